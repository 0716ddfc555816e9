//! The waiting room at the edge, in plain Rust: a queue poll answered from the ticket and the
//! cached status, and the admission check of claims on a campaign with a waiting room.
//!
//! The status reply follows from the ticket's sequence number and the cached `queue` fields
//! ([`QueueStatus::position`], [`QueueStatus::state`], [`QueueStatus::eta_seconds`]):
//! `position = sequence - now_serving` for arrival-ordered numbers (an estimate for numbers
//! drawn at random), `eta_seconds = ceil(position / admit_per_second)` (plus the time to
//! `starts_at` while the campaign is scheduled), admitted when `sequence <= now_serving` on an
//! active campaign. It is stock-aware: a `sold_out` status
//! answers `sold_out` to every ticket, and a waiting position beyond
//! [`UNLIKELY_FACTOR`] × `remaining` gets the outlook `unlikely`.

use crate::decide::Answer;
use crate::status::StatusEntry;
use flashgate_shared::admission::{self, AdmissionError, Ticket};
use flashgate_shared::api::{codes, CampaignStatus};
use flashgate_shared::queue::keys::{admit_lag_left_seconds, arrival_key};
use flashgate_shared::queue::{
    Outlook, QueueState, QueueStatus, StatusReply, NO_WAITING_ROOM, QUEUED,
    SECOND_WAVE_RETRY_AFTER_S,
};

/// A waiting position is `unlikely` to get a unit when it is more than this many times the
/// remaining stock: even if every other person ahead walked away, there would be nothing left.
pub const UNLIKELY_FACTOR: u64 = 2;
/// Longest `Retry-After` of a queue answer, seconds.
pub const MAX_RETRY_AFTER_S: u32 = 30;
/// `Retry-After` of a claim refused 429 `queued` (no admission token), seconds.
pub const QUEUED_RETRY_AFTER_S: u32 = 5;
/// `Retry-After` while admission is paused, seconds. One second: nobody knows when admission
/// resumes, and the edge may still say paused for up to one status TTL after it did; a
/// customer sent away for longer would come back to find herself admitted together with
/// everyone admitted meanwhile, and those claims would all reach the origin at once (see
/// `docs/WAITING-ROOM.md`, "The bound on claims at the origin"). The polls cost the origin
/// nothing.
pub const PAUSED_RETRY_AFTER_S: u32 = 1;

/// The edge's answer to a queue poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poll {
    /// The JSON reply (`admission_token` set when admitted).
    pub reply: StatusReply,
    /// `Retry-After`, 1..=[`MAX_RETRY_AFTER_S`] seconds.
    pub retry_after_s: u32,
}

/// The error answers of the waiting room.
fn refusal(e: AdmissionError, what: &str) -> Answer {
    let code = if e.http_status() == 400 {
        codes::INVALID_REQUEST
    } else {
        codes::FORBIDDEN
    };
    Answer::error(e.http_status(), code, &e.message(what))
}

/// 409 `{"result":"no_waiting_room","message":…}`: a queue request on a campaign without one.
pub fn no_waiting_room(id: &str) -> Answer {
    Answer::error(
        409,
        NO_WAITING_ROOM,
        &format!("campaign {id} has no waiting room"),
    )
}

/// Checks the ticket of a poll on campaign `id`: 400 `invalid_request` when missing or
/// malformed, 403 `forbidden` when forged or for another campaign.
pub fn check_ticket(secret: &[u8], ticket: Option<&str>, id: &str) -> Result<Ticket, Answer> {
    let Some(t) = ticket.filter(|t| !t.trim().is_empty()) else {
        return Err(Answer::error(
            400,
            codes::INVALID_REQUEST,
            "missing Flashgate-Ticket header (or ticket query parameter)",
        ));
    };
    admission::open_ticket(secret, t, id).map_err(|e| refusal(e, "ticket"))
}

/// Tickets this isolate has checked, so that a customer's repeated polls skip the base64,
/// HMAC and JSON of her ticket: a hit is only the very same ticket string, checked with the
/// isolate's one secret, and its campaign is compared again on every use. Holds at most
/// `capacity` tickets and starts over when full.
#[derive(Debug, Default)]
pub struct TicketCache {
    checked: std::collections::HashMap<String, Ticket>,
    capacity: usize,
}

impl TicketCache {
    /// An empty cache holding at most `capacity` tickets (0 disables it).
    pub fn new(capacity: usize) -> Self {
        TicketCache {
            checked: std::collections::HashMap::new(),
            capacity,
        }
    }

