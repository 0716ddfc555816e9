//! What every area of the API shares: the request-error body ([`ErrorBody`]) and its result
//! [`codes`], and the field rules and limits used by more than one area (campaign slug,
//! visible-ASCII fields, free-text reasons).
//!
//! The text rules themselves (visible ASCII, free text) are defined once in [`crate::text`];
//! they are re-exported here for the wire types that use them.

use serde::{Deserialize, Serialize};

pub use crate::text::{is_ascii_of, is_visible_ascii};

/// Longest campaign id (slug), in bytes.
pub const MAX_SLUG_LEN: usize = 64;

/// Largest free-text `reason` accepted by `release`, and largest `store` accepted by
/// `redeem`, in characters.
pub const MAX_REASON_LEN: usize = 200;

/// True when `s` is a campaign slug: `[a-z0-9-]{1,64}` ([`MAX_SLUG_LEN`]).
pub fn is_valid_slug(s: &str) -> bool {
    is_ascii_of(s, MAX_SLUG_LEN, |b| {
        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
    })
}

/// The message of the 404 for campaign `id`: `no campaign <id>` for a slug
/// ([`is_valid_slug`]); for anything else (too long, odd characters) the id is not echoed
/// back, so a request cannot make the answer carry text of its choosing.
pub fn no_campaign_message(id: &str) -> String {
    if is_valid_slug(id) {
        format!("no campaign {id}")
    } else {
        "no campaign with this id (a campaign id is [a-z0-9-]{1,64})".to_string()
    }
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

    /// Every code above.
    pub const ALL: &[&str] = &[
        INVALID_JSON,
        INVALID_REQUEST,
        INVALID_IDEMPOTENCY_KEY,
        UNAUTHORIZED,
        FORBIDDEN,
        NOT_FOUND,
        METHOD_NOT_ALLOWED,
        CONFLICT,
        PAYLOAD_TOO_LARGE,
        UNSUPPORTED_MEDIA_TYPE,
        IDEMPOTENCY_KEY_REUSED,
        VALIDATION_FAILED,
        IN_PROGRESS,
        RATE_LIMITED,
        HOLD_EXPIRED,
        ALREADY_REDEEMED,
        UNAVAILABLE,
        REQUEST_TIMEOUT,
    ];
}

/// The one shape of every request error: `{"result": <code>, "message": <text for humans>}`.
/// `message` never carries internal error text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// The error's code: `invalid_json`, `invalid_request`, `invalid_idempotency_key` (400),
    /// `unauthorized` (401), `forbidden` (403), `not_found` (404), `method_not_allowed` (405),
    /// `request_timeout` (408), `conflict`, `in_progress`, `hold_expired`, `already_redeemed`
    /// (409), `payload_too_large` (413), `unsupported_media_type` (415),
    /// `idempotency_key_reused`, `validation_failed` (422), `rate_limited` (429),
    /// `unavailable` (503). The list is [`codes::ALL`].
    pub result: String,
    /// A human-readable explanation (never internal error text).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slug_rule() {
        assert!(is_valid_slug("summer-sale-2026"));
        assert!(is_valid_slug(&"a".repeat(64)));
        assert!(!is_valid_slug(""));
        assert!(!is_valid_slug("Summer"));
        assert!(!is_valid_slug("a_b"));
        assert!(!is_valid_slug(&"a".repeat(65)));
    }

    #[test]
    fn error_body_wire_shape() {
        assert_eq!(
            ErrorBody::new(codes::NOT_FOUND, "no campaign x").to_json(),
            r#"{"result":"not_found","message":"no campaign x"}"#
        );
    }
}
