//! The isolate's winners filters ([`crate::winners`]) in the Workers runtime: fetched from the
//! origin single-flight per campaign and looked up for the claims that the cached status would
//! answer `sold_out`. Part of the wasm32 glue ([`super`]).

use super::index::fetch_held;
use super::{now_ms, wait_until};
use crate::config::EdgeConfig;
use crate::winners::{make_room, Fetched, Look, Verdict, WinnersSlot};
use flashgate_shared::winners_filter::{path, WinnersFilter, MAX_BODY_BYTES};
use std::cell::RefCell;
use std::collections::HashMap;

thread_local! {
    static FILTERS: RefCell<HashMap<String, WinnersSlot>> = RefCell::new(HashMap::new());
}

/// What the winners filter says of `customer`'s claim on sold-out campaign `id`
/// ([`Verdict`]: to the origin, `sold_out` at the edge, or unknown). The filter is refreshed
/// first (single-flight, at most once per TTL) when it is a TTL old or missing.
pub(super) async fn verdict(cfg: &EdgeConfig, id: &str, customer: &str) -> Verdict {
    let now = now_ms();
    let (ttl, max_stale) = (cfg.status_ttl_ms, cfg.status_max_stale_ms);
    let lead_timeout = cfg.origin_timeout_ms.saturating_add(1_000);
    let (look, generation, etag, held) = FILTERS.with(|slots| {
        let mut slots = slots.borrow_mut();
        make_room(&mut slots, id);
        let slot = slots.entry(id.to_string()).or_default();
        let look = slot.look(customer, now, ttl, max_stale, lead_timeout);
        if look == Look::Lead {
            slot.start(now);
        }
        let held = slot.value.is_some();
        (look, slot.refresh.generation, slot.etag.clone(), held)
    });
    let decided = |slots: &HashMap<String, WinnersSlot>| {
        slots.get(id).map_or(Verdict::Unknown, |s| {
            s.verdict(customer, now_ms(), max_stale)
        })
    };
    match look {
        Look::Decided(verdict) => verdict,
        Look::Lead => {
            let fetched = fetch(cfg, id, etag.as_deref(), held).await;
            if let Fetched::Failed(e) = &fetched {
                worker::console_warn!("winners filter of {id}: fetch failed: {e:?}");
            }
            FILTERS.with(|slots| {
                let mut slots = slots.borrow_mut();
                slots
                    .entry(id.to_string())
                    .or_default()
                    .finish(fetched, now_ms());
                decided(&slots)
            })
        }
        Look::Wait => {
            let moved = || {
                FILTERS.with(|slots| {
                    slots
                        .borrow()
                        .get(id)
                        .is_none_or(|s| s.refresh.generation != generation)
                })
            };
            wait_until(now.saturating_add(lead_timeout), moved).await;
            FILTERS.with(|slots| decided(&slots.borrow()))
        }
    }
}

/// One filter fetch: `GET {origin}/edge/v1/campaigns/{id}/winners-filter`
/// ([`super::index::fetch_held`]).
async fn fetch(cfg: &EdgeConfig, id: &str, etag: Option<&str>, held: bool) -> Fetched {
    let route = path(id);
    fetch_held(
        cfg,
        &route,
        etag,
        held,
        MAX_BODY_BYTES,
        WinnersFilter::decode,
    )
    .await
}
