//! Header parameters several operations share, as `utoipa::IntoParams` (`params(...)` of a
//! `#[utoipa::path]`). They exist for the document only: the handlers read these headers
//! through [`crate::http::extract`].

#![allow(dead_code)]

use utoipa::IntoParams;

/// `Idempotency-Key`, required: the same key again from the same caller gets the first
/// reply (status and body); with another body, 422 `idempotency_key_reused`.
#[derive(serde::Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyKey {
    /// 1..=255 visible ASCII characters (400 `invalid_idempotency_key` otherwise).
    #[serde(rename = "Idempotency-Key")]
    #[param(
        min_length = 1,
        max_length = 255,
        pattern = r"^[!-~]{1,255}$",
        example = "try-1"
    )]
    pub key: String,
}

/// `Idempotency-Key` of an admin write, optional: the same key and body again (per admin
/// token name) get the first reply with `Idempotent-Replayed: true`; while the first runs,
/// 409 `in_progress` + `Retry-After`; another body, 422 `idempotency_key_reused`.
#[derive(serde::Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct AdminIdempotencyKey {
    /// 1..=255 visible ASCII characters.
    #[serde(rename = "Idempotency-Key")]
    #[param(min_length = 1, max_length = 255, pattern = r"^[!-~]{1,255}$")]
    pub key: Option<String>,
}

/// `Flashgate-Admission` of a claim on a campaign with a waiting room: the admission token a
/// poll of the queue handed out (docs/WAITING-ROOM.md). Without one there, 429 `queued`.
#[derive(serde::Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct Admission {
    /// The admission token, as the poll gave it (at most 1,024 bytes).
    #[serde(rename = "Flashgate-Admission")]
    #[param(max_length = 1024)]
    pub admission: Option<String>,
}
