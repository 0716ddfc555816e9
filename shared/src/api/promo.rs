//! Wire types of the coupon-code service ("promo codes"): shared codes with rules, `check` /
//! `use` from the shop's checkout, `confirm` / `release` from its payment service, one-time
//! code batches. Not to be confused with giveaway coupons ([`super::giveaway`]).
//!
//! Units: money is integer minor units (cents) of the code's `currency`; percentages are basis
//! points (1000 = 10 %); times are RFC 3339 in UTC on output. Discount arithmetic:
//! [`crate::money`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Largest `limit` of a shared code.
pub const MAX_CODE_LIMIT: i64 = 10_000_000;
/// Largest `count` of one batch of one-time codes.
pub const MAX_BATCH_COUNT: i64 = 1_000_000;
/// Longest `order` reference of a use.
pub const MAX_ORDER_LEN: usize = 255;
/// Largest cart total accepted, in minor units (10^15, far above any real cart).
pub const MAX_CART_TOTAL: i64 = 1_000_000_000_000_000;

fn yes() -> bool {
    true
}

/// The offer a shared code ([`NewCode`]) and a batch of one-time codes ([`NewCodeBatch`])
/// have in common, flattened into both bodies. Exactly one of `percent_off` /
/// `amount_off` ([`validate_offer`]).
///
/// `starts_at` / `ends_at` are either an RFC 3339 instant (`"2026-03-29T21:59:00Z"`) or a
/// local date-time and an IANA zone (`"2026-03-29T23:59 Europe/Paris"`, or the next such
/// weekday: `"Sunday 23:59 Europe/Paris"`); the instant is stored. `starts_at` defaults to
/// now.
///
/// No `deny_unknown_fields` here: serde does not support it on a flattened struct. The
/// bodies that flatten it refuse unknown fields themselves (a field neither they nor the
/// offer know is an error), so the wire shapes stay strict.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Offer {
    /// Basis points, 1..=10 000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent_off: Option<i64>,
    /// Minor units, > 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount_off: Option<i64>,
    /// ISO 4217 code, three uppercase letters.
    pub currency: String,
    /// Minor units; the pre-discount cart total must be at least this (inclusive).
    #[serde(default)]
    pub min_order: i64,
    /// First instant of the code, as `ends_at`; absent: now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_at: Option<String>,
    /// Last instant of the code: RFC 3339, or a local date-time or weekday with an IANA zone.
    pub ends_at: String,
}

/// `POST /admin/v1/codes` body: a shared code and its rules (e.g. "SPRING10 gives 10% off
/// orders of $50 or more until Sunday, for the first 1,000 uses, once per customer"): `code`, the [`Offer`]'s fields, `limit`, `once_per_customer`.
/// Unknown fields are refused.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewCode {
    /// Normalised (trim, NFKC, uppercase) to `A–Z0–9`, 1..=64 characters.
    pub code: String,
    /// The offer (flattened: its fields stand at the top level).
    #[serde(flatten)]
    pub offer: Offer,
    /// Total uses, 1..=[`MAX_CODE_LIMIT`].
    pub limit: i64,
    /// Default true: each customer may hold or have used the code once.
    #[serde(default = "yes")]
    pub once_per_customer: bool,
}

/// `POST /admin/v1/codes/batches` body: `count` one-time codes (12 symbols each, valid
/// once) sharing these rules: `count` and the [`Offer`]'s
/// fields. Unknown fields are refused, `limit` and `once_per_customer` too (each code is
/// valid once).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewCodeBatch {
    /// 1..=[`MAX_BATCH_COUNT`].
    pub count: i64,
    /// The offer every code of the batch gives (flattened).
    #[serde(flatten)]
    pub offer: Offer,
}

