//! The waiting room's wire types: the campaign option, the join and status replies, the queue
//! fields of the cached campaign status, and the header names.
//!
//! A customer joins (`POST /api/v1/campaigns/{id}/queue`, answered by the origin) and gets a
//! signed ticket with a sequence number (see [`crate::admission`]). The origin advances the
//! queue's `now_serving` at `admit_per_second`, never faster than units can still be won. A
//! poll (`GET /api/v1/campaigns/{id}/queue` with [`TICKET_HEADER`]) is answered at the edge
//! from the ticket and the cached status: `position = sequence - now_serving`, and once
//! `sequence <= now_serving` an admission token that claims carry in [`ADMISSION_HEADER`].

use serde::{Deserialize, Serialize};

pub mod access;
mod grants;
pub mod joins;
pub mod keys;
pub mod presence;
mod wave;
pub use grants::{coarsen_grants, Grant, MAX_GRANTS};
pub use wave::{
    sorted_returned, DEFAULT_PRESENCE_WINDOW_SECONDS, DEFAULT_SECOND_WAVE_TTL_SECONDS,
    MAX_SKIPPED_LISTED, SECOND_WAVE_RETRY_AFTER_S,
};

/// Header carrying the signed ticket on a queue poll.
pub const TICKET_HEADER: &str = "flashgate-ticket";
/// Header carrying the signed admission token on a claim.
pub const ADMISSION_HEADER: &str = "flashgate-admission";

/// Result code of a claim refused because its customer has not been admitted yet (429).
pub const QUEUED: &str = "queued";
/// Result code of a join on a campaign without a waiting room (409).
pub const NO_WAITING_ROOM: &str = "no_waiting_room";

/// Bounds of `admit_per_second` (customers admitted per second).
pub const ADMIT_PER_SECOND: std::ops::RangeInclusive<u32> = 1..=100_000;
/// Bounds of `prequeue_seconds` (one day at most).
pub const PREQUEUE_SECONDS: std::ops::RangeInclusive<u32> = 0..=86_400;
/// Bounds of `admission_ttl_seconds` (10 s to one hour).
pub const ADMISSION_TTL_SECONDS: std::ops::RangeInclusive<u32> = 10..=3_600;
/// Default `prequeue_seconds` when the option leaves it out.
pub const DEFAULT_PREQUEUE_SECONDS: u32 = 600;
/// Default `admission_ttl_seconds` when the option leaves it out.
pub const DEFAULT_ADMISSION_TTL_SECONDS: u32 = 120;
/// Bounds of `presence_window_seconds` (5 s to one hour).
pub const PRESENCE_WINDOW_SECONDS: std::ops::RangeInclusive<u32> = 5..=3_600;

/// Order of the customers who join after the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Queueing {
    /// Arrival order.
    #[default]
    Fifo,
    /// All drawn at random.
    Random,
}

