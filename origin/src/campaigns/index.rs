//! The campaign index this origin serves the edge ([`flashgate_shared::campaign_index`]): the
//! ids of the campaigns that have not ended, or ended at most 7 days (plus up to an hour) ago,
//! built from PostgreSQL and kept by [`super::CampaignCache`] for `FLASHGATE_CAMPAIGN_CACHE_MS`
//! but at least [`MIN_CACHE`].

use axum::body::Bytes;
use chrono::{DateTime, Utc};
use flashgate_shared::campaign_index::{ended_cutoff_unix_s, etag, CampaignIndex};

use crate::db::Db;

/// Least time a built index is kept, however short `FLASHGATE_CAMPAIGN_CACHE_MS`: building
/// it reads every listed campaign id (~50 ms of PostgreSQL for 100,000), and every edge
/// isolate may ask once per status TTL. A campaign created through this origin drops it at
/// once; one created through another origin is listed within this time.
pub const MIN_CACHE: std::time::Duration = std::time::Duration::from_secs(1);

/// A built index, ready to send.
#[derive(Debug, Clone)]
pub struct BuiltIndex {
    /// The wire format.
    pub body: Bytes,
    /// Its entity tag (quoted).
    pub etag: String,
    /// Campaigns listed.
    pub campaigns: usize,
}

/// Reads the listed campaign ids at `now` and builds the index. Errors: the PostgreSQL error.
pub async fn build(db: &Db, now: DateTime<Utc>) -> sqlx::Result<BuiltIndex> {
    let cutoff = DateTime::from_timestamp(ended_cutoff_unix_s(now.timestamp()), 0)
        .unwrap_or(DateTime::UNIX_EPOCH);
    let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM campaigns WHERE ends_at > $1")
        .bind(cutoff)
        .fetch_all(db)
        .await?;
    let body = Bytes::from(CampaignIndex::from_ids(ids.iter().map(String::as_str)).encode());
    Ok(BuiltIndex {
        etag: etag(&body),
        body,
        campaigns: ids.len(),
    })
}
