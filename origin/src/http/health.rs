//! `/healthz` (the process is up), `/readyz` (whether this origin can serve: PostgreSQL, Redis
//! and the gates of the live campaigns) and `/metrics` (Prometheus metrics).

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use serde_json::json;
use tokio::time::Instant;

use crate::gate::readiness::{self, GateHealth};
use crate::metrics::LiveFigures;
use crate::redis_conn::Reach;
use crate::state::AppState;

/// How long `/readyz` waits for Redis, in milliseconds: a node or shard that has not answered
/// by then counts as not answering. Below the balancer's check timeout (scripts/lib/balancer.sh
/// checks every 500 ms, and HAProxy then times a check out after 500 ms).
pub const READY_REDIS_BUDGET_MS: u64 = 300;

/// 200 `{"status":"ready"}` while the process runs.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    responses((status = 200, description = "The process runs.", body = Object,
        example = json!({"status": "ok"}))),
)]
pub async fn healthz() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

/// Whether this origin can serve, for a load balancer's health check.
///
/// - 200 `{"status":"ready"}`: PostgreSQL answers, every Redis server (every primary of a
///   cluster) answers, and every shard of every live campaign's gate is loaded.
/// - 200 `{"status":"degraded", …}`: it can serve part of the traffic, and every origin is in
///   the same state (they share Redis), so taking it out of rotation would help no one: a
///   cluster primary is down or failing over (customers whose shard or records live there get
///   503 + `Retry-After`, the others are served), or a gate is being loaded.
/// - 503 `{"status":"not_ready", …}`: PostgreSQL does not answer, no Redis server answers, or
///   a live campaign's gate was lost (a shard answers without it and no load is under way).
///
/// The last two carry `"postgres":bool`, `"redis":bool` (some server answers), `"redis_all":
/// bool` (every one does), `"gate_loaded":bool` (every shard of every live gate) and `"gates"`:
/// the number of live gates by state (`loaded`, `partial`, `loading`, `unreachable`, `lost`;
/// see [`GateHealth`]). Redis is waited for [`READY_REDIS_BUDGET_MS`] at most, for its servers
/// and then for the gates. A lost gate is
/// also reloaded from here, so an origin that a load balancer took out of rotation gets ready
/// again by itself.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    responses(
        (status = 200, description = "`{\"status\":\"ready\"}`, or `{\"status\":\"degraded\",…}` \
            while the origin can serve part of the traffic (docs/SCALING.md).", body = Object,
            example = json!({"status": "ready"})),
        (status = 503, description = "`{\"status\":\"not_ready\",…}`: PostgreSQL or all of \
            Redis is unreachable, or a live gate was lost.", body = Object),
    ),
)]
pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let budget = Duration::from_millis(READY_REDIS_BUDGET_MS);
    // The simple query protocol: no prepared statement, so nothing a pooler can mix up.
    let (postgres, reach) = tokio::join!(
        async { sqlx::raw_sql("SELECT 1").execute(&state.db).await.is_ok() },
        state.redis.reach(Instant::now() + budget)
    );
    let gates = if postgres && reach != Reach::None {
        live_gates(&state, budget).await
    } else {
        None
    };
    let lost = gates
        .as_ref()
        .is_none_or(|g| g.contains_key(&GateHealth::Lost));
    let gate_loaded = gates
        .as_ref()
        .is_some_and(|g| g.keys().all(|h| *h == GateHealth::Loaded));
    if gate_loaded && reach == Reach::All {
        return (StatusCode::OK, axum::Json(json!({"status": "ready"})));
    }
    let (code, status) = if postgres && reach != Reach::None && !lost {
        (StatusCode::OK, "degraded")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not_ready")
    };
    let body = json!({
        "status": status,
        "postgres": postgres,
        "redis": reach != Reach::None,
        "redis_all": reach == Reach::All,
        "gate_loaded": gate_loaded,
        "gates": gates.unwrap_or_default(),
    });
    (code, axum::Json(body))
}

/// The gates of the campaigns that have not ended, counted by state; `None` when PostgreSQL
/// could not list them; Redis is waited for `budget` from the listing on. Starts a load of
/// each lost one.
async fn live_gates(state: &AppState, budget: Duration) -> Option<BTreeMap<GateHealth, usize>> {
    // In a transaction: behind a transaction pooler the statement's parse and execution then
    // stay on one server connection (docs/DEPLOY.md "Behind a connection pooler").
    let mut tx = state.db.begin().await.ok()?;
    let live = crate::campaigns::store::live(&mut *tx).await.ok()?;
    let _ = tx.commit().await;
    let deadline = Instant::now() + budget;
    // Every gate at once: on a Redis Cluster each shard lives in its own slot.
    let found = futures::future::join_all(
        live.iter()
            .map(|c| readiness::probe(&state.gate, &c.id, deadline)),
    )
    .await;
    let mut counts = BTreeMap::new();
    for (c, health) in live.iter().zip(found) {
        if health == GateHealth::Lost {
            state.gate_loader.spawn(&c.id);
        }
        *counts.entry(health).or_insert(0) += 1;
    }
    Some(counts)
}

/// Every metric of this origin in the Prometheus text format 0.0.4
/// ([`crate::metrics::CONTENT_TYPE`]), which Prometheus scrapes. The per-campaign gauges
/// (remaining, held, waiting-room length and now serving) are read at each scrape for the
/// campaigns that have not ended; when PostgreSQL does not answer they keep their last values.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    responses((status = 200, description = "Prometheus metrics of this origin (Prometheus \
        text format 0.0.4, docs/OPERATIONS.md).", content_type = "text/plain", body = String)),
)]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    if let Some(live) = live_figures(&state).await {
        state.metrics.set_live(&live);
    }
    (
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        state.metrics.render(),
    )
}

/// The figures of the campaigns that have not ended; `None` when PostgreSQL could not list
/// them. A waiting room whose Redis figures cannot be read is left out.
async fn live_figures(state: &AppState) -> Option<Vec<LiveFigures>> {
    let mut tx = state.db.begin().await.ok()?;
    let live = crate::campaigns::store::live(&mut *tx).await.ok()?;
    let ids: Vec<String> = live.iter().map(|c| c.id.clone()).collect();
    let held: BTreeMap<String, i64> = crate::claims::store::held_counts(&mut *tx, &ids)
        .await
        .ok()?
        .into_iter()
        .collect();
    let _ = tx.commit().await;
    let mut redis = state.redis.clone();
    let mut out = Vec::with_capacity(live.len());
    for c in live {
        let queue = match c.waiting_room {
            Some(_) => crate::queue::store::figures(&mut redis, &c.id)
                .await
                .ok()
                .map(|f| {
                    let length = f.joined.saturating_sub(f.admitted);
                    (to_i64(length), to_i64(f.now_serving))
                }),
            None => None,
        };
        out.push(LiveFigures {
            held: held.get(&c.id).copied().unwrap_or(0),
            remaining: c.remaining,
            campaign: c.id,
            queue,
        });
    }
    Some(out)
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
