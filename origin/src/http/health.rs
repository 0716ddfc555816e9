//! `/healthz` (the process is up), `/readyz` (PostgreSQL and Redis reachable, gates loaded)
//! and `/metrics` (Prometheus text).

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use serde_json::json;

use crate::state::AppState;

/// 200 `{"status":"ok"}` while the process runs.
pub async fn healthz() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

/// 200 `{"status":"ready"}` when PostgreSQL and Redis answer and the start-up gate load is done;
/// 503 `{"status":"not_ready","postgres":bool,"redis":bool,"gate_loaded":bool}` otherwise.
pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let postgres = sqlx::query("SELECT 1").execute(&state.db).await.is_ok();
    let mut redis = state.redis.clone();
    let redis_ok = redis::cmd("PING")
        .query_async::<String>(&mut redis)
        .await
        .is_ok();
    let gate_loaded = state.metrics.gates_ready.load(Ordering::Relaxed);
    if postgres && redis_ok && gate_loaded {
        (StatusCode::OK, axum::Json(json!({"status": "ready"})))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(
                json!({"status": "not_ready", "postgres": postgres, "redis": redis_ok, "gate_loaded": gate_loaded}),
            ),
        )
    }
}

/// Counters in the Prometheus text format.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}
