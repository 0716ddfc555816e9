//! Gift fulfilment (docs/GIFTS.md): gift campaigns, segments with their gift and frequency
//! caps, segment members (MSISDNs), the eligibility preview and fulfilments.
//!
//! Money is integer minor units of an ISO 4217 currency (`2000` EGP is 20.00 EGP); times are
//! RFC 3339 UTC; cap windows are whole days.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Most MSISDNs one `PUT …/members` call takes.
pub const MAX_MEMBERS_PER_CALL: usize = 100_000;
/// Largest body of `PUT …/members`, in bytes (100,000 MSISDNs of 15 digits, quoted, with
/// commas and some white space).
pub const MAX_MEMBERS_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Most cap rules on one segment.
pub const MAX_CAPS_PER_SEGMENT: usize = 10;
/// Largest `max` of a cap rule.
pub const MAX_CAP_GRANTS: i32 = 1_000;
/// Largest `per_days` of a cap rule (ten years).
pub const MAX_CAP_DAYS: i32 = 3_660;
/// Largest gift amount, in minor units.
pub const MAX_GIFT_AMOUNT: i64 = 1_000_000_000_000;
/// Longest gift campaign name, in characters.
pub const MAX_GIFT_CAMPAIGN_NAME: usize = 200;

/// True when `s` is an MSISDN as this API takes it: E.164 digits without the `+`, 8 to 15
/// of them.
pub fn is_valid_msisdn(s: &str) -> bool {
    (8..=15).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}

/// True when `s` is a gift campaign or segment id: 1 to 64 of `[A-Za-z0-9_-]`
/// (e.g. `WORLDCUP_2026`).
pub fn is_valid_gift_id(s: &str) -> bool {
    crate::text::is_ascii_of(s, 64, |b| {
        b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
    })
}

stored_enum! {
    /// What a gift is.
    #[derive(Default)]
    pub enum GiftKind {
        /// Mobile credit added to the subscriber's line by the provider.
        #[default]
        MobileCredit = "mobile_credit",
    }
}

stored_enum! {
    /// A gift campaign's stored state.
    pub enum GiftCampaignState {
        /// Grants between `starts_at` and `ends_at`.
        Active = "active",
        /// No grants while paused.
        Paused = "paused",
        /// No grants any more.
        Closed = "closed",
    }
}

stored_enum! {
    /// Where a fulfilment's provider call stands.
    pub enum DeliveryStatus {
        /// Granted; the provider has not confirmed the credit yet.
        Pending = "pending",
        /// The provider confirmed the credit.
        Delivered = "delivered",
        /// Every attempt failed; a manager may retry it.
        Failed = "failed",
    }
}

stored_enum! {
    /// What one entry of a delivery's history records (docs/GIFTS.md, "Delivery history").
    pub enum DeliveryOutcome {
        /// A provider call answered with a receipt (`answer`: the provider's reference).
        Delivered = "delivered",
        /// A provider call failed and may be retried: no answer in time, a 5xx, a transport
        /// error (`answer`: which).
        Error = "error",
        /// A provider call was refused (4xx); retrying it will not help (`answer`: the status).
        Refused = "refused",
        /// Not a call: the delivery gave up (after its last attempt, or a refusal).
        Failed = "failed",
        /// Not a call: a manager put the failed delivery back (`actor`: who).
        Retried = "retried",
    }
}

/// A gift: `amount` minor units of `currency`, of `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Gift {
    /// Minor units of `currency` (e.g. 2000 = 20.00 EGP).
    pub amount: i64,
    /// ISO 4217 code, e.g. `EGP`.
    pub currency: String,
    /// What the gift is (`mobile_credit`).
    #[serde(default)]
    pub kind: GiftKind,
}

/// A cap rule: at most `max` grants per sliding window of `per_days` days.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CapRule {
    /// Most grants inside one window.
    pub max: i32,
    /// Length of the sliding window, in days.
    pub per_days: i32,
}

impl CapRule {
    /// At most `max` grants per `per_days` days: `CapRule::at_most(2, 7)`.
    pub const fn at_most(max: i32, per_days: i32) -> Self {
        CapRule { max, per_days }
    }
}

/// Checks a set of cap rules: at most [`MAX_CAPS_PER_SEGMENT`], `max` in
/// 1..=[`MAX_CAP_GRANTS`], `per_days` in 1..=[`MAX_CAP_DAYS`], one rule per `per_days`.
/// The error is for humans.
pub fn check_caps(caps: &[CapRule]) -> Result<(), String> {
    if caps.len() > MAX_CAPS_PER_SEGMENT {
        return Err(format!("at most {MAX_CAPS_PER_SEGMENT} cap rules"));
    }
    for (i, c) in caps.iter().enumerate() {
        if !(1..=MAX_CAP_GRANTS).contains(&c.max) {
            return Err(format!("caps[{i}].max must be 1..={MAX_CAP_GRANTS}"));
        }
        if !(1..=MAX_CAP_DAYS).contains(&c.per_days) {
            return Err(format!("caps[{i}].per_days must be 1..={MAX_CAP_DAYS}"));
        }
        if caps[..i].iter().any(|o| o.per_days == c.per_days) {
            return Err(format!("caps[{i}]: two rules with per_days {}", c.per_days));
        }
    }
    Ok(())
}