/// Checks the value rules shared by [`NewCode`] and [`NewCodeBatch`]: exactly one of
/// `percent_off` (1..=10 000) and `amount_off` (> 0), currency `^[A-Z]{3}$`,
/// `min_order >= 0`. Returns a message for the first broken rule.
pub fn validate_offer(
    percent_off: Option<i64>,
    amount_off: Option<i64>,
    currency: &str,
    min_order: i64,
) -> Result<(), String> {
    match (percent_off, amount_off) {
        (Some(p), None) if !(1..=10_000).contains(&p) => {
            return Err("percent_off must be 1 to 10000 basis points".into())
        }
        (None, Some(a)) if a <= 0 => {
            return Err("amount_off must be a positive amount in minor units".into())
        }
        (Some(_), None) | (None, Some(_)) => {}
        _ => return Err("give exactly one of percent_off and amount_off".into()),
    }
    if !is_currency(currency) {
        return Err("currency must be an ISO 4217 code in upper case (USD, EUR, …)".into());
    }
    if min_order < 0 {
        return Err("min_order must be >= 0".into());
    }
    Ok(())
}

/// True when `s` is an ISO 4217 alphabetic currency code in the standard's current list, in
/// upper case as the standard writes it (`USD`, `EUR`, `EGP`; not `usd`, not `XXQ`). The list
/// comes from the `iso_currency` crate, which builds it from the ISO 4217 data tables.
pub fn is_currency(s: &str) -> bool {
    iso_currency::Currency::from_code(s).is_some()
}

stored_enum! {
    /// Whether a code is shared or one-time.
    pub enum CodeKind {
        /// A named code many customers use, up to its limit.
        Shared = "shared",
        /// One of a batch of generated codes, valid once.
        OneTime = "one_time",
    }
}

/// `GET /admin/v1/codes/{code}` body (also the 201 body of `POST /admin/v1/codes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AdminCode {
    /// The normalised code (`A–Z0–9`).
    pub code: String,
    /// Shared or one-time.
    pub kind: CodeKind,
    /// Basis points, or `null`.
    pub percent_off: Option<i64>,
    /// Minor units, or `null`.
    pub amount_off: Option<i64>,
    /// ISO 4217 code.
    pub currency: String,
    /// Minor units.
    pub min_order: i64,
    /// First instant of the code (RFC 3339 UTC).
    pub starts_at: DateTime<Utc>,
    /// Last instant of the code (RFC 3339 UTC).
    pub ends_at: DateTime<Utc>,
    /// Total uses.
    pub limit: i64,
    /// Uses not taken (held or used uses are taken; released ones came back).
    pub uses_left: i64,
    /// True when each customer may hold or have used the code once.
    pub once_per_customer: bool,
    /// The batch of a one-time code, else `null`.
    pub batch: Option<String>,
    /// RFC 3339 UTC: when a manager disabled the code; `null` while it is enabled.
    #[serde(default)]
    pub disabled_at: Option<DateTime<Utc>>,
}

/// `PATCH /admin/v1/codes/{code}` body: `{"action":"disable"}` or `{"action":"enable"}`.
/// Unknown fields are refused; an unknown action is a 422 `validation_failed`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CodeChange {
    /// `disable` or `enable`.
    pub action: String,
}

/// `POST /admin/v1/codes/batches` 201 body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CodeBatch {
    /// `b_` + 32 hex digits.
    pub id: String,
    /// Codes generated.
    pub count: i64,
    /// Path of the CSV of its codes (`GET`, admin token).
    pub csv: String,
    /// How long generating and saving took, in milliseconds.
    pub took_ms: u64,
}

/// `POST /api/v1/codes/{code}/check` body: `{"cart_total": 6000}`; `currency` optional (when
/// given it must be the code's).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CheckRequest {
    /// Pre-discount cart total in minor units, 0..=[`MAX_CART_TOTAL`].
    pub cart_total: i64,
    /// ISO 4217 code of the cart; when given it must be the code's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

/// `POST /api/v1/codes/{code}/check` 200 body: `discount + total = cart_total`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CheckReply {
    /// Minor units.
    pub discount: i64,
    /// Minor units.
    pub total: i64,
}

