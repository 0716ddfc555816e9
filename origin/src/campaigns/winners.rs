//! The winners filter this origin serves the edge ([`flashgate_shared::winners_filter`]): the
//! customers holding a unit of a campaign, read from the gate in Redis (every shard; a take
//! still committing counts), built into a binary fuse filter and kept by
//! [`super::CampaignCache`] for `FLASHGATE_CAMPAIGN_CACHE_MS` but at least [`MIN_CACHE`].
//!
//! The edge asks for it only while its cached status says the campaign, or a variant of it, is
//! sold out, naming those sell-outs (`?sold=`, a fingerprint). Once sold out, a variant's (or
//! the campaign's) holders change only when units come back (a release, an expired hold, a
//! restock), which ends its sell-out; so a filter built after the sell-outs it is asked for
//! stays right for them for as long as the edge uses it. The cache keeps one filter per
//! campaign and fingerprint: one built when fewer variants were sold out is never served for
//! more (it may miss a later variant's last winners). Its `ETag` (a hash of the body, the same
//! on every origin: the build is deterministic) lets the edge's once-per-TTL refresh be a
//! bodiless 304.

use axum::body::Bytes;
use flashgate_shared::campaign_index::etag;
use flashgate_shared::winners_filter::WinnersFilter;

use crate::gate::{self, Gate, Holders};

/// Least time a built filter is kept, however short `FLASHGATE_CAMPAIGN_CACHE_MS`: building
/// one for 100,000 winners reads them from Redis and hashes each (tens of ms), and every edge
/// isolate may ask once per status TTL.
pub const MIN_CACHE: std::time::Duration = std::time::Duration::from_secs(1);

/// Bytes of built filters this origin keeps at most (about 200 campaigns of 250,000 winners).
pub const MAX_CACHED_BYTES: u64 = 64 * 1024 * 1024;

/// A built filter, ready to send.
#[derive(Debug, Clone)]
pub struct BuiltFilter {
    /// The wire format.
    pub body: Bytes,
    /// Its entity tag (quoted).
    pub etag: String,
    /// Customers holding a unit.
    pub winners: u32,
}

/// Why no filter could be built.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BuildError {
    /// The campaign's gate is not loaded in Redis (yet).
    #[error("the gate of {0} is not loaded")]
    NotLoaded(String),
    /// Redis failed.
    #[error("redis: {0}")]
    Redis(String),
}

/// Reads the holders of campaign `c` from the gate and builds their filter (a "too many" one
/// above `max` winners). Errors: [`BuildError`].
pub async fn build(gate: &mut Gate, c: &str, max: usize) -> Result<BuiltFilter, BuildError> {
    let filter = match gate::holders(gate, c, max)
        .await
        .map_err(|e| BuildError::Redis(e.to_string()))?
    {
        Holders::NotLoaded => return Err(BuildError::NotLoaded(c.to_string())),
        Holders::TooMany { count } => WinnersFilter::TooMany {
            count: u32::try_from(count).unwrap_or(u32::MAX),
        },
        Holders::Listed(all) => WinnersFilter::build(all.iter().map(String::as_str), max),
    };
    let body = Bytes::from(filter.encode());
    Ok(BuiltFilter {
        etag: etag(&body),
        body,
        winners: filter.count(),
    })
}
