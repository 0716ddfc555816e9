//! The isolate's cache of campaign statuses ([`crate::status`]) in the Workers runtime: served
//! for `GET /api/v1/campaigns/{id}`, refreshed single-flight per campaign from the Cache API or
//! the origin, and changed by what a claim's answer says ([`learn`]). Part of the wasm32 glue
//! ([`super`]).

use super::origin::send;
use super::request_url::RequestUrl;
use super::respond::{self, answer, respond};
use super::{now_ms, wait_until};
use crate::config::EdgeConfig;
use crate::decide::Answer;
use crate::status::{self, Freshness, RefreshState, StatusEntry, Step};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

thread_local! {
    /// Whether a status put into the Cache API failed in this isolate already.
    static CACHE_PUT_FAILED: Cell<bool> = const { Cell::new(false) };
}
use worker::{Cache, Headers, Method, Request, Response, Result};

/// Header with the age of the cached status in ms (the standard `Age` header has it in s).
const STATUS_AGE_MS_HEADER: &str = "flashgate-status-age-ms";
/// Header set to `1` on a status served stale because the origin could not be reached.
const STALE_HEADER: &str = "flashgate-stale";
/// Campaign slots kept per isolate before idle ones are dropped.
const MAX_SLOTS: usize = 10_000;

/// What an isolate knows about one campaign.
#[derive(Default)]
struct Slot {
    /// Shared with the requests being answered from it (no copy per request).
    entry: Option<Rc<StatusEntry>>,
    refresh: RefreshState,
}

thread_local! {
    static SLOTS: RefCell<HashMap<String, Slot>> = RefCell::new(HashMap::new());
}

/// The cached status of `id`; for a `HEAD` (`head`) the same status and headers without the
/// body.
pub(super) async fn serve_status(
    cfg: &EdgeConfig,
    id: &str,
    url: &RequestUrl,
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
pub(super) async fn status_for(
    cfg: &EdgeConfig,
    id: &str,
    url: &RequestUrl,
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
fn cache_key(url: &RequestUrl, id: &str) -> String {
    let parsed = url.parsed().ok();
    format!(
        "{}://{}/__flashgate/edge-status/{id}",
        parsed.map_or("https", |u| u.scheme()),
        parsed
            .and_then(|u| u.host_str())
            .unwrap_or("flashgate-edge")
    )
}

/// One refresh: a fresh copy from the Cache API if another isolate put one there, else the
/// origin (copied into the Cache API). `None` when the origin fails.
async fn refresh(cfg: &EdgeConfig, id: &str, url: &RequestUrl) -> Option<StatusEntry> {
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
        // Once per isolate: a runtime without a Cache API (plain workerd, the local stack)
        // fails every put, and the isolate's own status cache still serves the TTL.
        if !CACHE_PUT_FAILED.replace(true) {
            worker::console_warn!(
                "status refresh of {id}: cache put failed: {e} (further failures of this \
                 isolate are not logged)"
            );
        }
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

/// Flips the cached state when the origin's claim answer, decided now, says sold out / ended /
/// paused ([`status::learn_from_claim`]).
pub(super) fn learn(id: &str, decided: status::Decided, code: u16, body: &[u8]) {
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
