//! Holds of a sale: pay or release a held unit before `held_until`.

use serde::{Deserialize, Serialize};

use super::claims::Claim;

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

/// The answer to `pay` and `release`, tagged by `result`. HTTP status: see
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
    /// 200: the hold is released and its unit is back (also the answer to a repeated release).
    Released {
        /// The claim, now `released`.
        claim: Claim,
    },
    /// 409: the hold is over — past `held_until`, expired by the sweeper, or released. Its unit
    /// is back (or goes back at the next sweep); it cannot be paid any more.
    HoldExpired,
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
    /// 200 for `paid` / `released`, 409 for everything else.
    pub fn http_status(&self) -> u16 {
        match self {
            HoldReply::Paid { .. } | HoldReply::Released { .. } => 200,
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
        assert_eq!(HoldReply::NotAHold.http_status(), 409);
        assert!(serde_json::from_str::<PayRequest>(r#"{"payment_ref":"p","x":1}"#).is_err());
        assert_eq!(
            serde_json::to_string(&ReleaseRequest::default()).unwrap(),
            "{}"
        );
    }
}
