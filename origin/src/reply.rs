//! The one reply type of the origin's business answers: a status, the exact JSON body bytes and
//! a typed [`Outcome`]. Claims, promo code checks and uses, hold changes, giveaway redeems and
//! admin writes answer with it, and the idempotency records ([`crate::idempotency`], the
//! `redeem_requests` table) keep it, so a replay sends the first body byte for byte.
//!
//! Its [`IntoResponse`] sets `Content-Type: application/json`, for an `in_progress` answer
//! or a 503, `Retry-After: 1` ([`RETRY_AFTER_SECONDS`]; RFC 9110, section 10.2.3), and for a
//! replay ([`Outcome::Replay`]) `Idempotent-Replayed: true`
//! ([`flashgate_shared::REPLAYED_HEADER`]), so that the edge never learns a campaign's state
//! from an answer decided earlier.

use axum::body::Bytes;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::ClaimReply;

use crate::error::RETRY_AFTER_SECONDS;
use std::sync::LazyLock;

/// What a reply says, for logs, spans and metrics (never sent: the body says it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// A claim was made (201).
    Claimed,
    /// No stock left (409 `sold_out`).
    SoldOut,
    /// She holds a claim already (409 `already_claimed`).
    AlreadyClaimed,
    /// The campaign has not started (409 `not_started`).
    NotStarted,
    /// The campaign has ended (409 `ended`).
    Ended,
    /// The campaign is paused (409 `paused`).
    Paused,
    /// The first request with this idempotency key is still running (409 `in_progress`).
    InProgress,
    /// The first reply of an idempotency key, sent again.
    Replay,
    /// A promo code check answered with its discount (200).
    CodeChecked,
    /// A promo code use was taken (201).
    CodeUsed,
    /// A promo code was refused (`invalid_code`, `used_up`, `already_used`, `not_applicable`).
    CodeRefused,
    /// A promo code use's state after confirm or release (200), or a conflict with it (409).
    UseState,
    /// A hold was paid or released, or refused (`hold_expired`, `already_paid`, ...).
    Hold,
    /// A giveaway coupon was redeemed (200) or had been (409 `already_redeemed`).
    Redeem,
    /// The reply of an admin write, kept for its idempotency key.
    AdminWrite,
    /// A gift was granted (201).
    GiftGranted,
    /// A gift fulfilment was refused (`cap_reached`, `not_in_segment`, `campaign_not_active`).
    GiftRefused,
}

impl Outcome {
    /// The short name used in logs and spans (`claimed`, `sold_out`, `replay`, ...).
    pub fn as_str(self) -> &'static str {
        use Outcome::*;
        match self {
            Claimed => "claimed",
            SoldOut => "sold_out",
            AlreadyClaimed => "already_claimed",
            NotStarted => "not_started",
            Ended => "ended",
            Paused => "paused",
            InProgress => "in_progress",
            Replay => "replay",
            CodeChecked => "code_checked",
            CodeUsed => "code_used",
            CodeRefused => "code_refused",
            UseState => "use_state",
            Hold => "hold",
            Redeem => "redeem",
            AdminWrite => "admin_write",
            GiftGranted => "gift_granted",
            GiftRefused => "gift_refused",
        }
    }

    /// The outcome of a claim reply.
    pub fn of_claim(reply: &ClaimReply) -> Self {
        match reply {
            ClaimReply::Claimed { .. } => Outcome::Claimed,
            ClaimReply::SoldOut => Outcome::SoldOut,
            ClaimReply::AlreadyClaimed { .. } => Outcome::AlreadyClaimed,
            ClaimReply::NotStarted { .. } => Outcome::NotStarted,
            ClaimReply::Ended => Outcome::Ended,
            ClaimReply::Paused => Outcome::Paused,
            ClaimReply::InProgress => Outcome::InProgress,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reply ready to send: status, the exact JSON body bytes (kept verbatim for replays) and its
/// [`Outcome`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Bytes,
    pub outcome: Outcome,
}

impl Reply {
    /// `body` serialised as JSON with `status`.
    pub fn json<T: serde::Serialize>(status: StatusCode, outcome: Outcome, body: &T) -> Self {
        Reply {
            status,
            body: Bytes::from(serde_json::to_vec(body).expect("replies serialise")),
            outcome,
        }
    }

    /// `body` serialised as JSON with the status of the wire type (`http_status()` of
    /// [`flashgate_shared::api`]). A status outside 100..=999 is answered as 409.
    pub fn with_status<T: serde::Serialize>(status: u16, outcome: Outcome, body: &T) -> Self {
        Reply::json(status_code(status), outcome, body)
    }

    /// The reply of a claim.
    pub fn claim(reply: &ClaimReply) -> Self {
        Reply::with_status(reply.http_status(), Outcome::of_claim(reply), reply)
    }

    /// The claim reply `sold_out`, the commonest answer of a sale: the same bytes as
    /// `Reply::claim(&ClaimReply::SoldOut)`, serialised once per process and shared.
    pub fn sold_out() -> Self {
        static SOLD_OUT: LazyLock<Reply> = LazyLock::new(|| Reply::claim(&ClaimReply::SoldOut));
        SOLD_OUT.clone()
    }
}

/// `status` as a [`StatusCode`]; a number that is no status (only from a damaged stored
/// record) reads as 409.
pub fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::CONFLICT)
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        let mut res = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            self.body,
        )
            .into_response();
        if self.outcome == Outcome::InProgress || self.status == StatusCode::SERVICE_UNAVAILABLE {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        if self.outcome == Outcome::Replay {
            res.headers_mut().insert(
                flashgate_shared::REPLAYED_HEADER,
                HeaderValue::from_static("true"),
            );
        }
        res.extensions_mut()
            .insert(crate::metrics::ResultLabel(self.outcome.as_str()));
        res
    }
}
