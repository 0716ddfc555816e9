//! Holds of a sale: pay, release or extend a held unit before `held_until`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::claims::Claim;

/// `GET /api/v1/claims/{id}` body: the claim in whatever status it has, with what the
/// checkout needs to match a paid one to its order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimDetail {
    /// The claim (flattened: its fields stand at the top level).
    #[serde(flatten)]
    pub claim: Claim,
    /// The payment's reference as `pay` got it; `null` unless `status` is `paid`.
    pub payment_ref: Option<String>,
    /// When the hold was paid (RFC 3339 UTC); `null` unless `status` is `paid`.
    pub paid_at: Option<DateTime<Utc>>,
}

/// Largest `payment_ref` accepted by `pay`, in bytes.
pub const MAX_PAYMENT_REF_LEN: usize = 255;

/// `POST /api/v1/claims/{id}/pay` body: the payment provider's reference of the payment that
/// confirms the hold (the order keeps the payment provider's id, never the card). `payment_ref` is 1..=[`MAX_PAYMENT_REF_LEN`] visible ASCII characters; unknown
/// fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PayRequest {
    /// The payment service's reference of the payment: 1..=[`MAX_PAYMENT_REF_LEN`] visible ASCII characters.
    pub payment_ref: String,
}

/// `POST /api/v1/claims/{id}/release` body (optional: an empty body is the same as `{}`).
/// `reason` is free text for the ledger (1..=[`MAX_REASON_LEN`](super::common::MAX_REASON_LEN) characters), e.g.
/// `payment_failed` or `customer_cancelled`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    /// Why the hold is released, for the ledger (free text); absent: a default reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `POST /api/v1/claims/{id}/extend` body (optional: an empty body is the same as `{}`).
/// `seconds` is how much to add to `held_until`, 1..=the campaign's `hold_extension_seconds`;
/// absent: the campaign's `hold_extension_seconds`. Unknown fields are refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ExtendRequest {
    /// Seconds to add to `held_until` (1..=the campaign's `hold_extension_seconds`, at most
    /// [`MAX_HOLD_EXTENSION_SECONDS`](super::campaigns::MAX_HOLD_EXTENSION_SECONDS)); absent:
    /// all the campaign allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<i64>,
}

/// Which hold call a [`HoldReply`] answers: the same result can be a success for one call and
/// a refusal for another (`released` is 200 for a release, 409 for a pay or an extend).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldCall {
    /// `POST /api/v1/claims/{id}/pay`.
    Pay,
    /// `POST /api/v1/claims/{id}/release`.
    Release,
    /// `POST /api/v1/claims/{id}/extend`.
    Extend,
}

/// The answer to `pay`, `release` and `extend`, tagged by `result`. HTTP status: see
/// [`HoldReply::http_status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum HoldReply {
    /// 200: the hold is paid with `payment_ref` (also the answer to the same pay again).
    Paid {
        /// The claim, now `paid`.
        claim: Claim,
        /// The payment's reference, as sent.
        payment_ref: String,
    },
    /// Release: 200, the hold is released and its unit is back (also the answer to a repeated
    /// release). Pay and extend: 409, the hold was released before (by the checkout or an
    /// admin), not timed out; it cannot be paid or extended any more.
    Released {
        /// The claim, now `released`.
        claim: Claim,
    },
    /// 200 (extend): `held_until` moved later, once per claim (also the answer to the same
    /// `Idempotency-Key` again, with the claim as it is now).
    Extended {
        /// The claim with its new `held_until`.
        claim: Claim,
        /// The new end of the hold (RFC 3339 UTC); the sweeper and `pay` both go by it.
        held_until: DateTime<Utc>,
    },
    /// 409: the hold timed out — past `held_until`, or expired by the sweeper. Its unit is
    /// back (or goes back at the next sweep); it cannot be paid or extended any more. (A hold
    /// that was released answers `released` instead.)
    HoldExpired,
    /// 409 (extend): the hold was extended before, with another `Idempotency-Key`; a claim is
    /// extended once at most. Its `held_until` is unchanged.
    AlreadyExtended {
        /// The claim, with the `held_until` of its one extension.
        claim: Claim,
    },
    /// 409: the claim is already paid (with another `payment_ref`, or a release came after the
    /// payment); it keeps its unit.
    AlreadyPaid {
        /// The paid claim.
        claim: Claim,
    },
    /// 409: the claim is not a sale hold (a giveaway coupon cannot be paid or released).
    NotAHold,
}

impl HoldReply {
    /// The claim the reply carries, to complete (its variant); `None` for the answers without
    /// one (`hold_expired`, `not_a_hold`).
    pub fn claim_mut(&mut self) -> Option<&mut Claim> {
        match self {
            HoldReply::Paid { claim, .. }
            | HoldReply::Released { claim }
            | HoldReply::Extended { claim, .. }
            | HoldReply::AlreadyExtended { claim }
            | HoldReply::AlreadyPaid { claim } => Some(claim),
            HoldReply::HoldExpired | HoldReply::NotAHold => None,
        }
    }

    /// The HTTP status of this answer to `call`: 200 for `paid`, `extended`, and `released`
    /// answering a release; 409 for everything else (`released` answering a pay or an extend
    /// included).
    pub fn http_status(&self, call: HoldCall) -> u16 {
        match (self, call) {
            (HoldReply::Paid { .. } | HoldReply::Extended { .. }, _) => 200,
            (HoldReply::Released { .. }, HoldCall::Release) => 200,
            _ => 409,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_wire_shapes() {
        assert_eq!(
            serde_json::to_string(&HoldReply::HoldExpired).unwrap(),
            r#"{"result":"hold_expired"}"#
        );
        assert_eq!(HoldReply::NotAHold.http_status(HoldCall::Pay), 409);
        assert!(serde_json::from_str::<ExtendRequest>(r#"{"seconds":1,"x":1}"#).is_err());
        assert!(serde_json::from_str::<PayRequest>(r#"{"payment_ref":"p","x":1}"#).is_err());
        assert_eq!(
            serde_json::to_string(&ReleaseRequest::default()).unwrap(),
            "{}"
        );
    }
}
