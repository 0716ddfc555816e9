//! What the capacity plan answers ([`super::plan`]): per kind of request its busiest second
//! and its total, the machines needed, the times, the queue and Redis memory. Serialised as
//! `flashgate plan --json` prints it.

use serde::Serialize;

use super::Inputs;

/// One kind of request or operation: its busiest second and its total over the sale.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rate {
    /// Count in the busiest one-second window (per second).
    pub peak_per_second: f64,
    /// Count over the whole sale.
    pub total: f64,
}

/// What the edge answers or passes on, per kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EdgePlan {
    /// Campaign status reads (the product page).
    pub status: Rate,
    /// Joins of the waiting room (taps, double taps included).
    pub joins: Rate,
    /// Waiting-room polls.
    pub polls: Rate,
    /// Claims answered `sold_out` at the edge.
    pub sold_out_answers: Rate,
    /// Claims forwarded to the origins.
    pub claims_forwarded: Rate,
    /// Edge cores at the busiest second, at the target utilisation.
    pub cores_needed: f64,
    /// Isolates the per-campaign figures assume.
    pub isolates: u64,
}

/// What the origins answer, per kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OriginPlan {
    /// Winning claims.
    pub winners: Rate,
    /// Claims answered `sold_out` by an origin.
    pub sold_out_answers: Rate,
    /// Other claim answers (replays of double taps, `in_progress`).
    pub other_claim_answers: Rate,
    /// Every claim reaching an origin.
    pub claims: Rate,
    /// Reports of the tickets the edge issued (one per isolate, campaign and second at most).
    pub join_reports: Rate,
    /// Presence reports from the edge.
    pub presence_reports: Rate,
    /// Status fetches of edge isolates.
    pub status_fetches: Rate,
    /// Busy origin cores at the busiest second.
    pub peak_busy_cores: f64,
    /// Origins of `cores_per_origin` cores at the target utilisation.
    pub origins_needed: u64,
}

/// Redis load and memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RedisPlan {
    /// Commands from the origins.
    pub ops: Rate,
    /// Busy Redis cores at the busiest second (all primaries together).
    pub peak_busy_cores: f64,
    /// Busy cores of the primary holding one campaign's queue (slot `{c}`: joins, presence,
    /// admission) at its busiest second. A primary runs its commands on one core: above 1 it
    /// cannot keep up, whatever `gate_shards` is (the queue does not shard).
    pub peak_queue_slot_busy_cores: f64,
    /// Bytes per queued visitor (her place and her presence entry).
    pub bytes_per_queued_visitor: f64,
    /// Bytes per winner (holder, stored reply, key stamp).
    pub bytes_per_winner: f64,
    /// Bytes of one campaign's fixed keys.
    pub bytes_per_campaign: f64,
    /// Bytes at the end of the sale, every variant.
    pub bytes_during_sale: f64,
    /// Bytes kept after the sale, until `kept_after_end_seconds` past the end.
    pub bytes_after_sale: f64,
    /// Seconds after the campaign's end the keys stay: hold + grace.
    pub kept_after_end_seconds: f64,
    /// Bytes once the grace has passed.
    pub bytes_after_grace: f64,
}

/// PostgreSQL load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PostgresPlan {
    /// Durable claims.
    pub claims: Rate,
    /// Grouped commits.
    pub commits: Rate,
    /// Claims per commit at the busiest second.
    pub claims_per_commit_at_peak: f64,
    /// Busy PostgreSQL cores at the busiest second.
    pub peak_busy_cores: f64,
}

/// When things happen, seconds from the start of the arrivals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Times {
    /// The first `sold_out` (every unit held); `None` when the crowd is smaller than the stock.
    pub sell_out_seconds: Option<f64>,
    /// Units back from unpaid holds.
    pub second_wave_units: f64,
    /// When the first of them comes back.
    pub second_wave_from_seconds: Option<f64>,
    /// When they are sold again; `None` when nobody is left to buy them.
    pub second_sell_out_seconds: Option<f64>,
    /// Seconds the model ran (the crowd's last request).
    pub modelled_seconds: f64,
}

/// The waiting room's queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueuePlan {
    /// Join → the poll that says `admitted`, median over the admitted.
    pub wait_p50_seconds: f64,
    /// The same, 95th percentile.
    pub wait_p95_seconds: f64,
    /// Most visitors waiting at once, every variant.
    pub peak_length: f64,
    /// Admission → claim (`ttl + poll / 2`).
    pub claim_delay_seconds: f64,
}

/// The plan: [`plan`]'s answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// What was planned for.
    pub inputs: Inputs,
    /// The edge's requests by kind and its cores.
    pub edge: EdgePlan,
    /// The origins' requests by kind and how many origins.
    pub origin: OriginPlan,
    /// Redis commands, cores and memory.
    pub redis: RedisPlan,
    /// PostgreSQL claims, commits and cores.
    pub postgres: PostgresPlan,
    /// Sell-out and second wave.
    pub times: Times,
    /// `None` without a waiting room.
    pub queue: Option<QueuePlan>,
    /// The calibration's `source`.
    pub calibration_source: String,
}
