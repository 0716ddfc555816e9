//! The admin API's one time parser, for every admin time field over HTTP and in the CLI
//! (campaigns' `starts_at` / `ends_at`, promo codes' `starts_at` / `ends_at`): an RFC 3339
//! instant, or a local date-time or weekday in an IANA zone ([`parse_instant`]).

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc, Weekday};
use chrono_tz::Tz;
use serde_json::Value;

/// The accepted forms, for error messages.
pub const FORMS: &str = "an RFC 3339 instant (\"2026-03-29T21:59:00Z\"), a local date-time and \
     an IANA zone (\"2026-03-29T23:59 Europe/Paris\") or a weekday, a time and a zone \
     (\"Sunday 23:59 Europe/Paris\")";

/// Rewrites the time `fields` of a JSON object body to RFC 3339 instants (UTC) parsed with
/// [`parse_instant`], so that a body's typed fields take every form the admin API accepts.
/// A field that is absent or not a string is left for the typed parse to judge. The error
/// names the field and the accepted forms (for a 422 `validation_failed`).
pub fn normalize_times(
    body: &mut Value,
    fields: &[&str],
    now: DateTime<Utc>,
) -> Result<(), String> {
    for field in fields {
        let Some(v) = body.get_mut(*field) else {
            continue;
        };
        let Some(text) = v.as_str() else {
            continue;
        };
        let t = parse_instant(text, now).map_err(|e| format!("{field}: {e}"))?;
        *v = Value::String(t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true));
    }
    Ok(())
}

/// A clap value parser of an admin time (the CLI's `--starts-at`, `--ends-at`, `set-ends-at`):
/// [`parse_instant`] against the current time.
pub fn parse_cli_time(s: &str) -> Result<DateTime<Utc>, String> {
    parse_instant(s, Utc::now())
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
    let bad = || format!("{s:?} is not a time: give {FORMS}");
    let (local, zone) = s.rsplit_once(' ').ok_or_else(bad)?;
    let tz: Tz = zone
        .parse()
        .map_err(|_| format!("{zone:?} is not an IANA time zone: give {FORMS}"))?;
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
    fn a_body_gets_every_form_as_an_instant_and_an_error_names_the_field() {
        let now = t("2026-03-25T10:00:00Z");
        let mut body = serde_json::json!({
            "starts_at": "2026-03-26T10:00:00Z",
            "ends_at": "Sunday 23:59 Europe/Paris",
            "name": "Sunday 23:59 Europe/Paris"
        });
        normalize_times(&mut body, &["starts_at", "ends_at"], now).unwrap();
        assert_eq!(body["starts_at"], "2026-03-26T10:00:00Z");
        assert_eq!(body["ends_at"], "2026-03-29T21:59:00Z");
        assert_eq!(body["name"], "Sunday 23:59 Europe/Paris");
        let mut bad = serde_json::json!({"ends_at": "soon"});
        let e = normalize_times(&mut bad, &["starts_at", "ends_at"], now).unwrap_err();
        assert!(
            e.starts_with("ends_at: ") && e.contains("Europe/Paris"),
            "{e}"
        );
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
