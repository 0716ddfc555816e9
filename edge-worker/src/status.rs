//! The cached campaign status: what an isolate remembers about one campaign, when it must be
//! refreshed, when it may be served stale, and what it learns from the origin's claim answers.
//!
//! Times are milliseconds since the Unix epoch on the edge's clock. The age of an entry is
//! counted from the moment the edge received it from the origin (`fetched_at_ms`), also when
//! the entry travelled through the Cache API, so an entry is never fresh for more than one
//! TTL in total: the staleness bound is the status TTL plus one origin round trip.

use crate::reveal::Reveal;
use flashgate_shared::api::{CampaignState, CampaignStatus, ClaimReply, VariantStatus};
use flashgate_shared::queue::{QueueStatus, StatusQueueFields};
use serde::{Deserialize, Serialize};

/// What the origin said about a campaign.
// One entry per campaign per isolate, almost all `Found`: boxing the larger variant would buy
// nothing but an allocation on every status refresh.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Known {
    /// 200: the campaign's status, with the body bytes to serve (the origin's own bytes, or the
    /// serialisation of `status` after the edge learned a new state).
    Found {
        /// Parsed status.
        status: CampaignStatus,
        /// JSON body served to clients.
        body: String,
        /// The waiting room's fields (`"queue"` in the body); `None`: no waiting room.
        queue: Option<QueueStatus>,
        /// The campaign's variants (`"variants"` in the body); empty without variants.
        variants: Vec<VariantStatus>,
    },
    /// 404: no such campaign; the origin's body.
    NotFound {
        /// JSON body served to clients.
        body: String,
    },
}

/// One cached status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusEntry {
    /// The origin's answer.
    pub known: Known,
    /// When the edge received it from the origin (or learned a new state from a claim
    /// answer), ms since the epoch.
    pub fetched_at_ms: i64,
    /// How far this isolate lets queue polls see into the waiting room's admissions
    /// ([`crate::reveal`]); `None`: everything the status says (set by [`adopt`]
    /// when the isolate adopts the entry).
    pub reveal: Option<Reveal>,
}

/// Whether an entry can be served as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Younger than the TTL: serve it.
    Fresh,
    /// Missing or at least one TTL old: refresh from the origin (single-flight).
    Refresh,
}

/// Why the origin's status answer could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OriginStatusError {
    /// Unexpected HTTP status (5xx, 429, ...).
    Status(u16),
    /// 200 with a body that is not a campaign status.
    BadBody,
}

impl StatusEntry {
    /// Age in ms at `now_ms` (0 when the clock went backwards).
    pub fn age_ms(&self, now_ms: i64) -> i64 {
        now_ms.saturating_sub(self.fetched_at_ms).max(0)
    }

    /// Fresh while `age < ttl_ms`.
    pub fn freshness(&self, now_ms: i64, ttl_ms: i64) -> Freshness {
        if self.age_ms(now_ms) < ttl_ms {
            Freshness::Fresh
        } else {
            Freshness::Refresh
        }
    }

    /// After a failed refresh: may this entry still be served (marked stale)? True while
    /// `age <= max_stale_ms`.
    pub fn servable_stale(&self, now_ms: i64, max_stale_ms: i64) -> bool {
        self.age_ms(now_ms) <= max_stale_ms
    }

    /// HTTP status of the cached answer (200 or 404).
    pub fn http_status(&self) -> u16 {
        match self.known {
            Known::Found { .. } => 200,
            Known::NotFound { .. } => 404,
        }
    }

    /// The JSON body of the cached answer.
    pub fn body(&self) -> &str {
        match &self.known {
            Known::Found { body, .. } | Known::NotFound { body } => body,
        }
    }

    /// The state, when the campaign exists.
    pub fn state(&self) -> Option<CampaignState> {
        match &self.known {
            Known::Found { status, .. } => Some(status.state),
            Known::NotFound { .. } => None,
        }
    }

