//! Request and response bodies of the public and admin API, shared by origin and edge so that
//! both give byte-for-byte the same bodies for the same results.
//!
//! Every non-2xx answer has one of two shapes:
//! - a business result: `{"result": "<code>", ...fields of that result}` (e.g. 409 `sold_out`);
//! - a request error: `{"result": "<code>", "message": "<text for humans>"}` ([`ErrorBody`]).
//!
//! Times are RFC 3339 in UTC; counts are plain integers.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What a campaign hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CampaignKind {
    /// A claim is a hold on one unit until it is paid or expires (seed "Flash Sale").
    Sale,
    /// A claim is an issued coupon with a redeemable code (seed "6M-coupon giveaway").
    Giveaway,
}

impl CampaignKind {
    /// The lowercase wire name (`sale` / `giveaway`).
    pub fn as_str(self) -> &'static str {
        match self {
            CampaignKind::Sale => "sale",
            CampaignKind::Giveaway => "giveaway",
        }
    }

    /// Parses the wire name; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "sale" => Some(CampaignKind::Sale),
            "giveaway" => Some(CampaignKind::Giveaway),
            _ => None,
        }
    }
}

/// The state of a campaign as seen by customers, decided by the origin's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
pub struct CampaignStatus {
    /// Slug `[a-z0-9-]{1,64}`.
    pub id: String,
    pub name: String,
    pub kind: CampaignKind,
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

/// A campaign as the admin API shows it: the public status plus the settings managers see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminCampaign {
    #[serde(flatten)]
    pub status: CampaignStatus,
    /// Sale: hold length in seconds; `null` for a giveaway.
    pub hold_seconds: Option<i64>,
    /// True while a manager has the campaign paused.
    pub paused: bool,
}

/// `POST /admin/v1/campaigns` body. Validation rules: see [`NewCampaign::validate`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewCampaign {
    pub id: String,
    pub name: String,
    pub kind: CampaignKind,
    /// 1..=[`MAX_STOCK`].
    pub stock: i64,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    /// Sale only: how long a hold lasts, in seconds (1..=86,400; default 600). Rejected for a
    /// giveaway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_seconds: Option<i64>,
}

/// Longest campaign name, in characters.
pub const MAX_NAME_LEN: usize = 200;
/// Largest stock of one campaign.
pub const MAX_STOCK: i64 = 10_000_000;
/// Hold length of a sale claim when the campaign does not set one (seed "Flash Sale": "pay
/// within 10 minutes").
pub const DEFAULT_HOLD_SECONDS: i64 = 600;
/// Longest hold a campaign may set, in seconds (one day).
pub const MAX_HOLD_SECONDS: i64 = 86_400;

impl NewCampaign {
    /// Checks the rules that the type system does not: slug shape, name of 1..=[`MAX_NAME_LEN`]
    /// characters ([`crate::text::check_free_text`]: not blank, no control character), stock range, times within the years 1970..=9999, `starts_at < ends_at`, hold only for sales and in range.
    /// Returns a human-readable message for the first broken rule.
    pub fn validate(&self) -> Result<(), String> {
        if !is_valid_slug(&self.id) {
            return Err("id must match [a-z0-9-]{1,64}".into());
        }
        crate::text::check_free_text("name", &self.name, MAX_NAME_LEN)?;
        if !(1..=MAX_STOCK).contains(&self.stock) {
            return Err(format!("stock must be between 1 and {MAX_STOCK}"));
        }
        for (name, t) in [("starts_at", self.starts_at), ("ends_at", self.ends_at)] {
            if !(1970..=9999).contains(&chrono::Datelike::year(&t)) {
                return Err(format!("{name} must be between the years 1970 and 9999"));
            }
        }
        if self.starts_at >= self.ends_at {
            return Err("starts_at must be before ends_at".into());
        }
        match (self.kind, self.hold_seconds) {
            (CampaignKind::Giveaway, Some(_)) => {
                Err("hold_seconds applies to sale campaigns only".into())
            }
            (CampaignKind::Sale, Some(h)) if !(1..=MAX_HOLD_SECONDS).contains(&h) => Err(format!(
                "hold_seconds must be between 1 and {MAX_HOLD_SECONDS}"
            )),
            _ => Ok(()),
        }
    }
}

