//! Webhook metrics, served at `GET /metrics` from the origin's registry: deliveries by result
//! and endpoint (`flashgate_webhook_deliveries_total{result,endpoint}`), the lag from an event's
//! write to its delivery (`flashgate_webhook_delivery_lag_seconds`, a histogram) and the queue
//! depth (`flashgate_webhook_queue_depth`: pending deliveries as of the last relay pass).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Upper bounds of the lag histogram's buckets, in seconds (up to the last retry, a day).
pub const LAG_BUCKETS_SECONDS: [f64; 16] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 7200.0,
    86400.0,
];

/// What one call came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallResult {
    /// A 2xx.
    Delivered,
    /// Failed, to be retried.
    Retry,
    /// Failed for the last time (or the endpoint answered 410).
    Failed,
}

impl CallResult {
    fn as_str(self) -> &'static str {
        match self {
            CallResult::Delivered => "delivered",
            CallResult::Retry => "retry",
            CallResult::Failed => "failed",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    result: String,
    endpoint: String,
}

/// Counts since start.
#[derive(Clone)]
pub struct WebhookMetrics {
    deliveries: Family<Labels, Counter>,
    lag: Histogram,
    depth: Gauge,
}

impl Default for WebhookMetrics {
    fn default() -> Self {
        WebhookMetrics {
            deliveries: Family::default(),
            lag: Histogram::new(LAG_BUCKETS_SECONDS),
            depth: Gauge::default(),
        }
    }
}

impl WebhookMetrics {
    /// Registers the webhook metrics in `r` (the origin's registry, prefix `flashgate_`).
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "webhook_deliveries",
            "Webhook calls by result (delivered, retry, failed) and endpoint id",
            self.deliveries.clone(),
        );
        r.register(
            "webhook_delivery_lag_seconds",
            "Time from an event's write to its delivery",
            self.lag.clone(),
        );
        r.register(
            "webhook_queue_depth",
            "Pending webhook deliveries as of the last relay pass",
            self.depth.clone(),
        );
    }

    /// One call to `endpoint` ended with `result`; a delivery `lag` after its event's write.
    pub fn call(&self, endpoint: &str, result: CallResult, lag: Option<Duration>) {
        self.deliveries
            .get_or_create(&Labels {
                result: result.as_str().to_string(),
                endpoint: endpoint.to_string(),
            })
            .inc();
        if let Some(lag) = lag {
            self.lag.observe(lag.as_secs_f64());
        }
    }

    /// The pending deliveries seen by a relay pass.
    pub fn depth(&self, pending: i64) {
        self.depth.set(pending);
    }
}
