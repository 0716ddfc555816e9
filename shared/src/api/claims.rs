//! Claims: a customer's claim on one unit of a campaign, the claim request and its answers.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::campaigns::CampaignState;
use super::common::{codes, ErrorBody};

stored_enum! {
    /// Status of a claim.
    pub enum ClaimStatus {
        /// Sale: the unit is held for the customer until `held_until`.
        Held = "held",
        /// Sale: paid within the hold.
        Paid = "paid",
        /// Sale: released (payment failed or cancelled); the unit went back.
        Released = "released",
        /// Sale: the hold passed `held_until` unpaid; the unit went back.
        Expired = "expired",
        /// Giveaway: a coupon was issued.
        Issued = "issued",
        /// Giveaway: the coupon was redeemed in store.
        Redeemed = "redeemed",
    }
}

impl ClaimStatus {
    /// The active statuses: a claim in one holds a unit and counts against one-per-customer.
    /// The one list of them (SQL binds it as `status = ANY($n)` with [`ClaimStatus::as_str`]).
    pub const ACTIVE: [ClaimStatus; 4] = [
        ClaimStatus::Held,
        ClaimStatus::Paid,
        ClaimStatus::Issued,
        ClaimStatus::Redeemed,
    ];

    /// True for the statuses of [`ClaimStatus::ACTIVE`].
    pub fn is_active(self) -> bool {
        ClaimStatus::ACTIVE.contains(&self)
    }

    /// The stored names of [`ClaimStatus::ACTIVE`], to bind as a `text[]`.
    pub fn active_names() -> [&'static str; 4] {
        ClaimStatus::ACTIVE.map(ClaimStatus::as_str)
    }
}

/// A customer's claim on one unit of a campaign.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Claim {
    /// Claim id (`c_` + UUID v7 in simple form).
    pub id: String,
    /// Campaign id.
    pub campaign: String,
    /// Customer id (the `sub` of the customer token).
    pub customer: String,
    /// The claim's status.
    pub status: ClaimStatus,
    /// Sale: end of the hold, RFC 3339 UTC. `null` for a giveaway.
    pub held_until: Option<DateTime<Utc>>,
    /// Giveaway: the coupon code. `null` for a sale.
    pub code: Option<String>,
    /// RFC 3339 UTC, on the origin's clock.
    pub created_at: DateTime<Utc>,
    /// The variant she claimed, on a campaign with variants; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// `POST /api/v1/campaigns/{id}/claims` request body: the empty JSON object `{}`, or on a
/// campaign with variants `{"variant": "<variant id>"}`. Any other field is unknown and
/// rejected; so is any other JSON value (an array, a string, `null`).
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimRequest {
    /// The variant to claim: required on a campaign with variants, refused (400) on one
    /// without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

impl<'de> Deserialize<'de> for ClaimRequest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Body;
        impl<'de> serde::de::Visitor<'de> for Body {
            type Value = ClaimRequest;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the JSON object {} or {\"variant\": \"<id>\"}")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut variant: Option<String> = None;
                while let Some(k) = map.next_key::<String>()? {
                    if k != "variant" {
                        return Err(serde::de::Error::unknown_field(&k, &["variant"]));
                    }
                    if variant.is_some() {
                        return Err(serde::de::Error::duplicate_field("variant"));
                    }
                    variant = Some(map.next_value::<String>()?);
                }
                Ok(ClaimRequest { variant })
            }
        }
        d.deserialize_map(Body)
    }
}

/// The answer to a claim, tagged by `result`. HTTP status: see [`ClaimReply::http_status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum ClaimReply {
    /// 201: she won a unit.
    Claimed {
        /// Her new claim.
        claim: Claim,
    },
    /// 409: no unit left.
    SoldOut,
    /// 409: she already holds an active claim on this campaign; it is returned.
    AlreadyClaimed {
        /// Her active claim.
        claim: Claim,
    },
    /// 409: the campaign has not started; RFC 3339 UTC start.
    NotStarted {
        /// When claims open (RFC 3339 UTC).
        starts_at: DateTime<Utc>,
    },
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

/// `GET /api/v1/campaigns/{id}/claims/mine` body (200), tagged by `result`: her claim, and
/// whether her hold timed out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum MineReply {
    /// Her claim, with its status (`held`, `paid`, `issued`, `redeemed`, `released`).
    Claimed {
        /// Her active claim if she has one, else her latest.
        claim: Claim,
    },
    /// Her hold expired: `held_until` passed without a pay (its `status` is `expired` once the
    /// sweeper got to it, `held` until then); its unit went back to the sale.
    Expired {
        /// Her latest claim, the expired hold.
        claim: Claim,
    },
}

/// Longest claim id accepted in a path, in bytes.
pub const MAX_CLAIM_ID_LEN: usize = 64;

/// True when `id` can be a claim id (`c_` + hex; 1..=[`MAX_CLAIM_ID_LEN`] bytes of
/// `[A-Za-z0-9_]`), so anything else is a 404 without a query.
pub fn is_claim_id_shape(id: &str) -> bool {
    super::common::is_ascii_of(id, MAX_CLAIM_ID_LEN, |b| {
        b.is_ascii_alphanumeric() || b == b'_'
    })
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

    #[test]
    fn the_active_statuses_are_the_ones_that_hold_a_unit() {
        assert_eq!(
            ClaimStatus::active_names(),
            ["held", "paid", "issued", "redeemed"]
        );
        assert!(!ClaimStatus::Released.is_active());
        assert!(!ClaimStatus::Expired.is_active());
    }

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
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
        let v = parse_claim_body(br#"{"variant":"42"}"#).unwrap();
        assert_eq!(v.variant.as_deref(), Some("42"));
        assert!(parse_claim_body(br#"{"variant":"42","variant":"43"}"#).is_err());
        assert!(parse_claim_body(br#"{"variant":42}"#).is_err());
    }

    #[test]
    fn claim_id_shape() {
        assert!(is_claim_id_shape("c_0190aa3b7c6e7d2f8a4b5c6d7e8f9a0b"));
        assert!(!is_claim_id_shape(""));
        assert!(!is_claim_id_shape("c-1"));
        assert!(!is_claim_id_shape(&"c".repeat(65)));
    }
}