/// True when `s` is a campaign slug: `[a-z0-9-]{1,64}`.
pub fn is_valid_slug(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Status of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimStatus {
    /// Sale: the unit is held for the customer until `held_until`.
    Held,
    /// Sale: paid within the hold.
    Paid,
    /// Sale: released (payment failed or cancelled); the unit went back.
    Released,
    /// Sale: the hold passed `held_until` unpaid; the unit went back.
    Expired,
    /// Giveaway: a coupon was issued.
    Issued,
    /// Giveaway: the coupon was redeemed in store.
    Redeemed,
}

impl ClaimStatus {
    /// The lowercase wire name (also the value stored in PostgreSQL).
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimStatus::Held => "held",
            ClaimStatus::Paid => "paid",
            ClaimStatus::Released => "released",
            ClaimStatus::Expired => "expired",
            ClaimStatus::Issued => "issued",
            ClaimStatus::Redeemed => "redeemed",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "held" => ClaimStatus::Held,
            "paid" => ClaimStatus::Paid,
            "released" => ClaimStatus::Released,
            "expired" => ClaimStatus::Expired,
            "issued" => ClaimStatus::Issued,
            "redeemed" => ClaimStatus::Redeemed,
            _ => return None,
        })
    }

    /// Active claims hold a unit and count against one-per-customer.
    pub fn is_active(self) -> bool {
        !matches!(self, ClaimStatus::Released | ClaimStatus::Expired)
    }
}

/// A customer's claim on one unit of a campaign.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// Claim id (`c_` + UUID v7 in simple form).
    pub id: String,
    /// Campaign id.
    pub campaign: String,
    /// Customer id (the `sub` of the customer token).
    pub customer: String,
    pub status: ClaimStatus,
    /// Sale: end of the hold, RFC 3339 UTC. `null` for a giveaway.
    pub held_until: Option<DateTime<Utc>>,
    /// Giveaway: the coupon code. `null` for a sale.
    pub code: Option<String>,
    /// RFC 3339 UTC, on the origin's clock.
    pub created_at: DateTime<Utc>,
}

/// `POST /api/v1/campaigns/{id}/claims` request body: the empty JSON object `{}`. Any field
/// is unknown and rejected; so is any other JSON value (an array, a string, `null`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClaimRequest {}

impl<'de> Deserialize<'de> for ClaimRequest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct EmptyObject;
        impl<'de> serde::de::Visitor<'de> for EmptyObject {
            type Value = ClaimRequest;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("the empty JSON object {}")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                match map.next_key::<String>()? {
                    None => Ok(ClaimRequest {}),
                    Some(k) => Err(serde::de::Error::unknown_field(&k, &[])),
                }
            }
        }
        d.deserialize_map(EmptyObject)
    }
}

/// The answer to a claim, tagged by `result`. HTTP status: see [`ClaimReply::http_status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum ClaimReply {
    /// 201: she won a unit.
    Claimed { claim: Claim },
    /// 409: no unit left.
    SoldOut,
    /// 409: she already holds an active claim on this campaign; it is returned.
    AlreadyClaimed { claim: Claim },
    /// 409: the campaign has not started; RFC 3339 UTC start.
    NotStarted { starts_at: DateTime<Utc> },
    /// 409: the campaign ended.
    Ended,
    /// 409: a manager paused the campaign.
    Paused,
    /// 409 + `Retry-After`: the first request with this idempotency key is still running.
    InProgress,
}

impl ClaimReply {
    /// HTTP status code for this reply: 201 for `claimed`, 409 for everything else.
    pub fn http_status(&self) -> u16 {
        match self {
            ClaimReply::Claimed { .. } => 201,
            _ => 409,
        }
    }

    /// The answer a claim gets from a campaign in `state` without touching the counter, or
    /// `None` when the claim has to go to the gate (state `active`). Used by the origin and,
    /// for its cached state, by the edge.
    pub fn for_state(state: CampaignState, starts_at: DateTime<Utc>) -> Option<Self> {
        match state {
            CampaignState::Active => None,
            CampaignState::SoldOut => Some(ClaimReply::SoldOut),
            CampaignState::Paused => Some(ClaimReply::Paused),
            CampaignState::Ended => Some(ClaimReply::Ended),
            CampaignState::Scheduled => Some(ClaimReply::NotStarted { starts_at }),
        }
    }
}

/// Largest `payment_ref` accepted by `pay`, in bytes.
pub const MAX_PAYMENT_REF_LEN: usize = 255;
/// Largest free-text `reason` accepted by `release` and `redeem`, in characters.
pub const MAX_REASON_LEN: usize = 200;

