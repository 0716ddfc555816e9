//! The caller's `x-request-id`, bounded: an id is kept (recorded in the request span and sent
//! back) only when it is 1 ..= [`MAX_REQUEST_ID_LEN`] visible ASCII characters; any other is
//! dropped, so that the request gets a fresh UUID v4 like a request without one. An unbounded
//! id would be copied into every log line and echoed in the answer.

use axum::http::Request;

use super::REQUEST_ID_HEADER;
pub use flashgate_shared::request_id::MAX_REQUEST_ID_LEN;

/// Removes an `x-request-id` that is empty, longer than [`MAX_REQUEST_ID_LEN`] or has a byte
/// outside visible ASCII (`!` ..= `~`). Used as a `tower::util::MapRequestLayer` in front of
/// tower-http's `SetRequestIdLayer`, which then makes a new id.
pub fn bounded<B>(mut req: Request<B>) -> Request<B> {
    let keep = req
        .headers()
        .get(REQUEST_ID_HEADER)
        .is_none_or(|v| flashgate_shared::request_id::is_kept(v.as_bytes()));
    if !keep {
        req.headers_mut().remove(REQUEST_ID_HEADER);
    }
    req
}
