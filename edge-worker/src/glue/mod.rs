//! The thin layer between the Workers runtime and the decisions in [`crate::decide`],
//! [`crate::status`], [`crate::index`], [`crate::winners`] and [`crate::cors`]: reads requests,
//! keeps the per-isolate status cache, campaign index and winners filters, talks to the Cache API and the origin, writes
//! responses (with their CORS headers). Compiled for wasm32 only.
//!
//! Single-flight: per campaign, one request of the isolate (the leader) refreshes the status;
//! concurrent requests wait for it by checking the slot on short timers of their own. They are
//! never woken from the leader: in workerd, code resumed from another request's callback runs
//! in that request's I/O context, and a response built there cannot be returned by the waiter
//! ("Cannot perform I/O on behalf of a different request"). The wait is bounded, so a
//! cancelled leader cannot make them hang.

use crate::config::EdgeConfig;
use crate::decide::{self, Answer, ClaimInput, Gate, Route, TokenCache};
use crate::limit::Action;
use crate::status::{self, Freshness, RefreshState, StatusEntry, Step};
use crate::winners::Verdict;
use flashgate_shared::api::CampaignState;
use flashgate_shared::queue::ADMISSION_HEADER;
use flashgate_shared::request_id::{self, REQUEST_ID_HEADER};
use flashgate_shared::trace::TRACEPARENT_HEADER;
use flashgate_shared::IDEMPOTENCY_KEY_HEADER;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;
use worker::{
    event, js_sys, Cache, Context, Delay, Env, Headers, Method, Request, RequestInit, Response,
    Result,
};

mod access;
mod clock;
mod index;
mod joins;
mod jwks;
mod origin;
mod queue;
mod respond;
mod telemetry;
mod winners;

use clock::now_ms;
use origin::{origin_target, pass_through, relay, send, send_bounded, sign_forwarded};
use respond::{answer, respond};

/// Header with the age of the cached status in ms (the standard `Age` header has it in s).
const STATUS_AGE_MS_HEADER: &str = "flashgate-status-age-ms";
/// Header set to `1` on a status served stale because the origin could not be reached.
const STALE_HEADER: &str = "flashgate-stale";
/// Header in which Cloudflare gives the worker the client's IP address.
const CF_CONNECTING_IP_HEADER: &str = "cf-connecting-ip";
/// Campaign slots kept per isolate before idle ones are dropped.
const MAX_SLOTS: usize = 10_000;

/// What an isolate knows about one campaign.
#[derive(Default)]
struct Slot {
    /// Shared with the requests being answered from it (no copy per request).
    entry: Option<Rc<StatusEntry>>,
    refresh: RefreshState,
}

/// Customer tokens kept verified per isolate.
const TOKEN_CACHE_CAPACITY: usize = 4_096;

