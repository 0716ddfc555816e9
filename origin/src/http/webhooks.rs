//! The webhook admin API (docs/WEBHOOKS.md; admin tokens: writes need `manager`, reads
//! `viewer`; every write has its `webhook_audit` row and takes an `Idempotency-Key`):
//! - `POST /admin/v1/webhooks/endpoints` `{url, event_types, description?, enabled?, secret?}`
//!   → 201 the endpoint with its secret;
//! - `GET /admin/v1/webhooks/endpoints` → every endpoint (no secrets);
//! - `GET /admin/v1/webhooks/endpoints/{id}` → one;
//! - `PATCH /admin/v1/webhooks/endpoints/{id}` `{url?, event_types?, description?, enabled?}`;
//! - `DELETE /admin/v1/webhooks/endpoints/{id}` → 204 (its deliveries go with it);
//! - `POST /admin/v1/webhooks/endpoints/{id}/rotate` → the new secret; the old one signs too
//!   for `FLASHGATE_WEBHOOK_ROTATION_OVERLAP_SECONDS`;
//! - `GET /admin/v1/webhooks/endpoints/{id}/deliveries[?status=]` → the newest deliveries;
//! - `POST /admin/v1/webhooks/endpoints/{id}/replay` `{event_id}` or `{since}` → 202 queued.
//!
//! Bad input is refused before anything is written: 401/403 token, 415, 413, 400 JSON, 404
//! unknown endpoint, 422 a value (unknown event type, a URL that is not https or names a
//! private address, a secret of the wrong shape or length, a description too long).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use flashgate_shared::api::webhooks::{
    DeliveryList, DeliveryState, Endpoint, EndpointChange, EndpointList, EndpointWithSecret,
    EventType, NewEndpoint, ReplayRequest, Replayed,
};
use flashgate_shared::api::ErrorBody;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::http::extract::{self, ManagerJson, Path, Role};
use crate::http::openapi::errors;
use crate::http::openapi::params::AdminIdempotencyKey;
use crate::state::AppState;
use crate::webhooks::deliveries::{self, Replay};
use crate::webhooks::endpoints::{self, Checked, CheckedChange};
use crate::webhooks::{sign, urls};

/// Longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 500;

/// 404 unless `raw` is a UUID.
fn endpoint_id(raw: &str) -> ApiResult<Uuid> {
    Uuid::parse_str(raw).map_err(|_| no_endpoint())
}

fn no_endpoint() -> ApiError {
    ApiError::NotFound("no such webhook endpoint".into())
}

/// The event types of a request: at least one, each known, no repeats kept.
fn event_types(names: &[String]) -> ApiResult<Vec<EventType>> {
    if names.is_empty() {
        return Err(ApiError::validation(
            "event_types must name at least one event type",
        ));
    }
    let mut out = Vec::new();
    for n in names {
        let t = EventType::parse(n).ok_or_else(|| {
            let known: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
            ApiError::validation(format!(
                "unknown event type '{}' (one of: {})",
                n.chars().take(64).collect::<String>(),
                known.join(", ")
            ))
        })?;
        if !out.contains(&t) {
            out.push(t);
        }
    }
    Ok(out)
}

async fn url(state: &AppState, url: &str) -> ApiResult<String> {
    urls::check(url, state.config.webhooks.webhook_allow_private)
        .await
        .map(|u| u.to_string())
        .map_err(|e| ApiError::validation(e.to_string()))
}

fn description(d: &str) -> ApiResult<()> {
    if d.chars().count() > MAX_DESCRIPTION_CHARS || d.chars().any(char::is_control) {
        return Err(ApiError::validation(format!(
            "description must be at most {MAX_DESCRIPTION_CHARS} characters, without control characters"
        )));
    }
    Ok(())
}

