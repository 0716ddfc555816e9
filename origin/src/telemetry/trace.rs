//! W3C Trace Context at the origin: the trace id of the request's `traceparent`
//! ([`flashgate_shared::trace`]), continued in the `request` span and so in every log line of
//! the request; a request without a valid one starts a new trace.

use axum::http::HeaderMap;
use flashgate_shared::trace::TRACEPARENT_HEADER;

/// The trace id of the request's `traceparent` and `true` (the caller's trace continued), or
/// a new random one (32 lowercase hex digits) and `false`.
pub fn of(headers: &HeaderMap) -> (String, bool) {
    match headers
        .get(TRACEPARENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(flashgate_shared::trace::trace_id)
    {
        Some(t) => (t.to_string(), true),
        None => (new_trace_id(), false),
    }
}

/// A new random trace id (a UUID v4's 128 bits in hex: never all zeros).
pub fn new_trace_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