    /// Same result as [`check_ticket`] for the same secret, ticket and campaign.
    pub fn check(
        &mut self,
        secret: &[u8],
        ticket: Option<&str>,
        id: &str,
    ) -> Result<Ticket, Answer> {
        if let Some(t) = ticket.and_then(|raw| self.checked.get(raw)) {
            if t.place.campaign == id {
                return Ok(t.clone());
            }
        }
        let t = check_ticket(secret, ticket, id)?;
        if let (Some(raw), true) = (ticket, self.capacity > 0) {
            if self.checked.len() >= self.capacity {
                self.checked.clear();
            }
            self.checked.insert(raw.to_string(), t.clone());
        }
        Ok(t)
    }
}

/// The campaign and its waiting room from a cached entry. Errors: the cached 404 of an
/// unknown campaign, 409 `no_waiting_room`.
pub fn waiting_room(entry: &StatusEntry) -> Result<(&CampaignStatus, &QueueStatus), Answer> {
    let Some((status, queue)) = entry.found() else {
        return Err(Answer {
            status: 404,
            body: entry.body().to_string(),
            retry_after_s: None,
        });
    };
    let Some(queue) = queue else {
        return Err(no_waiting_room(&status.id));
    };
    Ok((status, queue))
}

/// Tickets ahead of arrival key `seq` that the origin's line did not count when it read the
/// status (about `as_of_ms`): the more of the estimate from the recent arrival rate
/// ([`QueueStatus::unreported_ahead`]) and this isolate's own arrival keys issued since
/// ([`crate::joins::Issued::recent_keys`], increasing), which it knows exactly.
fn unseen_ahead(queue: &QueueStatus, seq: u64, as_of_ms: i64, own_recent: &[u64]) -> u64 {
    let known = arrival_key(queue.line_known_until_ms(as_of_ms).max(0), 0);
    let own = own_recent
        .partition_point(|&k| k < seq)
        .saturating_sub(own_recent.partition_point(|&k| k < known));
    queue
        .unreported_ahead(seq, as_of_ms)
        .max(u64::try_from(own).unwrap_or(0))
}

/// Answers a poll with a checked `ticket` from the cached `entry` at `now_ms`, as far as the
/// entry's reveal point ([`crate::reveal`]) shows the admissions; `own_recent` are the arrival
/// keys this isolate issued lately (see [`unseen_ahead`]). Errors: the cached 404 of
/// an unknown campaign, 409 `no_waiting_room`. Mints the admission token with `secret` when
/// the customer is admitted.
pub fn poll(
    entry: &StatusEntry,
    ticket: &Ticket,
    secret: &[u8],
    now_ms: i64,
    own_recent: &[u64],
) -> Result<Poll, Answer> {
    let (status, known) = waiting_room(entry)?;
    // What this isolate has revealed of the admissions so far (spread at the admit rate).
    let queue = &entry
        .reveal
        .map_or(known.clone(), |r| r.visible(known, now_ms));
    let seq = ticket.place.sequence;
    // Passed while she was away and not admitted since: next in line once she is seen again.
    let skipped = seq <= queue.now_serving && queue.is_skipped(seq);
    // The arrivals ahead of her that the origin had not counted when it read the status
    // (a join in a crowd, before the reports of the last second arrived).
    let position = if skipped {
        1
    } else {
        queue
            .position_of(seq, ticket.drawn_waiting_at_issue)
            .saturating_add(unseen_ahead(queue, seq, entry.fetched_at_ms, own_recent))
    };
    // The admission's expiry is fixed when it is granted (the status's grant timeline): a
    // poll never renews it, and once it has passed the unit is the next customer's.
    let expires_at_s = queue.admission_expiry_s(seq, now_ms);
    let state = match queue.state(status.state, position) {
        QueueState::Admitted if now_ms.div_euclid(1000) >= expires_at_s => QueueState::Lapsed,
        state => state,
    };
    let to_start_ms = status.starts_at.timestamp_millis().saturating_sub(now_ms);
    let remaining = u64::try_from(status.remaining).unwrap_or(0);
    // Admission does not pass an arrival key until its report is in (`ADMIT_LAG_MS`).
    let eta_seconds = match queue.eta_seconds(state, position, remaining, to_start_ms, now_ms) {
        0 => 0,
        eta => eta.max(admit_lag_left_seconds(seq, now_ms)),
    };
    let outlook = match state {
        QueueState::Waiting if position > remaining.saturating_mul(UNLIKELY_FACTOR) => {
            Some(Outlook::Unlikely)
        }
        QueueState::Waiting => Some(Outlook::Likely),
        QueueState::SoldOut => Some(queue.sold_out_outlook()),
        _ => None,
    };
    let held_until = queue
        .held_until
        .filter(|_| outlook == Some(Outlook::MayReturn));
    let admitted = state == QueueState::Admitted;
    let retry_after_s = match state {
        QueueState::Waiting => clamp_retry(eta_seconds / 2),
        QueueState::Admitted => clamp_retry(u64::from(queue.admission_ttl_seconds / 2)),
        QueueState::Paused => PAUSED_RETRY_AFTER_S,
        QueueState::SoldOut if held_until.is_some() => SECOND_WAVE_RETRY_AFTER_S,
        QueueState::SoldOut | QueueState::Ended | QueueState::Lapsed => MAX_RETRY_AFTER_S,
    };
    let admission_token =
        admitted.then(|| admission::mint_admission_until(secret, ticket, expires_at_s));
    Ok(Poll {
        reply: StatusReply {
            position: if admitted || state == QueueState::Lapsed {
                0
            } else {
                position
            },
            eta_seconds,
            state,
            admitted,
            admission_token,
            outlook,
            held_until,
        },
        retry_after_s,
    })
}

