//! Signed lifecycle webhooks (docs/WEBHOOKS.md): the event types, the body of a delivery and
//! the data it carries, and the admin bodies of endpoints and their deliveries.
//!
//! A delivery is a `POST` of an [`Event`] as JSON with the Standard Webhooks headers
//! `webhook-id` (the event id), `webhook-timestamp` (unix seconds) and `webhook-signature`
//! (`v1,<base64 HMAC-SHA256>`, space-separated when two secrets sign).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::claims::ClaimStatus;
use super::gifts::DeliveryStatus;
use super::promo::UseStatus;

stored_enum! {
    /// The type of an event (`type` of its body), the name an endpoint subscribes to.
    pub enum EventType {
        /// A sale's claim was written: the unit is held until `held_until`.
        ClaimHeld = "claim.held",
        /// A hold was paid within its time.
        ClaimPaid = "claim.paid",
        /// A hold was released; its unit went back.
        ClaimReleased = "claim.released",
        /// A hold passed `held_until` unpaid; its unit went back.
        ClaimExpired = "claim.expired",
        /// A hold was extended, once, to a later `held_until`.
        ClaimExtended = "claim.extended",
        /// A giveaway coupon was issued.
        CouponIssued = "coupon.issued",
        /// A giveaway coupon was redeemed in store.
        CouponRedeemed = "coupon.redeemed",
        /// A promo code use was taken at an order: held until `held_until`, waiting for the
        /// payment's confirm.
        CodeUseHeld = "code_use.held",
        /// A held promo code use was confirmed (the payment went through).
        CodeUseUsed = "code_use.used",
        /// A held promo code use was released (by the shop, or by the sweeper when not
        /// confirmed by `held_until`); the use went back to the code.
        CodeUseReleased = "code_use.released",
        /// A gift was granted to a subscriber, or a manager retried its failed delivery; its
        /// delivery by the provider is pending.
        GiftGranted = "gift.granted",
        /// The provider credited a granted gift.
        GiftDelivered = "gift.delivered",
        /// A granted gift's delivery was given up (a refusal, or the last attempt failed).
        GiftFailed = "gift.failed",
        /// The campaign's last unit was taken.
        CampaignSoldOut = "campaign.sold_out",
        /// A manager added units to the campaign.
        CampaignRestocked = "campaign.restocked",
        /// A manager paused the campaign.
        CampaignPaused = "campaign.paused",
        /// A manager resumed the campaign.
        CampaignResumed = "campaign.resumed",
        /// A manager closed the campaign.
        CampaignClosed = "campaign.closed",
    }
}

impl EventType {
    /// Every event type, in the order of the documentation.
    pub const ALL: [EventType; 18] = [
        EventType::ClaimHeld,
        EventType::ClaimPaid,
        EventType::ClaimReleased,
        EventType::ClaimExpired,
        EventType::ClaimExtended,
        EventType::CouponIssued,
        EventType::CouponRedeemed,
        EventType::CodeUseHeld,
        EventType::CodeUseUsed,
        EventType::CodeUseReleased,
        EventType::GiftGranted,
        EventType::GiftDelivered,
        EventType::GiftFailed,
        EventType::CampaignSoldOut,
        EventType::CampaignRestocked,
        EventType::CampaignPaused,
        EventType::CampaignResumed,
        EventType::CampaignClosed,
    ];

    /// The kind of object the event is about: `claim` (claims and coupons), `code_use` (a
    /// promo code use), `gift` (a gift fulfilment) or `campaign`.
    pub fn object_kind(self) -> &'static str {
        match self {
            EventType::CodeUseHeld | EventType::CodeUseUsed | EventType::CodeUseReleased => {
                "code_use"
            }
            EventType::GiftGranted | EventType::GiftDelivered | EventType::GiftFailed => "gift",
            EventType::ClaimHeld
            | EventType::ClaimPaid
            | EventType::ClaimReleased
            | EventType::ClaimExpired
            | EventType::ClaimExtended
            | EventType::CouponIssued
            | EventType::CouponRedeemed => "claim",
            _ => "campaign",
        }
    }
}

/// The body of every delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Event {
    /// The event's id, also the `webhook-id` header: the same for every attempt and replay,
    /// the key a receiver deduplicates on.
    pub id: String,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// When the change was made (RFC 3339 UTC).
    pub timestamp: DateTime<Utc>,
    /// The campaign (the gift campaign for `gift.*`); absent for `code_use.*`, as promo codes
    /// belong to no campaign.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campaign: Option<String>,
    /// The object's id: the claim's id for `claim.*` and `coupon.*`, the use's for
    /// `code_use.*`, the fulfilment's for `gift.*`, the campaign's for `campaign.*`.
    pub object_id: String,
    /// 1, 2, 3… per object: a receiver applies an event only when its sequence is above the
    /// last one it applied for that object (delivery order is not promised).
    pub sequence: i32,
    /// The object's state after the change.
    pub data: EventData,
}

/// The object's state an event carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum EventData {
    /// Of `claim.*` and `coupon.*` events.
    Claim(ClaimData),
    /// Of `campaign.*` events.
    Campaign(CampaignData),
    /// Of `code_use.*` events.
    CodeUse(CodeUseData),
    /// Of `gift.*` events.
    Gift(GiftData),
}

