//! The thin layer between the Workers runtime and the decisions in [`crate::decide`],
//! [`crate::status`], [`crate::index`], [`crate::winners`] and [`crate::cors`]: reads requests,
//! keeps the per-isolate status cache ([`status_cache`]), campaign index and winners filters,
//! talks to the Cache API and the origin, writes responses (with their CORS headers), and
//! forwards claims ([`claim`]); the budgets held across isolates are asked of the rate-limit
//! bindings ([`shared_limit`]). Compiled for wasm32 only.
//!
//! Single-flight: per campaign, one request of the isolate (the leader) refreshes the status;
//! concurrent requests wait for it by checking the slot on short timers of their own. They are
//! never woken from the leader: in workerd, code resumed from another request's callback runs
//! in that request's I/O context, and a response built there cannot be returned by the waiter
//! ("Cannot perform I/O on behalf of a different request"). The wait is bounded, so a
//! cancelled leader cannot make them hang.

use crate::config::EdgeConfig;
use crate::decide::{self, Answer, Route, TokenCache};
use crate::status;
use flashgate_shared::request_id::{self, REQUEST_ID_HEADER};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use worker::{event, js_sys, Context, Delay, Env, Method, Request, Response, Result};

mod access;
mod answers;
mod caller;
mod claim;
mod clock;
mod index;
mod isolate;
mod joins;
mod jwks;
mod origin;
mod queue;
mod request_url;
mod respond;
mod shared_limit;
mod status_cache;
mod telemetry;
mod winners;

use clock::now_ms;
use origin::{pass_through, send_bounded};
use respond::answer;
use status_cache::{serve_status, status_for};

/// Header in which Cloudflare gives the worker the client's IP address.
const CF_CONNECTING_IP_HEADER: &str = "cf-connecting-ip";
/// Customer tokens kept verified per isolate.
const TOKEN_CACHE_CAPACITY: usize = 4_096;

thread_local! {
    static TOKENS: RefCell<TokenCache> = RefCell::new(TokenCache::new(TOKEN_CACHE_CAPACITY));
    static CONFIG: RefCell<Option<Rc<EdgeConfig>>> = const { RefCell::new(None) };
}

/// Waits on short timers of its own ([`status::wait_poll_ms`]) until `done()` or until
/// `deadline_ms` (epoch ms) has passed: how a request waits for the one that leads a refresh
/// (a waiter is never woken from the leader's I/O context).
async fn wait_until(deadline_ms: i64, done: impl Fn() -> bool) {
    let mut attempt = 0;
    while !done() && now_ms() < deadline_ms {
        Delay::from(Duration::from_millis(status::wait_poll_ms(attempt))).await;
        attempt = attempt.saturating_add(1);
    }
}

fn config(env: &Env) -> std::result::Result<Rc<EdgeConfig>, String> {
    if let Some(c) = CONFIG.with(|c| c.borrow().clone()) {
        return Ok(c);
    }
    let cfg = Rc::new(EdgeConfig::from_lookup(|name| {
        let text = env.var(name).ok().map(|v| v.to_string());
        // A [vars] list (FLASHGATE_CORS_ORIGINS = ["https://shop.example"]) is a JS array
        // binding, not a string (read as one it is empty): its strings joined by commas.
        text.filter(|t| !t.is_empty())
            .or_else(|| list_var(env, name))
    })?);
    CONFIG.with(|c| *c.borrow_mut() = Some(cfg.clone()));
    clock::use_settings(cfg.clone());
    intern_header_names();
    Ok(cfg)
}

/// Keeps the names of the headers read on every request as JavaScript strings, so that a
/// header read sends a cached string instead of decoding the name from wasm memory (about a
/// microsecond a read; wasm-bindgen's `enable-interning`).
fn intern_header_names() {
    for name in [
        "authorization",
        "content-length",
        "content-type",
        "origin",
        "accept",
        CF_CONNECTING_IP_HEADER,
        REQUEST_ID_HEADER,
        flashgate_shared::queue::TICKET_HEADER,
        flashgate_shared::queue::ADMISSION_HEADER,
    ] {
        wasm_bindgen::intern(name);
    }
}

