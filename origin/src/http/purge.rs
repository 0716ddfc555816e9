//! `POST /admin/v1/campaigns/{id}/purge`: deletes an ended campaign's Redis keys at once
//! ([`crate::repair::cleanup::purge`]).

use super::extract::Path;
use crate::http::openapi::errors;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use flashgate_shared::api::{is_valid_slug, ErrorBody, PurgeReport};

use super::extract::{self, Role};
use crate::error::{ApiError, ApiResult};
use crate::repair::cleanup::{purge as purge_keys, PurgeError};
use crate::state::AppState;

/// 200 with the [`PurgeReport`]; 409 `conflict` while the campaign is live or holds are
/// outstanding (nothing deleted); 404 unknown campaign; manager token (401 missing / 403
/// unknown or viewer); 503 when PostgreSQL or Redis is down.
#[utoipa::path(
    post,
    path = "/admin/v1/campaigns/{id}/purge",
    tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Campaign id.")),
    responses(
        (status = 200, description = "The campaign's Redis keys are deleted.", body = PurgeReport),
        errors::NoCampaign,
        (status = 409, description = "conflict: the campaign is live or has holds outstanding; \
            nothing was deleted.", body = ErrorBody),
    ),
)]
pub async fn purge(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<PurgeReport>> {
    extract::admin(&headers, &state, Role::Manager)?;
    if !is_valid_slug(&id) {
        return Err(extract::no_campaign(&id));
    }
    match purge_keys(&state.db, &state.gate.redis(), &id).await {
        Ok(keys_deleted) => Ok(Json(PurgeReport {
            campaign: id,
            keys_deleted,
        })),
        Err(PurgeError::NotFound) => Err(extract::no_campaign(&id)),
        Err(e @ (PurgeError::Live(_) | PurgeError::HoldsOutstanding(..))) => {
            Err(ApiError::Conflict(e.to_string()))
        }
        Err(PurgeError::Store(e)) => Err(e.into()),
    }
}