/// A claim (or giveaway coupon) after the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimData {
    /// The claim's id.
    pub claim_id: String,
    /// The customer's id.
    pub customer: String,
    /// The claim's status after the change.
    pub status: ClaimStatus,
    /// Sale: until when the unit is held (RFC 3339 UTC); absent for a giveaway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_until: Option<DateTime<Utc>>,
    /// `claim.paid`: the payment reference given with the pay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_ref: Option<String>,
    /// The variant the claim took, on a campaign with variants (docs/VARIANTS.md); absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// A campaign's counts after the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CampaignData {
    /// Units in all.
    pub stock: i64,
    /// Units not taken.
    pub remaining: i64,
    /// True while paused.
    pub paused: bool,
    /// The end of the sale (RFC 3339 UTC).
    pub ends_at: DateTime<Utc>,
}

stored_enum! {
    /// Who released a promo code use.
    pub enum ReleasedBy {
        /// The shop, with `POST /api/v1/uses/{id}/release`.
        Service = "service",
        /// The sweeper: the use was not confirmed by its `held_until`.
        Sweeper = "sweeper",
    }
}

/// A promo code use after the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CodeUseData {
    /// The use's id (`u_…`), as the use call answered it.
    pub use_id: String,
    /// The code (normalised).
    pub code: String,
    /// The customer's id.
    pub customer: String,
    /// The shop's order reference given with the use.
    pub order: String,
    /// The use's status after the change.
    pub status: UseStatus,
    /// Until when a held use waits for its confirm (RFC 3339 UTC).
    pub held_until: DateTime<Utc>,
    /// `code_use.released`: who released it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_by: Option<ReleasedBy>,
}

/// A gift fulfilment after the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GiftData {
    /// The fulfilment's id (UUID).
    pub fulfilment_id: String,
    /// The subscriber's MSISDN (digits only).
    pub msisdn: String,
    /// Her segment.
    pub segment: String,
    /// The gift's amount in minor units of `currency`.
    pub amount: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// The delivery's status after the change.
    pub status: DeliveryStatus,
    /// `gift.delivered`: the provider's reference of the credit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_ref: Option<String>,
    /// `gift.failed`: the provider's last answer or error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `POST /admin/v1/webhooks/endpoints`: a new endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewEndpoint {
    /// Where events are posted: `https://…` (plain `http://` or a private address only when
    /// the origin runs with `FLASHGATE_WEBHOOK_ALLOW_PRIVATE`).
    pub url: String,
    /// The event types sent to it (at least one).
    pub event_types: Vec<String>,
    /// Free text for humans, at most 500 characters.
    #[serde(default)]
    pub description: String,
    /// Whether events are sent to it (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Its secret, `whsec_` + base64 of 24..=64 bytes; made at random when absent.
    #[serde(default)]
    pub secret: Option<String>,
}

fn yes() -> bool {
    true
}

/// `PATCH /admin/v1/webhooks/endpoints/{id}`: what to change (absent fields stay).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct EndpointChange {
    /// A new URL (same rules as at creation).
    #[serde(default)]
    pub url: Option<String>,
    /// New event types (at least one).
    #[serde(default)]
    pub event_types: Option<Vec<String>>,
    /// A new description.
    #[serde(default)]
    pub description: Option<String>,
    /// Enable or disable it.
    #[serde(default)]
    pub enabled: Option<bool>,
}

/// An endpoint as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Endpoint {
    /// Its id (UUID).
    pub id: String,
    /// Where events are posted.
    pub url: String,
    /// Free text for humans.
    pub description: String,
    /// The event types sent to it.
    pub event_types: Vec<EventType>,
    /// Whether events are sent to it.
    pub enabled: bool,
    /// Why the relay disabled it (a 410 from the receiver), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// Until when the previous secret still signs after a rotation (RFC 3339 UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_secret_until: Option<DateTime<Utc>>,
    /// When it was registered (RFC 3339 UTC).
    pub created_at: DateTime<Utc>,
}

/// The answer to a create or a rotation: the endpoint and its (new) secret, shown once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EndpointWithSecret {
    /// The endpoint.
    #[serde(flatten)]
    pub endpoint: Endpoint,
    /// `whsec_` + base64: the key receivers verify with.
    pub secret: String,
}

/// `GET /admin/v1/webhooks/endpoints`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EndpointList {
    /// Oldest first.
    pub endpoints: Vec<Endpoint>,
}

stored_enum! {
    /// Where a delivery stands.
    pub enum DeliveryState {
        /// Not delivered yet; due again at `next_attempt_at`.
        Pending = "pending",
        /// A 2xx answered it.
        Delivered = "delivered",
        /// Given up: the last attempt failed, or the endpoint answered 410.
        Failed = "failed",
    }
}

/// One event's delivery to one endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Delivery {
    /// The event (its `webhook-id`).
    pub event_id: String,
    /// The event's type.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// Where it stands.
    pub status: DeliveryState,
    /// Calls made in the current round.
    pub attempts: i32,
    /// The HTTP status of the last call, absent when none answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_response_code: Option<i32>,
    /// When the last call was made (RFC 3339 UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// When a pending delivery is due (RFC 3339 UTC).
    pub next_attempt_at: DateTime<Utc>,
    /// When it was queued (RFC 3339 UTC).
    pub created_at: DateTime<Utc>,
}

/// `GET /admin/v1/webhooks/endpoints/{id}/deliveries`: the newest deliveries.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryList {
    /// Newest first.
    pub deliveries: Vec<Delivery>,
}

/// `POST /admin/v1/webhooks/endpoints/{id}/replay`: one event, or every event since a time.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// The event to send again.
    #[serde(default)]
    pub event_id: Option<String>,
    /// Every event of the endpoint's types since this time (RFC 3339).
    #[serde(default)]
    pub since: Option<DateTime<Utc>>,
}

/// The answer to a replay: how many deliveries were queued.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Replayed {
    /// Deliveries queued.
    pub queued: i64,
}
