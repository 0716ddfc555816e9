//! `GET /admin/v1/campaigns/{id}/reconcile`: the [`crate::repair::reconcile`] report over HTTP.

use super::extract::Path;
use crate::http::openapi::errors;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use flashgate_shared::api::{is_valid_slug, ReconcileReport};

use super::extract::{self, Role};
use crate::error::{ApiError, ApiResult};
use crate::repair::reconcile::reconcile;
use crate::state::AppState;

/// 200 with the [`ReconcileReport`] (clean or not: `ok` says which); 404 unknown campaign;
/// admin token of any role (401 missing / 403 unknown); 503 when PostgreSQL or Redis is down.
#[utoipa::path(
    get,
    path = "/admin/v1/campaigns/{id}/reconcile",
    tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Campaign id.")),
    responses(
        (status = 200, description = "The reconciliation report; `ok` says whether it is clean.",
            body = ReconcileReport),
        errors::NoCampaign,
    ),
)]
pub async fn report(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<ReconcileReport>> {
    extract::admin(&headers, &state, Role::Viewer)?;
    let not_found = || extract::no_campaign(&id);
    if !is_valid_slug(&id) {
        return Err(not_found());
    }
    let mut redis = state.gate.clone();
    let report = reconcile(&state.db, &mut redis, &id)
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?
        .ok_or_else(not_found)?;
    Ok(Json(report))
}
