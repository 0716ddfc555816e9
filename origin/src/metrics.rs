//! Counters exposed at `GET /metrics` in the Prometheus text format. Plain atomics: the origin
//! needs a handful of counters, not a metrics framework.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Request and outcome counters since start.
#[derive(Default)]
pub struct Metrics {
    /// `GET /api/v1/campaigns/{id}` requests.
    pub status_requests: AtomicU64,
    /// `POST /api/v1/campaigns/{id}/claims` requests that reached the handler.
    pub claim_requests: AtomicU64,
    /// Claims answered `sold_out` from this origin's memory (no Redis, no PostgreSQL).
    pub sold_out_local: AtomicU64,
    /// Claims answered `sold_out` by the Redis gate.
    pub sold_out_gate: AtomicU64,
    /// Claims committed.
    pub claims_committed: AtomicU64,
    /// Replies replayed for a repeated idempotency key.
    pub replays: AtomicU64,
}

impl Metrics {
    /// Adds one to a counter.
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters in the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, help, v) in [
            (
                "flashgate_status_requests_total",
                "Campaign status requests.",
                &self.status_requests,
            ),
            (
                "flashgate_claim_requests_total",
                "Claim requests.",
                &self.claim_requests,
            ),
            (
                "flashgate_sold_out_local_total",
                "Claims answered sold_out from memory.",
                &self.sold_out_local,
            ),
            (
                "flashgate_sold_out_gate_total",
                "Claims answered sold_out by the Redis gate.",
                &self.sold_out_gate,
            ),
            (
                "flashgate_claims_committed_total",
                "Claims committed to PostgreSQL.",
                &self.claims_committed,
            ),
            (
                "flashgate_idempotent_replays_total",
                "Claim replies replayed for a repeated idempotency key.",
                &self.replays,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Ordering::Relaxed)
            );
        }
        out
    }
}
