//! Campaigns: what a campaign hands out, its state by the origin's clock, its public status,
//! and the body that creates one with its limits, its variants' included ([`NewVariant`],
//! [`check_variants`]; what else a variant is, is [`super::variants`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::common::is_valid_slug;

stored_enum! {
    /// What a campaign hands out.
    pub enum CampaignKind {
        /// A claim is a hold on one unit until it is paid or expires.
        Sale = "sale",
        /// A claim is an issued coupon with a redeemable code.
        Giveaway = "giveaway",
    }
}

/// The state of a campaign as seen by customers, decided by the origin's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CampaignState {
    /// Before `starts_at`.
    Scheduled,
    /// Between `starts_at` and `ends_at`, units left, not paused.
    Active,
    /// Paused by a campaign manager.
    Paused,
    /// No unit left (the sold-out flag is set); may clear when holds expire or stock is added.
    SoldOut,
    /// At or after `ends_at`, or closed by a manager.
    Ended,
}

impl CampaignState {
    /// Decides the state from the stored facts. Order of precedence: ended, paused,
    /// scheduled, sold out, active. `now >= ends_at` is ended; `now < starts_at` is scheduled.
    pub fn decide(
        now: DateTime<Utc>,
        starts_at: DateTime<Utc>,
        ends_at: DateTime<Utc>,
        paused: bool,
        remaining: i64,
    ) -> Self {
        if now >= ends_at {
            CampaignState::Ended
        } else if paused {
            CampaignState::Paused
        } else if now < starts_at {
            CampaignState::Scheduled
        } else if remaining <= 0 {
            CampaignState::SoldOut
        } else {
            CampaignState::Active
        }
    }

    /// The lowercase wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CampaignState::Scheduled => "scheduled",
            CampaignState::Active => "active",
            CampaignState::Paused => "paused",
            CampaignState::SoldOut => "sold_out",
            CampaignState::Ended => "ended",
        }
    }
}

/// `GET /api/v1/campaigns/{id}` body: the public status of a campaign.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CampaignStatus {
    /// Slug `[a-z0-9-]{1,64}`.
    pub id: String,
    /// Display name, 1..=[`MAX_NAME_LEN`] characters.
    pub name: String,
    /// Sale or giveaway.
    pub kind: CampaignKind,
    /// The state by the origin's clock when the status was read.
    pub state: CampaignState,
    /// Total units of the campaign.
    pub stock: i64,
    /// Units not claimed (held, paid or issued units are not remaining).
    pub remaining: i64,
    /// RFC 3339 UTC.
    pub starts_at: DateTime<Utc>,
    /// RFC 3339 UTC.
    pub ends_at: DateTime<Utc>,
}

/// `POST /admin/v1/campaigns` body. Validation rules: see [`NewCampaign::validate`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewCampaign {
    /// Slug `[a-z0-9-]{1,64}`, unique.
    pub id: String,
    /// Display name, 1..=[`MAX_NAME_LEN`] characters.
    pub name: String,
    /// Sale or giveaway.
    pub kind: CampaignKind,
    /// 1..=[`MAX_STOCK`].
    pub stock: i64,
    /// First instant claims are taken (RFC 3339 UTC).
    pub starts_at: DateTime<Utc>,
    /// First instant claims are refused (RFC 3339 UTC), after `starts_at`.
    pub ends_at: DateTime<Utc>,
    /// Sale only: how long a hold lasts, in seconds (1..=86,400; default 600). Rejected for a
    /// giveaway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_seconds: Option<i64>,
    /// Sale only: seconds a hold may be extended by, once per claim
    /// (`POST /api/v1/claims/{id}/extend`), 0..=[`MAX_HOLD_EXTENSION_SECONDS`]; absent or 0:
    /// holds cannot be extended. Rejected (other than 0) for a giveaway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_extension_seconds: Option<i64>,
    /// Shards of the campaign's Redis gate, 1..=[`MAX_GATE_SHARDS`]; fixed at creation. When
    /// absent, [`default_gate_shards`] of the stock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_shards: Option<i64>,
    /// The waiting room (see [`crate::queue::WaitingRoom`]); absent = none, the campaign
    /// behaves as without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_room: Option<crate::queue::WaitingRoom>,
    /// How customers get to claim: `first_come` (absent) or `draw` (see
    /// [`super::draws::CampaignAccess`]); `draw` needs the `draw` option and no waiting room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<super::draws::CampaignAccess>,
    /// With `access: "draw"`: the entry window and the buying window
    /// ([`super::draws::DrawSettings`]); rejected otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw: Option<super::draws::DrawSettings>,
    /// The campaign's variants (sizes, colours), at most [`MAX_VARIANTS`],
    /// ids unique; absent = none, the campaign behaves as without variants. With variants,
    /// `stock` is the sum of theirs: give that sum, or 0.
    pub variants: Option<Vec<NewVariant>>,
}

