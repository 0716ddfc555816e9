//! `GET /api/v1/campaigns/{id}` (public status), `POST /admin/v1/campaigns` (create),
//! `GET /edge/v1/campaign-index` (the campaign index the edge fetches) and
//! `GET /edge/v1/campaigns/{id}/winners-filter` (a sold-out campaign's winners, for the edge).

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::{AdminCampaign, ErrorBody, NewCampaign};
use flashgate_shared::queue::QueueStatus;

use super::extract::{self, Path};
use super::openapi::params::AdminIdempotencyKey;
use crate::campaigns::store;
use crate::campaigns::winners::BuildError;
use crate::error::{ApiError, ApiResult};
use crate::http::openapi::errors;
use crate::state::AppState;

/// The public status body: [`flashgate_shared::api::CampaignStatus`] plus, for a campaign with a
/// waiting room, `"queue"` ([`QueueStatus`], exactly as the edge parses it).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = PublicStatus)]
struct StatusBody {
    #[serde(flatten)]
    status: flashgate_shared::api::CampaignStatus,
    /// The waiting room's figures; only with a waiting room.
    #[serde(skip_serializing_if = "Option::is_none")]
    queue: Option<QueueStatus>,
    /// A draw campaign's draw: its state, windows and commitment (never its `result`: the
    /// reveal is `GET /api/v1/campaigns/{id}/draw`); only on a draw.
    #[serde(skip_serializing_if = "Option::is_none")]
    draw: Option<flashgate_shared::api::DrawStatus>,
    /// The campaign's variants (id, name, stock, remaining, state; a variant is `sold_out`
    /// alone while others have units, the campaign only when every variant is); only on a
    /// campaign with variants.
    #[serde(skip_serializing_if = "Option::is_none")]
    variants: Option<Vec<flashgate_shared::api::VariantStatus>>,
}

/// 200 with the campaign's public status (with `variants` when it has variants, `queue` when
/// it has a waiting room, `draw` and its commitment on a draw campaign; 503 when Redis cannot
/// tell the queue's figures), `Cache-Control: public, max-age=1`; 404 when unknown.
/// The state is decided by the origin's clock. Counts may be up to `FLASHGATE_CAMPAIGN_CACHE_MS`
/// old.
#[utoipa::path(
    get,
    path = "/api/v1/campaigns/{id}",
    tag = "public",
    params(("id" = String, Path, description = "Campaign id, a slug `[a-z0-9-]{1,64}`.")),
    responses(
        (status = 200, description = "The campaign's public status; `Cache-Control: public, max-age=1` \
            (`max-age=<TTL>` at the edge). `queue` only with a waiting room, `draw` only on a draw.",
            body = StatusBody,
            example = json!({"id": "tshirt", "name": "T-shirt drop", "kind": "sale", "state": "active",
                "stock": 3, "remaining": 2, "starts_at": "2026-01-01T12:00:00Z",
                "ends_at": "2026-01-01T13:00:00Z"})),
        (status = 404, description = "not_found: no such campaign.", body = ErrorBody,
            example = json!({"result": "not_found", "message": "no campaign tshirt"})),
    ),
)]
pub async fn status(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    state.metrics.status_requests.inc();
    tracing::Span::current().record("campaign", id.as_str());
    let row = extract::campaign(&state, &id).await?;
    let draw = match crate::access::admit::is_draw(&state.draw_kinds, &state.db, &id).await? {
        true => crate::access::store::find(&state.db, &id)
            .await?
            .map(|d| crate::access::store::brief(&d)),
        false => None,
    };
    let status = row.status_at(chrono::Utc::now());
    let variants = state.campaigns.variants(&state.db, &id).await?;
    let variants =
        (!variants.is_empty()).then(|| variants.iter().map(|v| v.status(status.state)).collect());
    let body = StatusBody {
        status,
        queue: crate::queue::status(&state, &row).await?,
        draw,
        variants,
    };
    Ok(super::public_status(body))
}

