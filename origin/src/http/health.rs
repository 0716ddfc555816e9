//! `/healthz` (the process is up), `/readyz` (PostgreSQL and Redis reachable, gates loaded)
//! and `/metrics` (Prometheus text).

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use serde_json::json;

use crate::state::AppState;

/// 200 `{"status":"ok"}` while the process runs.
pub async fn healthz() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

/// 200 `{"status":"ready"}` when PostgreSQL and Redis answer and the gate of every live
/// campaign is loaded; 503 `{"status":"not_ready","postgres":bool,"redis":bool,
/// "gate_loaded":bool}` otherwise. A missing gate (Redis restarted empty) is also reloaded from
/// here, so an origin that a load balancer took out of rotation gets ready again by itself.
pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    // The simple query protocol: no prepared statement, so nothing a pooler can mix up.
    let postgres = sqlx::raw_sql("SELECT 1").execute(&state.db).await.is_ok();
    let mut redis = state.redis.clone();
    let redis_ok = redis::cmd("PING")
        .query_async::<String>(&mut redis)
        .await
        .is_ok();
    let gate_loaded = postgres && redis_ok && live_gates_loaded(&state).await;
    if gate_loaded {
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

/// True when every campaign that has not ended has its gate loaded; starts a load for each one
/// that has not.
async fn live_gates_loaded(state: &AppState) -> bool {
    // Behind a transaction pooler `Db` runs it in a transaction of its own (crate::db).
    let Ok(live) = crate::campaigns::store::live(&state.db).await else {
        return false;
    };
    if live.is_empty() {
        return true;
    }
    let mut redis = state.gate.clone();
    let mut all = true;
    // One EXISTS per campaign: on a Redis Cluster each gate lives in its own slot.
    for c in &live {
        let Ok(loaded) = crate::gate::load::is_loaded(&mut redis, &c.id).await else {
            return false;
        };
        if !loaded {
            state.gate_loader.spawn(&c.id);
            all = false;
        }
    }
    all
}

/// Counters in the Prometheus text format.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render() + &state.gift_metrics.render(),
    )
}