    /// The campaign's variants as cached (empty without variants, or for an unknown campaign).
    pub fn variants(&self) -> &[VariantStatus] {
        match &self.known {
            Known::Found { variants, .. } => variants,
            Known::NotFound { .. } => &[],
        }
    }

    /// The campaign status and its waiting room, when the campaign exists.
    pub fn found(&self) -> Option<(&CampaignStatus, Option<&QueueStatus>)> {
        match &self.known {
            Known::Found { status, queue, .. } => Some((status, queue.as_ref())),
            Known::NotFound { .. } => None,
        }
    }
}

/// Freshness of a possibly missing entry.
pub fn freshness(entry: Option<&StatusEntry>, now_ms: i64, ttl_ms: i64) -> Freshness {
    entry.map_or(Freshness::Refresh, |e| e.freshness(now_ms, ttl_ms))
}

/// Refresh bookkeeping of one campaign in one isolate (ms since the epoch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RefreshState {
    /// Set while a request (the leader) refreshes: when it started.
    pub refreshing_since: Option<i64>,
    /// When the last refresh failed; cleared by a successful one.
    pub failed_at: Option<i64>,
    /// Bumped by every finished refresh, so waiters see that the leader is done.
    pub generation: u64,
}

/// What a request does about a campaign's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The entry is fresh: use it.
    Serve,
    /// Refresh it (this request becomes the leader).
    Lead,
    /// Another request is refreshing it: wait for that one (single-flight).
    Wait,
    /// A refresh failed less than one TTL ago: do not try again yet, use the old entry
    /// (stale, within max-stale) or nothing.
    BackOff,
}

/// Decides [`Step`]: fresh entries are served; a refresh in progress is waited for unless it
/// has run `lead_timeout_ms` (its request was presumably cancelled; this one takes over);
/// after a failed refresh the origin is left alone for one TTL, so an outage costs the origin
/// at most one try per TTL per isolate and clients are not made to wait for each try.
pub fn next_step(
    entry: Option<&StatusEntry>,
    refresh: &RefreshState,
    now_ms: i64,
    ttl_ms: i64,
    lead_timeout_ms: i64,
) -> Step {
    let fresh = freshness(entry, now_ms, ttl_ms) == Freshness::Fresh;
    step(fresh, refresh, now_ms, ttl_ms, lead_timeout_ms)
}

/// [`next_step`] for anything refreshed from the origin at most once per TTL (a status, the
/// campaign index), given whether what the isolate holds is `fresh`.
pub fn step(
    fresh: bool,
    refresh: &RefreshState,
    now_ms: i64,
    ttl_ms: i64,
    lead_timeout_ms: i64,
) -> Step {
    if fresh {
        return Step::Serve;
    }
    if let Some(since) = refresh.refreshing_since {
        if now_ms.saturating_sub(since) < lead_timeout_ms {
            return Step::Wait;
        }
        return Step::Lead;
    }
    match refresh.failed_at {
        Some(at) if now_ms.saturating_sub(at) < ttl_ms => Step::BackOff,
        _ => Step::Lead,
    }
}

/// How long a waiting request sleeps before its `attempt`-th look at the slot, ms: 2, 4, 8,
/// 16, then 25. Short at first (a refresh usually takes one quick round trip), capped so that
/// many waiters during a slow origin cost few wake-ups.
pub fn wait_poll_ms(attempt: u32) -> u64 {
    2u64.saturating_mul(1u64 << attempt.min(4)).min(25)
}

