//! Building the edge's own answers with few calls into the runtime (part of the wasm32 glue,
//! [`super`]). Each call from the worker's wasm into JavaScript costs far more than the Rust
//! around it on the hot paths (a queue poll, a cached status, a sold-out claim), so the headers
//! every such answer carries are built once per isolate and copied into each answer in one
//! call (`new Headers(template)`), and the response is put together without the extra
//! `Headers` and `content-type` that `Response::from_bytes` would make and throw away.

use crate::decide::Answer;
use flashgate_shared::{ANSWERED_BY_HEADER, PRIVATE_CACHE_CONTROL};
use std::cell::RefCell;
use worker::worker_sys::web_sys;
use worker::{Headers, Response, ResponseBuilder, Result};

thread_local! {
    /// `content-type: application/json`, `flashgate-answered-by: edge`,
    /// `cache-control: private, no-store`: the headers of every answer the edge gives itself
    /// except the cached status.
    static EDGE_JSON: Headers = template(&[
        ("content-type", "application/json"),
        (ANSWERED_BY_HEADER, "edge"),
        ("cache-control", PRIVATE_CACHE_CONTROL),
    ]);
    /// The cached status's constant headers, for the status TTL they were built with.
    static STATUS: RefCell<Option<(i64, Headers)>> = const { RefCell::new(None) };
}

/// A `Headers` holding `pairs` (a header the runtime refuses is left out: the names and values
/// here are constants known to be valid).
fn template(pairs: &[(&str, &str)]) -> Headers {
    let h = Headers::new();
    for (name, value) in pairs {
        let _ = h.set(name, value);
    }
    h
}

/// A copy of `template` that the caller may change (one call into the runtime).
fn copy(template: &Headers) -> Result<Headers> {
    Ok(Headers(web_sys::Headers::new_with_headers(&template.0)?))
}

/// A fresh copy of the edge's own JSON headers ([`EDGE_JSON`]).
pub(super) fn edge_json_headers() -> Result<Headers> {
    EDGE_JSON.with(copy)
}

/// A fresh copy of the cached status's constant headers: `content-type: application/json`,
/// `flashgate-answered-by: edge` and `cache-control: public, max-age=<TTL in whole seconds,
/// rounded up>`.
pub(super) fn status_headers(ttl_ms: i64) -> Result<Headers> {
    STATUS.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.as_ref().is_none_or(|(ttl, _)| *ttl != ttl_ms) {
            let max_age = format!("public, max-age={}", (ttl_ms + 999) / 1000);
            let h = template(&[
                ("content-type", "application/json"),
                (ANSWERED_BY_HEADER, "edge"),
                ("cache-control", &max_age),
            ]);
            *slot = Some((ttl_ms, h));
        }
        match slot.as_ref() {
            Some((_, h)) => copy(h),
            None => Ok(Headers::new()),
        }
    })
}

/// A response with `status`, `headers` and `body`.
pub(super) fn respond(status: u16, headers: Headers, body: Vec<u8>) -> Response {
    ResponseBuilder::new()
        .with_status(status)
        .with_headers(headers)
        .fixed(body)
}

/// A response for an edge answer: its status and JSON body, the edge's JSON headers and its
/// `Retry-After` when it has one.
pub(super) fn answer(a: &Answer) -> Result<Response> {
    let headers = edge_json_headers()?;
    if let Some(s) = a.retry_after_s {
        headers.set("retry-after", &s.to_string())?;
    }
    Ok(respond(a.status, headers, a.body.clone().into_bytes()))
}

/// A 200 HTML page the edge renders itself (the edge's headers, `content-type: text/html`).
pub(super) fn html(body: String) -> Result<Response> {
    let headers = edge_json_headers()?;
    headers.set("content-type", "text/html; charset=utf-8")?;
    Ok(respond(200, headers, body.into_bytes()))
}
