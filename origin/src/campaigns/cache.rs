//! This origin's cache of campaign rows, so the claim path and the status endpoint do not read
//! PostgreSQL on every request. An entry is trusted for `ttl` (config
//! `FLASHGATE_CAMPAIGN_CACHE_MS`, default 100 ms); a change made through this origin
//! invalidates it at once, a change made through another origin shows within `ttl`.
//!
//! Refreshes are single-flight per campaign: when an entry goes stale under load, one request
//! reads PostgreSQL and the others wait for its answer. Unknown ids are cached too (as
//! `None`), so a flood of made-up ids costs one query per id per `ttl`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::PgPool;

use super::store::{self, CampaignRow};

/// Entries kept before the map is emptied (a bound against floods of made-up ids).
const MAX_ENTRIES: usize = 50_000;

type Cached = Option<Arc<CampaignRow>>;

#[derive(Default)]
struct Slot {
    value: Mutex<Option<(Instant, Cached)>>,
    refresh: tokio::sync::Mutex<()>,
}

impl Slot {
    fn fresh(&self, ttl: Duration) -> Option<Cached> {
        let v = self.value.lock().expect("cache slot lock");
        v.as_ref()
            .filter(|(at, _)| at.elapsed() < ttl)
            .map(|(_, c)| c.clone())
    }
}

/// See the module documentation.
pub struct CampaignCache {
    ttl: Duration,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

impl CampaignCache {
    /// A cache whose entries are trusted for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        CampaignCache {
            ttl,
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn slot(&self, id: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().expect("cache lock");
        if slots.len() >= MAX_ENTRIES && !slots.contains_key(id) {
            slots.clear();
        }
        slots.entry(id.to_string()).or_default().clone()
    }

    /// The campaign `id`, from cache when fresh, else from PostgreSQL. `Ok(None)`: unknown id.
    pub async fn get(&self, db: &PgPool, id: &str) -> sqlx::Result<Cached> {
        let slot = self.slot(id);
        if let Some(c) = slot.fresh(self.ttl) {
            return Ok(c);
        }
        let _guard = slot.refresh.lock().await;
        // Another request may have refreshed the entry while this one waited.
        if let Some(c) = slot.fresh(self.ttl) {
            return Ok(c);
        }
        let row = store::find(db, id).await?.map(Arc::new);
        *slot.value.lock().expect("cache slot lock") = Some((Instant::now(), row.clone()));
        Ok(row)
    }

    /// Drops the entry of `id`, so the next read goes to PostgreSQL.
    pub fn invalidate(&self, id: &str) {
        if let Some(slot) = self.slots.lock().expect("cache lock").get(id) {
            *slot.value.lock().expect("cache slot lock") = None;
        }
    }
}