/// The `waiting_room` option of a campaign:
/// `{"admit_per_second": 200, "queueing": "fifo", "prequeue_seconds": 600,
/// "admission_ttl_seconds": 120}`. Unknown fields are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct WaitingRoom {
    /// Customers admitted per second, [`ADMIT_PER_SECOND`].
    pub admit_per_second: u32,
    /// Order after the start (default `fifo`).
    #[serde(default)]
    pub queueing: Queueing,
    /// Joins in this many seconds before `starts_at` are shuffled at the start,
    /// [`PREQUEUE_SECONDS`] (default [`DEFAULT_PREQUEUE_SECONDS`]).
    #[serde(default = "default_prequeue")]
    pub prequeue_seconds: u32,
    /// An admission token is valid this many seconds after it is issued,
    /// [`ADMISSION_TTL_SECONDS`] (default [`DEFAULT_ADMISSION_TTL_SECONDS`]).
    #[serde(default = "default_ttl")]
    pub admission_ttl_seconds: u32,
    /// A ticket not seen for this many seconds (no poll reported by the edge; a fresh ticket
    /// counts as seen when it joined) is skipped by admission, [`PRESENCE_WINDOW_SECONDS`]
    /// (default [`DEFAULT_PRESENCE_WINDOW_SECONDS`]).
    #[serde(default = "default_window")]
    pub presence_window_seconds: u32,
    /// An admission's lifetime once the campaign has sold out once (the second wave), seconds,
    /// [`ADMISSION_TTL_SECONDS`] (default [`DEFAULT_SECOND_WAVE_TTL_SECONDS`]).
    #[serde(default = "default_second_wave_ttl")]
    pub second_wave_admission_ttl_seconds: u32,
    /// The challenge at the join, `none` (default), `pow` or `turnstile`
    /// ([`access::JoinAccess`]).
    #[serde(default)]
    pub challenge: access::ChallengeKind,
    /// Difficulty of a `pow` challenge, bits, [`access::POW_DIFFICULTY`] (default
    /// [`crate::pow::DEFAULT_DIFFICULTY`]).
    #[serde(default = "default_difficulty")]
    pub pow_difficulty: u8,
    /// True: a join whose challenge provider times out or errs gets a normal ticket (default
    /// false: it counts as failed).
    #[serde(default)]
    pub challenge_fail_open: bool,
    /// What a failed join gets: `infinite_queue` (default) or `forbidden` (403).
    #[serde(default)]
    pub challenge_failure: access::ChallengeFailure,
    /// True: a join needs the shop's signed invite ([`crate::invite`]).
    #[serde(default)]
    pub invite_only: bool,
}

fn default_difficulty() -> u8 {
    crate::pow::DEFAULT_DIFFICULTY
}

fn default_window() -> u32 {
    DEFAULT_PRESENCE_WINDOW_SECONDS
}

fn default_second_wave_ttl() -> u32 {
    DEFAULT_SECOND_WAVE_TTL_SECONDS
}

fn default_prequeue() -> u32 {
    DEFAULT_PREQUEUE_SECONDS
}

fn default_ttl() -> u32 {
    DEFAULT_ADMISSION_TTL_SECONDS
}

impl WaitingRoom {
    /// The access options ([`access::JoinAccess`]), as the public status carries them.
    pub fn access(&self) -> access::JoinAccess {
        access::JoinAccess {
            challenge: self.challenge,
            pow_difficulty: self.pow_difficulty,
            challenge_fail_open: self.challenge_fail_open,
            challenge_failure: self.challenge_failure,
            invite_only: self.invite_only,
        }
    }

    /// Checks the bounds; returns a human-readable message for the first broken rule (the
    /// origin answers it as 422 `validation_failed`).
    pub fn validate(&self) -> Result<(), String> {
        let checks = [
            ("admit_per_second", self.admit_per_second, &ADMIT_PER_SECOND),
            ("prequeue_seconds", self.prequeue_seconds, &PREQUEUE_SECONDS),
            (
                "admission_ttl_seconds",
                self.admission_ttl_seconds,
                &ADMISSION_TTL_SECONDS,
            ),
            (
                "presence_window_seconds",
                self.presence_window_seconds,
                &PRESENCE_WINDOW_SECONDS,
            ),
            (
                "second_wave_admission_ttl_seconds",
                self.second_wave_admission_ttl_seconds,
                &ADMISSION_TTL_SECONDS,
            ),
        ];
        for (name, value, range) in checks {
            if !range.contains(&value) {
                return Err(format!(
                    "waiting_room.{name} must be between {} and {}",
                    range.start(),
                    range.end()
                ));
            }
        }
        self.access().validate()
    }
}

/// Where a customer stands in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum QueueState {
    /// In line (also before the start).
    Waiting,
    /// Admitted: claims are let through with the admission token.
    Admitted,
    /// No unit left: nobody waits for a unit that no longer exists.
    SoldOut,
    /// The campaign is over.
    Ended,
    /// A manager paused the campaign or its admission.
    Paused,
    /// Admitted, but the admission expired without a claim (its expiry is fixed when it is
    /// granted, [`QueueStatus::grant_ms`]): claims are refused 403 and the unit went to the
    /// next customer in line.
    Lapsed,
}