/// `POST /api/v1/codes/{code}/use` body: `{"order": "o81", "cart_total": 6000}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UseRequest {
    /// The shop's order reference: 1..=[`MAX_ORDER_LEN`] visible ASCII characters.
    pub order: String,
    /// Minor units, 0..=[`MAX_CART_TOTAL`].
    pub cart_total: i64,
    /// ISO 4217 code of the cart; when given it must be the code's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

/// `POST /api/v1/codes/{code}/use` 201 body: the use, held until `held_until`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UseReply {
    /// Use id: `u_` + 32 hex digits.
    #[serde(rename = "use")]
    pub use_id: String,
    /// Minor units.
    pub discount: i64,
    /// Minor units: `cart_total - discount`.
    pub total: i64,
    /// RFC 3339 UTC: confirm before then or the use is released.
    pub held_until: DateTime<Utc>,
}

/// Why a known code does not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum NotApplicable {
    /// The cart total is below `min_order`.
    BelowMinimum,
    /// At or after `ends_at`.
    Expired,
    /// Before `starts_at`.
    NotStarted,
    /// No use left (the used-up flag).
    UsedUp,
    /// She holds or used it already (once per customer).
    AlreadyUsed,
    /// The request's `currency` is not the code's.
    CurrencyMismatch,
    /// A manager disabled the code (`PATCH /admin/v1/codes/{code}` `{"action":"disable"}`);
    /// every origin answers this within the bound documented in docs/ADMIN.md.
    Disabled,
}

/// A code's refusals, tagged by `result`:
/// - 404 `{"result":"invalid_code"}`: no such code (a failed try; see guess limiting);
/// - 422 `{"result":"not_applicable","reason":…}`: a known code that does not apply (check;
///   and use, for the rules' reasons);
/// - 409 `{"result":"used_up"}`: use refused, no use left;
/// - 409 `{"result":"already_used","use":"u_…"}`: she holds or used the code already (once
///   per customer), or the order already has a held or used use of the code (one use per
///   (code, order)); `use` is that earlier use's id when known;
/// - 409 `{"result":"in_progress"}` + `Retry-After`: the first use with this
///   `Idempotency-Key` is still running; retry with the same key (as a claim's
///   [`super::claims::ClaimReply::InProgress`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum CodeRefusal {
    /// 404: no such code (a guess; counts against the guess limit).
    InvalidCode,
    /// 422: the code exists but does not apply to this cart now, for `reason`.
    NotApplicable {
        /// Why the code does not apply.
        reason: NotApplicable,
    },
    /// 409: no use left.
    UsedUp,
    /// 409: she or the order has a held or used use of the code already.
    AlreadyUsed {
        /// The earlier use's id (`u_` + 32 hex digits), when known.
        #[serde(rename = "use", default, skip_serializing_if = "Option::is_none")]
        use_id: Option<String>,
    },
    /// 409: the first use with this `Idempotency-Key` is still running.
    InProgress,
}

impl CodeRefusal {
    /// HTTP status: 404, 422, 409, 409, 409.
    pub fn http_status(&self) -> u16 {
        match self {
            CodeRefusal::InvalidCode => 404,
            CodeRefusal::NotApplicable { .. } => 422,
            CodeRefusal::UsedUp | CodeRefusal::AlreadyUsed { .. } | CodeRefusal::InProgress => 409,
        }
    }
}

stored_enum! {
    /// State of a use.
    pub enum UseStatus {
        /// Taken at the order, waiting for the payment.
        Held = "held",
        /// Confirmed: the payment went through.
        Used = "used",
        /// Released (payment failed, or not confirmed in time): the use went back.
        Released = "released",
    }
}

/// `POST /api/v1/uses/{id}/confirm` and `/release` 200 body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UseState {
    /// The use id (`u_` + 32 hex digits).
    #[serde(rename = "use")]
    pub use_id: String,
    /// The code used.
    pub code: String,
    /// The state after the call.
    pub status: UseStatus,
}