/// Registers an endpoint: 201 with it and its secret (shown here and after a rotation only).
#[utoipa::path(
    post,
    path = "/admin/v1/webhooks/endpoints",
    tag = "webhooks",
    security(("admin_token" = [])),
    params(AdminIdempotencyKey),
    request_body(content = NewEndpoint, example = json!({"url": "https://shop.example/hooks",
        "event_types": ["claim.held", "claim.paid", "claim.released", "claim.expired"],
        "description": "checkout"})),
    responses(
        (status = 201, description = "The endpoint, created (audited), with its secret.",
            body = EndpointWithSecret),
        errors::JsonBody,
        (status = 409, description = "in_progress (+ `Retry-After`).", body = ErrorBody),
        (status = 422, description = "validation_failed: url (not https, a private address), \
            an unknown event type, a secret of the wrong shape or length, description; \
            idempotency_key_reused.", body = ErrorBody),
    ),
)]
pub async fn create(
    State(state): State<AppState>,
    ManagerJson { who, body }: ManagerJson<NewEndpoint>,
) -> ApiResult<Response> {
    let types = event_types(&body.event_types)?;
    description(&body.description)?;
    let secret = match body.secret {
        Some(s) => {
            sign::key_of(&s).map_err(|e| ApiError::validation(format!("secret: {e}")))?;
            s
        }
        None => sign::new_secret(),
    };
    let checked = Checked {
        url: url(&state, &body.url).await?,
        event_types: types,
        description: body.description,
        enabled: body.enabled,
        secret,
    };
    let created = endpoints::create(&state.db, &who.name, &checked).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// Every endpoint, oldest first (viewer).
#[utoipa::path(
    get,
    path = "/admin/v1/webhooks/endpoints",
    tag = "webhooks",
    security(("admin_token" = [])),
    responses((status = 200, description = "The endpoints (at most 500), without secrets.",
        body = EndpointList)),
)]
pub async fn list(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    extract::admin(&headers, &state, Role::Viewer)?;
    let endpoints = endpoints::list(&state.db).await?;
    Ok(Json(EndpointList { endpoints }).into_response())
}

/// One endpoint (viewer); 404 unknown.
#[utoipa::path(
    get,
    path = "/admin/v1/webhooks/endpoints/{id}",
    tag = "webhooks",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Endpoint id (UUID).")),
    responses(
        (status = 200, description = "The endpoint, without its secret.", body = Endpoint),
        errors::NotFound,
    ),
)]
pub async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    extract::admin(&headers, &state, Role::Viewer)?;
    let id = endpoint_id(&id)?;
    let e = endpoints::find(&state.db, id)
        .await?
        .ok_or_else(no_endpoint)?;
    Ok(Json(e).into_response())
}

/// Changes an endpoint (manager): url, event types, description, enabled; absent fields stay.
#[utoipa::path(
    patch,
    path = "/admin/v1/webhooks/endpoints/{id}",
    tag = "webhooks",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Endpoint id (UUID)."), AdminIdempotencyKey),
    request_body(content = EndpointChange, example = json!({"enabled": false})),
    responses(
        (status = 200, description = "The endpoint, changed (audited).", body = Endpoint),
        errors::InvalidJson,
        errors::NotFound,
        (status = 422, description = "validation_failed: as at creation.", body = ErrorBody),
    ),
)]
pub async fn change(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ManagerJson { who, body }: ManagerJson<EndpointChange>,
) -> ApiResult<Response> {
    let id = endpoint_id(&id)?;
    let mut checked = CheckedChange {
        enabled: body.enabled,
        ..CheckedChange::default()
    };
    if let Some(t) = &body.event_types {
        checked.event_types = Some(event_types(t)?);
    }
    if let Some(d) = body.description {
        description(&d)?;
        checked.description = Some(d);
    }
    if let Some(u) = &body.url {
        checked.url = Some(url(&state, u).await?);
    }
    let e = endpoints::change(&state.db, &who.name, id, &checked)
        .await?
        .ok_or_else(no_endpoint)?;
    Ok(Json(e).into_response())
}

/// Deletes an endpoint and its deliveries (manager): 204; 404 unknown.
#[utoipa::path(
    delete,
    path = "/admin/v1/webhooks/endpoints/{id}",
    tag = "webhooks",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Endpoint id (UUID)."), AdminIdempotencyKey),
    responses(
        (status = 204, description = "Deleted (audited)."),
        errors::NotFound,
    ),
)]
pub async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let who = extract::admin(&headers, &state, Role::Manager)?;
    let id = endpoint_id(&id)?;
    if endpoints::delete(&state.db, &who.name, id).await? {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(no_endpoint())
    }
}