/// The most shards a campaign's Redis gate may have.
pub const MAX_GATE_SHARDS: i64 = 1024;

/// The shard count of a campaign created without `gate_shards`: 1 up to 10,000 units (one
/// counter serves such a campaign; the gate behaves as an unsharded one), 4 up to 100,000
/// units, 16 above.
pub fn default_gate_shards(stock: i64) -> i64 {
    match stock {
        i64::MIN..=10_000 => 1,
        10_001..=100_000 => 4,
        _ => 16,
    }
}

/// Longest campaign name, in characters.
pub const MAX_NAME_LEN: usize = 200;
/// Largest stock of one campaign, in units; also the largest `add` of a restock and the largest
/// `set_stock`.
pub const MAX_STOCK: i64 = 10_000_000;
/// Years a campaign time may fall in: PostgreSQL's `timestamptz` cannot hold every chrono
/// date, so times keep to plain four-digit years.
pub const YEARS: std::ops::RangeInclusive<i32> = 1970..=9999;

/// Checks a unit count `field` against 1..=[`MAX_STOCK`]: `Ok(n)`, or `Err` with the message
/// naming the field (e.g. `"stock must be between 1 and 10000000"`).
pub fn check_stock(field: &str, n: i64) -> Result<i64, String> {
    if (1..=MAX_STOCK).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{field} must be between 1 and {MAX_STOCK}"))
    }
}

/// Checks that time `field` lies within [`YEARS`]; `Err` carries the message naming the field.
pub fn check_year(field: &str, t: DateTime<Utc>) -> Result<(), String> {
    if YEARS.contains(&chrono::Datelike::year(&t)) {
        Ok(())
    } else {
        Err(format!(
            "{field} must be between the years {} and {}",
            YEARS.start(),
            YEARS.end()
        ))
    }
}

/// Checks that an end written by a manager, `field` (`ends_at`), is after `now`: a campaign is
/// never created already ended, nor given an end that has passed (that would date its end
/// before claims it answered; `close` ends it now). `Err` carries the message naming the field.
pub fn check_end_ahead(
    field: &str,
    ends_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), String> {
    if ends_at > now {
        Ok(())
    } else {
        Err(format!(
            "{field} must be in the future ({} is not after now, {}); to end a campaign now, close it",
            ends_at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ))
    }
}

/// Hold length of a sale claim when the campaign does not set one, in seconds ("pay within
/// 10 minutes").
pub const DEFAULT_HOLD_SECONDS: i64 = 600;
/// Longest hold a campaign may set, in seconds (one day).
pub const MAX_HOLD_SECONDS: i64 = 86_400;
/// Largest `hold_extension_seconds` of a campaign (one hour); 0 turns extension off.
pub const MAX_HOLD_EXTENSION_SECONDS: i64 = 3_600;

/// Checks a campaign's `hold_extension_seconds`: 0..=[`MAX_HOLD_EXTENSION_SECONDS`]. The
/// message names the field.
pub fn check_hold_extension(seconds: i64) -> Result<i64, String> {
    if (0..=MAX_HOLD_EXTENSION_SECONDS).contains(&seconds) {
        Ok(seconds)
    } else {
        Err(format!(
            "hold_extension_seconds must be between 0 (off) and {MAX_HOLD_EXTENSION_SECONDS}"
        ))
    }
}

/// The most variants one campaign may have.
pub const MAX_VARIANTS: usize = 1_000;

/// One variant in a creation body (`POST /admin/v1/campaigns`, `variants`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewVariant {
    /// Slug `[a-z0-9-]{1,64}` (the rules of a campaign id), unique within the campaign.
    pub id: String,
    /// Display name, 1..=200 characters.
    pub name: String,
    /// Units of this variant, 0..=10,000,000.
    pub stock: i64,
}

