//! What the origin tells its operator: Prometheus metrics ([`metrics`], served at
//! `GET /metrics`) and W3C Trace Context ([`trace`]: the `traceparent` of a request, continued
//! in the `request` span and so in every log line of the request), and the per-second answer
//! counts the dashboard draws ([`series`]).

pub mod access_log;
pub mod exposition;
pub mod metrics;
pub mod series;
pub mod trace;