/// `POST /api/v1/claims/{id}/pay` body: the payment provider's reference of the payment that
/// confirms the hold (seed "Flash Sale": "the order keeps the payment provider's id, never the
/// card"). `payment_ref` is 1..=[`MAX_PAYMENT_REF_LEN`] visible ASCII characters; unknown
/// fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayRequest {
    pub payment_ref: String,
}

/// `POST /api/v1/claims/{id}/release` body (optional: an empty body is the same as `{}`).
/// `reason` is free text for the ledger (1..=[`MAX_REASON_LEN`] characters), e.g.
/// `payment_failed` or `customer_cancelled`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

pub use crate::text::is_visible_ascii;

/// The answer to `pay` and `release`, tagged by `result`. HTTP status: see
/// [`HoldReply::http_status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum HoldReply {
    /// 200: the hold is paid with `payment_ref` (also the answer to the same pay again).
    Paid { claim: Claim, payment_ref: String },
    /// 200: the hold is released and its unit is back (also the answer to a repeated release).
    Released { claim: Claim },
    /// 409: the hold is over — past `held_until`, expired by the sweeper, or released. Its unit
    /// is back (or goes back at the next sweep); it cannot be paid any more.
    HoldExpired,
    /// 409: the claim is already paid (with another `payment_ref`, or a release came after the
    /// payment); it keeps its unit.
    AlreadyPaid { claim: Claim },
    /// 409: the claim is not a sale hold (a giveaway coupon cannot be paid or released).
    NotAHold,
}

impl HoldReply {
    /// 200 for `paid` / `released`, 409 for everything else.
    pub fn http_status(&self) -> u16 {
        match self {
            HoldReply::Paid { .. } | HoldReply::Released { .. } => 200,
            _ => 409,
        }
    }
}

/// `POST /api/v1/coupons/{code}/redeem` body (optional: an empty body is the same as `{}`).
/// `store` names the store or POS terminal for the ledger (1..=[`MAX_REASON_LEN`] visible
/// ASCII characters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedeemRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
}

/// The answer to a redeem, tagged by `result` (seed "6M-coupon giveaway": redeem in store).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum RedeemReply {
    /// 200: redeemed now, at `redeemed_at` (RFC 3339 UTC, origin clock).
    Redeemed {
        code: String,
        redeemed_at: DateTime<Utc>,
    },
    /// 409: the coupon was redeemed before, at `redeemed_at`.
    AlreadyRedeemed { redeemed_at: DateTime<Utc> },
}

impl RedeemReply {
    /// 200 for `redeemed`, 409 for `already_redeemed`.
    pub fn http_status(&self) -> u16 {
        match self {
            RedeemReply::Redeemed { .. } => 200,
            RedeemReply::AlreadyRedeemed { .. } => 409,
        }
    }
}

/// `GET /api/v1/coupons/{code}` body: an issued coupon with its QR payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coupon {
    /// The 12-symbol code.
    pub code: String,
    pub campaign: String,
    pub customer: String,
    /// `issued` or `redeemed`.
    pub status: ClaimStatus,
    /// RFC 3339 UTC.
    pub issued_at: DateTime<Utc>,
    /// RFC 3339 UTC; `null` until redeemed.
    pub redeemed_at: Option<DateTime<Utc>>,
    /// What the QR code shown to the customer encodes: see [`coupon_qr_payload`].
    pub qr: String,
}

/// The QR payload of a coupon: `flashgate:coupon:<CODE>`. The POS scans it, takes the code
/// after the last `:` and calls redeem with it. Pure, so the app can draw the QR from the code
/// in the claim reply without another request.
pub fn coupon_qr_payload(code: &str) -> String {
    format!("flashgate:coupon:{code}")
}

/// Units of a campaign by claim status, from PostgreSQL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCounts {
    pub held: i64,
    pub paid: i64,
    pub released: i64,
    pub expired: i64,
    pub issued: i64,
    pub redeemed: i64,
}

/// The Redis gate of a campaign as reconciliation saw it. `null` in the report when the gate
/// is not loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateView {
    /// `fg:{c}:remaining`.
    pub remaining: i64,
    /// Takes still committing (`fg:{c}:pending`).
    pub pending: i64,
    /// Customers the gate remembers as holding a unit.
    pub holders: i64,
    /// Whether the sold-out flag is set.
    pub sold_out_flag: bool,
    /// Gate holders naming a claim that is not active in PostgreSQL (blocks the customer).
    pub stale_holders: i64,
    /// Active claims in PostgreSQL the gate does not know (the customer could take twice at the
    /// gate; PostgreSQL's unique index still refuses).
    pub missing_holders: i64,
}

