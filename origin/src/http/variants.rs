//! `PUT /admin/v1/campaigns/{id}/variants/{variant}`: a manager adds a variant to a campaign
//! with variants, or changes one's name and stock ([`crate::campaigns::variants::set`]).

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flashgate_shared::api::{
    check_variant, is_valid_slug, ErrorBody, GateFollow, SetVariant, VariantReply,
};

use super::extract::{self, Path, Role};
use super::openapi::params::AdminIdempotencyKey;
use crate::campaigns::variants::{self, SetOutcome, VariantRow};
use crate::error::{ApiError, ApiResult};
use crate::http::openapi::errors;
use crate::state::AppState;

/// Adds variant `variant` to campaign `id` or changes it (manager token), with its
/// `set_variant` audit row; the campaign's stock and remaining move by the variant's stock
/// change, and the Redis gate follows (under the campaign's change lock). 200 with the variant
/// (`changed: false` when it already was so: nothing written). Errors, each changing nothing:
/// 404 no such campaign; 409 the campaign has ended, has no variants (variants are given at
/// creation), or the stock is below the variant's claimed units; 422 a rule of the body
/// (`name`, `stock` 0..=10,000,000, the variant id's shape) or of the bounds (more than 1,000
/// variants, a campaign stock past 10,000,000). Idempotent with `Idempotency-Key` like every
/// admin write.
#[utoipa::path(
    put,
    path = "/admin/v1/campaigns/{id}/variants/{variant}",
    tag = "admin",
    security(("admin_token" = [])),
    params(
        ("id" = String, Path, description = "Campaign id."),
        ("variant" = String, Path, description = "Variant id, a slug `[a-z0-9-]{1,64}`."),
        AdminIdempotencyKey,
    ),
    request_body(content = SetVariant, example = json!({"name": "Size 42", "stock": 25})),
    responses(
        (status = 200, description = "The variant after the change (audited as `set_variant`).",
            body = VariantReply),
        errors::NoCampaign,
        (status = 409, description = "conflict: the campaign has ended, has no variants, or \
            the stock is below the variant's claimed units.", body = ErrorBody),
        (status = 422, description = "validation_failed: a rule of the body or of the bounds \
            (at most 1,000 variants; a campaign stock of at most 10,000,000).",
            body = ErrorBody),
    ),
)]
pub async fn put(
    State(state): State<AppState>,
    Path((id, variant)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let who = extract::admin(&headers, &state, Role::Manager)?;
    if !is_valid_slug(&id) {
        return Err(extract::no_campaign(&id));
    }
    let new: SetVariant = extract::json_body(&headers, body).await?;
    check_variant(&variant, &new.name, new.stock).map_err(ApiError::validation)?;
    let mut gate = state.gate.clone();
    let lock = crate::gate::lock_changes(&mut gate, &id)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(campaign = %id, error = %e, "gate change lock not taken");
            None
        });
    let outcome = variants::set(&state.db, &id, &variant, &new, &who.name).await;
    let followed = match &outcome {
        Ok(SetOutcome::Changed { before, after, .. }) => {
            Some(follow(&state, &mut gate, &id, before.as_ref(), after).await)
        }
        _ => None,
    };
    if let Some(lock) = lock {
        lock.release(&mut gate).await;
    }
    let (changed, row, audit, gate) = match outcome? {
        SetOutcome::NotFound => return Err(extract::no_campaign(&id)),
        SetOutcome::Conflict(m) => return Err(ApiError::Conflict(m)),
        SetOutcome::Invalid(m) => return Err(ApiError::validation(m)),
        SetOutcome::Unchanged(row) => (false, row, None, GateFollow::NotNeeded),
        SetOutcome::Changed { after, audit, .. } => {
            state.campaigns.invalidate(&id).await;
            state.flags.clear(&id);
            let gate = followed.unwrap_or(GateFollow::Pending);
            (true, after, Some(*audit), gate)
        }
    };
    let campaign = extract::campaign(&state, &id).await?;
    let reply = VariantReply {
        changed,
        variant: row.status(campaign.state_at(chrono::Utc::now())),
        audit,
        gate,
    };
    Ok(Json(reply).into_response())
}

/// The gate follows a committed variant change: its stock's difference moves the variant's
/// count and the campaign's ([`crate::gate::variants::adjust`]), bounded by PostgreSQL's
/// `remaining` of each read now.
async fn follow(
    state: &AppState,
    gate: &mut crate::gate::Gate,
    c: &str,
    before: Option<&VariantRow>,
    after: &VariantRow,
) -> GateFollow {
    let delta = after.stock - before.map_or(0, |b| b.stock);
    if delta == 0 {
        return GateFollow::NotNeeded;
    }
    let pg_campaign = match crate::gate::pg_remaining(&state.db, c).await {
        Ok(Some(r)) => r,
        _ => return GateFollow::Pending,
    };
    match crate::gate::variants::adjust(gate, c, &after.id, delta, after.remaining, pg_campaign)
        .await
    {
        Ok(true) => GateFollow::Updated,
        Ok(false) => GateFollow::Pending,
        Err(e) => {
            tracing::warn!(campaign = %c, error = %e, "gate did not follow the variant change");
            GateFollow::Pending
        }
    }
}
