//! Gift fulfilment metrics, appended to `GET /metrics` (Prometheus text format): the advisory
//! lock wait (a histogram in seconds), replays (the fast path and after the lock), grants,
//! refusals, ledger refusals (layer 4), provider errors and retries, deliveries, and the
//! outbox lag (age of the oldest pending provider call, in seconds, as of the last relay pass).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the lock-wait histogram buckets, in microseconds.
pub const LOCK_WAIT_BUCKETS_US: [u64; 14] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 5_000_000,
];

/// Counters since start.
#[derive(Default)]
pub struct GiftMetrics {
    lock_wait_buckets: [AtomicU64; LOCK_WAIT_BUCKETS_US.len()],
    lock_wait_count: AtomicU64,
    lock_wait_sum_us: AtomicU64,
    replays_fast: AtomicU64,
    replays_locked: AtomicU64,
    granted: AtomicU64,
    refused: AtomicU64,
    ledger_refused: AtomicU64,
    provider_errors: AtomicU64,
    provider_retries: AtomicU64,
    delivered: AtomicU64,
    failed: AtomicU64,
    outbox_lag_ms: AtomicU64,
    outbox_pending: AtomicU64,
}

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl GiftMetrics {
    /// One advisory lock acquired after waiting `d`.
    pub fn lock_waited(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        for (bound, bucket) in LOCK_WAIT_BUCKETS_US.iter().zip(&self.lock_wait_buckets) {
            if us <= *bound {
                inc(bucket);
            }
        }
        inc(&self.lock_wait_count);
        self.lock_wait_sum_us.fetch_add(us, Ordering::Relaxed);
    }
    /// A recorded reply sent by the fast path (no lock, no write).
    pub fn replay_fast(&self) {
        inc(&self.replays_fast)
    }
    /// A recorded reply found after the lock (the request ahead had just committed it).
    pub fn replay_locked(&self) {
        inc(&self.replays_locked)
    }
    /// A grant committed.
    pub fn granted(&self) {
        inc(&self.granted)
    }
    /// A refusal (`cap_reached`, `not_in_segment`, `campaign_not_active`).
    pub fn refused(&self) {
        inc(&self.refused)
    }
    /// The ledger's uniqueness refused a grant that layers 1–3 let through.
    pub fn ledger_refused(&self) {
        inc(&self.ledger_refused)
    }
    /// A provider call that failed (timeout, 5xx, refusal, transport error).
    pub fn provider_error(&self) {
        inc(&self.provider_errors)
    }
    /// A failed provider call scheduled again.
    pub fn provider_retry(&self) {
        inc(&self.provider_retries)
    }
    /// A fulfilment marked delivered.
    pub fn delivered(&self) {
        inc(&self.delivered)
    }
    /// A fulfilment marked failed after its last attempt.
    pub fn failed(&self) {
        inc(&self.failed)
    }
    /// The outbox as the last relay pass saw it: pending rows and the oldest one's age.
    pub fn outbox_seen(&self, pending: u64, oldest_age: Duration) {
        self.outbox_pending.store(pending, Ordering::Relaxed);
        let ms = u64::try_from(oldest_age.as_millis()).unwrap_or(u64::MAX);
        self.outbox_lag_ms.store(ms, Ordering::Relaxed);
    }

    /// Replays (fast path plus after the lock) over all fulfilment requests that were
    /// answered with a grant or a replay; 0 before any.
    pub fn replay_rate(&self) -> f64 {
        let replays =
            self.replays_fast.load(Ordering::Relaxed) + self.replays_locked.load(Ordering::Relaxed);
        let all = replays + self.granted.load(Ordering::Relaxed);
        if all == 0 {
            0.0
        } else {
            replays as f64 / all as f64
        }
    }

    /// The metrics in the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::new();
        let h = "flashgate_gift_lock_wait_seconds";
        let _ = writeln!(
            out,
            "# HELP {h} Wait for the (campaign, subscriber) advisory lock.\n# TYPE {h} histogram"
        );
        for (bound, bucket) in LOCK_WAIT_BUCKETS_US.iter().zip(&self.lock_wait_buckets) {
            let le = *bound as f64 / 1e6;
            let _ = writeln!(out, "{h}_bucket{{le=\"{le}\"}} {}", get(bucket));
        }
        let count = get(&self.lock_wait_count);
        let _ = writeln!(out, "{h}_bucket{{le=\"+Inf\"}} {count}");
        let sum = get(&self.lock_wait_sum_us) as f64 / 1e6;
        let _ = writeln!(out, "{h}_sum {sum}\n{h}_count {count}");
        for (name, help, v) in [
            (
                "flashgate_gift_replays_fast_total",
                "Fulfilment replies replayed by the key fast path.",
                &self.replays_fast,
            ),
            (
                "flashgate_gift_replays_locked_total",
                "Fulfilment replies replayed after the lock.",
                &self.replays_locked,
            ),
            (
                "flashgate_gift_grants_total",
                "Gifts granted.",
                &self.granted,
            ),
            (
                "flashgate_gift_refusals_total",
                "Fulfilments refused with a reason code.",
                &self.refused,
            ),
            (
                "flashgate_gift_ledger_refusals_total",
                "Grants refused by the ledger's uniqueness.",
                &self.ledger_refused,
            ),
            (
                "flashgate_gift_provider_errors_total",
                "Provider calls that failed.",
                &self.provider_errors,
            ),
            (
                "flashgate_gift_provider_retries_total",
                "Provider calls scheduled again.",
                &self.provider_retries,
            ),
            (
                "flashgate_gift_delivered_total",
                "Fulfilments delivered by the provider.",
                &self.delivered,
            ),
            (
                "flashgate_gift_failed_total",
                "Fulfilments failed after their last attempt.",
                &self.failed,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                get(v)
            );
        }
        let _ = writeln!(
            out,
            "# HELP flashgate_gift_replay_ratio Replays over grants plus replays.\n# TYPE flashgate_gift_replay_ratio gauge\nflashgate_gift_replay_ratio {}",
            self.replay_rate()
        );
        let _ = writeln!(
            out,
            "# HELP flashgate_gift_outbox_pending Pending provider calls (last relay pass).\n# TYPE flashgate_gift_outbox_pending gauge\nflashgate_gift_outbox_pending {}",
            get(&self.outbox_pending)
        );
        let _ = writeln!(
            out,
            "# HELP flashgate_gift_outbox_lag_seconds Age of the oldest pending provider call (last relay pass).\n# TYPE flashgate_gift_outbox_lag_seconds gauge\nflashgate_gift_outbox_lag_seconds {}",
            get(&self.outbox_lag_ms) as f64 / 1e3
        );
        out
    }
}
