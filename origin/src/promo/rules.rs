//! The rules of a code and how they judge a cart (most checks read only the code's rules, which
//! never change once written, so any origin can cache them), and the
//! admin API's time inputs: an RFC 3339 instant or a local date-time in an IANA zone.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc, Weekday};
use chrono_tz::Tz;
use flashgate_shared::api::coupons::{CodeKind, NotApplicable};
use flashgate_shared::money::{self, Applied, Discount};

/// The rules of a code or batch, times already resolved to instants: what is written, and
/// (in [`CodeRules::rules`]) what is read back and cached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRules {
    pub kind: CodeKind,
    /// Basis points (1000 = 10 %), or `None` for an amount.
    pub percent_off_bp: Option<i64>,
    /// Minor units, or `None` for a percentage.
    pub amount_off: Option<i64>,
    pub currency: String,
    /// Minor units, compared with the pre-discount cart total, inclusive.
    pub min_order: i64,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    /// Total uses of a code (1 for a one-time code).
    pub use_limit: i64,
    pub once_per_customer: bool,
}

/// A code with its rules, as cached by every origin. Rules never change once written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeRules {
    /// The normalised code.
    pub code: String,
    pub rules_id: i64,
    /// The rules row, as written by [`super::store::insert_rules`].
    pub rules: NewRules,
    /// Batch id of a one-time code.
    pub batch: Option<String>,
}

impl CodeRules {
    /// The discount of the code.
    pub fn discount(&self) -> Discount {
        match (self.rules.percent_off_bp, self.rules.amount_off) {
            (Some(bp), _) => Discount::Percent { basis_points: bp },
            (None, Some(a)) => Discount::Amount { minor_units: a },
            (None, None) => Discount::Amount { minor_units: 0 },
        }
    }

    /// Judges a cart by the rules alone (no state), in this order: `not_started`
    /// (`now < starts_at`), `expired` (`now >= ends_at`), `currency_mismatch` (when the request
    /// names a currency), `below_minimum` (`cart_total < min_order`). Otherwise the discount
    /// by [`flashgate_shared::money::apply`].
    pub fn judge(
        &self,
        now: DateTime<Utc>,
        cart_total: i64,
        currency: Option<&str>,
    ) -> Result<Applied, NotApplicable> {
        if now < self.rules.starts_at {
            return Err(NotApplicable::NotStarted);
        }
        if now >= self.rules.ends_at {
            return Err(NotApplicable::Expired);
        }
        if currency.is_some_and(|c| c != self.rules.currency) {
            return Err(NotApplicable::CurrencyMismatch);
        }
        if cart_total < self.rules.min_order {
            return Err(NotApplicable::BelowMinimum);
        }
        Ok(money::apply(self.discount(), cart_total))
    }
}

/// Parses a time of the admin API into an instant:
/// - an RFC 3339 instant: `2026-03-29T21:59:00Z`, `2026-03-29T23:59:00+02:00`;
/// - a local date-time and an IANA zone, separated by a space: `2026-03-29T23:59 Europe/Paris`
///   (seconds optional; a space instead of `T` allowed);
/// - a weekday, a local time and a zone: `Sunday 23:59 Europe/Paris` — the first such moment
///   after `now`.
///
/// Daylight saving: a local time that occurs twice (clocks going back) is the earlier
/// instant; one that never occurs (clocks going forward) is refused. Errors are messages for
/// a 422 `validation_failed`.
pub fn parse_instant(input: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let s = input.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    let bad = || {
        format!(
            "{s:?} is neither an RFC 3339 instant nor a local time with an IANA zone \
             (\"2026-03-29T23:59 Europe/Paris\", \"Sunday 23:59 Europe/Paris\")"
        )
    };
    let (local, zone) = s.rsplit_once(' ').ok_or_else(bad)?;
    let tz: Tz = zone
        .parse()
        .map_err(|_| format!("{zone:?} is not an IANA time zone"))?;
    let local = local.trim();
    if let Some(naive) = parse_local_date_time(local) {
        return resolve(tz, naive, s);
    }
    let (day, time) = local.split_once(' ').ok_or_else(bad)?;
    let weekday: Weekday = day.trim().parse().map_err(|_| bad())?;
    let time = parse_time(time.trim()).ok_or_else(bad)?;
    let today: NaiveDate = now.with_timezone(&tz).date_naive();
    let ahead = (7 + weekday.num_days_from_monday() as i64
        - today.weekday().num_days_from_monday() as i64)
        % 7;
    for extra in [0, 7] {
        let date = today + chrono::Duration::days(ahead + extra);
        let t = resolve(tz, date.and_time(time), s)?;
        if t > now {
            return Ok(t);
        }
    }
    Err(bad())
}

fn parse_time(s: &str) -> Option<NaiveTime> {
    NaiveTime::parse_from_str(s, "%H:%M:%S")
        .or_else(|_| NaiveTime::parse_from_str(s, "%H:%M"))
        .ok()
}

fn parse_local_date_time(s: &str) -> Option<NaiveDateTime> {
    [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
}

fn resolve(tz: Tz, naive: NaiveDateTime, input: &str) -> Result<DateTime<Utc>, String> {
    use chrono::LocalResult;
    match tz.from_local_datetime(&naive) {
        LocalResult::Single(t) => Ok(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(earlier, _) => Ok(earlier.with_timezone(&Utc)),
        LocalResult::None => Err(format!(
            "{input:?} does not exist in {tz} (the clocks skip it for daylight saving)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn local_times_in_a_zone_with_daylight_saving() {
        let now = t("2026-03-25T10:00:00Z"); // a Wednesday
                                             // Summer time from 2026-03-29 02:00 local (UTC+2 after).
        assert_eq!(
            parse_instant("2026-03-29T23:59 Europe/Paris", now).unwrap(),
            t("2026-03-29T21:59:00Z")
        );
        assert_eq!(
            parse_instant("Sunday 23:59 Europe/Paris", now).unwrap(),
            t("2026-03-29T21:59:00Z")
        );
        assert_eq!(
            parse_instant("2026-03-28 23:59:30 Europe/Paris", now).unwrap(),
            t("2026-03-28T22:59:30Z")
        );
        // 02:30 does not exist that night.
        assert!(parse_instant("2026-03-29T02:30 Europe/Paris", now).is_err());
        // 02:30 on 2026-10-25 happens twice: the earlier (summer time) instant.
        assert_eq!(
            parse_instant("2026-10-25T02:30 Europe/Paris", now).unwrap(),
            t("2026-10-25T00:30:00Z")
        );
        assert!(parse_instant("Sunday 23:59 Mars/Olympus", now).is_err());
        assert!(parse_instant("tomorrow", now).is_err());
    }

    #[test]
    fn weekday_is_the_next_one_after_now() {
        // Sunday 2026-03-29 23:59:30 Paris = 21:59:30Z; "Sunday 23:59" has passed → next week.
        let now = t("2026-03-29T21:59:30Z");
        assert_eq!(
            parse_instant("Sunday 23:59 Europe/Paris", now).unwrap(),
            t("2026-04-05T21:59:00Z")
        );
    }
}