/// Creates a campaign (manager token) with its `create` audit row, and opens its waiting room
/// when it has one; a draw campaign (`access: "draw"`) gets its secret seed and commitment in
/// the same transaction. 201 with the campaign; 409 when the id exists; 422 when a rule of
/// [`NewCampaign::validate`] is broken, `ends_at` (or a draw's `draw.entries_close_at`) is not in
/// the future ([`flashgate_shared::api::check_end_ahead`],
/// [`flashgate_shared::api::check_entries_ahead`]; nothing is written, no gate loaded), or a
/// waiting room is asked for on an origin without
/// `FLASHGATE_EDGE_SECRET`; 401/403 without / with a wrong token.
#[utoipa::path(
    post,
    path = "/admin/v1/campaigns",
    tag = "admin",
    security(("admin_token" = [])),
    params(AdminIdempotencyKey),
    request_body(content = NewCampaign, description = "Times as RFC 3339, a local date-time + IANA \
        zone, or e.g. `\"Sunday 23:59 Europe/Paris\"` (docs/ADMIN.md, \"Times\").",
        example = json!({"id": "tshirt", "name": "T-shirt drop", "kind": "sale", "stock": 3,
            "starts_at": "2030-01-01T12:00:00Z", "ends_at": "2030-01-01T13:00:00Z"})),
    responses(
        (status = 201, description = "The campaign, created (audited).", body = AdminCampaign),
        errors::InvalidJson,
        (status = 409, description = "conflict: a campaign with this id exists; in_progress \
            (+ `Retry-After`) while the first request with this `Idempotency-Key` runs.",
            body = ErrorBody, headers(("Retry-After" = u32))),
        errors::PayloadTooLarge,
        errors::NotJson,
        (status = 422, description = "validation_failed (a rule of the body, naming the field: \
            e.g. `ends_at` or a draw's `draw.entries_close_at` not in the future, nothing \
            created; a waiting room on an origin \
            without an edge secret; `variants`: more than 1,000, a duplicate id, a stock below \
            0, or `stock` neither their sum nor 0) or idempotency_key_reused.",
            body = ErrorBody),
    ),
)]
pub async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let admin = extract::admin(&headers, &state, extract::Role::Manager)?;
    let new: NewCampaign =
        extract::json_body_with_times(&headers, body, &["starts_at", "ends_at"]).await?;
    new.validate().map_err(ApiError::validation)?;
    // Checked before anything is written: a campaign created already ended would have its
    // gate loaded into Redis for nothing.
    let now = chrono::Utc::now();
    flashgate_shared::api::check_end_ahead("ends_at", new.ends_at, now)
        .map_err(ApiError::validation)?;
    if let Some(d) = &new.draw {
        flashgate_shared::api::check_entries_ahead(d, now).map_err(ApiError::validation)?;
    }
    if new.waiting_room.is_some() || new.draw.is_some() {
        crate::queue::require_secret(&state)?;
    }
    // The campaign, its variants and a draw's row (its seed and commitment) are written
    // together, or none is.
    let mut tx = state.db.begin().await?;
    let row = store::insert(&mut *tx, &new, &admin.name)
        .await?
        .ok_or_else(|| ApiError::Conflict(format!("campaign {} exists", new.id)))?;
    if let Some(variants) = &new.variants {
        crate::campaigns::variants::insert_all(&mut tx, &row.id, variants).await?;
    }
    if let Some(d) = &new.draw {
        crate::access::store::create(&mut *tx, &row.id, d).await?;
    }
    tx.commit().await?;
    let mut gate = state.gate.clone();
    crate::gate::load::load(&state.db, &mut gate, &row.id)
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    if row.waiting_room.is_some() {
        crate::queue::store::open(&mut state.redis.clone(), &row.id).await?;
    }
    state.campaigns.invalidate(&row.id).await;
    state.campaigns.invalidate_index().await;
    let body = AdminCampaign {
        status: row.status_at(chrono::Utc::now()),
        hold_seconds: row.hold_seconds.map(i64::from),
        hold_extension_seconds: i64::from(row.hold_extension_seconds),
        paused: row.paused,
        gate_shards: i64::from(row.gate_shards),
        waiting_room: row.waiting_room(),
        queue: None,
    };
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}

/// `GET /edge/v1/campaign-index`: the campaign index ([`flashgate_shared::campaign_index`]) of
/// the campaigns that have not ended or ended at most 7 days (+ up to 1 hour) ago, at most
/// `FLASHGATE_CAMPAIGN_CACHE_MS` old (a campaign created through this origin is listed at
/// once). 200 with the body, `Content-Type: application/vnd.flashgate.campaign-index` and an
/// `ETag`; 304 (no body) when `If-None-Match` names the current `ETag`. For the edge: a valid
/// edge signature (over `GET`, the path and an empty body) or, without one,
/// `Authorization: Bearer <service token>`; an origin without an edge secret takes any caller
/// (the index holds fingerprints, not ids). 401/403 otherwise; 503 when PostgreSQL fails.
#[utoipa::path(
    get,
    path = "/edge/v1/campaign-index",
    tag = "edge",
    security(("service_token" = []), ()),
    responses(
        (status = 200, description = "The campaign index: one 4-byte fingerprint per campaign \
            that has not ended or ended at most 7 days ago; with an `ETag`.",
            content_type = "application/vnd.flashgate.campaign-index", body = Vec<u8>,
            headers(("ETag" = String))),
        (status = 304, description = "Unchanged since the `If-None-Match` given.",
            headers(("ETag" = String))),
    ),
)]
pub async fn index(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    use flashgate_shared::campaign_index::{CONTENT_TYPE, INDEX_PATH};
    state.metrics.index_requests.inc();
    let secret = state.config.edge_secret.as_ref();
    if extract::edge_proof(&headers, secret, "GET", INDEX_PATH, b"")?
        == extract::EdgeProof::Unsigned
    {
        extract::require_token(&headers, &state.config.service_token, "the campaign index")?;
    }
    let built = state.campaigns.index(&state.db).await?;
    Ok(conditional(
        &headers,
        CONTENT_TYPE,
        &built.etag,
        &built.body,
    ))
}

