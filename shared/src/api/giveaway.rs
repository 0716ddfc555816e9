//! Giveaway coupons: redeem in store, the coupon view and its QR payload.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::claims::ClaimStatus;

/// `POST /api/v1/coupons/{code}/redeem` body (optional: an empty body is the same as `{}`).
/// `store` names the store or POS terminal for the ledger (1..=[`MAX_REASON_LEN`](super::common::MAX_REASON_LEN) visible
/// ASCII characters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RedeemRequest {
    /// The store redeeming it, for the ledger (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
}

/// The answer to a redeem, tagged by `result` (redeem in store).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum RedeemReply {
    /// 200: redeemed now, at `redeemed_at` (RFC 3339 UTC, origin clock).
    Redeemed {
        /// The coupon's code.
        code: String,
        /// When it was redeemed (RFC 3339 UTC, origin clock).
        redeemed_at: DateTime<Utc>,
    },
    /// 409: the coupon was redeemed before, at `redeemed_at`.
    AlreadyRedeemed {
        /// When it was first redeemed (RFC 3339 UTC, origin clock).
        redeemed_at: DateTime<Utc>,
    },
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Coupon {
    /// The 12-symbol code.
    pub code: String,
    /// The campaign that issued it.
    pub campaign: String,
    /// The customer it was issued to (the `sub` of her token).
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

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn redeem_wire_shapes() {
        let r = RedeemReply::AlreadyRedeemed {
            redeemed_at: t("2026-01-01T12:00:00Z"),
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"result":"already_redeemed","redeemed_at":"2026-01-01T12:00:00Z"}"#
        );
        assert_eq!(r.http_status(), 409);
        assert_eq!(coupon_qr_payload("ABCD"), "flashgate:coupon:ABCD");
    }
}