/// `GET /admin/v1/campaigns/{id}/reconcile` body and `flashgate reconcile <campaign>` output.
/// Checks `stock = remaining + held + paid` (sale) or `stock = remaining + issued + redeemed`
/// (giveaway), the ledger against the claims, and the Redis gate against PostgreSQL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcileReport {
    pub campaign: String,
    pub kind: CampaignKind,
    pub stock: i64,
    /// `campaigns.remaining` in PostgreSQL.
    pub remaining: i64,
    /// Claims by status.
    pub claims: StatusCounts,
    /// Units out: held + paid (sale) or issued + redeemed (giveaway).
    pub active: i64,
    /// Units out by the ledger: claimed/issued events minus released/expired events.
    pub ledger_active: i64,
    /// Ledger claim ids without a claim row.
    pub ledger_orphans: i64,
    /// Units handed out or available beyond the stock: `max(0, remaining + active − stock)`.
    pub oversold: i64,
    /// Units neither available nor held by a claim: `max(0, stock − remaining − active)`, plus
    /// units PostgreSQL has remaining that the gate will not hand out.
    pub stranded: i64,
    /// The gate, or `null` when it is not loaded (it is rebuilt from PostgreSQL on next use).
    pub gate: Option<GateView>,
    /// Human-readable list of every disagreement found; empty when clean.
    pub faults: Vec<String>,
    /// True when `faults` is empty (so `oversold` and `stranded` are 0).
    pub ok: bool,
}

/// Result codes of request errors ([`ErrorBody::result`]) with their HTTP status.
pub mod codes {
    /// 400: the body is not valid JSON, has duplicate keys or the wrong shape.
    pub const INVALID_JSON: &str = "invalid_json";
    /// 400: a field or header is present but has a bad value.
    pub const INVALID_REQUEST: &str = "invalid_request";
    /// 400: `Idempotency-Key` missing or not 1..=255 printable ASCII.
    pub const INVALID_IDEMPOTENCY_KEY: &str = "invalid_idempotency_key";
    /// 401: no credentials, or a malformed, expired or forged token.
    pub const UNAUTHORIZED: &str = "unauthorized";
    /// 403: valid credentials that may not do this (wrong admin token, missing edge signature).
    pub const FORBIDDEN: &str = "forbidden";
    /// 404: no such campaign / claim / route.
    pub const NOT_FOUND: &str = "not_found";
    /// 405: method not allowed on this path.
    pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
    /// 409: a resource with this id exists.
    pub const CONFLICT: &str = "conflict";
    /// 413: body larger than allowed.
    pub const PAYLOAD_TOO_LARGE: &str = "payload_too_large";
    /// 415: `Content-Type` is not `application/json`.
    pub const UNSUPPORTED_MEDIA_TYPE: &str = "unsupported_media_type";
    /// 422: the same idempotency key with a different body or campaign.
    pub const IDEMPOTENCY_KEY_REUSED: &str = "idempotency_key_reused";
    /// 422: well-formed JSON that breaks a rule (e.g. stock out of range).
    pub const VALIDATION_FAILED: &str = "validation_failed";
    /// 409 + `Retry-After` (admin writes): the first request with this `Idempotency-Key` is
    /// still running; retry with the same key to get its reply.
    pub const IN_PROGRESS: &str = "in_progress";
    /// 429: too many requests.
    pub const RATE_LIMITED: &str = "rate_limited";
    /// 409 (pay): the hold passed `held_until`, expired or was released.
    pub const HOLD_EXPIRED: &str = "hold_expired";
    /// 409 (redeem): the coupon was redeemed before.
    pub const ALREADY_REDEEMED: &str = "already_redeemed";
    /// 503 + `Retry-After`: a dependency is down or the gate is being rebuilt.
    pub const UNAVAILABLE: &str = "unavailable";
    /// 408: the request (its body, or its whole handling) took longer than the origin's bound.
    pub const REQUEST_TIMEOUT: &str = "request_timeout";
}

/// The one shape of every request error: `{"result": <code>, "message": <text for humans>}`.
/// `message` never carries internal error text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// One of [`codes`].
    pub result: String,
    pub message: String,
}

