//! Workers glue of who may join (wasm32 only): the `pow` challenge route and the Turnstile
//! siteverify call. The decisions are in [`crate::access`].

use super::origin::send_bounded;
use super::request_url::RequestUrl;
use super::respond::{answer, edge_json_headers, respond};
use super::{caller, now_ms, status_for};
use crate::access::{self, Failure, Siteverify};
use crate::config::EdgeConfig;
use crate::decide::Answer;
use crate::queue;
use flashgate_shared::api::codes;
use worker::{js_sys, Headers, Method, Request, RequestInit, Response, Result};

/// Largest siteverify answer read, bytes.
const MAX_SITEVERIFY_BODY: usize = 16 * 1024;

/// `GET /api/v1/campaigns/{id}/queue/challenge`: a `pow` challenge for the customer whose
/// token verifies here (401 otherwise), rate limited as a join.
pub(super) async fn challenge(
    req: Request,
    cfg: &EdgeConfig,
    id: &str,
    url: &RequestUrl,
) -> Result<Response> {
    let customer = match caller::joining(&req, cfg).await? {
        Ok((_, Some(customer))) => customer,
        Ok((_, None)) => {
            return answer(&Answer::error(
                401,
                codes::UNAUTHORIZED,
                "a valid customer token is required",
            ))
        }
        Err(a) => return answer(&a),
    };
    let Some(secret) = cfg.edge_secret.as_deref() else {
        return answer(&Answer::unavailable());
    };
    let (entry, _fresh) = status_for(cfg, id, url).await;
    let Some(entry) = entry else {
        return answer(&Answer::unavailable());
    };
    let known = match queue::waiting_room(&entry) {
        Ok((_, known)) => known,
        Err(a) => return answer(&a),
    };
    let mut nonce = [0u8; 16];
    for b in &mut nonce {
        *b = (js_sys::Math::random() * 256.0) as u8;
    }
    let now_s = now_ms().div_euclid(1000);
    match access::challenge(secret, &known.access, id, &customer, nonce, now_s) {
        Ok(reply) => Ok(respond(
            200,
            edge_json_headers()?,
            serde_json::to_vec(&reply).unwrap_or_default(),
        )),
        Err(a) => answer(&a),
    }
}

/// Checks widget token `token` with the configured siteverify, within its timeout.
pub(super) async fn turnstile(
    cfg: &EdgeConfig,
    token: Option<&str>,
    ip: Option<&str>,
) -> std::result::Result<(), Failure> {
    let Some(token) = token.filter(|t| !t.trim().is_empty()) else {
        return Err(Failure::Missing);
    };
    let outcome = match cfg.turnstile.secret.as_deref() {
        None => {
            worker::console_error!("turnstile: FLASHGATE_TURNSTILE_SECRET is not set");
            Siteverify::Failed
        }
        Some(secret) => match siteverify(cfg, secret, token, ip).await {
            Ok((code, body)) => Siteverify::Answered(code, body),
            Err(e) => {
                // `e` is the request helper's ("origin timed out" on a timeout).
                worker::console_error!(
                    "turnstile siteverify failed or passed {} ms: {e}",
                    cfg.turnstile.timeout_ms
                );
                Siteverify::Failed
            }
        },
    };
    access::turnstile_verdict(&outcome)
}

async fn siteverify(
    cfg: &EdgeConfig,
    secret: &str,
    token: &str,
    ip: Option<&str>,
) -> Result<(u16, Vec<u8>)> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    let body = access::siteverify_body(secret, token, ip);
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(body.into()));
    let req = Request::new_with_init(&cfg.turnstile.siteverify_url, &init)?;
    let (code, _, body) =
        send_bounded(req, cfg.turnstile.timeout_ms, Some(MAX_SITEVERIFY_BODY)).await?;
    Ok((code, body))
}