/// `GET /edge/v1/campaigns/{id}/winners-filter`: the winners filter of a campaign
/// ([`flashgate_shared::winners_filter`]): the customers holding a unit, read from the gate, at
/// most `FLASHGATE_WINNERS_FILTER_MAX` of them listed ("too many" above), at most
/// `FLASHGATE_CAMPAIGN_CACHE_MS` (but at least 1 s) old. `?sold=` (16 hex digits, the edge's
/// fingerprint of the sell-outs it saw) keys the filter: each is built at its first fetch, so
/// after the sell-outs it names (another value, or none, is the key of no sell-outs). 200 with
/// the body, `Content-Type: application/vnd.flashgate.winners-filter` and an `ETag`; 304 (no
/// body) when `If-None-Match` names the current `ETag`. Callers as for the campaign index (edge
/// signature over `GET`, the path without query and an empty body, or the service token). 404
/// for an unknown campaign; 503 when Redis fails or the campaign's gate is not loaded.
#[utoipa::path(
    get,
    path = "/edge/v1/campaigns/{id}/winners-filter",
    tag = "edge",
    security(("service_token" = []), ()),
    params(
        ("id" = String, Path, description = "Campaign id."),
        ("sold" = Option<String>, Query,
            description = "The sell-outs the filter must postdate: 16 hex digits (docs/EDGE.md)."),
    ),
    responses(
        (status = 200, description = "The winners filter of the campaign (docs/EDGE.md).",
            content_type = "application/vnd.flashgate.winners-filter", body = Vec<u8>,
            headers(("ETag" = String))),
        (status = 304, description = "Unchanged since the `If-None-Match` given.",
            headers(("ETag" = String))),
        errors::NoCampaign,
    ),
)]
pub async fn winners_filter(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> ApiResult<Response> {
    use flashgate_shared::winners_filter::{path, CONTENT_TYPE};
    state.metrics.winners_filter_requests.inc();
    let secret = state.config.edge_secret.as_ref();
    if extract::edge_proof(&headers, secret, "GET", &path(&id), b"")?
        == extract::EdgeProof::Unsigned
    {
        extract::require_token(&headers, &state.config.service_token, "the winners filter")?;
    }
    let row = extract::campaign(&state, &id).await?;
    let max = state.config.winners_filter_max;
    let sold = sold_of(query.as_deref());
    let built = match state
        .campaigns
        .winners(&state.gate, &row.id, sold, max)
        .await
    {
        // A gate that is not in Redis (Redis lost it, or an ended campaign's was never loaded
        // by this Redis) is loaded here from PostgreSQL, then read once more: a 503 would never
        // clear for a campaign no claim reloads (schemathesis found it,
        // tests/tests/it/api/openapi.rs).
        Err(e) if matches!(*e, BuildError::NotLoaded(_)) => {
            let mut gate = state.gate.clone();
            crate::gate::load::load_missing(&state.db, &mut gate, &row.id)
                .await
                .map_err(|e| ApiError::Unavailable(e.to_string()))?;
            state
                .campaigns
                .winners(&state.gate, &row.id, sold, max)
                .await
        }
        other => other,
    }
    .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    Ok(conditional(
        &headers,
        CONTENT_TYPE,
        &built.etag,
        &built.body,
    ))
}

/// The `sold` of a winners filter's query: its 16 lowercase hex digits, else `""`.
fn sold_of(query: Option<&str>) -> &str {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|p| p.strip_prefix("sold="))
        .filter(|v| v.len() == 16 && v.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .unwrap_or("")
}

/// 200 with `body`, its `Content-Type` and `ETag`; 304 with the `ETag` alone when
/// `If-None-Match` names it.
fn conditional(headers: &HeaderMap, content_type: &str, etag: &str, body: &Bytes) -> Response {
    let unchanged = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag));
    if unchanged {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag.to_string())]).into_response();
    }
    (
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (header::ETAG, etag.to_string()),
        ],
        body.clone(),
    )
        .into_response()
}
