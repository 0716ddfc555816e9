//! The origin's one error type for HTTP handlers, and its mapping to the documented body
//! shape `{"result": <code>, "message": <text for humans>}` ([`flashgate_shared::api::ErrorBody`]).
//!
//! Unavailable dependencies (PostgreSQL, Redis down, slow or timed out) are logged with their
//! detail and answered as 503 `unavailable` with `Retry-After`; a PostgreSQL refusal of a value
//! the request sent is a 4xx (see `From<sqlx::Error>`): a client never sees internal error text,
//! and never a 500 or a "retry later" for anything it can send.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::{codes, ErrorBody};

/// Seconds a client is asked to wait before retrying a 503 or an `in_progress` claim.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// A request that cannot be answered with a business result.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 with a result code from [`codes`] (`invalid_json`, `invalid_request`, ...).
    #[error("bad request: {1}")]
    BadRequest(&'static str, String),
    /// 401 `unauthorized`.
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    /// 403 `forbidden`.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// 404 `not_found`.
    #[error("not found: {0}")]
    NotFound(String),
    /// 405 `method_not_allowed`.
    #[error("method not allowed")]
    MethodNotAllowed(String),
    /// 409 `conflict`.
    #[error("conflict: {0}")]
    Conflict(String),
    /// 413 `payload_too_large`.
    #[error("payload too large")]
    PayloadTooLarge(String),
    /// 415 `unsupported_media_type`.
    #[error("unsupported media type")]
    UnsupportedMediaType(String),
    /// 422 with a result code (`validation_failed`, `idempotency_key_reused`).
    #[error("unprocessable: {1}")]
    Unprocessable(&'static str, String),
    /// 408 `request_timeout`: the body or the whole request took longer than its bound.
    #[error("request timeout: {0}")]
    RequestTimeout(String),
    /// 429 `rate_limited` with `Retry-After` of the given seconds (promo code guess limiting).
    #[error("rate limited: {1}")]
    RateLimited(u64, String),
    /// 503 `unavailable` with `Retry-After`: a dependency failed or the gate is loading.
    /// The detail is logged, never sent.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

impl ApiError {
    /// 422 `validation_failed`.
    pub fn validation(message: impl Into<String>) -> Self {
        ApiError::Unprocessable(codes::VALIDATION_FAILED, message.into())
    }

    /// 400 `invalid_json`.
    pub fn invalid_json(message: impl Into<String>) -> Self {
        ApiError::BadRequest(codes::INVALID_JSON, message.into())
    }

    fn parts(&self) -> (StatusCode, &'static str, String) {
        use ApiError::*;
        match self {
            BadRequest(code, m) => (StatusCode::BAD_REQUEST, code, m.clone()),
            Unauthorized(m) => (StatusCode::UNAUTHORIZED, codes::UNAUTHORIZED, m.clone()),
            Forbidden(m) => (StatusCode::FORBIDDEN, codes::FORBIDDEN, m.clone()),
            NotFound(m) => (StatusCode::NOT_FOUND, codes::NOT_FOUND, m.clone()),
            MethodNotAllowed(m) => (
                StatusCode::METHOD_NOT_ALLOWED,
                codes::METHOD_NOT_ALLOWED,
                m.clone(),
            ),
            Conflict(m) => (StatusCode::CONFLICT, codes::CONFLICT, m.clone()),
            PayloadTooLarge(m) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                codes::PAYLOAD_TOO_LARGE,
                m.clone(),
            ),
            UnsupportedMediaType(m) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                codes::UNSUPPORTED_MEDIA_TYPE,
                m.clone(),
            ),
            Unprocessable(code, m) => (StatusCode::UNPROCESSABLE_ENTITY, code, m.clone()),
            RequestTimeout(m) => (
                StatusCode::REQUEST_TIMEOUT,
                codes::REQUEST_TIMEOUT,
                m.clone(),
            ),
            RateLimited(_, m) => (
                StatusCode::TOO_MANY_REQUESTS,
                codes::RATE_LIMITED,
                m.clone(),
            ),
            Unavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                codes::UNAVAILABLE,
                "a dependency is unavailable; retry after the given delay".into(),
            ),
        }
    }
}

/// SQLSTATE of a statement cancelled by `statement_timeout` (`query_canceled`).
pub const SQLSTATE_QUERY_CANCELED: &str = "57014";

/// Maps a PostgreSQL failure by its SQLSTATE (PostgreSQL manual, appendix A "Error Codes"):
/// - class 22 (data exception: a NUL byte in text, a number out of range, a bad date, ...) is
///   caused by the request's values: 422 `validation_failed`;
/// - class 23 (integrity constraint violation): 409 `conflict` for a unique or exclusion
///   violation (23505, 23P01: the thing exists), 422 `validation_failed` for the others
///   (not null, foreign key, check);
/// - everything else — connection loss, pool timeout, `statement_timeout` (57014), server
///   shutting down — is a dependency being unavailable: 503 `unavailable` + `Retry-After`.
///
/// The PostgreSQL detail is logged, never sent.
impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        let code = e
            .as_database_error()
            .and_then(|d| d.code())
            .map(|c| c.into_owned());
        match code.as_deref() {
            Some(c) if c.starts_with("22") || c.starts_with("23") => {
                tracing::info!(sqlstate = c, error = %e, "PostgreSQL refused a request's value");
                match c {
                    "23505" | "23P01" => ApiError::Conflict(
                        "a value of the request conflicts with existing data".into(),
                    ),
                    _ => ApiError::validation("a value of the request is not acceptable"),
                }
            }
            _ => ApiError::Unavailable(format!("postgres: {e}")),
        }
    }
}

impl From<redis::RedisError> for ApiError {
    fn from(e: redis::RedisError) -> Self {
        ApiError::Unavailable(format!("redis: {e}"))
    }
}

/// Why work on the record (PostgreSQL) and the gate (Redis) together did not complete: a
/// gate load, a stock change, an audit or a reconciliation. A request that meets one is
/// answered 503 with `Retry-After` (or the 4xx a refused value gives), like either error alone.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// PostgreSQL failed.
    #[error("postgres: {0}")]
    Db(#[from] sqlx::Error),
    /// Redis failed.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Db(e) => e.into(),
            StoreError::Redis(e) => e.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message) = self.parts();
        if let ApiError::Unavailable(detail) = &self {
            tracing::warn!(%detail, "answering 503");
        }
        let body = ErrorBody::new(code, message).to_json();
        let mut res = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
        if let ApiError::RateLimited(seconds, _) = &self {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from((*seconds).max(1)));
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        res.extensions_mut()
            .insert(crate::metrics::ResultLabel(code));
        res
    }
}

/// Result alias for handlers.
pub type ApiResult<T> = Result<T, ApiError>;
