//! The origin's Prometheus metrics, served at `GET /metrics` in the Prometheus text format
//! 0.0.4 (which Prometheus scrapes and `promtool check metrics` reads; the `prometheus-client`
//! crate encodes OpenMetrics, rewritten by [`super::exposition`]). One registry per origin
//! ([`Metrics`]), so several origins in one process (the tests) keep their own counts.
//!
//! Names follow Prometheus conventions: base units (seconds), `_total` on counters, bounded
//! label values (`route` is the route template, `result` an outcome or error code, `campaign`
//! only a campaign that has not ended). The call sites are one line each; every definition is
//! here (the gift metrics are in [`crate::gifts::metrics`], registered in the same registry).

use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
pub use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::reply::Outcome;

/// The `Content-Type` of `GET /metrics`.
pub const CONTENT_TYPE: &str = super::exposition::CONTENT_TYPE;

/// The claim route's template (the `route` label of its requests).
pub const CLAIM_ROUTE: &str = "/api/v1/campaigns/{id}/claims";

/// The results a claim is answered with, whose request series are created at start.
pub const CLAIM_RESULTS: [&str; 9] = [
    "claimed",
    "sold_out",
    "already_claimed",
    "replay",
    "in_progress",
    "not_started",
    "ended",
    "paused",
    "unavailable",
];

/// Latency buckets in seconds: 0.5 ms to about 8 s, doubling.
pub fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_5, 2.0, 15))
}

/// The `result` label of a response, set as a response extension by the replies that know it
/// ([`crate::reply::Reply`]: its outcome; [`crate::error::ApiError`]: its error code) and read
/// by the request metrics layer ([`crate::http`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResultLabel(pub &'static str);

/// Where a claim's answer came from (the `answered_from` label of `flashgate_claims_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnsweredFrom {
    /// This origin's memory: the cached campaign row or the local sold-out flag.
    Memory,
    /// Redis: the gate or the idempotency record.
    Gate,
    /// PostgreSQL: a commit or a claim row.
    Store,
}

impl AnsweredFrom {
    /// The label value: `memory`, `gate` or `store`.
    pub fn as_str(self) -> &'static str {
        match self {
            AnsweredFrom::Memory => "memory",
            AnsweredFrom::Gate => "gate",
            AnsweredFrom::Store => "store",
        }
    }
}

/// Labels of `flashgate_http_request_duration_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    /// The route template (`/api/v1/campaigns/{id}/claims`), `unmatched` for no route.
    pub route: String,
    /// The outcome (`claimed`, `sold_out`, ...), the error code (`unavailable`, ...), or `ok`
    /// / `error` for a reply that carries neither.
    pub result: &'static str,
}

/// Labels of `flashgate_claims_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ClaimLabels {
    pub result: &'static str,
    pub answered_from: &'static str,
}

/// The `op` label of `flashgate_gate_op_duration_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct OpLabels {
    pub op: &'static str,
}

/// The `bucket` label of `flashgate_guess_refusals_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BucketLabels {
    pub bucket: &'static str,
}

/// The `campaign` label of the per-campaign gauges.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CampaignLabels {
    pub campaign: String,
}

/// The `state` label of `flashgate_redis_campaign_keys`: `live`, `ended` (holds outstanding)
/// or `expiring` (ended and settled: the keys expire after the grace period).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct KeyStateLabels {
    pub state: &'static str,
}

/// The `result` label of `flashgate_edge_reported_answers_total`: a result label the edge
/// reports ([`flashgate_shared::answers::is_result_label`]: `[a-z_]`, bounded in length; the
/// edge's own small set of answers).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct EdgeAnswerLabels {
    pub result: String,
}