/// Body of `POST /admin/v1/gift-campaigns`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewGiftCampaign {
    /// The id (1..=64 of `[A-Za-z0-9_-]`).
    pub id: String,
    /// Name for people (1..=200 characters).
    pub name: String,
    /// First instant of grants (RFC 3339 UTC).
    pub starts_at: DateTime<Utc>,
    /// No grant at or after this instant (RFC 3339 UTC).
    pub ends_at: DateTime<Utc>,
}

/// A gift campaign as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GiftCampaign {
    /// The id (1..=64 of `[A-Za-z0-9_-]`).
    pub id: String,
    /// Name for people (1..=200 characters).
    pub name: String,
    /// First instant of grants (RFC 3339 UTC).
    pub starts_at: DateTime<Utc>,
    /// No grant at or after this instant (RFC 3339 UTC).
    pub ends_at: DateTime<Utc>,
    /// Stored state (`active`, `paused`, `closed`).
    pub state: GiftCampaignState,
    /// Its segments, by id.
    pub segments: Vec<Segment>,
}

/// The gift of a new segment: `{amount, currency}` (`kind` defaults to `mobile_credit`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewGift {
    /// Minor units of `currency` (e.g. 2000 = 20.00 EGP).
    pub amount: i64,
    /// ISO 4217 code, e.g. `EGP`.
    pub currency: String,
    /// What the gift is (`mobile_credit`).
    #[serde(default)]
    pub kind: GiftKind,
}

/// Body of `POST /admin/v1/gift-campaigns/{id}/segments`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewSegment {
    /// The id (1..=64 of `[A-Za-z0-9_-]`).
    pub id: String,
    /// The gift.
    pub gift: NewGift,
    /// Cap rules; every one must pass.
    #[serde(default)]
    pub caps: Vec<CapRule>,
}

/// A segment with its gift and cap rules (ordered by `per_days`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Segment {
    /// The id (1..=64 of `[A-Za-z0-9_-]`).
    pub id: String,
    /// The gift.
    pub gift: Gift,
    /// Cap rules; every one must pass.
    pub caps: Vec<CapRule>,
}

/// Body of `PATCH /admin/v1/gift-campaigns/{id}/segments/{segment}`: the new set of cap rules
/// (replaces the old set; empty = no cap).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CapsChange {
    /// Cap rules; every one must pass.
    pub caps: Vec<CapRule>,
}

/// Body of `PUT /admin/v1/gift-campaigns/{id}/segments/{segment}/members`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Members {
    /// MSISDNs: E.164 digits without `+`, 8..=15.
    pub msisdns: Vec<String>,
}

/// Reply of `PUT …/members`: how many were added, how many were already in the segment
/// (a repeated MSISDN within one call counts once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MembersAdded {
    /// MSISDNs newly added.
    pub added: u64,
    /// MSISDNs that were already members of the segment.
    pub already: u64,
}

/// Why a subscriber gets no gift now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// A cap rule is used up; `next_eligible_at` says when the earliest grant leaves its window.
    CapReached,
    /// The subscriber is in no segment of the campaign.
    NotInSegment,
    /// The campaign is paused, closed, not started or ended.
    CampaignNotActive,
}

/// Reply of `GET /api/v1/gift-campaigns/{id}/eligibility?msisdn=…`: a preview ("would it be
/// granted now"), never a promise; only a fulfilment decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Eligibility {
    /// True when a fulfilment now would grant.
    pub eligible: bool,
    /// The gift.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gift: Option<Gift>,
    /// Why not, when not eligible.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<Refusal>,
    /// When the first used-up cap frees (RFC 3339 UTC).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub next_eligible_at: Option<DateTime<Utc>>,
}

/// Body of `POST /api/v1/gift-campaigns/{id}/fulfilments`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FulfilmentRequest {
    /// The subscriber: E.164 digits without `+`, 8..=15.
    pub msisdn: String,
}

/// A granted gift and its delivery status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Fulfilment {
    /// A UUID (hyphenated, lowercase); also the provider's idempotency key.
    pub id: String,
    /// The gift campaign id.
    pub campaign: String,
    /// The subscriber: E.164 digits without `+`, 8..=15.
    pub msisdn: String,
    /// Her segment.
    pub segment: String,
    /// The gift.
    pub gift: Gift,
    /// Delivery status.
    pub status: DeliveryStatus,
    /// When granted (the campaign clock, RFC 3339 UTC).
    pub created_at: DateTime<Utc>,
}