/// Checks one variant's fields; `Err` names the field.
pub fn check_variant(id: &str, name: &str, stock: i64) -> Result<(), String> {
    if !is_valid_slug(id) {
        return Err("variants: id must match [a-z0-9-]{1,64}".into());
    }
    crate::text::check_free_text("variants: name", name, MAX_NAME_LEN)?;
    if !(0..=MAX_STOCK).contains(&stock) {
        return Err(format!("variants: stock must be between 0 and {MAX_STOCK}"));
    }
    Ok(())
}

/// Checks the variants of a creation body: at most [`MAX_VARIANTS`], ids unique, each valid
/// ([`check_variant`]), their stock summing to 1..=10,000,000. Returns that sum.
pub fn check_variants(variants: &[NewVariant]) -> Result<i64, String> {
    if variants.is_empty() {
        return Err("variants: give at least one variant, or leave the field out".into());
    }
    if variants.len() > MAX_VARIANTS {
        return Err(format!("variants: at most {MAX_VARIANTS} variants"));
    }
    let mut seen = std::collections::HashSet::with_capacity(variants.len());
    let mut sum = 0i64;
    for v in variants {
        check_variant(&v.id, &v.name, v.stock)?;
        if !seen.insert(v.id.as_str()) {
            return Err(format!("variants: duplicate id {}", v.id));
        }
        sum += v.stock;
    }
    if !(1..=MAX_STOCK).contains(&sum) {
        return Err(format!(
            "variants: their stock must sum to between 1 and {MAX_STOCK}"
        ));
    }
    Ok(sum)
}

impl NewCampaign {
    /// Checks the rules that the type system does not: slug shape, name of 1..=[`MAX_NAME_LEN`]
    /// characters ([`crate::text::check_free_text`]: not blank, no control character), stock
    /// range ([`check_stock`]), times within the stored years ([`check_year`]),
    /// `starts_at < ends_at`, the waiting room's bounds
    /// ([`crate::queue::WaitingRoom::validate`]), hold only for sales and in range, `gate_shards`
    /// in 1..=[`MAX_GATE_SHARDS`], `access` with its `draw` option
    /// ([`super::draws::check_access`]). Returns a human-readable message
    /// for the first broken rule.
    pub fn validate(&self) -> Result<(), String> {
        if !is_valid_slug(&self.id) {
            return Err("id must match [a-z0-9-]{1,64}".into());
        }
        crate::text::check_free_text("name", &self.name, MAX_NAME_LEN)?;
        match &self.variants {
            Some(variants) => {
                let sum = check_variants(variants)?;
                if self.stock != 0 && self.stock != sum {
                    return Err(format!(
                        "stock must be the sum of the variants' stock ({sum}) or 0"
                    ));
                }
            }
            None => {
                check_stock("stock", self.stock)?;
            }
        }
        check_year("starts_at", self.starts_at)?;
        check_year("ends_at", self.ends_at)?;
        if let Some(w) = &self.waiting_room {
            w.validate()?;
        }
        if self.starts_at >= self.ends_at {
            return Err("starts_at must be before ends_at".into());
        }
        super::draws::check_access(
            self.access,
            self.draw.as_ref(),
            self.waiting_room.is_some(),
            self.ends_at,
        )?;
        match (self.kind, self.hold_seconds) {
            (CampaignKind::Giveaway, Some(_)) => {
                Err("hold_seconds applies to sale campaigns only".into())
            }
            (CampaignKind::Sale, Some(h)) if !(1..=MAX_HOLD_SECONDS).contains(&h) => Err(format!(
                "hold_seconds must be between 1 and {MAX_HOLD_SECONDS}"
            )),
            _ => Ok(()),
        }?;
        match (self.kind, self.hold_extension_seconds) {
            (CampaignKind::Giveaway, Some(n)) if n != 0 => {
                Err("hold_extension_seconds applies to sale campaigns only".into())
            }
            (_, Some(n)) => check_hold_extension(n).map(|_| ()),
            _ => Ok(()),
        }?;
        match self.gate_shards {
            Some(n) if !(1..=MAX_GATE_SHARDS).contains(&n) => Err(format!(
                "gate_shards must be between 1 and {MAX_GATE_SHARDS}"
            )),
            _ => Ok(()),
        }
    }

