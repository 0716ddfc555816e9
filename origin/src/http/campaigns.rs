//! `GET /api/v1/campaigns/{id}` (public status) and `POST /admin/v1/campaigns` (create).

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::{AdminCampaign, NewCampaign};
use flashgate_shared::queue::QueueStatus;

use super::extract::{self, Path};
use crate::campaigns::store;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The public status body: [`flashgate_shared::api::CampaignStatus`] plus, for a campaign with a
/// waiting room, `"queue"` ([`QueueStatus`], exactly as the edge parses it).
#[derive(serde::Serialize)]
struct StatusBody {
    #[serde(flatten)]
    status: flashgate_shared::api::CampaignStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    queue: Option<QueueStatus>,
}

/// 200 with the campaign's public status (with `queue` when it has a waiting room; 503 when
/// Redis cannot tell the queue's figures), `Cache-Control: public, max-age=1`; 404 when unknown.
/// The state is decided by the origin's clock. Counts may be up to `FLASHGATE_CAMPAIGN_CACHE_MS`
/// old.
pub async fn status(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    state.metrics.status_requests.inc();
    tracing::Span::current().record("campaign", id.as_str());
    let row = extract::campaign(&state, &id).await?;
    let body = StatusBody {
        status: row.status_at(chrono::Utc::now()),
        queue: crate::queue::status(&state, &row).await?,
    };
    Ok((
        [(header::CACHE_CONTROL, "public, max-age=1")],
        axum::Json(body),
    )
        .into_response())
}

/// Creates a campaign (manager token) with its `create` audit row, and opens its waiting room
/// when it has one. 201 with the campaign; 409 when the id exists; 422 when a rule of
/// [`NewCampaign::validate`] is broken, or a waiting room is asked for on an origin without
/// `FLASHGATE_EDGE_SECRET`; 401/403 without / with a wrong token.
pub async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let admin = extract::admin(&headers, &state, extract::Role::Manager)?;
    let new: NewCampaign =
        extract::json_body_with_times(&headers, body, &["starts_at", "ends_at"]).await?;
    new.validate().map_err(ApiError::validation)?;
    if new.waiting_room.is_some() {
        crate::queue::require_secret(&state)?;
    }
    let row = store::insert(&state.db, &new, &admin.name)
        .await?
        .ok_or_else(|| ApiError::Conflict(format!("campaign {} exists", new.id)))?;
    let mut gate = state.gate.clone();
    crate::gate::load::load(&state.db, &mut gate, &row.id)
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    if row.waiting_room.is_some() {
        crate::queue::store::open(&mut state.redis.clone(), &row.id).await?;
    }
    state.campaigns.invalidate(&row.id).await;
    let body = AdminCampaign {
        status: row.status_at(chrono::Utc::now()),
        hold_seconds: row.hold_seconds.map(i64::from),
        paused: row.paused,
        gate_shards: i64::from(row.gate_shards),
        waiting_room: row.waiting_room(),
        queue: None,
    };
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}
