//! The isolate's campaign index ([`crate::index`]) and CORS ([`crate::cors`]) in the Workers
//! runtime: fetching the index from the origin single-flight, and setting the CORS headers on
//! every answer. Part of the wasm32 glue ([`super`]).

use super::origin::{send_bounded, sign_forwarded};
use super::{now_ms, wait_until};
use crate::config::EdgeConfig;
use crate::decide::{self, Answer};
use crate::held;
use crate::index::{Check, Fetched, IndexSlot};
use flashgate_shared::campaign_index::{CampaignIndex, INDEX_PATH, MAX_BODY_BYTES};
use flashgate_shared::ANSWERED_BY_HEADER;
use std::cell::RefCell;
use worker::{Headers, Method, Request, RequestInit, Response, Result};

thread_local! {
    static INDEX: RefCell<IndexSlot> = RefCell::new(IndexSlot::default());
}

/// `Ok` when campaign `id` (a valid slug) may exist, else the origin's 404 for it: looked up in
/// the isolate's index, which is refreshed first (single-flight, at most once per TTL) when a
/// miss finds it a TTL old.
pub(super) async fn known(cfg: &EdgeConfig, id: &str) -> std::result::Result<(), Answer> {
    let now = now_ms();
    let (ttl, max_stale) = (cfg.status_ttl_ms, cfg.status_max_stale_ms);
    let lead_timeout = cfg.origin_timeout_ms.saturating_add(1_000);
    let (check, generation, etag, held) = INDEX.with(|slot| {
        let mut slot = slot.borrow_mut();
        let check = slot.check(id, now, ttl, max_stale, lead_timeout);
        if check == Check::Lead {
            slot.start(now);
        }
        let held = slot.value.is_some();
        (check, slot.refresh.generation, slot.etag.clone(), held)
    });
    let verdict = match check {
        Check::Pass | Check::NotFound => check,
        Check::Lead => {
            let fetched = fetch(cfg, etag.as_deref(), held).await;
            if let Fetched::Failed(e) = &fetched {
                worker::console_warn!("campaign index fetch failed: {e:?}");
            }
            INDEX.with(|slot| {
                let mut slot = slot.borrow_mut();
                slot.finish(fetched, now_ms());
                slot.decide(id, now_ms(), max_stale)
            })
        }
        Check::Wait => {
            let moved = || INDEX.with(|slot| slot.borrow().refresh.generation != generation);
            wait_until(now.saturating_add(lead_timeout), moved).await;
            INDEX.with(|slot| slot.borrow().decide(id, now_ms(), max_stale))
        }
    };
    match verdict {
        Check::NotFound => Err(decide::no_such_campaign(id)),
        _ => Ok(()),
    }
}

/// One index fetch: `GET {origin}/edge/v1/campaign-index` ([`fetch_held`]).
async fn fetch(cfg: &EdgeConfig, etag: Option<&str>, held: bool) -> Fetched {
    fetch_held(
        cfg,
        INDEX_PATH,
        "",
        etag,
        held,
        MAX_BODY_BYTES,
        CampaignIndex::decode,
    )
    .await
}

/// One fetch of something the isolate keeps with its `ETag` ([`crate::held`]):
/// `GET {origin}{path}{query}`, signed like a forwarded request (over `path`, without the
/// query), with `If-None-Match` when a value is `held`; the body read up to `max_body` bytes
/// and decoded by `decode`.
pub(super) async fn fetch_held<T, E>(
    cfg: &EdgeConfig,
    path: &str,
    query: &str,
    etag: Option<&str>,
    held: bool,
    max_body: usize,
    decode: impl FnOnce(&[u8]) -> std::result::Result<T, E>,
) -> held::Fetched<T, E> {
    let attempt = async {
        let out = Headers::new();
        if let Some(tag) = etag {
            out.set("if-none-match", tag)?;
        }
        sign_forwarded(cfg, &out, None, "GET", path, b"")?;
        let mut init = RequestInit::new();
        init.with_method(Method::Get).with_headers(out);
        let url = format!("{}{path}{query}", cfg.origin_url);
        let req = Request::new_with_init(&url, &init)?;
        send_bounded(req, cfg.origin_timeout_ms, Some(max_body)).await
    };
    match attempt.await {
        Ok((code, headers, body)) => {
            let tag = headers.get("etag").ok().flatten();
            held::Fetched::read(code, tag.as_deref(), &body, held && etag.is_some(), decode)
        }
        Err(_) => held::Fetched::Failed(held::FetchError::Unreachable),
    }
}

/// The answer to a CORS preflight (`OPTIONS` while origins are allowed): 200, empty body,
/// as the origin's tower-http layer answers it; its CORS headers are added by [`cors`].
pub(super) fn preflight() -> Result<Response> {
    let headers = Headers::new();
    headers.set(ANSWERED_BY_HEADER, "edge")?;
    headers.set("cache-control", flashgate_shared::PRIVATE_CACHE_CONTROL)?;
    Ok(Response::empty()?.with_status(200).with_headers(headers))
}

/// Sets the CORS headers for a request from `origin` on `resp` (any answer: the edge's own,
/// relayed, errors): the origin's own `Access-Control-*` headers are replaced by the edge's
/// ([`crate::cors::Cors::headers`]). Nothing changes while CORS is off.
pub(super) fn cors(
    cfg: &EdgeConfig,
    origin: Option<&str>,
    preflight: bool,
    resp: Response,
) -> Result<Response> {
    if !cfg.cors.enabled() {
        return Ok(resp);
    }
    let headers = resp.headers();
    let relayed: Vec<String> = headers
        .keys()
        .filter(|n| n.starts_with("access-control-"))
        .collect();
    for name in relayed {
        headers.delete(&name)?;
    }
    for (name, value) in cfg.cors.headers(origin, preflight) {
        if name == "vary" {
            // Keep a relayed Vary (and do not repeat the origin's own CORS one).
            let present = headers.get("vary")?.unwrap_or_default();
            if !present.contains(&value) {
                headers.append(name, &value)?;
            }
        } else {
            headers.set(name, &value)?;
        }
    }
    Ok(resp)
}