    /// The gate's shard count: `gate_shards`, else [`default_gate_shards`] of the stock.
    pub fn shards(&self) -> i64 {
        self.gate_shards
            .unwrap_or_else(|| default_gate_shards(self.total_stock()))
    }

    /// The campaign's stock: the sum of the variants' stock when it has variants, else `stock`.
    pub fn total_stock(&self) -> i64 {
        match &self.variants {
            Some(v) => v.iter().map(|v| v.stock).sum(),
            None => self.stock,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn gate_shards_range_and_default() {
        let mut c = NewCampaign {
            id: "g".into(),
            name: "G".into(),
            kind: CampaignKind::Giveaway,
            stock: 200_000,
            starts_at: t("2026-01-01T12:00:00Z"),
            ends_at: t("2026-01-01T13:00:00Z"),
            hold_seconds: None,
            hold_extension_seconds: None,
            gate_shards: None,
            waiting_room: None,
            access: None,
            draw: None,
            variants: None,
        };
        assert_eq!((c.validate(), c.shards()), (Ok(()), 16));
        for (n, ok) in [
            (0, false),
            (1, true),
            (1024, true),
            (1025, false),
            (-3, false),
        ] {
            c.gate_shards = Some(n);
            assert_eq!(c.validate().is_ok(), ok, "{n}");
        }
        assert_eq!(
            [1, 10_000, 10_001, 100_000, 100_001].map(default_gate_shards),
            [1, 1, 4, 4, 16]
        );
    }

    #[test]
    fn state_precedence() {
        let s = t("2026-01-01T12:00:00Z");
        let e = t("2026-01-01T13:00:00Z");
        assert_eq!(
            CampaignState::decide(t("2026-01-01T11:59:59Z"), s, e, false, 5),
            CampaignState::Scheduled
        );
        assert_eq!(
            CampaignState::decide(s, s, e, false, 5),
            CampaignState::Active
        );
        assert_eq!(
            CampaignState::decide(s, s, e, false, 0),
            CampaignState::SoldOut
        );
        assert_eq!(
            CampaignState::decide(s, s, e, true, 0),
            CampaignState::Paused
        );
        assert_eq!(
            CampaignState::decide(e, s, e, true, 5),
            CampaignState::Ended
        );
    }

    #[test]
    fn an_end_that_has_passed_is_refused_naming_the_field() {
        let now = t("2026-12-03T10:00:00Z");
        assert!(check_end_ahead("ends_at", t("2026-12-03T10:00:01Z"), now).is_ok());
        for end in [now, t("2026-12-03T09:59:59Z")] {
            let e = check_end_ahead("ends_at", end, now).unwrap_err();
            assert!(e.starts_with("ends_at must be in the future"), "{e}");
        }
    }

    #[test]
    fn stock_and_year_limits() {
        assert_eq!(check_stock("stock", 1), Ok(1));
        assert_eq!(check_stock("stock", MAX_STOCK), Ok(MAX_STOCK));
        assert_eq!(
            check_stock("add", MAX_STOCK + 1).unwrap_err(),
            "add must be between 1 and 10000000"
        );
        assert!(check_stock("stock", 0).is_err());
        assert!(check_year("ends_at", t("9999-12-31T23:59:59Z")).is_ok());
        assert_eq!(
            check_year("ends_at", t("1969-12-31T23:59:59Z")).unwrap_err(),
            "ends_at must be between the years 1970 and 9999"
        );
    }

    fn v(id: &str, stock: i64) -> NewVariant {
        NewVariant {
            id: id.into(),
            name: format!("Size {id}"),
            stock,
        }
    }

    #[test]
    fn variant_rules() {
        assert_eq!(check_variants(&[v("41", 2), v("42", 3)]), Ok(5));
        assert!(check_variants(&[v("41", 2), v("41", 3)]).is_err());
        assert!(check_variants(&[v("41", -1)]).is_err());
        assert!(check_variants(&[v("Bad", 1)]).is_err());
        assert!(check_variants(&[v("41", 0)]).is_err());
        assert!(check_variants(&[]).is_err());
        let many: Vec<_> = (0..=MAX_VARIANTS).map(|i| v(&i.to_string(), 1)).collect();
        assert!(check_variants(&many).is_err());
        assert!(check_variants(&many[..MAX_VARIANTS]).is_ok());
    }
}