/// The honest outlook of a waiting customer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outlook {
    /// A unit may well be left at this position.
    Likely,
    /// The position is far beyond the remaining stock (see `docs/WAITING-ROOM.md`).
    Unlikely,
    /// Sold out for now, but units may come back until `held_until`: holds are outstanding,
    /// or a unit is on its way back to the gate (keep polling, slowly).
    MayReturn,
    /// Sold out for good: every unit is sold for good, none held or on its way back (stop
    /// polling).
    Final,
}

/// Join reply (`POST /api/v1/campaigns/{id}/queue`, 201 the first time, 200 after that).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JoinReply {
    /// The signed ticket, opaque to clients (see [`crate::admission`]).
    pub ticket: String,
    /// Customers ahead in line plus one (1 = next); 0 once admitted.
    pub position: u64,
    /// Estimated wait, seconds.
    pub eta_seconds: u64,
    /// Queue state.
    pub state: QueueState,
}

/// Status reply (`GET /api/v1/campaigns/{id}/queue` with [`TICKET_HEADER`]), answered by
/// the edge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatusReply {
    /// `sequence - now_serving`, 0 once admitted.
    pub position: u64,
    /// `position / admit_per_second` rounded up, plus the time to the start when scheduled;
    /// seconds.
    pub eta_seconds: u64,
    /// Queue state.
    pub state: QueueState,
    /// True when `state` is `admitted`.
    pub admitted: bool,
    /// The admission token, only when admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_token: Option<String>,
    /// While waiting: `likely` or `unlikely`; when sold out: `may_return` or `final`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outlook: Option<Outlook>,
    /// Only when sold out with `outlook: may_return`: by when units may come back (RFC 3339
    /// UTC), the status's `queue.held_until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_until: Option<chrono::DateTime<chrono::Utc>>,
    /// On a campaign with variants, each one as the edge's cached status has it (`remaining`
    /// approximate within the status's staleness bound; `state` `sold_out` when none is left),
    /// so the waiting page can say "size 42 sold out" and offer the others; the admission token
    /// lets its holder claim any of them. Absent on a campaign without variants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<crate::api::VariantStatus>,
}

/// The queue fields of the public campaign status (`GET /api/v1/campaigns/{id}`), carried
/// under the key `queue`; absent when the campaign has no waiting room. The status's own
/// `state` and `remaining` complete them (stock awareness).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueueStatus {
    /// Highest sequence number admitted so far (0 = nobody yet).
    pub now_serving: u64,
    /// Customers admitted per second.
    pub admit_per_second: u32,
    /// Lifetime of an admission token, seconds.
    pub admission_ttl_seconds: u32,
    /// True while a manager has paused admission.
    #[serde(default)]
    pub paused: bool,
    /// Customers admitted so far (0 = nobody yet; absent = 0).
    #[serde(default)]
    pub admitted: u64,
    /// Sequence numbers drawn at random in the low block `[1, RANDOM_BLOCK)` so far (the
    /// shuffled prequeue, and every join of a `random` queue); absent = 0.
    #[serde(default)]
    pub drawn: u64,
    /// Customers admitted within `admission_ttl_seconds` who have not claimed yet (absent =
    /// 0): units are set aside for them, so nobody else is admitted for those units until
    /// they claim or their admissions lapse.
    #[serde(default)]
    pub unclaimed: u64,
    /// When the oldest of the `unclaimed` admissions lapses (its admission time plus
    /// `admission_ttl_seconds`), Unix ms; absent = 0 (none).
    #[serde(default)]
    pub first_lapse_ms: i64,
    /// When the newest of the `unclaimed` admissions lapses, Unix ms; absent = 0 (none).
    #[serde(default)]
    pub last_lapse_ms: i64,
    /// When the admissions were granted: points `{"n", "at_ms"}` in increasing `n`, at most
    /// [`MAX_GRANTS`], covering the admissions of the last `admission_ttl_seconds` plus one
    /// older floor point ([`QueueStatus::grant_ms`]). Absent from an origin that does not keep
    /// them: an admission token then expires `admission_ttl_seconds` after each poll that
    /// mints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<Vec<Grant>>,
    /// Sequence numbers at or below `now_serving` that admission passed while their tickets
    /// were away (not seen within `presence_window_seconds`), not admitted since: increasing,
    /// at most [`MAX_SKIPPED_LISTED`] (the lowest); absent = none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<u64>,
    /// Skipped tickets admitted after they came back, within the admission TTL: `{"n",
    /// "at_ms"}` (admitted at `at_ms`, Unix ms), in increasing `n`; absent = none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub returned: Vec<Grant>,
    /// By when units may still come back to the gate (RFC 3339 UTC), on a campaign that is
    /// active or sold out and sells with holds: the latest `held_until` of its outstanding
    /// holds, and at least one hold from now while PostgreSQL counts a unit left (a unit the
    /// gate gave out whose hold is not written yet, or one counted back that the gate has not
    /// got yet). Absent when nothing can come back: once sold out, the sale is over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_until: Option<chrono::DateTime<chrono::Utc>>,
    /// Tickets in line (issued, reported, not passed by admission yet); absent = 0.
    #[serde(default)]
    pub line: u64,
    /// Of `line`, those before the edge's arrival keys (drawn numbers, origin arrivals).
    #[serde(default)]
    pub line_before_keys: u64,
    /// Points of the line of arrival keys ([`keys::LineMark`], increasing, at most
    /// [`keys::MAX_LINE_MARKS`]), from which the edge reckons their positions; absent = none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub line_marks: Vec<keys::LineMark>,
    /// How joins after the start are ordered (the edge issues their tickets).
    #[serde(default)]
    pub queueing: Queueing,
    /// Joins this many seconds before `starts_at` draw their numbers; earlier ones are refused.
    #[serde(default)]
    pub prequeue_seconds: u32,
    /// Who may join: the challenge and invite options (absent = none of them).
    #[serde(default, skip_serializing_if = "access::JoinAccess::is_open")]
    pub access: access::JoinAccess,
}