/// Answer of `POST …/fulfilments`: 201 `granted`, or 409 with a reason code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum FulfilmentReply {
    /// 201: the gift was granted; its provider call is in the outbox.
    Granted {
        /// The grant, `pending` until the provider confirms it.
        fulfilment: Fulfilment,
    },
    /// 409: a cap rule is used up until `next_eligible_at`.
    CapReached {
        /// When the first used-up cap frees (RFC 3339 UTC).
        next_eligible_at: DateTime<Utc>,
    },
    /// 409: the subscriber is in no segment of the campaign.
    NotInSegment,
    /// 409: the campaign is paused, closed, not started or ended.
    CampaignNotActive,
}

impl FulfilmentReply {
    /// The HTTP status of this answer.
    pub fn http_status(&self) -> u16 {
        match self {
            FulfilmentReply::Granted { .. } => 201,
            _ => 409,
        }
    }
}

/// Reply of `GET /admin/v1/gift-campaigns/{id}/fulfilments`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FulfilmentList {
    /// Newest first.
    pub fulfilments: Vec<Fulfilment>,
}

/// One entry of a delivery's history: a provider call or a change of the delivery's course.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryAttempt {
    /// What happened.
    pub outcome: DeliveryOutcome,
    /// A call's number within its round (1 up to `FLASHGATE_GIFT_DELIVERY_MAX_ATTEMPTS`; a
    /// manager's retry starts a new round at 1); absent for `failed` and `retried`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i32>,
    /// The provider's answer: its reference of a `delivered` call, the error of the others
    /// (`timed out`, `provider answered 503`, ...); absent for `retried`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The admin token's name of a `retried`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// When (RFC 3339 UTC, PostgreSQL's clock).
    pub at: DateTime<Utc>,
}

/// Reply of `GET /admin/v1/fulfilments/{id}/attempts`: the whole delivery history of a
/// fulfilment, oldest first, kept through a manager's retries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryHistory {
    /// The fulfilment with its delivery status now.
    pub fulfilment: Fulfilment,
    /// Every entry, oldest first.
    pub attempts: Vec<DeliveryAttempt>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msisdn_shape() {
        assert!(is_valid_msisdn("201000000001"));
        assert!(is_valid_msisdn("12345678"));
        assert!(is_valid_msisdn("123456789012345"));
        assert!(!is_valid_msisdn("1234567"));
        assert!(!is_valid_msisdn("1234567890123456"));
        assert!(!is_valid_msisdn("+201000000001"));
        assert!(!is_valid_msisdn("20100000000a"));
        assert!(!is_valid_msisdn("２０１０００００００01"));
    }

    #[test]
    fn caps_rules() {
        let ok = [CapRule::at_most(1, 3), CapRule::at_most(2, 7)];
        assert!(check_caps(&ok).is_ok());
        assert!(check_caps(&[CapRule::at_most(0, 1)]).is_err());
        assert!(check_caps(&[CapRule::at_most(1, 0)]).is_err());
        assert!(check_caps(&[ok[0], ok[0]]).is_err());
    }

    #[test]
    fn reply_wire_shapes() {
        let at = "2026-06-11T10:00:00Z".parse().unwrap();
        assert_eq!(
            serde_json::to_string(&FulfilmentReply::CapReached {
                next_eligible_at: at
            })
            .unwrap(),
            r#"{"result":"cap_reached","next_eligible_at":"2026-06-11T10:00:00Z"}"#
        );
        assert_eq!(
            serde_json::to_string(&FulfilmentReply::NotInSegment).unwrap(),
            r#"{"result":"not_in_segment"}"#
        );
        let e = Eligibility {
            eligible: false,
            gift: None,
            reason: Some(Refusal::CampaignNotActive),
            next_eligible_at: None,
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"eligible":false,"reason":"campaign_not_active"}"#
        );
    }
}

/// The mobile-credit provider's HTTP API, as the origin's relay calls it and the provider
/// simulator (`provider-sim/`) serves it:
/// `POST /v1/credits` with `Idempotency-Key: <fulfilment id>` and a [`provider::CreditRequest`]
/// body → 200 [`provider::CreditReceipt`]. The same key again credits nothing more and answers
/// the first receipt (`replayed: true`).
pub mod provider {
    use serde::{Deserialize, Serialize};

    /// Path of the credit call.
    pub const CREDITS_PATH: &str = "/v1/credits";

    /// One credit to make.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct CreditRequest {
        /// The subscriber: E.164 digits without `+`, 8..=15.
        pub msisdn: String,
        /// Minor units of `currency`.
        pub amount: i64,
        /// ISO 4217 code.
        pub currency: String,
    }

    /// The provider's receipt of a credit.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct CreditReceipt {
        /// The provider's reference of the credit.
        pub credit_id: String,
        /// True when this key had been credited before (nothing was credited this time).
        pub replayed: bool,
    }
}
