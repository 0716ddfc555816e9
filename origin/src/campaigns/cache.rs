//! This origin's cache of campaign rows, so the claim path and the status endpoint do not read
//! PostgreSQL on every request. An entry is trusted for `ttl` (config
//! `FLASHGATE_CAMPAIGN_CACHE_MS`, default 100 ms); a change made through this origin
//! invalidates it at once, a change made through another origin shows within `ttl`.
//!
//! A `moka` cache: refreshes are single-flight per campaign (when an entry goes stale under
//! load, one request reads PostgreSQL and the others wait for its answer). Unknown ids are
//! cached too (as `None`), so a flood of made-up ids costs one query per id per `ttl`; at most
//! [`MAX_ENTRIES`] ids are kept.

use std::sync::Arc;
use std::time::Duration;

use crate::db::Db;
use moka::future::Cache;

use super::index::{build, BuiltIndex};
use super::store::{self, CampaignRow};
use super::variants::VariantRow;
use super::winners::{self, BuildError, BuiltFilter};
use crate::gate::Gate;

/// Entries kept at most (a bound against floods of made-up ids).
pub const MAX_ENTRIES: u64 = 50_000;

type Cached = Option<Arc<CampaignRow>>;

/// See the module documentation.
pub struct CampaignCache {
    rows: Cache<String, Cached>,
    /// The campaign index ([`super::index`]), one entry, built single-flight.
    index: Cache<(), Arc<BuiltIndex>>,
    /// Winners filters by campaign and the sell-outs they were asked for ([`super::winners`]),
    /// built single-flight, bounded by their bytes ([`winners::MAX_CACHED_BYTES`]).
    winners: Cache<(String, String), Arc<BuiltFilter>>,
    /// The variants of each campaign ([`super::variants`]), empty for one without, trusted
    /// for `ttl` like the rows.
    variants: Cache<String, Arc<Vec<VariantRow>>>,
}

impl CampaignCache {
    /// A cache whose entries are trusted for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        CampaignCache {
            rows: Cache::builder()
                .max_capacity(MAX_ENTRIES)
                .time_to_live(ttl)
                .build(),
            index: Cache::builder()
                .max_capacity(1)
                .time_to_live(ttl.max(super::index::MIN_CACHE))
                .build(),
            winners: Cache::builder()
                .max_capacity(winners::MAX_CACHED_BYTES)
                .weigher(|_, f: &Arc<BuiltFilter>| u32::try_from(f.body.len()).unwrap_or(u32::MAX))
                .time_to_live(ttl.max(winners::MIN_CACHE))
                .build(),
            variants: Cache::builder()
                .max_capacity(MAX_ENTRIES)
                .time_to_live(ttl)
                .build(),
        }
    }

    /// The campaign `id`, from cache when fresh, else from PostgreSQL. `Ok(None)`: unknown id.
    /// Errors: the PostgreSQL error of the read (shared by the requests that waited for it).
    pub async fn get(&self, db: &Db, id: &str) -> sqlx::Result<Cached> {
        let load = async { store::find(db, id).await.map(|row| row.map(Arc::new)) };
        crate::cache::get_or_load(&self.rows, id.to_string(), load).await
    }

    /// The variants of campaign `c` (empty without variants), from cache when fresh, else
    /// from PostgreSQL. Errors: the PostgreSQL error of the read.
    pub async fn variants(&self, db: &Db, c: &str) -> sqlx::Result<Arc<Vec<VariantRow>>> {
        let load = async { super::variants::list(db, c).await.map(Arc::new) };
        crate::cache::get_or_load(&self.variants, c.to_string(), load).await
    }

    /// The campaign index, from cache when fresh (`ttl`, at least [`super::index::MIN_CACHE`]),
    /// else built from PostgreSQL (once for all the requests that ask at the same time). Errors: the PostgreSQL error of the read.
    pub async fn index(&self, db: &Db) -> sqlx::Result<Arc<BuiltIndex>> {
        let load = async { build(db, chrono::Utc::now()).await.map(Arc::new) };
        crate::cache::get_or_load(&self.index, (), load).await
    }

    /// The winners filter of campaign `c` asked for the sell-outs `sold` (the edge's
    /// fingerprint; at most `max` winners listed), from cache when fresh (`ttl`, at least
    /// [`winners::MIN_CACHE`]), else built from the gate in Redis (once for all the requests
    /// that ask at the same time): a filter built for other sell-outs may miss the last
    /// winners of those `sold` names, never one built for them. Errors: [`BuildError`], shared
    /// by the requests that waited for it.
    pub async fn winners(
        &self,
        gate: &Gate,
        c: &str,
        sold: &str,
        max: usize,
    ) -> Result<Arc<BuiltFilter>, Arc<BuildError>> {
        let mut gate = gate.clone();
        let load = async move { winners::build(&mut gate, c, max).await.map(Arc::new) };
        let key = (c.to_string(), sold.to_string());
        self.winners.try_get_with(key, load).await
    }

    /// Drops the cached index (a campaign was created), so the next fetch lists it.
    pub async fn invalidate_index(&self) {
        self.index.invalidate(&()).await;
    }

    /// Drops the entry of `id`, so the next read goes to PostgreSQL.
    pub async fn invalidate(&self, id: &str) {
        self.rows.invalidate(id).await;
        self.variants.invalidate(id).await;
    }
}
