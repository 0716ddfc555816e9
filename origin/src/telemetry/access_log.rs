//! The one line and the latency sample per request: a middleware on every route
//! ([`record_request`]), writing `flashgate_http_request_duration_seconds{route,result}` of
//! [`Metrics`] and the access log line.

use std::time::Instant;

use super::metrics::{Metrics, ResultLabel};

/// The log target of the one line per request ([`record_request`]): on with
/// `FLASHGATE_LOG_FORMAT=json`, off by default (see `RUST_LOG`).
pub const ACCESS_LOG_TARGET: &str = "flashgate_access";

/// Middleware (on every route, inside the `request` span): records the request's time in
/// `flashgate_http_request_duration_seconds{route,result}` and writes one access log line
/// (route, result, status, latency in milliseconds; the span adds method, path, request id,
/// trace id and campaign). The route is the matched template, never the raw path, so the
/// label stays bounded.
pub async fn record_request(
    axum::extract::State(metrics): axum::extract::State<std::sync::Arc<Metrics>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let t0 = Instant::now();
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .cloned();
    let res = next.run(req).await;
    let elapsed = t0.elapsed();
    let route = route.as_ref().map_or("unmatched", |p| p.as_str());
    let status = res.status();
    let result = res.extensions().get::<ResultLabel>().map_or(
        if status.is_client_error() || status.is_server_error() {
            "error"
        } else {
            "ok"
        },
        |r| r.0,
    );
    metrics.request(route, result, elapsed);
    tracing::info!(
        target: ACCESS_LOG_TARGET,
        route,
        result,
        status = status.as_u16(),
        latency_ms = elapsed.as_secs_f64() * 1e3,
        "answered"
    );
    res
}
