//! The caller's `x-request-id`, bounded: an id is kept (recorded in the request span and sent
//! back) only when it is 1 ..= [`MAX_REQUEST_ID_LEN`] visible ASCII characters; any other is
//! dropped, so that the request gets a fresh UUID v4 like a request without one. An unbounded
//! id would be copied into every log line and echoed in the answer.

use axum::http::Request;

use super::REQUEST_ID_HEADER;

/// The longest caller's request id kept, in bytes (a UUID is 36; a CDN's ray id with a colo
/// suffix is ~20).
pub const MAX_REQUEST_ID_LEN: usize = 128;

/// Removes an `x-request-id` that is empty, longer than [`MAX_REQUEST_ID_LEN`] or has a byte
/// outside visible ASCII (`!` ..= `~`). Used as a `tower::util::MapRequestLayer` in front of
/// tower-http's `SetRequestIdLayer`, which then makes a new id.
pub fn bounded<B>(mut req: Request<B>) -> Request<B> {
    let keep = req.headers().get(REQUEST_ID_HEADER).is_none_or(|v| {
        let b = v.as_bytes();
        !b.is_empty() && b.len() <= MAX_REQUEST_ID_LEN && b.iter().all(|c| c.is_ascii_graphic())
    });
    if !keep {
        req.headers_mut().remove(REQUEST_ID_HEADER);
    }
    req
}
