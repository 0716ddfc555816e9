//! The admin API for campaign managers (docs/ADMIN.md):
//! - `GET /admin/v1/campaigns` — campaigns with live counts (viewer);
//! - `GET /admin/v1/campaigns/{id}` — one campaign with live counts (viewer);
//! - `PATCH /admin/v1/campaigns/{id}` — pause, resume, close, restock, set stock, move the end,
//!   set the waiting room, pause or resume its admission (manager);
//! - `GET /admin/v1/campaigns/{id}/audit` — the audit trail, newest first (viewer);
//! - `GET /admin/v1/campaigns/{id}/series` — claims, sold-out answers, remaining and the
//!   edge's own answers per second over the last minutes or since a time, up to an hour
//!   (viewer; [`crate::admin::series`]);
//! - `GET /admin/v1/campaigns/{id}/claims` and `…/claims.csv` — the claims feed and its
//!   export (viewer; [`feed`]);
//! - `GET /admin` — the dashboard ([`dashboard`]).
//!
//! Every call needs an admin token: 401 without one, 403 with an unknown one or a viewer token
//! on a write. Errors have the documented body `{"result","message"}`.

pub mod dashboard;
pub mod feed;
pub mod idempotency;

use super::extract::Path;
use crate::http::openapi::errors;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
pub use flashgate_shared::api::admin::{AuditList, CampaignList, ChangeReply};
use flashgate_shared::api::{is_valid_slug, CampaignSeries, CampaignView, ErrorBody};

use super::extract::{self, Admin, Role};
use super::openapi::params::AdminIdempotencyKey;
use crate::admin::audit;
use crate::admin::toggles::{self, Applied, Change, ChangeRequest, GateFollow};
use crate::admin::{series, views};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The checks of a call on campaign `id`: an admin token of role `needed` (401/403), then the
/// slug shape of the id (anything else cannot exist: 404). Returns who called.
fn authorize(headers: &HeaderMap, state: &AppState, needed: Role, id: &str) -> ApiResult<Admin> {
    let who = extract::admin(headers, state, needed)?;
    tracing::Span::current().record("campaign", id);
    if is_valid_slug(id) {
        Ok(who)
    } else {
        Err(extract::no_campaign(id))
    }
}

/// 200 with the newest campaigns and their live counts.
#[utoipa::path(
    get,
    path = "/admin/v1/campaigns",
    tag = "admin",
    security(("admin_token" = [])),
    responses((status = 200, description = "The newest campaigns (at most 500) with live counts.",
        body = CampaignList)),
)]
pub async fn list(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    extract::admin(&headers, &state, Role::Viewer)?;
    let mut campaigns = views::list(&state.db).await?;
    crate::queue::fill_views(&state, &mut campaigns).await;
    Ok(Json(CampaignList { campaigns }).into_response())
}

/// 200 with one campaign and its live counts; 404 when unknown.
#[utoipa::path(
    get,
    path = "/admin/v1/campaigns/{id}",
    tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Campaign id.")),
    responses(
        (status = 200, description = "The campaign with live counts.", body = CampaignView),
        errors::NoCampaign,
    ),
)]
pub async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    authorize(&headers, &state, Role::Viewer, &id)?;
    let mut view = views::show(&state.db, &id)
        .await?
        .ok_or_else(|| extract::no_campaign(&id))?;
    crate::queue::fill_views(&state, std::slice::from_mut(&mut view)).await;
    Ok(Json(view).into_response())
}

/// 200 with the campaign's audit trail; 404 when the campaign is unknown.
#[utoipa::path(
    get,
    path = "/admin/v1/campaigns/{id}/audit",
    tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Campaign id.")),
    responses(
        (status = 200, description = "The audit trail, newest first.", body = AuditList),
        errors::NoCampaign,
    ),
)]
pub async fn audit_trail(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    authorize(&headers, &state, Role::Viewer, &id)?;
    if crate::campaigns::store::find(&state.db, &id)
        .await?
        .is_none()
    {
        return Err(extract::no_campaign(&id));
    }
    let entries = audit::list(&state.db, &id).await?;
    Ok(Json(AuditList {
        campaign: id,
        entries,
    })
    .into_response())
}

