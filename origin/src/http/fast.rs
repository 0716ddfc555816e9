//! The sold-out fast path: a claim that this origin can answer from memory is answered in the
//! accept loop ([`crate::server`]), before the router and its layers (request id, span,
//! metrics and deadline layers, routing), with the very reply the full path gives.
//!
//! It takes a request only when all of these hold, and otherwise hands it on untouched (or, once
//! its body was read, with the same body bytes) to the full path, which decides it as always:
//! - `POST /api/v1/campaigns/{id}/claims` with `{id}` a slug as sent (no percent-encoding);
//! - this origin's sold-out memory of the campaign is fresh and holds its winners snapshot
//!   ([`crate::gate::flags::SoldOutFlags::answers_locally`]);
//! - the access line is off (the default text logs; with `FLASHGATE_LOG_FORMAT=json` every
//!   request keeps its line inside its `request` span, so every claim takes the full path) and
//!   no CORS origins are configured (the CORS layer adds its headers to every answer);
//! - every check of the claim handler passes: `Content-Type`, `Idempotency-Key`, the customer
//!   token (verified as always: a bad one still gets 401 through the full path), the body
//!   (already received in full, at most [`MAX_CLAIM_BODY_BYTES`], `{}`), the edge signature
//!   when `FLASHGATE_EDGE_SECRET` is set; the campaign row is cached and has no waiting room;
//! - and [`service::answer_early`] answers: the campaign is not active by the clock, or she is
//!   not a winner (a winner's retry goes on to the gate, which replays her first reply).
//!
//! The answer is the full path's byte for byte: status and body ([`Reply`]), `Content-Type`,
//! `Cache-Control: private, no-store`, `Flashgate-Answered-By: origin` and `x-request-id` (the
//! request's when [`super::request_id::bounded`] keeps it, else a new UUID v4). It is counted
//! as the full path counts it (`flashgate_claim_requests_total`,
//! `flashgate_claims_total{answered_from="memory"}`, `flashgate_http_request_duration_seconds`
//! unless `FLASHGATE_REQUEST_METRICS=false`, the dashboard's per-second series); no span is
//! made (nothing is logged on this answer). It runs outside the router's panic layer: the accept
//! loop catches a panic on its way and answers it as the layer would (503 `unavailable` +
//! `Retry-After`, the text logged, never sent).

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderName, HeaderValue, Method, Request};
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::{is_valid_slug, parse_claim_body};
use flashgate_shared::MAX_CLAIM_BODY_BYTES;
use futures::{FutureExt, StreamExt};

use super::extract;
use crate::claims::service;
use crate::reply::Reply;
use crate::state::AppState;

/// The fast path of one origin (see the module documentation).
pub struct FastPath {
    state: AppState,
}

impl FastPath {
    /// The fast path of `state`'s origin; `None` when CORS origins are configured (then every
    /// claim takes the full path, whose CORS layer adds its headers).
    pub fn new(state: AppState) -> Option<Arc<Self>> {
        let cors = state.config.cors_origins().unwrap_or_default();
        cors.is_empty().then(|| Arc::new(FastPath { state }))
    }

    /// The answer to `req` when the fast path takes it; else `Err` with the request to hand to
    /// the full path (the same request; once its body was read, the same body bytes).
    pub async fn answer(&self, req: Request<Body>) -> Result<Response, Request<Body>> {
        let t0 = Instant::now();
        let state = &self.state;
        let req = super::request_id::bounded(req);
        let campaign = match claim_campaign(&req) {
            Some(c) if state.flags.answers_locally(c) && !access_lines_on() => c.to_string(),
            _ => return Err(req),
        };
        let headers = req.headers();
        let key = headers
            .get(flashgate_shared::IDEMPOTENCY_KEY_HEADER)
            .map(|v| v.as_bytes());
        if extract::require_json(headers).is_err()
            || flashgate_shared::idempotency::check_key(key).is_err()
        {
            return Err(req);
        }
        let row = match state.campaigns.get(&state.db, &campaign).await {
            Ok(Some(row)) if row.waiting_room.is_none() => row,
            _ => return Err(req),
        };
        let Ok(customer) = extract::customer(headers, state).await else {
            return Err(req);
        };
        let (parts, body) = req.into_parts();
        let body = match received(body) {
            Received::Whole(bytes) => bytes,
            Received::Partly(body) => return Err(Request::from_parts(parts, body)),
        };
        let secret = state.config.edge_secret.as_ref();
        let signed =
            extract::edge_signature(&parts.headers, secret, "POST", parts.uri.path(), &body);
        // A claim naming a variant takes the full path (the variant is checked there).
        let checked = parse_claim_body(&body).is_ok_and(|b| b.variant.is_none()) && signed.is_ok();
        let reply = checked
            .then(|| service::answer_early(&state.flags, &state.metrics, &row, &customer))
            .flatten();
        let Some(reply) = reply else {
            let mut parts = parts;
            if checked {
                parts.extensions.insert(extract::EarlyAsked);
            }
            return Err(Request::from_parts(parts, Body::from(body)));
        };
        state.metrics.claim_requests.inc();
        super::claims::answered(state, &campaign, &reply);
        let request_id = parts.headers.get(super::REQUEST_ID_HEADER).cloned();
        let res = respond(reply, request_id, state, t0);
        Ok(res)
    }
}