impl ErrorBody {
    /// Builds an error body from a code of [`codes`] and a message.
    pub fn new(result: &str, message: impl Into<String>) -> Self {
        ErrorBody {
            result: result.to_string(),
            message: message.into(),
        }
    }

    /// The body as a JSON string.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("ErrorBody serialises")
    }
}

/// Parses a claim body: valid JSON object without duplicate or unknown keys. Returns the
/// error code ([`codes::INVALID_JSON`]) and a message on failure.
pub fn parse_claim_body(body: &[u8]) -> Result<ClaimRequest, ErrorBody> {
    serde_json::from_slice::<ClaimRequest>(body).map_err(|e| {
        ErrorBody::new(
            codes::INVALID_JSON,
            format!("claim body must be a JSON object without unknown fields: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
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
    fn claim_reply_wire_shape() {
        assert_eq!(
            serde_json::to_string(&ClaimReply::SoldOut).unwrap(),
            r#"{"result":"sold_out"}"#
        );
        let ns = ClaimReply::NotStarted {
            starts_at: t("2026-01-01T12:00:00Z"),
        };
        assert_eq!(
            serde_json::to_string(&ns).unwrap(),
            r#"{"result":"not_started","starts_at":"2026-01-01T12:00:00Z"}"#
        );
    }

    #[test]
    fn claim_body_rules() {
        assert!(parse_claim_body(b"{}").is_ok());
        assert!(parse_claim_body(b"{\"x\":1}").is_err());
        assert!(parse_claim_body(b"{\"x\":1,\"x\":1}").is_err());
        assert!(parse_claim_body(b"not json").is_err());
        assert!(parse_claim_body(b"[]").is_err());
    }

    #[test]
    fn hold_and_redeem_wire_shapes() {
        assert_eq!(
            serde_json::to_string(&HoldReply::HoldExpired).unwrap(),
            r#"{"result":"hold_expired"}"#
        );
        let r = RedeemReply::AlreadyRedeemed {
            redeemed_at: t("2026-01-01T12:00:00Z"),
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"result":"already_redeemed","redeemed_at":"2026-01-01T12:00:00Z"}"#
        );
        assert_eq!(coupon_qr_payload("ABCD"), "flashgate:coupon:ABCD");
        assert!(serde_json::from_str::<PayRequest>(r#"{"payment_ref":"p","x":1}"#).is_err());
        assert!(is_visible_ascii("pay_123", 255));
        assert!(!is_visible_ascii("pay 123", 255));
    }

    #[test]
    fn slug_rule() {
        assert!(is_valid_slug("summer-sale-2026"));
        assert!(!is_valid_slug(""));
        assert!(!is_valid_slug("Summer"));
        assert!(!is_valid_slug(&"a".repeat(65)));
    }
}

/// Wire types of the coupon-code service (seed "Coupons"; issue 6): shared codes with rules,
/// `check` / `use` from the shop's checkout, `confirm` / `release` from its payment service,
/// one-time code batches.
///
/// Units: money is integer minor units (cents) of the code's `currency`; percentages are basis
/// points (1000 = 10 %); times are RFC 3339 in UTC on output. Discount arithmetic:
/// [`crate::money`].
pub mod coupons {
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
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub starts_at: Option<String>,
        pub ends_at: String,
    }

    /// `POST /admin/v1/codes` body: a shared code and its rules (seed "Coupons", decision 1:
    /// "SPRING10 gives 10% off orders of $50 or more until Sunday, for the first 1,000 uses,
    /// once per customer"): `code`, the [`Offer`]'s fields, `limit`, `once_per_customer`.
    /// Unknown fields are refused.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct NewCode {
        /// Normalised (trim, NFKC, uppercase) to `A–Z0–9`, 1..=64 characters.
        pub code: String,
        #[serde(flatten)]
        pub offer: Offer,
        /// Total uses, 1..=[`MAX_CODE_LIMIT`].
        pub limit: i64,
        /// Default true: each customer may hold or have used the code once.
        #[serde(default = "yes")]
        pub once_per_customer: bool,
    }

    /// `POST /admin/v1/codes/batches` body: `count` one-time codes (12 symbols each, valid
    /// once) sharing these rules (seed "Coupons", decision 4): `count` and the [`Offer`]'s
    /// fields. Unknown fields are refused, `limit` and `once_per_customer` too (each code is
    /// valid once).
    #[derive(Debug, Clone, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct NewCodeBatch {
        /// 1..=[`MAX_BATCH_COUNT`].
        pub count: i64,
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
        if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err("currency must be three uppercase letters (ISO 4217)".into());
        }
        if min_order < 0 {
            return Err("min_order must be >= 0".into());
        }
        Ok(())
    }

    /// Whether a code is shared or one-time.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum CodeKind {
        Shared,
        OneTime,
    }

    impl CodeKind {
        /// The wire and stored name.
        pub fn as_str(self) -> &'static str {
            match self {
                CodeKind::Shared => "shared",
                CodeKind::OneTime => "one_time",
            }
        }
    }

    /// `GET /admin/v1/codes/{code}` body (also the 201 body of `POST /admin/v1/codes`).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct AdminCode {
        pub code: String,
        pub kind: CodeKind,
        /// Basis points, or `null`.
        pub percent_off: Option<i64>,
        /// Minor units, or `null`.
        pub amount_off: Option<i64>,
        pub currency: String,
        /// Minor units.
        pub min_order: i64,
        pub starts_at: DateTime<Utc>,
        pub ends_at: DateTime<Utc>,
        pub limit: i64,
        /// Uses not taken (held or used uses are taken; released ones came back).
        pub uses_left: i64,
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
    #[serde(deny_unknown_fields)]
    pub struct CodeChange {
        /// `disable` or `enable`.
        pub action: String,
    }

    /// `POST /admin/v1/codes/batches` 201 body.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct CodeBatch {
        /// `b_` + 32 hex digits.
        pub id: String,
        pub count: i64,
        /// Path of the CSV of its codes (`GET`, admin token).
        pub csv: String,
        /// How long generating and saving took, in milliseconds.
        pub took_ms: u64,
    }

    /// `POST /api/v1/codes/{code}/check` body: `{"cart_total": 6000}`; `currency` optional (when
    /// given it must be the code's).
    #[derive(Debug, Clone, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct CheckRequest {
        /// Pre-discount cart total in minor units, 0..=[`MAX_CART_TOTAL`].
        pub cart_total: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub currency: Option<String>,
    }

    /// `POST /api/v1/codes/{code}/check` 200 body: `discount + total = cart_total`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct CheckReply {
        /// Minor units.
        pub discount: i64,
        /// Minor units.
        pub total: i64,
    }

    /// `POST /api/v1/codes/{code}/use` body: `{"order": "o81", "cart_total": 6000}`.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct UseRequest {
        /// The shop's order reference: 1..=[`MAX_ORDER_LEN`] visible ASCII characters.
        pub order: String,
        /// Minor units, 0..=[`MAX_CART_TOTAL`].
        pub cart_total: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub currency: Option<String>,
    }

    /// `POST /api/v1/codes/{code}/use` 201 body: the use, held until `held_until`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    ///   [`crate::api::ClaimReply::InProgress`]).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "result", rename_all = "snake_case")]
    pub enum CodeRefusal {
        InvalidCode,
        NotApplicable {
            reason: NotApplicable,
        },
        UsedUp,
        AlreadyUsed {
            /// The earlier use's id (`u_` + 32 hex digits), when known.
            #[serde(rename = "use", default, skip_serializing_if = "Option::is_none")]
            use_id: Option<String>,
        },
        InProgress,
    }

    impl CodeRefusal {
        /// HTTP status: 404, 422, 409, 409, 409.
        pub fn http_status(&self) -> u16 {
            match self {
                CodeRefusal::InvalidCode => 404,
                CodeRefusal::NotApplicable { .. } => 422,
                CodeRefusal::UsedUp | CodeRefusal::AlreadyUsed { .. } | CodeRefusal::InProgress => {
                    409
                }
            }
        }
    }

    /// State of a use.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum UseStatus {
        /// Taken at the order, waiting for the payment.
        Held,
        /// Confirmed: the payment went through.
        Used,
        /// Released (payment failed, or not confirmed in time): the use went back.
        Released,
    }

    /// `POST /api/v1/uses/{id}/confirm` and `/release` 200 body.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UseState {
        #[serde(rename = "use")]
        pub use_id: String,
        pub code: String,
        pub status: UseStatus,
    }

    /// 409 bodies of confirm / release: `{"result":"use_released"}` (confirm of a released
    /// use), `{"result":"use_confirmed"}` (release of a confirmed use).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "result", rename_all = "snake_case")]
    pub enum UseConflict {
        UseReleased,
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
}