/// `Retry-After` in 1..=[`MAX_RETRY_AFTER_S`] seconds.
fn clamp_retry(s: u64) -> u32 {
    u32::try_from(s.clamp(1, u64::from(MAX_RETRY_AFTER_S))).unwrap_or(MAX_RETRY_AFTER_S)
}

/// How long after its expiry a genuine admission token still carries a claim to the origin,
/// seconds: long enough for a client to retry a claim whose reply it lost, short enough that a
/// token does not become a standing pass. Only the recorded answer of an already decided claim
/// comes back (the origin refuses a new key 403), so this bounds load, not correctness.
pub const REPLAY_GRACE_S: i64 = 600;
/// Claims with an expired admission token forwarded per customer per second (the bucket of
/// [`crate::limit::Action::Replay`]).
pub const REPLAY_PER_S: u32 = 1;

/// What a claim's admission token lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// A valid token: the claim goes to the origin.
    Now,
    /// A genuine token (signed, this customer's and campaign's) that expired less than
    /// [`REPLAY_GRACE_S`] ago: the claim may only be a retry of a decided one, which the origin
    /// answers from its record (403 there for a new key). Forwarded at most [`REPLAY_PER_S`]
    /// per customer per second.
    ReplayOnly,
}

/// 429 `{"result":"queued"}` + `Retry-After: retry_after_s`.
fn queued(retry_after_s: u32) -> Answer {
    Answer {
        status: 429,
        body: format!(r#"{{"result":"{QUEUED}"}}"#),
        retry_after_s: Some(retry_after_s),
    }
}

/// The answer to an admitted claim that the isolate's forwarding pace refused: 429
/// `{"result":"queued"}` + `Retry-After` (whole seconds until the pace lets one more through,
/// at least 1). An isolate forwards the claims of a campaign with a waiting room through a
/// token bucket of `admit_per_second` tokens per second and one second's burst
/// ([`crate::limit::Action::Forward`], keyed by campaign), so in any one-second window it
/// forwards at most `2 × admit_per_second` of them, however the claims bunch up (after a
/// stall of the machine, say). The admission token stays valid; the customer claims again
/// after the delay.
pub fn paced(retry_after_s: u32) -> Answer {
    queued(retry_after_s.max(1))
}

/// The admission rate of this cached campaign's waiting room (customers per second); `None`
/// without one.
pub fn admit_rate(entry: Option<&StatusEntry>) -> Option<u32> {
    entry
        .and_then(StatusEntry::found)
        .and_then(|(_, q)| q.map(|q| q.admit_per_second))
}

/// True when claims on this cached campaign need an admission token.
pub fn has_waiting_room(entry: Option<&StatusEntry>) -> bool {
    admit_rate(entry).is_some()
}

/// Checks the admission token of a checked claim by `customer` on campaign `id`: 429
/// `{"result":"queued"}` + `Retry-After` without one, 400 `invalid_request` when malformed,
/// 403 `forbidden` when forged, another customer's or campaign's, or expired more than
/// [`REPLAY_GRACE_S`] ago; [`Admitted::ReplayOnly`] when expired within it.
pub fn check_claim_admission(
    secret: &[u8],
    token: Option<&str>,
    id: &str,
    customer: &str,
    now_ms: i64,
) -> Result<Admitted, Answer> {
    let Some(token) = token.filter(|t| !t.trim().is_empty()) else {
        return Err(queued(QUEUED_RETRY_AFTER_S));
    };
    let a = admission::open_admission(secret, token, id, customer)
        .map_err(|e| refusal(e, "admission token"))?;
    let now_s = now_ms.div_euclid(1000);
    if now_s < a.expires_at_s {
        Ok(Admitted::Now)
    } else if now_s.saturating_sub(a.expires_at_s) < REPLAY_GRACE_S {
        Ok(Admitted::ReplayOnly)
    } else {
        Err(refusal(AdmissionError::Expired, "admission token"))
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "queue_wave_tests.rs"]
mod wave_tests;