/// Rotates an endpoint's secret (manager): a new random secret signs from now on; the previous
/// one keeps signing (a second signature) for `FLASHGATE_WEBHOOK_ROTATION_OVERLAP_SECONDS`.
#[utoipa::path(
    post,
    path = "/admin/v1/webhooks/endpoints/{id}/rotate",
    tag = "webhooks",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Endpoint id (UUID)."), AdminIdempotencyKey),
    responses(
        (status = 200, description = "The endpoint with its new secret (audited).",
            body = EndpointWithSecret),
        errors::NotFound,
    ),
)]
pub async fn rotate(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let who = extract::admin(&headers, &state, Role::Manager)?;
    let id = endpoint_id(&id)?;
    let overlap = state
        .config
        .webhooks
        .webhook_rotation_overlap_seconds
        .max(0);
    let e = endpoints::rotate(&state.db, &who.name, id, &sign::new_secret(), overlap)
        .await?
        .ok_or_else(no_endpoint)?;
    Ok(Json(e).into_response())
}

/// The `status` filter of the delivery list.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeliveryQuery {
    /// `pending`, `delivered` or `failed`.
    pub status: Option<String>,
}

/// The newest deliveries of an endpoint (viewer): status, attempts, last response code and
/// time.
#[utoipa::path(
    get,
    path = "/admin/v1/webhooks/endpoints/{id}/deliveries",
    tag = "webhooks",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Endpoint id (UUID)."), DeliveryQuery),
    responses(
        (status = 200, description = "The newest deliveries (at most 1,000).", body = DeliveryList),
        errors::NotFound,
        errors::UnknownStatus,
    ),
)]
pub async fn list_deliveries(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    q: Result<Query<DeliveryQuery>, QueryRejection>,
) -> ApiResult<Response> {
    extract::admin(&headers, &state, Role::Viewer)?;
    let id = endpoint_id(&id)?;
    let Query(q) = q.map_err(|e| ApiError::validation(e.body_text()))?;
    let status =
        match q.status.as_deref() {
            None => None,
            Some(s) => Some(DeliveryState::parse(s).ok_or_else(|| {
                ApiError::validation("status must be pending, delivered or failed")
            })?),
        };
    endpoints::find(&state.db, id)
        .await?
        .ok_or_else(no_endpoint)?;
    let deliveries = deliveries::list(&state.db, id, status).await?;
    Ok(Json(DeliveryList { deliveries }).into_response())
}

/// Sends events again to an endpoint (manager): one event (`event_id`), or every event of its
/// types since a time (`since`); exactly one of the two. 202 with the number queued.
#[utoipa::path(
    post,
    path = "/admin/v1/webhooks/endpoints/{id}/replay",
    tag = "webhooks",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Endpoint id (UUID)."), AdminIdempotencyKey),
    request_body(content = ReplayRequest, example = json!({"since": "2030-01-01T00:00:00Z"})),
    responses(
        (status = 202, description = "Queued (audited).", body = Replayed),
        errors::NotFound,
        (status = 422, description = "validation_failed: neither or both of event_id and since; \
            an event_id that is not a UUID.", body = ErrorBody),
    ),
)]
pub async fn replay(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ManagerJson { who, body }: ManagerJson<ReplayRequest>,
) -> ApiResult<Response> {
    let id = endpoint_id(&id)?;
    let what = match (body.event_id, body.since) {
        (Some(e), None) => Replay::Event(
            Uuid::parse_str(&e).map_err(|_| ApiError::validation("event_id must be a UUID"))?,
        ),
        (None, Some(t)) => Replay::Since(t),
        _ => {
            return Err(ApiError::validation(
                "give exactly one of event_id and since",
            ))
        }
    };
    let queued = deliveries::replay(&state.db, &who.name, id, what)
        .await?
        .ok_or_else(no_endpoint)?;
    Ok((StatusCode::ACCEPTED, Json(Replayed { queued })).into_response())
}
