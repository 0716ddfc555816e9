//! The isolate's campaign index ([`flashgate_shared::campaign_index`]): which campaign ids
//! exist, so that an unknown id is answered 404 at the edge without an origin request.
//!
//! - A hit ("may exist") goes on to the status cache as before, however old the index is: a
//!   campaign, once listed, only leaves the index a week after its end.
//! - A miss on an index younger than the status TTL is a 404 at the edge.
//! - A miss on an older index (or no index yet) refreshes it first, single-flight, at most
//!   once per TTL (a failed refresh backs off for one TTL, as a status refresh does), then
//!   decides from the refreshed index. A new campaign is therefore seen within one TTL plus one
//!   origin round trip.
//! - No index at all (the origin does not serve one, refuses the edge, or is down) lets every
//!   well-formed id through to the status cache: the edge never turns away a real campaign
//!   because it could not learn the index. An index older than the max-stale bound counts as
//!   none.
//!
//! Times are ms since the Unix epoch on the edge's clock.

use crate::held::{self, Held};
use crate::memo;
use crate::status::{self, Step};
use flashgate_shared::campaign_index::{CampaignIndex, IndexError};

/// What the isolate holds: the last index, its `ETag`, when it was confirmed.
pub type IndexSlot = Held<CampaignIndex>;

/// The origin's answer to an index fetch, read ([`Fetched::from_origin`]).
pub type Fetched = held::Fetched<CampaignIndex, IndexError>;

/// Why an index fetch was not usable.
pub type FetchError = held::FetchError<IndexError>;

/// What a request does about a campaign id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// The id may exist (or no index can be had): go on to the status cache.
    Pass,
    /// No such campaign: the origin's 404, answered by the edge.
    NotFound,
    /// Refresh the index first; this request leads.
    Lead,
    /// Another request is refreshing it: wait for that one, then [`IndexSlot::decide`].
    Wait,
}

impl Fetched {
    /// Reads the origin's answer: status, `ETag` and body. A 304 when no index is held is a
    /// failure (nothing to keep).
    pub fn from_origin(code: u16, etag: Option<&str>, body: &[u8], held: bool) -> Self {
        Self::read(code, etag, body, held, CampaignIndex::decode)
    }
}

impl IndexSlot {
    /// Decides what a request for campaign `id` (a valid slug) does at `now_ms` (see the
    /// module documentation). Status TTL `ttl_ms`, max-stale `max_stale_ms`, and the time
    /// after which a refresh in progress is presumed dead, `lead_timeout_ms`.
    pub fn check(
        &self,
        id: &str,
        now_ms: i64,
        ttl_ms: i64,
        max_stale_ms: i64,
        lead_timeout_ms: i64,
    ) -> Check {
        let index = self.usable(now_ms, max_stale_ms);
        if index.is_some_and(|i| i.may_contain_fingerprint(memo::campaign_fingerprint(id))) {
            return Check::Pass;
        }
        let fresh = index.is_some() && now_ms.saturating_sub(self.fetched_at_ms) < ttl_ms;
        match status::step(fresh, &self.refresh, now_ms, ttl_ms, lead_timeout_ms) {
            Step::Serve => Check::NotFound,
            Step::Lead => Check::Lead,
            Step::Wait => Check::Wait,
            // A refresh failed within the last TTL: decide from what is held.
            Step::BackOff => self.decide(id, now_ms, max_stale_ms),
        }
    }

    /// After a refresh (led or waited for): the verdict from what is held now. No usable index
    /// lets the id pass.
    pub fn decide(&self, id: &str, now_ms: i64, max_stale_ms: i64) -> Check {
        match self.usable(now_ms, max_stale_ms) {
            Some(index) if !index.may_contain_fingerprint(memo::campaign_fingerprint(id)) => {
                Check::NotFound
            }
            _ => Check::Pass,
        }
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
