//! `GET /admin/v1/campaigns/{id}/invite-key`: the key the shop signs a campaign's invites with
//! (`invite_only` waiting rooms; [`flashgate_shared::invite`]).

use super::extract::Path;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use flashgate_shared::api::ErrorBody;
use flashgate_shared::invite::invite_key_hex;
use serde::Serialize;

use super::extract::{self, Role};
use super::openapi::errors;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// A campaign's invite key.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct InviteKey {
    /// Campaign id.
    pub campaign_id: String,
    /// The HMAC-SHA256 key of the campaign's invites, 64 lowercase hex digits (32 bytes).
    /// Derived from the edge secret: rotating that secret rotates the key.
    pub invite_key: String,
    /// Always `"HS256"` (HMAC-SHA256 over `flashgate-invite-v1.<payload>`).
    pub algorithm: &'static str,
    /// True while the campaign's waiting room is `invite_only`.
    pub invite_only: bool,
}

/// 200 with the campaign's [`InviteKey`] (whether or not the campaign is invite-only yet);
/// 404 unknown campaign; admin token of role manager (401 missing, 403 unknown or viewer);
/// 409 `conflict` when this origin has no `FLASHGATE_EDGE_SECRET` (the key is derived from
/// it, so there is none to give; a configuration to fix, not a failure to retry).
#[utoipa::path(
    get,
    path = "/admin/v1/campaigns/{id}/invite-key",
    tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Campaign id.")),
    responses(
        (status = 200, description = "The key the shop signs this campaign's invites with \
            (docs/ACCESS.md).", body = InviteKey),
        errors::NoCampaign,
        (status = 409, description = "conflict: this origin has no FLASHGATE_EDGE_SECRET, \
            which the invite key is derived from.", body = ErrorBody),
    ),
)]
pub async fn invite_key(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<InviteKey>> {
    extract::admin(&headers, &state, Role::Manager)?;
    let row = extract::campaign(&state, &id).await?;
    let secret = crate::queue::secret(&state).map_err(|_| {
        ApiError::Conflict(
            "invites need FLASHGATE_EDGE_SECRET on the origin: the invite key is derived \
             from it"
                .into(),
        )
    })?;
    Ok(Json(InviteKey {
        invite_key: invite_key_hex(secret, &row.id),
        campaign_id: row.id.clone(),
        algorithm: "HS256",
        invite_only: row.waiting_room().is_some_and(|w| w.invite_only),
    }))
}