/// The query of [`series_of`]: `?seconds=N` or `?from=<time>`, not both.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SeriesQuery {
    /// Seconds back from now (1 to [`series::MAX_SECONDS`]; default
    /// [`series::DEFAULT_SECONDS`]).
    #[param(minimum = 1, maximum = 3600)]
    pub seconds: Option<i64>,
    /// The first second of the series (RFC 3339), e.g. the sale's start: the series runs from
    /// it to now, at most the last 3,600 s (an earlier `from` starts 3,600 s back; a later
    /// one, the current second only).
    pub from: Option<chrono::DateTime<chrono::Utc>>,
}

/// 200 with the campaign's per-second series ([`series::CampaignSeries`]); 404 when the
/// campaign is unknown; 422 `validation_failed` for `seconds` outside 1..=3600, a `from` that
/// is not an RFC 3339 time, both, or another query parameter.
#[utoipa::path(
    get,
    path = "/admin/v1/campaigns/{id}/series",
    tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Campaign id."), SeriesQuery),
    responses(
        (status = 200, description = "Per second over the last `seconds` seconds, or from \
            `from` to now.", body = CampaignSeries),
        errors::NoCampaign,
        (status = 422, description = "validation_failed: `seconds` outside 1..=3600, a `from` \
            that is not an RFC 3339 time, both, or another query parameter.", body = ErrorBody),
    ),
)]
pub async fn series_of(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    q: Result<Query<SeriesQuery>, QueryRejection>,
) -> ApiResult<Response> {
    authorize(&headers, &state, Role::Viewer, &id)?;
    let bad = || {
        ApiError::validation(format!(
            "the query must be ?seconds=N with N a whole number from 1 to {}, or \
             ?from=<RFC 3339 time>",
            series::MAX_SECONDS
        ))
    };
    let Query(q) = q.map_err(|_| bad())?;
    let seconds = match (q.seconds, q.from) {
        (Some(_), Some(_)) => return Err(bad()),
        (None, Some(from)) => series::seconds_since(from, chrono::Utc::now()),
        (seconds, None) => seconds.unwrap_or(series::DEFAULT_SECONDS),
    };
    if !(1..=series::MAX_SECONDS).contains(&seconds) {
        return Err(bad());
    }
    let body = series::read(&state.db, &state.metrics.sold_out_series, &id, seconds)
        .await?
        .ok_or_else(|| extract::no_campaign(&id))?;
    Ok(Json(body).into_response())
}