/// The strings of a binding that is a JS array, joined by commas; `None` for anything else.
fn list_var(env: &Env, name: &str) -> Option<String> {
    let value = js_sys::Reflect::get(env.as_ref(), &wasm_bindgen::JsValue::from_str(name)).ok()?;
    if !js_sys::Array::is_array(&value) {
        return None;
    }
    let items: Vec<String> = js_sys::Array::from(&value)
        .iter()
        .filter_map(|v| v.as_string())
        .collect();
    Some(items.join(","))
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> Result<Response> {
    let cfg = match config(&env) {
        Ok(c) => c,
        Err(msg) => {
            worker::console_error!("flashgate edge misconfigured: {msg}");
            return answer(&Answer::misconfigured());
        }
    };
    // Only CORS looks at the caller's Origin (a call into the runtime saved on every request
    // while it is off).
    let origin = if cfg.cors.enabled() {
        req.headers().get("origin").ok().flatten()
    } else {
        None
    };
    let preflight = cfg.cors.is_preflight(req.method().as_ref());
    let request_id = req
        .headers()
        .get(REQUEST_ID_HEADER)
        .ok()
        .flatten()
        .filter(|id| request_id::is_kept(id.as_bytes()));
    let mut resp = match handle(req, &env, cfg.clone(), preflight).await {
        Ok(resp) => resp,
        Err(e) => {
            worker::console_error!("flashgate edge error: {e}");
            answer(&Answer::unavailable())?
        }
    };
    // Presence reports due after this request go out once it is answered.
    for (id, report) in queue::take_reports() {
        ctx.wait_until(queue::send_report(cfg.clone(), id, report));
    }
    // So do the reports of the tickets issued here (one reporter per campaign and isolate).
    for (id, reporter) in joins::take_starts() {
        ctx.wait_until(joins::report(cfg.clone(), id, reporter));
    }
    // And those of the answers given here (one reporter per campaign and isolate).
    for (id, reporter) in answers::take_starts() {
        ctx.wait_until(answers::report(cfg.clone(), id, reporter));
    }
    // The origin sends the id back on its answers; the edge's own answers echo the caller's.
    if let Some(id) = request_id {
        let h = resp.headers_mut();
        if !h.has(REQUEST_ID_HEADER).unwrap_or(true) {
            let _ = h.set(REQUEST_ID_HEADER, &id);
        }
    }
    index::cors(&cfg, origin.as_deref(), preflight, resp)
}

async fn handle(req: Request, env: &Env, cfg: Rc<EdgeConfig>, preflight: bool) -> Result<Response> {
    if preflight {
        drain(req).await;
        return index::preflight();
    }
    // An id sent percent-encoded is the same campaign: routed, cached, gated, rate limited and
    // forwarded under its canonical path (the origin is only ever sent that).
    let url = request_url::RequestUrl::of(&req);
    let method = req.method();
    let head = method == Method::Head;
    let path = url.path();
    if path == crate::telemetry::METRICS_PATH {
        return telemetry::serve(&req, &cfg);
    }
    // The worker's own liveness (no origin call), as the origin's `/healthz` answers it.
    if (method == Method::Get || head) && path == "/healthz" {
        return answer(&Answer {
            status: 200,
            body: r#"{"status":"ok"}"#.into(),
            retry_after_s: None,
        });
    }
    let route = decide::route(method.as_ref(), path);
    // Unknown campaigns are answered here, before anything asks the origin (claims after
    // their request checks, in `claim`).
    let campaign = match &route {
        Route::Status { id } | Route::QueuePoll { id } | Route::QueueJoin { id } => Some(*id),
        Route::QueueChallenge { id } | Route::Draw { id } => Some(*id),
        Route::CampaignPassThrough { id } => Some(id.as_ref()),
        _ => None,
    };
    if let Some(id) = campaign {
        if let Err(a) = index::known(&cfg, id).await {
            drain(req).await;
            return answer(&a);
        }
    }
    match route {
        Route::Status { id } => serve_status(&cfg, id, &url, head).await,
        Route::Claim { id } => claim::claim(req, env, &cfg, id, &url).await,
        Route::QueuePoll { id } => queue::poll(req, &cfg, id, &url).await,
        Route::QueueJoin { id } => joins::join(req, env, &cfg, id, &url).await,
        Route::QueueChallenge { id } => access::challenge(req, &cfg, id, &url).await,
        Route::Draw { id } => {
            let accept = req.headers().get("accept").ok().flatten();
            if crate::page::wants_html(accept.as_deref()) {
                respond::html(crate::page_draw::render_draw(id))
            } else {
                pass_through(req, &cfg, &url).await
            }
        }
        Route::PassThrough | Route::CampaignPassThrough { .. } => {
            pass_through(req, &cfg, &url).await
        }
        Route::NoSuchCampaign { id } => {
            drain(req).await;
            answer(&decide::no_such_campaign(id))
        }
        Route::NoSuchRoute => {
            drain(req).await;
            answer(&Answer::no_such_route())
        }
        Route::WrongMethod { allow } => {
            drain(req).await;
            let resp = answer(&decide::method_not_allowed())?;
            resp.headers().set("allow", allow)?;
            Ok(resp)
        }
    }
}

/// Reads and drops the body of a request the edge refuses without looking at it, when it is
/// at most [`decide::DRAIN_LIMIT_BYTES`]: answering without reading it makes the runtime
/// close the client's connection (and a client's next request on it fails).
async fn drain(mut req: Request) {
    let length = req.headers().get("content-length").ok().flatten();
    if decide::drain_before_refusing(length.as_deref()) {
        let _ = req.bytes().await;
    }
}