/// 409 bodies of confirm / release: `{"result":"use_released"}` (confirm of a released
/// use), `{"result":"use_confirmed"}` (release of a confirmed use).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum UseConflict {
    /// Confirm of a released use.
    UseReleased,
    /// Release of a confirmed use.
    UseConfirmed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn code(body: Value) -> Result<NewCode, String> {
        serde_json::from_value(body).map_err(|e| e.to_string())
    }

    fn batch(body: Value) -> Result<NewCodeBatch, String> {
        serde_json::from_value(body).map_err(|e| e.to_string())
    }

    #[test]
    fn currencies_are_codes_of_the_iso_4217_list_in_upper_case() {
        for ok in ["USD", "EUR", "EGP", "JPY"] {
            assert!(is_currency(ok), "{ok}");
        }
        for bad in ["XXQ", "ABC", "usd", "Eur", "US", "USDD", "", "€"] {
            assert!(!is_currency(bad), "{bad}");
        }
    }

    #[test]
    fn code_and_batch_bodies_share_the_offer_and_stay_strict() {
        let c = code(
            json!({"code": "SPRING10", "percent_off": 1000, "currency": "USD",
            "ends_at": "Sunday 23:59 Europe/Paris", "limit": 1000}),
        )
        .unwrap();
        assert_eq!(
            (c.offer.percent_off, c.offer.amount_off, c.offer.min_order),
            (Some(1000), None, 0)
        );
        assert!(c.once_per_customer && c.offer.starts_at.is_none());
        // The same JSON out as in: flat, optional fields left out.
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"code": "SPRING10", "percent_off": 1000, "currency": "USD", "min_order": 0,
                "ends_at": "Sunday 23:59 Europe/Paris", "limit": 1000,
                "once_per_customer": true})
        );
        let b = batch(json!({"count": 3, "amount_off": 2000, "currency": "USD",
            "min_order": 5000, "starts_at": "2026-01-01T00:00:00Z",
            "ends_at": "2027-01-01T00:00:00Z"}))
        .unwrap();
        assert_eq!(
            (b.count, b.offer.amount_off, b.offer.min_order),
            (3, Some(2000), 5000)
        );
        assert_eq!(b.offer.starts_at.as_deref(), Some("2026-01-01T00:00:00Z"));

        let base = json!({"code": "A", "percent_off": 10, "currency": "USD",
            "ends_at": "2099-01-01T00:00:00Z", "limit": 1});
        let with = |mut v: Value, k: &str, x: Value| {
            v[k] = x;
            v
        };
        // Unknown fields are refused in both bodies; a batch refuses `limit` and
        // `once_per_customer`.
        assert!(code(with(base.clone(), "x", json!(1)))
            .unwrap_err()
            .contains("unknown field `x`"));
        let b0 = json!({"count": 1, "amount_off": 2000, "currency": "USD",
            "ends_at": "2099-01-01T00:00:00Z"});
        assert!(batch(b0.clone()).is_ok());
        for k in ["x", "limit", "once_per_customer", "code"] {
            let e = batch(with(b0.clone(), k, json!(1))).unwrap_err();
            assert!(e.contains(&format!("unknown field `{k}`")), "{k}: {e}");
        }
        // Missing, mistyped and repeated offer fields are still errors.
        let mut no_currency = base.clone();
        no_currency.as_object_mut().unwrap().remove("currency");
        assert!(code(no_currency)
            .unwrap_err()
            .contains("missing field `currency`"));
        assert!(code(with(base.clone(), "percent_off", json!("10"))).is_err());
        assert!(code(with(base.clone(), "min_order", json!(1.5))).is_err());
        assert!(batch(with(b0, "count", json!("1"))).is_err());
        let twice = r#"{"code":"A","currency":"USD","currency":"EUR","percent_off":10,
            "ends_at":"2099-01-01T00:00:00Z","limit":1}"#;
        assert!(serde_json::from_str::<NewCode>(twice).is_err());
    }
}