thread_local! {
    static SLOTS: RefCell<HashMap<String, Slot>> = RefCell::new(HashMap::new());
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
    Ok(cfg)
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
    let mut resp = match handle(req, cfg.clone(), preflight).await {
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
    // The origin sends the id back on its answers; the edge's own answers echo the caller's.
    if let Some(id) = request_id {
        let h = resp.headers_mut();
        if !h.has(REQUEST_ID_HEADER).unwrap_or(true) {
            let _ = h.set(REQUEST_ID_HEADER, &id);
        }
    }
    index::cors(&cfg, origin.as_deref(), preflight, resp)
}

async fn handle(req: Request, cfg: Rc<EdgeConfig>, preflight: bool) -> Result<Response> {
    if preflight {
        drain(req).await;
        return index::preflight();
    }
    let mut url = req.url()?;
    // An id sent percent-encoded is the same campaign: routed, cached, gated, rate limited and
    // forwarded under its canonical path (the origin is only ever sent that).
    if let Some(canonical) = decide::canonical_path(url.path()) {
        url.set_path(&canonical);
    }
    let method = req.method();
    let head = method == Method::Head;
    let path = url.path().to_string();
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
    let route = decide::route(method.as_ref(), &path);
    // Unknown campaigns are answered here, before anything asks the origin (claims after
    // their request checks, in `claim`).
    let campaign = match &route {
        Route::Status { id } | Route::QueuePoll { id } | Route::QueueJoin { id } => Some(*id),
        Route::QueueChallenge { id } => Some(*id),
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
        Route::Claim { id } => telemetry::counted(claim(req, &cfg, id, &url).await?),
        Route::QueuePoll { id } => queue::poll(req, &cfg, id, &url).await,
        Route::QueueJoin { id } => queue::join(req, &cfg, id, &url).await,
        Route::QueueChallenge { id } => access::challenge(req, &cfg, id, &url).await,
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

// ---------------------------------------------------------------- status cache

/// The cached status of `id`; for a `HEAD` (`head`) the same status and headers without the
/// body.
async fn serve_status(
    cfg: &EdgeConfig,
    id: &str,
    url: &worker::Url,
    head: bool,
) -> Result<Response> {
    let (entry, fresh) = status_for(cfg, id, url).await;
    let Some(entry) = entry else {
        return answer(&Answer::unavailable());
    };
    let age_ms = entry.age_ms(now_ms());
    let headers = respond::status_headers(cfg.status_ttl_ms)?;
    headers.set("age", &(age_ms / 1000).to_string())?;
    headers.set(STATUS_AGE_MS_HEADER, &age_ms.to_string())?;
    if !fresh {
        headers.set(STALE_HEADER, "1")?;
    }
    let body = if head {
        Vec::new()
    } else {
        entry.body().as_bytes().to_vec()
    };
    Ok(respond(entry.http_status(), headers, body))
}

/// The cached status of `id` and whether it is fresh: refreshed first (single-flight) when it
/// is missing or a TTL old. After a failed refresh the old entry is returned (not fresh)
/// while it is within max-stale, else `None`.
async fn status_for(
    cfg: &EdgeConfig,
    id: &str,
    url: &worker::Url,
) -> (Option<Rc<StatusEntry>>, bool) {
    let now = now_ms();
    let lead_timeout = cfg.origin_timeout_ms.saturating_add(1_000);
    let (entry, step, generation) = SLOTS.with(|slots| {
        let mut slots = slots.borrow_mut();
        // Looked up by `&str` first: the id is copied into a key only for a new slot.
        if !slots.contains_key(id) {
            if slots.len() >= MAX_SLOTS {
                slots.retain(|_, s| s.refresh.refreshing_since.is_some());
            }
            slots.insert(id.to_string(), Slot::default());
        }
        let Some(slot) = slots.get_mut(id) else {
            return (None, Step::BackOff, 0);
        };
        let step = status::next_step(
            slot.entry.as_deref(),
            &slot.refresh,
            now,
            cfg.status_ttl_ms,
            lead_timeout,
        );
        if step == Step::Lead {
            slot.refresh.refreshing_since = Some(now);
        }
        (slot.entry.clone(), step, slot.refresh.generation)
    });
    match step {
        Step::Serve => return (entry, true),
        Step::BackOff => {}
        Step::Lead => {
            let result = refresh(cfg, id, url).await;
            let now = now_ms();
            SLOTS.with(|slots| {
                let mut slots = slots.borrow_mut();
                let slot = slots.entry(id.to_string()).or_default();
                match result {
                    Some(new) => {
                        // Never replace a younger entry (learned from a claim answer meanwhile).
                        if slot
                            .entry
                            .as_ref()
                            .is_none_or(|e| e.fetched_at_ms <= new.fetched_at_ms)
                        {
                            let new =
                                status::adopt(slot.entry.as_deref(), new, now, cfg.status_ttl_ms);
                            slot.entry = Some(Rc::new(new));
                        }
                        slot.refresh.failed_at = None;
                    }
                    None => slot.refresh.failed_at = Some(now),
                }
                slot.refresh.refreshing_since = None;
                slot.refresh.generation += 1;
            });
        }
        Step::Wait => {
            wait_until(now.saturating_add(lead_timeout), || {
                SLOTS.with(|slots| {
                    slots
                        .borrow()
                        .get(id)
                        .is_none_or(|s| s.refresh.generation != generation)
                })
            })
            .await;
        }
    }
    let now = now_ms();
    SLOTS.with(|slots| {
        let slots = slots.borrow();
        let entry = slots.get(id).and_then(|s| s.entry.clone());
        match entry {
            Some(e) if e.freshness(now, cfg.status_ttl_ms) == Freshness::Fresh => (Some(e), true),
            Some(e) if e.servable_stale(now, cfg.status_max_stale_ms) => (Some(e), false),
            _ => (None, false),
        }
    })
}

/// The Cache API key of a campaign's status (a GET URL on the worker's own host).
fn cache_key(url: &worker::Url, id: &str) -> String {
    format!(
        "{}://{}/__flashgate/edge-status/{id}",
        url.scheme(),
        url.host_str().unwrap_or("flashgate-edge")
    )
}

/// One refresh: a fresh copy from the Cache API if another isolate put one there, else the
/// origin (copied into the Cache API). `None` when the origin fails.
async fn refresh(cfg: &EdgeConfig, id: &str, url: &worker::Url) -> Option<StatusEntry> {
    let key = cache_key(url, id);
    let cache = Cache::default();
    if let Ok(Some(mut hit)) = cache.get(key.as_str(), false).await {
        let origin_status = hit
            .headers()
            .get(status::CACHE_ORIGIN_STATUS_HEADER)
            .ok()
            .flatten();
        let fetched_at = hit
            .headers()
            .get(status::CACHE_FETCHED_AT_HEADER)
            .ok()
            .flatten();
        if let Ok(body) = hit.bytes().await {
            let now = now_ms();
            if let Some(e) = status::from_cache(
                id,
                origin_status.as_deref(),
                fetched_at.as_deref(),
                &body,
                now,
                cfg.status_ttl_ms,
            ) {
                return Some(e);
            }
        }
    }
    let origin_url = format!("{}/api/v1/campaigns/{id}", cfg.origin_url);
    let req = Request::new(&origin_url, Method::Get).ok()?;
    let (code, _headers, body) = send(req, cfg.origin_timeout_ms).await.ok()?;
    let entry = match status::from_origin(id, code, &body, now_ms()) {
        Ok(e) => e,
        Err(e) => {
            worker::console_warn!("status refresh of {id}: origin answer unusable: {e:?}");
            return None;
        }
    };
    if let Err(e) = put_in_cache(&cache, &key, &entry, cfg.status_ttl_ms).await {
        worker::console_warn!("status refresh of {id}: cache put failed: {e}");
    }
    Some(entry)
}

async fn put_in_cache(cache: &Cache, key: &str, entry: &StatusEntry, ttl_ms: i64) -> Result<()> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    headers.set(
        "cache-control",
        &format!("public, max-age={}", (ttl_ms + 999) / 1000),
    )?;
    headers.set(
        status::CACHE_ORIGIN_STATUS_HEADER,
        &entry.http_status().to_string(),
    )?;
    headers.set(
        status::CACHE_FETCHED_AT_HEADER,
        &entry.fetched_at_ms.to_string(),
    )?;
    let resp = Response::from_bytes(entry.body().as_bytes().to_vec())?.with_headers(headers);
    cache.put(key, resp).await
}

// ---------------------------------------------------------------- claims

async fn claim(
    mut req: Request,
    cfg: &EdgeConfig,
    id: &str,
    url: &worker::Url,
) -> Result<Response> {
    // Each header read is a call into the runtime: a header is read where the claim first
    // needs it, so a sold-out answer reads only the four its checks look at.
    let content_length = req.headers().get("content-length")?;
    if let Err(a) = decide::check_content_length(content_length.as_deref()) {
        // Read a moderately large body before answering so the client's connection stays
        // usable; a huge one is refused unread.
        if decide::drain_before_refusing(content_length.as_deref()) {
            let _ = req.bytes().await;
        }
        return answer(&a);
    }
    let body = match req.bytes().await {
        Ok(b) => b,
        Err(_) => {
            return answer(&Answer::error(
                400,
                flashgate_shared::api::codes::INVALID_JSON,
                "claim body could not be read",
            ))
        }
    };
    let headers = req.headers();
    let authorization = headers.get("authorization")?;
    let key = headers.get(IDEMPOTENCY_KEY_HEADER)?;
    let content_type = headers.get("content-type")?;
    let ip = std::cell::OnceCell::new();
    let client_ip = || ip.get_or_init(|| queue::ip_of(headers)).as_deref();
    let input = ClaimInput {
        authorization: authorization.as_deref(),
        idempotency_key: key.as_deref().map(str::as_bytes),
        content_type: content_type.as_deref(),
        content_length: None,
        body: Some(&body),
    };
    let bearer = authorization
        .as_deref()
        .and_then(flashgate_shared::token::bearer);
    let verifier = jwks::verifier(cfg, bearer).await;
    let now = now_ms();
    let checked = TOKENS.with(|t| {
        decide::check_claim(
            &input,
            &mut t.borrow_mut(),
            &verifier,
            flashgate_shared::token::NumericDate::from_unix_ms(now),
        )
    });
    let customer = match checked {
        Ok(c) => c,
        Err(a) => return answer(&a),
    };
    if let Err(a) = decide::claim_campaign_check(id) {
        return answer(&a);
    }
    if let Err(a) = index::known(cfg, id).await {
        return answer(&a);
    }
    let (entry, fresh) = status_for(cfg, id, url).await;
    let now = now_ms();
    // A campaign with a waiting room: rate limits first, then the gate, then the admission
    // token (so that a sold-out campaign still says sold_out to everyone).
    let admit_rate = crate::queue::admit_rate(entry.as_deref());
    let waiting_room = admit_rate.is_some();
    if waiting_room {
        if let Err(a) = queue::limit(cfg, Action::Claim, Some(&customer), client_ip()) {
            return answer(&a);
        }
    }
    // After the sell-out a possible winner's claim (her retry) still goes to the origin, which
    // answers it with her first reply; this is the sold_out she is told otherwise.
    let mut sold_out_answer = None;
    if let Gate::Answer(a) = decide::gate(entry.as_deref(), fresh, now, cfg.not_started_skew_ms) {
        let sold_out =
            entry.as_deref().and_then(StatusEntry::state) == Some(CampaignState::SoldOut);
        if !sold_out {
            return answer(&a);
        }
        match winners::verdict(cfg, id, &customer).await {
            Verdict::Winner => sold_out_answer = Some(a),
            Verdict::Loser => return answer(&a),
            // Without a filter a winner's retry cannot be told from anyone's claim: a sold_out
            // could be false to her, so the answer is "retry", not final.
            Verdict::Unknown => return answer(&Answer::unavailable()),
        }
    }
    // A claim of a variant the cached status says is sold out while the campaign is live
    // ([`decide::variant_gate`]): answered here, except a possible winner's retry.
    if sold_out_answer.is_none() {
        if let Some(v) = decide::claimed_variant(&body) {
            if let Gate::Answer(a) = decide::variant_gate(entry.as_deref(), fresh, &v) {
                if winners::verdict(cfg, id, &customer).await == Verdict::Loser {
                    return answer(&a);
                }
            }
        }
    }
    let admission = headers.get(ADMISSION_HEADER)?;
    if waiting_room {
        let checked = queue::queue_secret(cfg)
            .and_then(|secret| {
                crate::queue::check_claim_admission(
                    secret,
                    admission.as_deref(),
                    id,
                    &customer,
                    now,
                )
            })
            .and_then(|admitted| match admitted {
                crate::queue::Admitted::Now => Ok(()),
                // An expired token: only the origin knows whether this key was decided.
                crate::queue::Admitted::ReplayOnly => {
                    queue::limit(cfg, Action::Replay, Some(&customer), None)
                }
            })
            // Last: only a claim that is about to be forwarded takes a forwarding token.
            .and_then(|()| queue::pace(id, admit_rate.unwrap_or(0)));
        if let Err(a) = checked {
            // Without a usable admission a possible winner is told sold_out, as everyone.
            return answer(sold_out_answer.as_ref().unwrap_or(&a));
        }
    }
    // Forward: body bytes, Authorization and Idempotency-Key as sent, plus the client IP and
    // the edge signature over all of them.
    let out = Headers::new();
    if let Some(ct) = &content_type {
        out.set("content-type", ct)?;
    }
    if let Some(a) = &authorization {
        out.set("authorization", a)?;
    }
    if let Some(k) = &key {
        out.set(IDEMPOTENCY_KEY_HEADER, k)?;
    }
    if let Some(a) = &admission {
        out.set(ADMISSION_HEADER, a)?;
    }
    if let Some(t) = headers.get(TRACEPARENT_HEADER)? {
        out.set(TRACEPARENT_HEADER, &t)?;
    }
    if let Some(id) = headers.get(REQUEST_ID_HEADER)? {
        out.set(REQUEST_ID_HEADER, &id)?;
    }
    sign_forwarded(cfg, &out, client_ip(), "POST", url.path(), &body)?;
    let target = origin_target(cfg, url);
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(out)
        .with_body(Some(js_sys::Uint8Array::from(body.as_slice()).into()));
    let forwarded = Request::new_with_init(&target, &init)?;
    let (code, resp_headers, resp_body) = match send(forwarded, cfg.origin_timeout_ms).await {
        Ok(r) if r.0 < 500 => r,
        Ok((code, _, _)) => {
            worker::console_warn!("claim on {id}: origin answered {code}");
            return answer(&Answer::unavailable());
        }
        Err(e) => {
            worker::console_warn!("claim on {id}: origin unreachable: {e}");
            return answer(&Answer::unavailable());
        }
    };
    let replayed = resp_headers.get(flashgate_shared::REPLAYED_HEADER)?;
    learn(
        id,
        status::Decided::from_header(replayed.as_deref()),
        code,
        &resp_body,
    );
    relay(code, &resp_headers, resp_body)
}

/// Flips the cached state when the origin's claim answer, decided now, says sold out / ended /
/// paused ([`status::learn_from_claim`]).
fn learn(id: &str, decided: status::Decided, code: u16, body: &[u8]) {
    let now = now_ms();
    SLOTS.with(|slots| {
        let mut slots = slots.borrow_mut();
        if let Some(slot) = slots.get_mut(id) {
            if let Some(new) =
                status::learn_from_claim(slot.entry.as_deref(), decided, code, body, now)
            {
                slot.entry = Some(Rc::new(new));
            }
        }
    });
}
