//! The edge's requests to the origin: sending with a timeout and a bounded body, relaying the
//! answer, signing what is forwarded, and passing other requests through. Part of the wasm32
//! glue ([`super`]).

use super::request_url::RequestUrl;
use super::{answer, now_ms, CF_CONNECTING_IP_HEADER};
use crate::config::EdgeConfig;
use crate::decide::{self, Answer};
use flashgate_shared::trace::TRACEPARENT_HEADER;
use flashgate_shared::{
    signature, ANSWERED_BY_HEADER, CLIENT_IP_HEADER, EDGE_SIGNATURE_HEADER, IDEMPOTENCY_KEY_HEADER,
};
use futures_util::future::{select, Either};
use std::time::Duration;
use worker::{
    js_sys, AbortController, Delay, Fetch, Headers, Method, Request, RequestInit, Response, Result,
};

/// Sends a request to the origin with a timeout; returns status, headers and body bytes. A
/// request [`decide::may_resend`] allows is sent a second time when the first try got no
/// answer at all (both within the one timeout). Errors when the origin is unreachable or too
/// slow (the request is then aborted).
pub(super) async fn send(req: Request, timeout_ms: i64) -> Result<(u16, Headers, Vec<u8>)> {
    send_bounded(req, timeout_ms, None).await
}

/// Posts JSON `body` to the origin's edge-only `path`, signed with the edge secret, with the
/// origin timeout ([`send`]).
pub(super) async fn post_signed(
    cfg: &EdgeConfig,
    path: &str,
    body: &[u8],
) -> Result<(u16, Headers, Vec<u8>)> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    sign_forwarded(cfg, &headers, None, "POST", path, body)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(js_sys::Uint8Array::from(body).into()));
    let req = Request::new_with_init(&format!("{}{path}", cfg.origin_url), &init)?;
    send(req, cfg.origin_timeout_ms).await
}

/// Sends report `body` (`what`, for the log) of campaign `id` to the origin's edge-only
/// `path`, signed, up to `tries` times (the same report id each time: the origin counts it
/// once), waiting 500 ms more before each retry; true once the origin answered it (a 4xx
/// refusal included: sending it again would not help; logged).
pub(super) async fn post_report(
    cfg: &EdgeConfig,
    what: &str,
    id: &str,
    path: &str,
    body: &[u8],
    tries: u32,
) -> bool {
    for attempt in 0..tries {
        if attempt > 0 {
            Delay::from(Duration::from_millis(500 * u64::from(attempt))).await;
        }
        match post_signed(cfg, path, body).await {
            Ok((code, _, _)) if code < 500 => {
                if code != 200 {
                    worker::console_error!("{what} for {id} refused: {code}");
                }
                return true;
            }
            Ok((code, _, _)) => worker::console_error!("{what} for {id}: {code}"),
            Err(e) => worker::console_error!("{what} for {id}: {e}"),
        }
    }
    false
}

/// [`send`], reading at most `max_body` bytes of the body when set: a longer body (with or
/// without `Content-Length`) is an error and the rest is never read.
pub(super) async fn send_bounded(
    req: Request,
    timeout_ms: i64,
    max_body: Option<usize>,
) -> Result<(u16, Headers, Vec<u8>)> {
    let controller = AbortController::default();
    let signal = controller.signal();
    let keyed = req.headers().has(IDEMPOTENCY_KEY_HEADER)?;
    // A copy made before the first try reads the body (see decide::may_resend).
    let spare = if decide::may_resend(req.method().as_ref(), keyed) {
        Some(req.clone()?)
    } else {
        None
    };
    let work = async move {
        let mut resp = match Fetch::Request(req).send_with_signal(&signal).await {
            Ok(resp) => resp,
            // No answer at all (e.g. an idle connection the origin closed as it was reused):
            // once more, on a new connection, within the same timeout.
            Err(first) => match spare {
                Some(again) => Fetch::Request(again).send_with_signal(&signal).await?,
                None => return Err(first),
            },
        };
        let body = match max_body {
            None => resp.bytes().await?,
            Some(max) => read_bounded(&mut resp, max).await?,
        };
        Ok::<_, worker::Error>((resp.status_code(), resp.headers().clone(), body))
    };
    let timeout = Delay::from(Duration::from_millis(timeout_ms.max(1) as u64));
    match select(Box::pin(work), timeout).await {
        Either::Left((result, _)) => result,
        Either::Right(((), _)) => {
            controller.abort();
            Err(worker::Error::RustError("origin timed out".into()))
        }
    }
}