/// Applies one change (manager token). 200 with [`ChangeReply`]; 404 unknown campaign; 409
/// `conflict` when the campaign's facts forbid it (stock below the units claimed, stock above
/// the maximum, a restock or stock change of a campaign with variants: their stock changes per
/// variant, [`super::variants::put`]); 422 `validation_failed` for a bad body, an end before the start or an end that
/// is not in the future (`close` ends a campaign now), a waiting room on a draw or a draw's end
/// not after its `draw.entries_close_at` ([`super::draw::check_change`]); 400, 413,
/// 415 for malformed requests. Nothing is written on any refusal.
#[utoipa::path(
    patch,
    path = "/admin/v1/campaigns/{id}",
    tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Campaign id."), AdminIdempotencyKey),
    request_body(content = ChangeRequest, description = "Exactly one of \
        `{\"action\":\"pause\"}`, `resume`, `close`, `pause_admission`, `resume_admission`, \
        `{\"action\":\"restock\",\"add\":n}`, `{\"set_stock\":n}`, `{\"ends_at\":…}`, \
        `{\"waiting_room\":{…}}`, `{\"hold_extension_seconds\":n}`.", example = json!({"action": "pause"})),
    responses(
        (status = 200, description = "Applied (or already so: `changed` false).",
            body = ChangeReply),
        errors::JsonBody,
        errors::NoCampaign,
        (status = 409, description = "conflict: the campaign's facts forbid it (stock below the \
            units claimed; a restock or `set_stock` of a campaign with variants, whose stock \
            changes per variant); in_progress (+ `Retry-After`) for a running request with this key.",
            body = ErrorBody, headers(("Retry-After" = u32))),
        (status = 422, description = "validation_failed (an unknown action, an end before the \
            start or not in the future, a waiting room on a draw, a draw's end not after its \
            entries close, …), idempotency_key_reused.",
            body = ErrorBody),
    ),
)]
pub async fn change(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let who = authorize(&headers, &state, Role::Manager, &id)?;
    let request: ChangeRequest =
        extract::json_body_with_times(&headers, body, &["ends_at"]).await?;
    let change = Change::try_from(request).map_err(ApiError::validation)?;
    if let Change::SetEndsAt { ends_at } = change {
        flashgate_shared::api::check_end_ahead("ends_at", ends_at, chrono::Utc::now())
            .map_err(ApiError::validation)?;
    }
    super::draw::check_change(&state, &id, &change).await?;
    if matches!(change, Change::SetWaitingRoom { .. }) {
        crate::queue::require_secret(&state)?;
    }
    // A campaign with variants has the stock of its variants: it changes per variant.
    if change.moves_stock() && !state.campaigns.variants(&state.db, &id).await?.is_empty() {
        return Err(ApiError::Conflict(
            "this campaign has variants: change a variant's stock \
             (PUT /admin/v1/campaigns/{id}/variants/{variant})"
                .into(),
        ));
    }
    // A stock change holds the gate's change lock from before its commit until the gate has
    // followed it, so a correction of the gate never sees it in PostgreSQL only (it would take
    // the units off twice). Without Redis, or after the wait, it goes on unlocked: the claim
    // commit still decides in SQL.
    let mut gate_handle = state.gate.clone();
    let lock = if change.moves_stock() {
        crate::gate::lock_changes(&mut gate_handle, &id)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(campaign = %id, error = %e, "gate change lock not taken");
                None
            })
    } else {
        None
    };
    let applied = toggles::apply(&state.db, &id, &who, change).await;
    let followed = match applied {
        Ok(Applied::Changed {
            ref before,
            ref after,
            ..
        }) => Some(toggles::follow(&state.db, &mut gate_handle, &id, change, before, after).await),
        _ => None,
    };
    if let Some(lock) = lock {
        lock.release(&mut gate_handle).await;
    }
    let (changed, audit, gate) = match applied? {
        Applied::NotFound => return Err(extract::no_campaign(&id)),
        Applied::Unchanged { before } => {
            toggles::refusal(change, &before).map_err(|message| match change {
                Change::SetEndsAt { .. } | Change::SetHoldExtension { .. } => {
                    ApiError::validation(message)
                }
                _ => ApiError::Conflict(message),
            })?;
            (false, None, GateFollow::NotNeeded)
        }
        Applied::Changed { audit, .. } => {
            state.campaigns.invalidate(&id).await;
            let gate = followed.unwrap_or(GateFollow::Pending);
            state.flags.clear(&id);
            tracing::info!(
                campaign = %id,
                actor = %who.name,
                action = change.action(),
                seq = audit.seq,
                "campaign changed by a manager"
            );
            (true, Some(*audit), gate)
        }
    };
    tracing::Span::current().record("outcome", change.action());
    let mut campaign = views::show(&state.db, &id)
        .await?
        .ok_or_else(|| extract::no_campaign(&id))?;
    crate::queue::fill_views(&state, std::slice::from_mut(&mut campaign)).await;
    Ok(Json(ChangeReply {
        changed,
        campaign,
        audit,
        gate,
    })
    .into_response())
}
