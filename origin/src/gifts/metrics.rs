//! Gift fulfilment metrics, served at `GET /metrics` from the origin's registry
//! ([`crate::metrics::Metrics`]): the advisory lock wait (a histogram in seconds), replays (the
//! fast path and after the lock), grants, refusals, ledger refusals (layer 4), provider errors
//! and retries, deliveries, and the outbox lag (age of the oldest pending provider call, in
//! seconds, as of the last relay pass).

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::FloatGauge;

/// Upper bounds of the lock-wait histogram buckets, in seconds.
pub const LOCK_WAIT_BUCKETS_SECONDS: [f64; 14] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// Counts since start.
#[derive(Clone)]
pub struct GiftMetrics {
    /// `flashgate_advisory_lock_wait_seconds`.
    pub lock_wait: Histogram,
    replays_fast: Counter,
    replays_locked: Counter,
    granted: Counter,
    refused: Counter,
    ledger_refused: Counter,
    provider_errors: Counter,
    provider_retries: Counter,
    delivered: Counter,
    failed: Counter,
    outbox_lag: FloatGauge,
    outbox_pending: Gauge,
    replay_ratio: FloatGauge,
}

impl Default for GiftMetrics {
    fn default() -> Self {
        GiftMetrics {
            lock_wait: Histogram::new(LOCK_WAIT_BUCKETS_SECONDS),
            replays_fast: Counter::default(),
            replays_locked: Counter::default(),
            granted: Counter::default(),
            refused: Counter::default(),
            ledger_refused: Counter::default(),
            provider_errors: Counter::default(),
            provider_retries: Counter::default(),
            delivered: Counter::default(),
            failed: Counter::default(),
            outbox_lag: FloatGauge::default(),
            outbox_pending: Gauge::default(),
            replay_ratio: FloatGauge::default(),
        }
    }
}

impl GiftMetrics {
    /// Registers every gift metric in `r` (the origin's registry, prefix `flashgate_`; help
    /// texts end without a period, which the registry appends).
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "advisory_lock_wait_seconds",
            "Wait for the (campaign, subscriber) advisory lock",
            self.lock_wait.clone(),
        );
        for (name, help, c) in [
            (
                "gift_replays_fast",
                "Fulfilment replies replayed by the key fast path",
                &self.replays_fast,
            ),
            (
                "gift_replays_locked",
                "Fulfilment replies replayed after the lock",
                &self.replays_locked,
            ),
            ("gift_grants", "Gifts granted", &self.granted),
            (
                "gift_refusals",
                "Fulfilments refused with a reason code",
                &self.refused,
            ),
            (
                "gift_ledger_refusals",
                "Grants refused by the ledger's uniqueness",
                &self.ledger_refused,
            ),
            (
                "gift_provider_errors",
                "Provider calls that failed",
                &self.provider_errors,
            ),
            (
                "gift_provider_retries",
                "Provider calls scheduled again",
                &self.provider_retries,
            ),
            (
                "gift_delivered",
                "Fulfilments delivered by the provider",
                &self.delivered,
            ),
            (
                "gift_failed",
                "Fulfilments failed after their last attempt",
                &self.failed,
            ),
        ] {
            r.register(name, help, c.clone());
        }
        r.register(
            "gift_replay_ratio",
            "Replays over grants plus replays",
            self.replay_ratio.clone(),
        );
        r.register(
            "gift_outbox_pending",
            "Pending provider calls (last relay pass)",
            self.outbox_pending.clone(),
        );
        r.register(
            "outbox_lag_seconds",
            "Age of the oldest pending provider call (last relay pass)",
            self.outbox_lag.clone(),
        );
    }

    /// One advisory lock acquired after waiting `d`.
    pub fn lock_waited(&self, d: Duration) {
        self.lock_wait.observe(d.as_secs_f64());
    }
    /// A recorded reply sent by the fast path (no lock, no write).
    pub fn replay_fast(&self) {
        self.replays_fast.inc();
        self.update_ratio();
    }
    /// A recorded reply found after the lock (the request ahead had just committed it).
    pub fn replay_locked(&self) {
        self.replays_locked.inc();
        self.update_ratio();
    }
    /// A grant committed.
    pub fn granted(&self) {
        self.granted.inc();
        self.update_ratio();
    }
    /// A refusal (`cap_reached`, `not_in_segment`, `campaign_not_active`).
    pub fn refused(&self) {
        self.refused.inc();
    }
    /// The ledger's uniqueness refused a grant that layers 1–3 let through.
    pub fn ledger_refused(&self) {
        self.ledger_refused.inc();
    }
    /// A provider call that failed (timeout, 5xx, refusal, transport error).
    pub fn provider_error(&self) {
        self.provider_errors.inc();
    }
    /// A failed provider call scheduled again.
    pub fn provider_retry(&self) {
        self.provider_retries.inc();
    }
    /// A fulfilment marked delivered.
    pub fn delivered(&self) {
        self.delivered.inc();
    }
    /// A fulfilment marked failed after its last attempt.
    pub fn failed(&self) {
        self.failed.inc();
    }
    /// The outbox as the last relay pass saw it: pending rows and the oldest one's age.
    pub fn outbox_seen(&self, pending: u64, oldest_age: Duration) {
        self.outbox_pending
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
        self.outbox_lag.set(oldest_age.as_secs_f64());
    }

    /// Replays (fast path plus after the lock) over all fulfilment requests that were
    /// answered with a grant or a replay; 0 before any.
    pub fn replay_rate(&self) -> f64 {
        let replays = self.replays_fast.get() + self.replays_locked.get();
        let all = replays + self.granted.get();
        if all == 0 {
            0.0
        } else {
            replays as f64 / all as f64
        }
    }

    fn update_ratio(&self) {
        self.replay_ratio.set(self.replay_rate());
    }
}