/// Turns the origin's answer to `GET /api/v1/campaigns/{id}` into a cache entry: 200 with a
/// [`CampaignStatus`] body whose `id` is `id`, or 404. Anything else is an error (the entry is
/// not replaced; the caller may serve the old one stale).
pub fn from_origin(
    id: &str,
    http_status: u16,
    body: &[u8],
    now_ms: i64,
) -> Result<StatusEntry, OriginStatusError> {
    let known = match http_status {
        200 => {
            let status: CampaignStatus =
                serde_json::from_slice(body).map_err(|_| OriginStatusError::BadBody)?;
            if status.id != id {
                return Err(OriginStatusError::BadBody);
            }
            let StatusQueueFields { queue } =
                serde_json::from_slice(body).map_err(|_| OriginStatusError::BadBody)?;
            let StatusVariantFields { variants } =
                serde_json::from_slice(body).map_err(|_| OriginStatusError::BadBody)?;
            let body = String::from_utf8(body.to_vec()).map_err(|_| OriginStatusError::BadBody)?;
            Known::Found {
                status,
                body,
                queue,
                variants,
            }
        }
        404 => Known::NotFound {
            body: String::from_utf8_lossy(body).into_owned(),
        },
        other => return Err(OriginStatusError::Status(other)),
    };
    Ok(StatusEntry {
        known,
        fetched_at_ms: now_ms,
        reveal: None,
    })
}

/// `new`, as this isolate adopts it at `now_ms` in place of `prev`: with its reveal point
/// ([`Reveal::after`], [`crate::reveal`]) when it has a waiting room. Status TTL `ttl_ms`.
pub fn adopt(
    prev: Option<&StatusEntry>,
    mut new: StatusEntry,
    now_ms: i64,
    ttl_ms: i64,
) -> StatusEntry {
    let Some(queue) = new.found().and_then(|(_, q)| q.cloned()) else {
        return new;
    };
    let before = prev.and_then(|p| {
        let q = p.found()?.1?;
        // A status adopted without a reveal point showed everything it knew.
        let r = p.reveal.unwrap_or(Reveal {
            count: q.admitted,
            seq: q.now_serving,
            at_ms: p.fetched_at_ms,
        });
        Some((q.clone(), r))
    });
    new.reveal = Some(Reveal::after(
        before.as_ref().map(|(q, r)| (q, r)),
        &queue,
        now_ms,
        ttl_ms,
    ));
    new
}

/// Header of a Cache API copy: the origin's HTTP status (200 or 404).
pub const CACHE_ORIGIN_STATUS_HEADER: &str = "flashgate-origin-status";
/// Header of a Cache API copy: when the edge received the answer, ms since the epoch.
pub const CACHE_FETCHED_AT_HEADER: &str = "flashgate-fetched-at";

/// Reads an entry back from its Cache API copy (the two headers above and the body). Returns
/// `None` for a copy that is malformed or no longer fresh at `now_ms`, so that the Cache API
/// never extends an entry's life past one TTL from the origin's answer.
pub fn from_cache(
    id: &str,
    origin_status: Option<&str>,
    fetched_at: Option<&str>,
    body: &[u8],
    now_ms: i64,
    ttl_ms: i64,
) -> Option<StatusEntry> {
    let origin_status: u16 = origin_status?.trim().parse().ok()?;
    let fetched_at_ms: i64 = fetched_at?.trim().parse().ok()?;
    let entry = from_origin(id, origin_status, body, fetched_at_ms).ok()?;
    (entry.freshness(now_ms, ttl_ms) == Freshness::Fresh).then_some(entry)
}

/// A status body as the origin writes it: the status plus its `queue` fields and its
/// `variants`, if any.
#[derive(Serialize)]
struct WithQueue<'a> {
    #[serde(flatten)]
    status: &'a CampaignStatus,
    #[serde(flatten)]
    queue: StatusQueueFields,
    #[serde(skip_serializing_if = "<[VariantStatus]>::is_empty")]
    variants: &'a [VariantStatus],
}

/// The `variants` of a status body (absent: none).
#[derive(Deserialize)]
struct StatusVariantFields {
    #[serde(default)]
    variants: Vec<VariantStatus>,
}

/// A claim answer that names a variant: `{"result":"sold_out","variant":"42"}`.
#[derive(Deserialize)]
struct VariantAnswer {
    result: String,
    variant: Option<String>,
}

/// When the origin decided a claim answer it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// Now: the answer says how the campaign stands.
    Now,
    /// Earlier: the kept reply of a request with the same idempotency key, marked
    /// `Idempotent-Replayed: true` ([`flashgate_shared::REPLAYED_HEADER`]). It says how the
    /// campaign stood then (a `sold_out` from before units came back), so nothing is learned.
    Earlier,
}