/// The reply as the full path's layers send it, counted in the request metrics.
fn respond(
    reply: Reply,
    request_id: Option<HeaderValue>,
    state: &AppState,
    t0: Instant,
) -> Response {
    let result = reply.outcome.as_str();
    let length = HeaderValue::from(reply.body.len());
    let mut res = reply.into_response();
    let h = res.headers_mut();
    // As axum's router sets it (hyper would write the same from the body's size).
    h.insert(header::CONTENT_LENGTH, length);
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(flashgate_shared::PRIVATE_CACHE_CONTROL),
    );
    h.insert(
        HeaderName::from_static(flashgate_shared::ANSWERED_BY_HEADER),
        HeaderValue::from_static("origin"),
    );
    if let Some(id) = request_id.or_else(super::RandomUuid::new_id) {
        h.insert(HeaderName::from_static(super::REQUEST_ID_HEADER), id);
    }
    if state.config.request_metrics {
        let route = crate::metrics::CLAIM_ROUTE;
        state.metrics.request(route, result, t0.elapsed());
    }
    res
}

/// The campaign id of `POST /api/v1/campaigns/{id}/claims` when `{id}` is a slug as sent.
fn claim_campaign(req: &Request<Body>) -> Option<&str> {
    if req.method() != Method::POST {
        return None;
    }
    let id = req
        .uri()
        .path()
        .strip_prefix("/api/v1/campaigns/")?
        .strip_suffix("/claims")?;
    is_valid_slug(id).then_some(id)
}

/// True when the access line ([`crate::metrics::ACCESS_LOG_TARGET`]) would be written.
fn access_lines_on() -> bool {
    tracing::enabled!(target: crate::metrics::ACCESS_LOG_TARGET, tracing::Level::INFO)
}

/// A body as far as it has arrived.
enum Received {
    /// All of it, at most [`MAX_CLAIM_BODY_BYTES`].
    Whole(Bytes),
    /// Not all there yet, larger than the bound, or failed: the same body again (what was read
    /// first, then the rest as it comes), for the full path to read as always.
    Partly(Body),
}

/// Reads what of `body` has already arrived, without waiting.
fn received(body: Body) -> Received {
    let mut stream = body.into_data_stream();
    let mut read = Vec::new();
    let mut size = 0;
    loop {
        match stream.next().now_or_never() {
            Some(Some(Ok(chunk))) => {
                size += chunk.len();
                read.push(Ok(chunk));
                if size > MAX_CLAIM_BODY_BYTES {
                    break;
                }
            }
            Some(None) => {
                let chunks = read.into_iter().filter_map(Result::ok);
                return Received::Whole(chunks.collect::<Vec<Bytes>>().concat().into());
            }
            Some(Some(Err(e))) => {
                read.push(Err(e));
                break;
            }
            None => break,
        }
    }
    Received::Partly(Body::from_stream(futures::stream::iter(read).chain(stream)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(path: &str) -> Request<Body> {
        Request::post(path).body(Body::empty()).expect("request")
    }

    #[test]
    fn only_a_claim_on_a_slug_as_sent_is_looked_at() {
        assert_eq!(
            claim_campaign(&post("/api/v1/campaigns/summer-1/claims")),
            Some("summer-1")
        );
        assert_eq!(
            claim_campaign(&post("/api/v1/campaigns/summer%2D1/claims")),
            None
        );
        assert_eq!(
            claim_campaign(&post("/api/v1/campaigns/summer-1/claims/")),
            None
        );
        assert_eq!(claim_campaign(&post("/api/v1/campaigns/a/b/claims")), None);
        assert_eq!(claim_campaign(&post("/api/v1/campaigns//claims")), None);
        let get = Request::get("/api/v1/campaigns/summer-1/claims")
            .body(Body::empty())
            .expect("request");
        assert_eq!(claim_campaign(&get), None);
    }

    #[tokio::test]
    async fn a_body_that_has_not_all_arrived_is_handed_on_whole() {
        let whole = received(Body::from("{}"));
        assert!(matches!(whole, Received::Whole(b) if b == "{}"));
        let (mut tx, rx) = futures::channel::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        tx.try_send(Ok(Bytes::from_static(b"{"))).expect("send");
        let Received::Partly(body) = received(Body::from_stream(rx)) else {
            panic!("the body has not all arrived");
        };
        tx.try_send(Ok(Bytes::from_static(b"}"))).expect("send");
        drop(tx);
        let read = axum::body::to_bytes(body, 64).await.expect("read");
        assert_eq!(read, "{}");
    }
}
