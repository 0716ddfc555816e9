//! The isolate's winners filters ([`crate::winners`]) in the Workers runtime: fetched from the
//! origin single-flight per campaign and looked up for the claims that the cached status would
//! answer `sold_out`. Part of the wasm32 glue ([`super`]).

use super::index::fetch_held;
use super::{now_ms, wait_until};
use crate::config::EdgeConfig;
use crate::winners::{make_room, sold_query, Fetched, Look, Verdict, WinnersSlot};
use flashgate_shared::winners_filter::{path, WinnersFilter, MAX_BODY_BYTES};
use std::cell::RefCell;
use std::collections::HashMap;

thread_local! {
    static FILTERS: RefCell<HashMap<String, WinnersSlot>> = RefCell::new(HashMap::new());
}

/// What the winners filter says of `customer`'s claim on campaign `id`, a claim the cached
/// status (whose sell-outs are `sold`, [`crate::winners::sold_key`]) would answer `sold_out`
/// ([`Verdict`]: to the origin, `sold_out` at the edge, or unknown). The filter is refreshed
/// first (single-flight) when it is a TTL old, missing, or was fetched for other sell-outs.
pub(super) async fn verdict(cfg: &EdgeConfig, id: &str, customer: &str, sold: u64) -> Verdict {
    // A request that waited for another's refresh looks once more: that refresh may have
    // been for other sell-outs than this claim's.
    for _ in 0..2 {
        if let Some(v) = look_once(cfg, id, customer, sold).await {
            return v;
        }
    }
    FILTERS.with(|slots| decided(&slots.borrow(), id, customer, sold, cfg))
}

/// What the filter held says, without refreshing.
fn decided(
    slots: &HashMap<String, WinnersSlot>,
    id: &str,
    customer: &str,
    sold: u64,
    cfg: &EdgeConfig,
) -> Verdict {
    slots.get(id).map_or(Verdict::Unknown, |s| {
        s.verdict(customer, sold, now_ms(), cfg.status_max_stale_ms)
    })
}

/// One look at the filter ([`WinnersSlot::look`]): decided, or refreshed by this request and
/// decided; `None` after waiting for another request's refresh.
async fn look_once(cfg: &EdgeConfig, id: &str, customer: &str, sold: u64) -> Option<Verdict> {
    let now = now_ms();
    let (ttl, max_stale) = (cfg.status_ttl_ms, cfg.status_max_stale_ms);
    let lead_timeout = cfg.origin_timeout_ms.saturating_add(1_000);
    let (look, generation, etag, held) = FILTERS.with(|slots| {
        let mut slots = slots.borrow_mut();
        make_room(&mut slots, id);
        let slot = slots.entry(id.to_string()).or_default();
        let look = slot.look(customer, sold, now, ttl, max_stale, lead_timeout);
        if look == Look::Lead {
            slot.start(sold, now);
        }
        let held = slot.value.is_some();
        (look, slot.refresh.generation, slot.etag.clone(), held)
    });
    match look {
        Look::Decided(verdict) => Some(verdict),
        Look::Lead => {
            let fetched = fetch(cfg, id, sold, etag.as_deref(), held).await;
            if let Fetched::Failed(e) = &fetched {
                worker::console_warn!("winners filter of {id}: fetch failed: {e:?}");
            }
            Some(FILTERS.with(|slots| {
                let mut slots = slots.borrow_mut();
                slots
                    .entry(id.to_string())
                    .or_default()
                    .finish(fetched, now_ms());
                decided(&slots, id, customer, sold, cfg)
            }))
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
            None
        }
    }
}

/// One filter fetch: `GET {origin}/edge/v1/campaigns/{id}/winners-filter?sold=…`
/// ([`super::index::fetch_held`]) for the sell-outs `sold`.
async fn fetch(cfg: &EdgeConfig, id: &str, sold: u64, etag: Option<&str>, held: bool) -> Fetched {
    let route = path(id);
    fetch_held(
        cfg,
        &route,
        &sold_query(sold),
        etag,
        held,
        MAX_BODY_BYTES,
        WinnersFilter::decode,
    )
    .await
}