/// Sequence numbers below this are drawn at random (the prequeue, and every join of a `random`
/// queue); arrivals of a `fifo` queue after the start get `RANDOM_BLOCK + 1`, `+ 2`, ...
/// (2^40: draws collide rarely, and every number stays exact in a JSON double).
pub const RANDOM_BLOCK: u64 = 1 << 40;

impl QueueStatus {
    /// Customers ahead of sequence `seq` plus one (1 = next); 0 once admitted
    /// (`seq <= now_serving`).
    ///
    /// Exact for arrival-ordered numbers (`seq >= RANDOM_BLOCK`): the drawn customers not yet
    /// admitted come first. Estimated for a drawn number: the drawn customers still waiting are
    /// spread uniformly over `(now_serving, RANDOM_BLOCK)`, so about
    /// `(seq - now_serving) / (RANDOM_BLOCK - now_serving)` of them are at or before `seq`
    /// (at least 1). Without drawn numbers, `seq - now_serving`.
    pub fn position(&self, seq: u64) -> u64 {
        if seq <= self.now_serving {
            return 0;
        }
        if seq >= keys::EDGE_BLOCK {
            return self.keyed_position(seq);
        }
        let drawn_waiting = self.drawn.saturating_sub(self.admitted);
        if self.now_serving >= RANDOM_BLOCK || (seq < RANDOM_BLOCK && self.drawn == 0) {
            seq - self.now_serving
        } else if seq >= RANDOM_BLOCK {
            drawn_waiting + (seq - RANDOM_BLOCK)
        } else {
            let ahead = u128::from(seq - self.now_serving) * u128::from(drawn_waiting)
                / u128::from(RANDOM_BLOCK - self.now_serving);
            (ahead as u64).clamp(1, drawn_waiting.max(1))
        }
    }