impl Decided {
    /// From the value of the answer's `Idempotent-Replayed` header (absent: `None`).
    pub fn from_header(replayed: Option<&str>) -> Self {
        match replayed {
            Some(v) if v.trim().eq_ignore_ascii_case("true") => Decided::Earlier,
            _ => Decided::Now,
        }
    }
}

/// What the edge learns from the origin's answer to a forwarded claim: a 409 `sold_out`,
/// `ended` or `paused` decided [`Decided::Now`] flips the cached state at once (and counts as
/// a fresh observation at `now_ms`); `sold_out` also sets `remaining` to 0. Returns `None`
/// when nothing changes (a replayed answer, other answers, no entry, unknown campaign, or
/// the state is already that one).
pub fn learn_from_claim(
    entry: Option<&StatusEntry>,
    decided: Decided,
    http_status: u16,
    body: &[u8],
    now_ms: i64,
) -> Option<StatusEntry> {
    if http_status != 409 || decided == Decided::Earlier {
        return None;
    }
    if let Ok(VariantAnswer {
        result,
        variant: Some(v),
    }) = serde_json::from_slice::<VariantAnswer>(body)
    {
        return (result == "sold_out")
            .then(|| learn_variant_sold_out(entry?, &v, now_ms))
            .flatten();
    }
    let new_state = match serde_json::from_slice::<ClaimReply>(body).ok()? {
        ClaimReply::SoldOut => CampaignState::SoldOut,
        ClaimReply::Ended => CampaignState::Ended,
        ClaimReply::Paused => CampaignState::Paused,
        _ => return None,
    };
    changed(entry?, now_ms, |status, variants| {
        if status.state == new_state {
            return false;
        }
        status.state = new_state;
        if new_state == CampaignState::SoldOut {
            status.remaining = 0;
            for v in variants.iter_mut() {
                v.remaining = 0;
            }
        }
        for v in variants.iter_mut() {
            v.state = flashgate_shared::api::variant_state(new_state, v.remaining);
        }
        true
    })
}

/// The entry `entry` of a campaign known to exist, with `change` made to a copy of its status
/// and variants, its body written anew, observed at `now_ms`. `None` when the campaign is not
/// known to exist or `change` returns false (nothing changes).
fn changed(
    entry: &StatusEntry,
    now_ms: i64,
    change: impl FnOnce(&mut CampaignStatus, &mut Vec<VariantStatus>) -> bool,
) -> Option<StatusEntry> {
    let Known::Found {
        status,
        queue,
        variants,
        ..
    } = &entry.known
    else {
        return None;
    };
    let (mut status, mut variants) = (status.clone(), variants.clone());
    if !change(&mut status, &mut variants) {
        return None;
    }
    let queue = queue.clone();
    let body = serde_json::to_string(&WithQueue {
        status: &status,
        queue: StatusQueueFields {
            queue: queue.clone(),
        },
        variants: &variants,
    })
    .ok()?;
    Some(StatusEntry {
        known: Known::Found {
            status,
            body,
            queue,
            variants,
        },
        fetched_at_ms: now_ms,
        reveal: entry.reveal,
    })
}

/// The origin answered a claim of variant `v` `sold_out` (decided now): that variant's cached
/// `remaining` becomes 0 and its state `sold_out`; the campaign's state stays (it is sold out
/// only when every variant is). `None` when nothing changes (no such variant, already so).
pub fn learn_variant_sold_out(entry: &StatusEntry, v: &str, now_ms: i64) -> Option<StatusEntry> {
    changed(entry, now_ms, |status, variants| {
        let Some(found) = variants.iter_mut().find(|x| x.id == v) else {
            return false;
        };
        if found.remaining == 0 && found.state == CampaignState::SoldOut {
            return false;
        }
        found.remaining = 0;
        found.state = flashgate_shared::api::variant_state(status.state, 0);
        true
    })
}

#[cfg(test)]
#[path = "status_tests.rs"]
pub(crate) mod tests;