/// One live campaign's figures, as set by [`Metrics::set_live`] at each scrape.
#[derive(Debug, Clone, Default)]
pub struct LiveFigures {
    pub campaign: String,
    /// Units left (PostgreSQL's `campaigns.remaining`).
    pub remaining: i64,
    /// Claims held and not yet paid (sales with a hold).
    pub held: i64,
    /// Waiting-room figures, for a campaign with a waiting room: (queue length, now serving).
    pub queue: Option<(i64, i64)>,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// The origin's metrics and their registry. Every handle is cheap to update (atomics);
/// families are keyed by bounded labels.
pub struct Metrics {
    registry: Registry,
    /// `flashgate_status_requests_total`: `GET /api/v1/campaigns/{id}` requests.
    pub status_requests: Counter,
    /// `flashgate_claim_requests_total`: claim requests that reached the handler.
    pub claim_requests: Counter,
    /// `flashgate_campaign_index_requests_total`: campaign index fetches (the edge's).
    pub index_requests: Counter,
    /// `flashgate_winners_filter_requests_total`: winners filter fetches (the edge's).
    pub winners_filter_requests: Counter,
    /// `flashgate_http_request_duration_seconds{route,result}`.
    pub http_duration: HistogramFamily<RequestLabels>,
    /// `flashgate_claims_total{result,answered_from}`: claim answers.
    pub claims: Family<ClaimLabels, Counter>,
    /// `flashgate_commit_batch_size`: claims per grouped commit.
    pub commit_batch_size: Histogram,
    /// `flashgate_commit_duration_seconds`: one grouped commit, retries claim by claim included.
    pub commit_duration: Histogram,
    /// `flashgate_gate_op_duration_seconds{op}`: one step of the Redis gate.
    pub gate_op: HistogramFamily<OpLabels>,
    /// `flashgate_idempotency_replays_total`: first replies sent again for a repeated key.
    pub idempotency_replays: Counter,
    /// `flashgate_in_progress_total`: `in_progress` answers (the key's first request runs).
    pub in_progress: Counter,
    /// `flashgate_pending_takes`: units taken at the gate whose commit has not finished.
    pub pending_takes: Gauge,
    /// `flashgate_sweeper_expired_total`: holds expired by the sweeper.
    pub sweeper_expired: Counter,
    /// `flashgate_gate_loads_total`: gate loads started.
    pub gate_loads: Counter,
    /// `flashgate_orphaned_takes_settled_total`: pending takes settled by PostgreSQL after their
    /// request or their origin was gone ([`crate::repair::settle`]).
    pub orphaned_takes_settled: Counter,
    /// `flashgate_gate_audit_lowered_total`: units the gate audit took off gates that promised
    /// more than PostgreSQL has ([`crate::repair::audit`]).
    pub gate_audit_lowered: Counter,
    /// `flashgate_gate_audit_raised_total`: units the gate audit put back on gates that had lost
    /// them.
    pub gate_audit_raised: Counter,
    /// `flashgate_gate_audit_pass_seconds`: one gate audit pass over every live campaign (on
    /// the origin whose turn it was). A lost unit is put back within two passes.
    pub gate_audit_pass: Histogram,
    /// `flashgate_gate_audit_holders_dropped_total`: gate holders the audit found naming no
    /// active claim and dropped ([`crate::repair::holders`]).
    pub gate_audit_holders_dropped: Counter,
    /// `flashgate_gate_audit_holders_restored_total`: active claims whose missing gate holder
    /// the audit wrote.
    pub gate_audit_holders_restored: Counter,
    /// `flashgate_gate_audit_code_flags_total`: promo codes whose cached flags the audit found
    /// behind PostgreSQL after a release and rewrote ([`crate::promo::audit`]).
    pub gate_audit_code_flags: Counter,
    /// `flashgate_gate_audit_code_holders_dropped_total`: cached code uses naming a released
    /// use that the audit dropped.
    pub gate_audit_code_holders_dropped: Counter,
    /// `flashgate_guess_refusals_total{bucket}`: promo code tries refused 429 by the guess
    /// limiter, by the bucket that was spent (`customer` or `ip`).
    pub guess_refusals: Family<BucketLabels, Counter>,
    /// `flashgate_campaign_remaining{campaign}` (live campaigns only).
    pub campaign_remaining: Family<CampaignLabels, Gauge>,
    /// `flashgate_campaign_held{campaign}` (live campaigns only).
    pub campaign_held: Family<CampaignLabels, Gauge>,
    /// `flashgate_queue_length{campaign}`: joined and not yet admitted (live waiting rooms).
    pub queue_length: Family<CampaignLabels, Gauge>,
    /// `flashgate_queue_now_serving{campaign}`: the highest admitted place (live waiting rooms).
    pub queue_now_serving: Family<CampaignLabels, Gauge>,
    /// `flashgate_queue_stalled{campaign}`: 1 while a live waiting room's admission step
    /// cannot run (queue lost by Redis, gate not loaded, Redis failing), else 0; set by the
    /// admitting task each tick ([`crate::queue::admit`]).
    pub queue_stalled: Family<CampaignLabels, Gauge>,
    /// `flashgate_queue_restores_total`: queues reopened from their PostgreSQL checkpoint after
    /// Redis lost them ([`crate::queue::restore`]).
    pub queue_restores: Counter,
    /// `flashgate_queue_join_requests_total`: join steps run (a customer's own join, one report
    /// of the tickets an isolate issued, or one group of joins from an older edge), counted
    /// past the campaign's checks.
    pub queue_join_requests: Counter,
    /// `flashgate_queue_joins_total`: joins the origin placed (one per customer and request,
    /// grouped or not), and reported tickets new to the line.
    pub queue_joins: Counter,
    /// `flashgate_redis_campaign_keys{state}`: Redis keys of campaigns by campaign state, as
    /// the last clean-up pass of this origin counted them ([`crate::repair::cleanup`]).
    pub redis_campaign_keys: Family<KeyStateLabels, Gauge>,
    /// `flashgate_edge_reported_answers_total{result}`: the answers the edge's isolates gave
    /// themselves, as their reports to this origin counted them ([`Metrics::edge_answers`]).
    pub edge_reported_answers: Family<EdgeAnswerLabels, Counter>,
    /// `sold_out` answers of this origin per campaign and second (the dashboard's series; not
    /// exported to Prometheus, which has `flashgate_claims_total{result="sold_out"}`).
    pub sold_out_series: super::series::AnswerSeries,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Counts one pending take while alive ([`Metrics::pending_take`]).
pub struct PendingTake<'a>(&'a Gauge);

impl Drop for PendingTake<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Metrics {
    /// A registry with every metric of the origin registered (the gift ones are added by
    /// [`Metrics::registry_mut`] callers before the first scrape).
    pub fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::with_prefix("flashgate"),
            status_requests: Counter::default(),
            claim_requests: Counter::default(),
            index_requests: Counter::default(),
            winners_filter_requests: Counter::default(),
            http_duration: Family::new_with_constructor(latency_histogram),
            claims: Family::default(),
            commit_batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 10)),
            commit_duration: latency_histogram(),
            gate_op: Family::new_with_constructor(latency_histogram),
            idempotency_replays: Counter::default(),
            in_progress: Counter::default(),
            pending_takes: Gauge::default(),
            sweeper_expired: Counter::default(),
            gate_loads: Counter::default(),
            orphaned_takes_settled: Counter::default(),
            gate_audit_lowered: Counter::default(),
            gate_audit_raised: Counter::default(),
            gate_audit_pass: Histogram::new(exponential_buckets(0.01, 2.0, 12)),
            gate_audit_holders_dropped: Counter::default(),
            gate_audit_holders_restored: Counter::default(),
            gate_audit_code_flags: Counter::default(),
            gate_audit_code_holders_dropped: Counter::default(),
            guess_refusals: Family::default(),
            campaign_remaining: Family::default(),
            campaign_held: Family::default(),
            queue_length: Family::default(),
            queue_now_serving: Family::default(),
            queue_stalled: Family::default(),
            queue_restores: Counter::default(),
            queue_join_requests: Counter::default(),
            queue_joins: Counter::default(),
            redis_campaign_keys: Family::default(),
            edge_reported_answers: Family::default(),
            sold_out_series: Default::default(),
        };
        // The claim route's series exist from the start, at 0: Prometheus computes a rate only
        // between two samples, so a series born in the middle of a burst would hide the burst.
        for result in CLAIM_RESULTS {
            let labels = RequestLabels {
                route: CLAIM_ROUTE.to_string(),
                result,
            };
            drop(m.http_duration.get_or_create(&labels));
        }
        // So do the edge's claim answers (challenge failures appear with their first report).
        m.edge_answers(
            flashgate_shared::answers::CLAIM_RESULTS
                .iter()
                .map(|r| (*r, 0)),
        );
        let r = &mut m.registry;
        // Counters are registered without `_total`: the encoder appends it to the samples (and
        // super::exposition to the family). Help texts end without a period: the registry
        // appends one.
        r.register(
            "status_requests",
            "Campaign status requests",
            m.status_requests.clone(),
        );
        r.register(
            "claim_requests",
            "Claim requests that reached the handler",
            m.claim_requests.clone(),
        );
        r.register(
            "campaign_index_requests",
            "Campaign index fetches (by the edge)",
            m.index_requests.clone(),
        );
        r.register(
            "winners_filter_requests",
            "Winners filter fetches (by the edge)",
            m.winners_filter_requests.clone(),
        );
        r.register(
            "http_request_duration_seconds",
            "Time to answer a request, by route template and result (the outcome, the error code, or ok / error)",
            m.http_duration.clone(),
        );
        r.register(
            "claims",
            "Claim answers by result and by what answered (memory, gate, store)",
            m.claims.clone(),
        );
        r.register(
            "commit_batch_size",
            "Claims per grouped PostgreSQL commit",
            m.commit_batch_size.clone(),
        );
        r.register(
            "commit_duration_seconds",
            "Time of one grouped commit, claim-by-claim retries included",
            m.commit_duration.clone(),
        );
        r.register(
            "gate_op_duration_seconds",
            "Time of one Redis gate step, by operation (take, confirm)",
            m.gate_op.clone(),
        );
        r.register(
            "idempotency_replays",
            "First replies sent again for a repeated Idempotency-Key",
            m.idempotency_replays.clone(),
        );
        r.register(
            "in_progress",
            "Answers in_progress: the key's first request still runs",
            m.in_progress.clone(),
        );
        r.register(
            "pending_takes",
            "Units taken at the gate whose commit has not finished",
            m.pending_takes.clone(),
        );
        r.register(
            "sweeper_expired",
            "Holds expired by the sweeper",
            m.sweeper_expired.clone(),
        );
        r.register(
            "gate_loads",
            "Gate loads started (a lost or missing gate)",
            m.gate_loads.clone(),
        );
        r.register(
            "orphaned_takes_settled",
            "Pending takes settled by PostgreSQL after their request or origin was gone",
            m.orphaned_takes_settled.clone(),
        );
        r.register(
            "gate_audit_lowered",
            "Units the gate audit took off gates that promised more than PostgreSQL has",
            m.gate_audit_lowered.clone(),
        );
        r.register(
            "gate_audit_raised",
            "Units the gate audit put back on gates that had lost them",
            m.gate_audit_raised.clone(),
        );
        r.register(
            "gate_audit_pass_seconds",
            "Time of one gate audit pass over every live campaign",
            m.gate_audit_pass.clone(),
        );
        r.register(
            "gate_audit_holders_dropped",
            "Gate holders naming no active claim that the gate audit dropped",
            m.gate_audit_holders_dropped.clone(),
        );
        r.register(
            "gate_audit_holders_restored",
            "Active claims whose missing gate holder the gate audit wrote",
            m.gate_audit_holders_restored.clone(),
        );
        r.register(
            "gate_audit_code_flags",
            "Promo codes whose cached flags the gate audit found behind PostgreSQL and rewrote",
            m.gate_audit_code_flags.clone(),
        );
        r.register(
            "gate_audit_code_holders_dropped",
            "Cached promo code uses naming a released use that the gate audit dropped",
            m.gate_audit_code_holders_dropped.clone(),
        );
        r.register(
            "guess_refusals",
            "Promo code tries refused by the guess limiter, by spent bucket (customer, ip)",
            m.guess_refusals.clone(),
        );
        r.register(
            "campaign_remaining",
            "Units left, per live campaign",
            m.campaign_remaining.clone(),
        );
        r.register(
            "campaign_held",
            "Claims held and not yet paid, per live campaign",
            m.campaign_held.clone(),
        );
        r.register(
            "queue_length",
            "Customers joined and not yet admitted, per live waiting room",
            m.queue_length.clone(),
        );
        r.register(
            "queue_now_serving",
            "Highest admitted place, per live waiting room",
            m.queue_now_serving.clone(),
        );
        r.register(
            "queue_stalled",
            "1 while a live waiting room cannot admit (queue lost, gate not loaded, Redis failing)",
            m.queue_stalled.clone(),
        );
        r.register(
            "queue_restores",
            "Waiting rooms reopened from their PostgreSQL checkpoint after a Redis loss",
            m.queue_restores.clone(),
        );
        r.register(
            "queue_join_requests",
            "Join steps run by the origin: a customer's own join, one report of the tickets an isolate issued, or one group of joins from an older edge",
            m.queue_join_requests.clone(),
        );
        r.register(
            "queue_joins",
            "Joins placed by the origin, grouped or not, and tickets issued at the edge that were new to the line",
            m.queue_joins.clone(),
        );
        r.register(
            "redis_campaign_keys",
            "Redis keys of campaigns by state (live, ended with holds outstanding, expiring)",
            m.redis_campaign_keys.clone(),
        );
        r.register(
            "edge_reported_answers",
            "Answers the edge gave itself (sold_out, queued, rate_limited, challenge_*, ...), summed from its isolates' reports",
            m.edge_reported_answers.clone(),
        );
        m
    }

    /// The registry, to register more metrics (at start-up only).
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// One request answered in `elapsed` on `route` (a template) with `result`.
    pub fn request(&self, route: &str, result: &'static str, elapsed: Duration) {
        let labels = RequestLabels {
            route: route.to_string(),
            result,
        };
        self.http_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// One claim answered with `outcome` by `from`.
    pub fn claim(&self, outcome: Outcome, from: AnsweredFrom) {
        let labels = ClaimLabels {
            result: outcome.as_str(),
            answered_from: from.as_str(),
        };
        self.claims.get_or_create(&labels).inc();
    }

    /// Claims answered with `outcome` by `from` so far.
    pub fn claims_of(&self, outcome: Outcome, from: AnsweredFrom) -> u64 {
        let labels = ClaimLabels {
            result: outcome.as_str(),
            answered_from: from.as_str(),
        };
        self.claims.get(&labels).map_or(0, |c| c.get())
    }

    /// One grouped commit of `size` claims that took `elapsed`.
    pub fn commit(&self, size: usize, elapsed: Duration) {
        self.commit_batch_size.observe(size as f64);
        self.commit_duration.observe(elapsed.as_secs_f64());
    }

    /// Runs the gate step `op` and records its time.
    pub async fn gate_op<T>(&self, op: &'static str, step: impl Future<Output = T>) -> T {
        let t0 = Instant::now();
        let out = step.await;
        self.gate_op
            .get_or_create(&OpLabels { op })
            .observe(t0.elapsed().as_secs_f64());
        out
    }

    /// One promo code try refused by the guess limiter's `bucket` (its label value, e.g.
    /// `customer` or `ip`: `crate::promo::guess::Bucket::as_str`).
    pub fn guess_refused(&self, bucket: &'static str) {
        self.guess_refusals
            .get_or_create(&BucketLabels { bucket })
            .inc();
    }

    /// Makes the series of the guess limiter's `buckets` exist from the start, at 0 (see the
    /// claim route's series in [`Metrics::new`] for why).
    pub fn announce_guess_buckets(&self, buckets: impl IntoIterator<Item = &'static str>) {
        for bucket in buckets {
            drop(self.guess_refusals.get_or_create(&BucketLabels { bucket }));
        }
    }

    /// Adds one counted edge report's rows, (result, answers), to
    /// `flashgate_edge_reported_answers_total`.
    pub fn edge_answers<'a>(&self, rows: impl IntoIterator<Item = (&'a str, u64)>) {
        for (result, n) in rows {
            let labels = EdgeAnswerLabels {
                result: result.to_string(),
            };
            self.edge_reported_answers.get_or_create(&labels).inc_by(n);
        }
    }

    /// Counts one pending take until the returned guard drops.
    pub fn pending_take(&self) -> PendingTake<'_> {
        self.pending_takes.inc();
        PendingTake(&self.pending_takes)
    }

    /// Replaces the per-campaign gauges with `live` (campaigns that have not ended): a
    /// campaign that ended leaves the families.
    pub fn set_live(&self, live: &[LiveFigures]) {
        for f in [
            &self.campaign_remaining,
            &self.campaign_held,
            &self.queue_length,
            &self.queue_now_serving,
        ] {
            f.clear();
        }
        for c in live {
            let l = CampaignLabels {
                campaign: c.campaign.clone(),
            };
            self.campaign_remaining.get_or_create(&l).set(c.remaining);
            self.campaign_held.get_or_create(&l).set(c.held);
            if let Some((length, serving)) = c.queue {
                self.queue_length.get_or_create(&l).set(length);
                self.queue_now_serving.get_or_create(&l).set(serving);
            }
        }
    }

    /// Every metric in the Prometheus text format 0.0.4 ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode_registry(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        super::exposition::from_openmetrics(&out)
    }
}

/// A float gauge (seconds, ratios).
pub type FloatGauge = Gauge<f64, AtomicU64>;

pub use super::access_log::{record_request, ACCESS_LOG_TARGET};