    /// [`QueueStatus::position`] of a ticket whose number is `seq` and which carries
    /// `drawn_waiting_at_issue` ([`crate::admission::Ticket::drawn_waiting_at_issue`], ≥ 1
    /// for a drawn number, 0 for an arrival number or a ticket issued before it existed). When
    /// `seq` is a drawn number still waiting but this status knows of no drawn customer still
    /// waiting, the status is older than her draw (an edge's cached status from before her
    /// join): the ticket's count stands in for it, so the estimate is the one her join
    /// answered, never `seq − now_serving` (about 2^40).
    pub fn position_of(&self, seq: u64, drawn_waiting_at_issue: u64) -> u64 {
        let stale = drawn_waiting_at_issue > 0
            && seq < RANDOM_BLOCK
            && seq > self.now_serving
            && self.drawn.saturating_sub(self.admitted) == 0;
        if !stale {
            return self.position(seq);
        }
        let known = QueueStatus {
            drawn: self.admitted.saturating_add(drawn_waiting_at_issue),
            grants: None,
            skipped: Vec::new(),
            returned: Vec::new(),
            ..self.clone()
        };
        known.position(seq)
    }

    /// The queue state of a customer at `position` ([`QueueStatus::position`]) on a campaign in
    /// `campaign` state: `sold_out`, `ended` or `paused` when the campaign is (or admission is
    /// paused); on an active campaign `admitted` at position 0, else `waiting`; `waiting`
    /// before the start.
    pub fn state(&self, campaign: crate::api::CampaignState, position: u64) -> QueueState {
        use crate::api::CampaignState as C;
        match campaign {
            C::SoldOut => QueueState::SoldOut,
            C::Ended => QueueState::Ended,
            C::Paused => QueueState::Paused,
            _ if self.paused => QueueState::Paused,
            C::Active if position == 0 => QueueState::Admitted,
            C::Active | C::Scheduled => QueueState::Waiting,
        }
    }

    /// Estimated wait in seconds at `now_ms` (Unix ms) of a customer at `position` on a
    /// campaign with `remaining` units; 0 unless `waiting`. The larger of two waits, plus the
    /// time to the start (`to_start_ms`, milliseconds, rounded up to seconds):
    /// - the rate: `ceil(position / admit_per_second)`;
    /// - the stock: admission never goes past `remaining − unclaimed` units, so a position
    ///   beyond them waits for `position − (remaining − unclaimed)` of the `unclaimed`
    ///   admissions to lapse: until the first lapse for the first one, until the last lapse
    ///   for more (never earlier than the true lapse; it may be later when admissions were
    ///   spread over time). An admission that ends in a claim frees no unit, so this assumes
    ///   that the admitted who have not claimed yet will not.
    ///
    /// Read from a status at most one status TTL old, and admission follows a lapse within one
    /// admitting tick, so the estimate is never more than one status TTL plus one tick too
    /// optimistic for the reason of the stock (docs/WAITING-ROOM.md).
    pub fn eta_seconds(
        &self,
        state: QueueState,
        position: u64,
        remaining: u64,
        to_start_ms: i64,
        now_ms: i64,
    ) -> u64 {
        if state != QueueState::Waiting {
            return 0;
        }
        let by_rate = position.div_ceil(u64::from(self.admit_per_second.max(1)));
        let free = remaining.saturating_sub(self.unclaimed);
        let by_stock = if position > free && self.unclaimed > 0 {
            let lapse = if position - free == 1 {
                self.first_lapse_ms
            } else {
                self.last_lapse_ms
            };
            (lapse.saturating_sub(now_ms).max(0) as u64).div_ceil(1000)
        } else {
            0
        };
        by_rate
            .max(by_stock)
            .saturating_add((to_start_ms.max(0) as u64).div_ceil(1000))
    }
}

/// The waiting room as `GET /admin/v1/campaigns[/{id}]` shows it (key `queue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueueView {
    /// Customers who joined and are not admitted yet.
    pub length: u64,
    /// Highest sequence number admitted so far (0 = nobody yet).
    pub now_serving: u64,
    /// Customers admitted so far.
    pub admitted: u64,
    /// Admitted within `admission_ttl_seconds` and not yet claimed.
    pub admitted_unclaimed: u64,
    /// Customers admitted per second.
    pub admit_per_second: u32,
    /// True while a manager has paused admission.
    pub paused: bool,
}

/// The part of a campaign status body the waiting room reads: `{"queue": {...}}` (other
/// fields ignored). Parse it from the same bytes as the campaign status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatusQueueFields {
    /// `None`: no waiting room; the campaign behaves as without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueStatus>,
}

#[cfg(test)]
mod tests;