/// The body of `resp`, chunk by chunk; an error once it passes `max` bytes.
pub(super) async fn read_bounded(resp: &mut Response, max: usize) -> Result<Vec<u8>> {
    use futures_util::StreamExt;
    // A bodiless answer (a 304, a 204) has nothing to stream.
    if matches!(resp.body(), worker::ResponseBody::Empty) {
        return Ok(Vec::new());
    }
    let mut stream = resp.stream()?;
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > max {
            return Err(worker::Error::RustError(format!(
                "the body is larger than {max} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Copies an origin answer into a response, marking it answered by the origin.
pub(super) fn relay(code: u16, headers: &Headers, body: Vec<u8>) -> Result<Response> {
    let out = Headers::new();
    for (name, value) in headers.entries() {
        if !matches!(
            name.as_str(),
            "content-length" | "content-encoding" | "transfer-encoding" | "connection"
        ) {
            out.append(&name, &value)?;
        }
    }
    if !out.has(ANSWERED_BY_HEADER)? {
        out.set(ANSWERED_BY_HEADER, "origin")?;
    }
    Ok(Response::from_bytes(body)?
        .with_status(code)
        .with_headers(out))
}

/// The `traceparent` of a forwarded request: the caller's trace (`incoming`) continued with a
/// new span id, or a new trace ([`flashgate_shared::trace::child`]).
fn traceparent(incoming: Option<&str>) -> String {
    let mut random = [0u8; 24];
    for chunk in random.chunks_mut(4) {
        // Math.random: a trace id needs to be unique, not secret.
        let n = (js_sys::Math::random() * 4_294_967_296.0) as u32;
        chunk.copy_from_slice(&n.to_le_bytes());
    }
    flashgate_shared::trace::child(incoming, random)
}

/// Sets `traceparent` in `out` (the caller's trace, found in `out`, continued with a new span
/// id, or a new trace: see [`traceparent`]), then adds the client IP
/// (`Flashgate-Client-Ip`) and the edge signature over the request in `out` (method, path,
/// body, `Authorization`, `Idempotency-Key`, client IP) when an edge secret is configured;
/// without one the request goes unsigned and without a client IP (the origin would not trust
/// it).
pub(super) fn sign_forwarded(
    cfg: &EdgeConfig,
    out: &Headers,
    client_ip: Option<&str>,
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<()> {
    let incoming = out.get(TRACEPARENT_HEADER)?;
    out.set(TRACEPARENT_HEADER, &traceparent(incoming.as_deref()))?;
    let Some(secret) = &cfg.edge_secret else {
        return Ok(());
    };
    if let Some(ip) = client_ip {
        out.set(CLIENT_IP_HEADER, ip)?;
    }
    let authorization = out.get("authorization")?;
    let key = out.get(IDEMPOTENCY_KEY_HEADER)?;
    let signed = signature::Signed {
        method,
        path,
        body,
        authorization: authorization.as_deref().map(str::as_bytes),
        idempotency_key: key.as_deref().map(str::as_bytes),
        client_ip: client_ip.map(str::as_bytes),
    };
    let sig = signature::sign(secret, now_ms().div_euclid(1000), &signed);
    out.set(EDGE_SIGNATURE_HEADER, &sig)
}

/// The origin URL for the same path and query.
pub(super) fn origin_target(cfg: &EdgeConfig, url: &RequestUrl) -> Result<String> {
    Ok(match url.parsed()?.query() {
        Some(q) => format!("{}{}?{q}", cfg.origin_url, url.path()),
        None => format!("{}{}", cfg.origin_url, url.path()),
    })
}

// ---------------------------------------------------------------- pass-through

pub(super) async fn pass_through(
    mut req: Request,
    cfg: &EdgeConfig,
    url: &RequestUrl,
) -> Result<Response> {
    let target = origin_target(cfg, url)?;
    let method = req.method();
    let client_ip = decide::client_ip(req.headers().get(CF_CONNECTING_IP_HEADER)?.as_deref());
    let out = Headers::new();
    for (name, value) in req.headers().entries() {
        if decide::passes_on(&name) {
            out.append(&name, &value)?;
        }
    }
    let mut init = RequestInit::new();
    let mut body = Vec::new();
    if !matches!(method, Method::Get | Method::Head) {
        // Read whole (the runtime resets a client whose body is left unread), then refuse what
        // the origin could never take.
        body = match req.bytes().await {
            Ok(body) => body,
            Err(_) => return answer(&decide::unreadable_body()),
        };
        if let Err(refusal) = decide::check_pass_through_body(body.len()) {
            return answer(&refusal);
        }
        init.with_body(Some(js_sys::Uint8Array::from(body.as_slice()).into()));
    }
    sign_forwarded(
        cfg,
        &out,
        client_ip.as_deref(),
        method.as_ref(),
        url.path(),
        &body,
    )?;
    init.with_method(method).with_headers(out);
    let forwarded = Request::new_with_init(&target, &init)?;
    match send(forwarded, cfg.origin_timeout_ms).await {
        Ok((code, headers, body)) => relay(code, &headers, body),
        Err(_) => answer(&Answer::unavailable()),
    }
}
