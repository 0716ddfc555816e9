//! The gift admin API for managers (admin tokens with roles; writes need `manager`, reads
//! `viewer`; every write has its `gift_audit` row):
//! - `POST /admin/v1/gift-campaigns` `{id, name, starts_at, ends_at}` → 201;
//! - `GET /admin/v1/gift-campaigns/{id}` → the campaign with its segments;
//! - `POST /admin/v1/gift-campaigns/{id}/segments` `{id, gift: {amount, currency}, caps}` → 201;
//! - `PATCH /admin/v1/gift-campaigns/{id}/segments/{segment}` `{caps}` → 200;
//! - `PUT /admin/v1/gift-campaigns/{id}/segments/{segment}/members` `{msisdns}` → 200
//!   `{added, already}`;
//! - `GET /admin/v1/gift-campaigns/{id}/fulfilments[?status=failed]` → the newest fulfilments;
//! - `POST /admin/v1/fulfilments/{id}/retry` → 200, a failed delivery pending again;
//! - `GET /admin/v1/fulfilments/{id}/attempts` → the fulfilment and its delivery history.
//!
//! Bad input is refused before anything is written: 401/403 token, 415, 413, 400 JSON, 404
//! unknown campaign or segment, 422 a value, 409 something that exists or conflicts.

use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use flashgate_shared::api::gifts::{
    check_caps, is_valid_gift_id, is_valid_msisdn, CapsChange, DeliveryHistory, DeliveryStatus,
    Fulfilment, FulfilmentList, GiftCampaign, Members, MembersAdded, NewGiftCampaign, NewSegment,
    Segment, MAX_GIFT_AMOUNT, MAX_GIFT_CAMPAIGN_NAME, MAX_MEMBERS_BODY_BYTES, MAX_MEMBERS_PER_CALL,
};

use super::params::{campaign_id, fulfilment_id, unknown_campaign};
use crate::error::{ApiError, ApiResult};
use crate::gifts::deliveries::{self, Retried};
use crate::gifts::history::{self, Outbox};
use crate::gifts::store::{self, MembersResult, SegmentCreated};
use crate::http::extract::{self, Admin, ManagerJson, Path, Role};
use crate::http::openapi::errors;
use crate::http::openapi::params::AdminIdempotencyKey;
use crate::state::AppState;
use flashgate_shared::api::ErrorBody;

fn unknown_segment(s: &str) -> ApiError {
    ApiError::NotFound(format!(
        "no segment {} in this campaign",
        s.chars().take(64).collect::<String>()
    ))
}

/// 422 unless `id` can name a new campaign or segment.
fn new_id(id: &str) -> ApiResult<()> {
    if is_valid_gift_id(id) {
        Ok(())
    } else {
        Err(ApiError::validation(
            "id must be 1 to 64 of A-Z, a-z, 0-9, '_' and '-'",
        ))
    }
}

fn segment_id(s: &str) -> ApiResult<()> {
    if is_valid_gift_id(s) {
        Ok(())
    } else {
        Err(unknown_segment(s))
    }
}

/// A JSON body of a segment write, with its size bound.
pub trait SegmentBody: serde::de::DeserializeOwned {
    /// Largest body accepted, in bytes (413 past it).
    const MAX_BYTES: usize = extract::MAX_JSON_BODY_BYTES;
}

impl SegmentBody for CapsChange {}

impl SegmentBody for Members {
    const MAX_BYTES: usize = MAX_MEMBERS_BODY_BYTES;
}

/// A manager's write to one segment, `…/gift-campaigns/{id}/segments/{seg}/…`: who calls, the
/// two ids and the JSON body. Refused before the body is parsed: 401/403 a token that is not a
/// manager's, 404 an id that cannot name a campaign or segment (no query is made); then the
/// body: 415 not JSON, 413 past [`SegmentBody::MAX_BYTES`], 400/422 as [`extract::parse_json`].
pub struct SegmentWrite<T> {
    /// The caller, for the audit trail.
    pub who: Admin,
    /// The campaign id.
    pub id: String,
    /// The segment id.
    pub seg: String,
    /// The body.
    pub body: T,
}

impl<T: SegmentBody> FromRequest<AppState> for SegmentWrite<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> ApiResult<Self> {
        let (mut parts, body) = req.into_parts();
        let Path((id, seg)) =
            Path::<(String, String)>::from_request_parts(&mut parts, state).await?;
        let who = extract::admin(&parts.headers, state, Role::Manager)?;
        campaign_id(&id)?;
        segment_id(&seg)?;
        extract::require_json(&parts.headers)?;
        let bytes = extract::read_body(&parts.headers, body, T::MAX_BYTES).await?;
        let body = extract::parse_json(&bytes)?;
        Ok(SegmentWrite { who, id, seg, body })
    }
}

/// Creates a campaign: 201 with it; 409 when the id exists; 422 a bad id (1..=64 of
/// `[A-Za-z0-9_-]`), name (1..=200 characters, no control character), a time in none of the
/// admin API's forms (RFC 3339, or a zone time such as `Sunday 23:59 Europe/Paris`; the error
/// names the field), `ends_at` not after `starts_at`, or `ends_at` not in the future.
#[utoipa::path(
    post,
    path = "/admin/v1/gift-campaigns",
    tag = "gifts",
    security(("admin_token" = [])),
    params(AdminIdempotencyKey),
    request_body(content = NewGiftCampaign, example = json!({"id": "spring", "name": "Spring gifts",
        "starts_at": "2030-03-01T00:00:00Z", "ends_at": "2030-06-01T00:00:00Z"})),
    responses(
        (status = 201, description = "The gift campaign, created (audited).", body = GiftCampaign),
        errors::JsonBody,
        (status = 409, description = "conflict: the id exists; in_progress (+ `Retry-After`).",
            body = ErrorBody, headers(("Retry-After" = u32))),
        (status = 422, description = "validation_failed: id, name, a time, `ends_at` not after \
            `starts_at` or not in the future; idempotency_key_reused.", body = ErrorBody),
    ),
)]
pub async fn create_campaign(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> ApiResult<Response> {
    // The manager's token first, then the body, as every manager write (ManagerJson) does.
    let who = extract::admin(&headers, &state, Role::Manager)?;
    let c: NewGiftCampaign =
        extract::json_body_with_times(&headers, body, &["starts_at", "ends_at"]).await?;
    new_id(&c.id)?;
    flashgate_shared::text::check_free_text("name", &c.name, MAX_GIFT_CAMPAIGN_NAME)
        .map_err(ApiError::validation)?;
    if c.ends_at <= c.starts_at {
        return Err(ApiError::validation("ends_at must be after starts_at"));
    }
    flashgate_shared::api::check_end_ahead("ends_at", c.ends_at, chrono::Utc::now())
        .map_err(ApiError::validation)?;
    let created = store::create_campaign(&state.db, &who.name, &c)
        .await?
        .ok_or_else(|| ApiError::Conflict(format!("gift campaign {} exists", c.id)))?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// The campaign with its segments (viewer); 404 unknown.
#[utoipa::path(
    get,
    path = "/admin/v1/gift-campaigns/{id}",
    tag = "gifts",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Gift campaign id (1..=64 of `[A-Za-z0-9_-]`).")),
    responses(
        (status = 200, description = "The gift campaign with its segments.", body = GiftCampaign),
        errors::NoGiftCampaign,
    ),
)]
pub async fn show_campaign(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    extract::admin(&headers, &state, Role::Viewer)?;
    campaign_id(&id)?;
    let c = store::campaign(&state.db, &id)
        .await?
        .ok_or_else(|| unknown_campaign(&id))?;
    Ok(Json(c).into_response())
}

/// Creates a segment with its gift and caps: 201 with it; 404 unknown campaign; 409 the
/// segment exists; 422 a bad id, amount (1..=10^12 minor units), currency (three uppercase
/// letters) or caps ([`check_caps`]).
#[utoipa::path(
    post,
    path = "/admin/v1/gift-campaigns/{id}/segments",
    tag = "gifts",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Gift campaign id."), AdminIdempotencyKey),
    request_body(content = NewSegment, example = json!({"id": "gold", "gift": {"amount": 500,
        "currency": "EUR"}, "caps": [{"max": 1, "per_days": 30}]})),
    responses(
        (status = 201, description = "The segment, created (audited).", body = Segment),
        errors::JsonBody,
        errors::NoGiftCampaign,
        (status = 409, description = "conflict: the segment exists; in_progress (+ `Retry-After`).",
            body = ErrorBody, headers(("Retry-After" = u32))),
        (status = 422, description = "validation_failed: id, amount, currency or caps; \
            idempotency_key_reused.", body = ErrorBody),
    ),
)]
pub async fn create_segment(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ManagerJson { who, body: s }: ManagerJson<NewSegment>,
) -> ApiResult<Response> {
    campaign_id(&id)?;
    new_id(&s.id)?;
    if !(1..=MAX_GIFT_AMOUNT).contains(&s.gift.amount) {
        return Err(ApiError::validation(format!(
            "gift.amount must be 1..={MAX_GIFT_AMOUNT} minor units"
        )));
    }
    if !flashgate_shared::api::promo::is_currency(&s.gift.currency) {
        return Err(ApiError::validation(
            "gift.currency must be an ISO 4217 code in upper case (EGP, EUR, …)",
        ));
    }
    check_caps(&s.caps).map_err(ApiError::validation)?;
    match store::create_segment(&state.db, &who.name, &id, &s).await? {
        SegmentCreated::Created(seg) => Ok((StatusCode::CREATED, Json(seg)).into_response()),
        SegmentCreated::UnknownCampaign => Err(unknown_campaign(&id)),
        SegmentCreated::Exists => Err(ApiError::Conflict(format!(
            "segment {} exists in this campaign",
            s.id
        ))),
    }
}

/// Replaces a segment's caps: 200 with the segment; the next fulfilment applies them. 404
/// unknown campaign or segment; 422 bad caps.
#[utoipa::path(
    patch,
    path = "/admin/v1/gift-campaigns/{id}/segments/{segment}",
    tag = "gifts",
    security(("admin_token" = [])),
    params(
        ("id" = String, Path, description = "Gift campaign id."),
        ("segment" = String, Path, description = "Segment id."),
        AdminIdempotencyKey,
    ),
    request_body(content = CapsChange, example = json!({"caps": [{"max": 2, "per_days": 30}]})),
    responses(
        (status = 200, description = "The segment with its new caps (audited).", body = Segment),
        errors::JsonBody,
        errors::NoSegment,
        errors::InProgress,
        (status = 422, description = "validation_failed: bad caps; idempotency_key_reused.",
            body = ErrorBody),
    ),
)]
pub async fn set_caps(
    State(state): State<AppState>,
    SegmentWrite {
        who,
        id,
        seg,
        body: change,
    }: SegmentWrite<CapsChange>,
) -> ApiResult<Response> {
    check_caps(&change.caps).map_err(ApiError::validation)?;
    let s = store::set_caps(&state.db, &who.name, &id, &seg, &change.caps)
        .await?
        .ok_or_else(|| unknown_segment(&seg))?;
    Ok(Json(s).into_response())
}

/// Adds members: 200 `{added, already}`. At most [`MAX_MEMBERS_PER_CALL`] MSISDNs (422
/// past it), each E.164 digits without `+`, 8 to 15 (422 names the first bad one's index);
/// 404 unknown segment; 409 when some are in another segment of the campaign (nothing
/// written).
#[utoipa::path(
    put,
    path = "/admin/v1/gift-campaigns/{id}/segments/{segment}/members",
    tag = "gifts",
    security(("admin_token" = [])),
    params(
        ("id" = String, Path, description = "Gift campaign id."),
        ("segment" = String, Path, description = "Segment id."),
    ),
    request_body(content = Members, example = json!({"msisdns": ["33612345678"]})),
    responses(
        (status = 200, description = "How many were added, how many were members already.",
            body = MembersAdded),
        errors::JsonBody,
        errors::NoSegment,
        (status = 409, description = "conflict: some are in another segment of the campaign \
            (nothing written).", body = ErrorBody),
        (status = 422, description = "validation_failed: more than 100,000, or a bad MSISDN \
            (its index named).", body = ErrorBody),
    ),
)]
pub async fn add_members(
    State(state): State<AppState>,
    SegmentWrite {
        who,
        id,
        seg,
        body: m,
    }: SegmentWrite<Members>,
) -> ApiResult<Response> {
    if m.msisdns.len() > MAX_MEMBERS_PER_CALL {
        return Err(ApiError::validation(format!(
            "at most {MAX_MEMBERS_PER_CALL} msisdns per call"
        )));
    }
    if let Some(i) = m.msisdns.iter().position(|x| !is_valid_msisdn(x)) {
        return Err(ApiError::validation(format!(
            "msisdns[{i}] must be E.164 digits without '+', 8 to 15 of them"
        )));
    }
    match store::add_members(&state.db, &who.name, &id, &seg, &m.msisdns).await? {
        MembersResult::Added(added) => Ok(Json(added).into_response()),
        MembersResult::UnknownSegment => Err(unknown_segment(&seg)),
        MembersResult::InOtherSegment(n) => Err(ApiError::Conflict(format!(
            "{n} of these msisdns are in another segment of this campaign; nothing was added"
        ))),
    }
}

/// The query of the fulfilment list.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only the fulfilments of this delivery status.
    pub status: Option<DeliveryStatus>,
}

/// The newest fulfilments of a campaign (viewer), of one delivery status with `?status=`;
/// 404 unknown campaign; 422 an unknown status.
#[utoipa::path(
    get,
    path = "/admin/v1/gift-campaigns/{id}/fulfilments",
    tag = "gifts",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Gift campaign id."), ListQuery),
    responses(
        (status = 200, description = "The newest fulfilments, of one delivery status with \
            `?status=`.", body = FulfilmentList),
        errors::NoGiftCampaign,
        errors::UnknownStatus,
    ),
)]
pub async fn list_fulfilments(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> ApiResult<Response> {
    extract::admin(&headers, &state, Role::Viewer)?;
    campaign_id(&id)?;
    let Query(q) =
        q.map_err(|_| ApiError::validation("status must be pending, delivered or failed"))?;
    if store::campaign(&state.db, &id).await?.is_none() {
        return Err(unknown_campaign(&id));
    }
    let fulfilments = deliveries::list(&state.db, &id, q.status).await?;
    Ok(Json(FulfilmentList { fulfilments }).into_response())
}

/// Puts a failed delivery back in the outbox (manager), with its `gift.granted` webhook event:
/// 200 with the fulfilment (`pending`); 404 unknown; 409 when it is not `failed`.
#[utoipa::path(
    post,
    path = "/admin/v1/fulfilments/{id}/retry",
    tag = "gifts",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Fulfilment id (a UUID)."), AdminIdempotencyKey),
    responses(
        (status = 200, description = "The fulfilment, `pending` again (audited; a \
            `gift.granted` webhook event).", body = Fulfilment),
        errors::NoFulfilment,
        (status = 409, description = "conflict: the delivery is not `failed`; in_progress \
            (+ `Retry-After`).", body = ErrorBody, headers(("Retry-After" = u32))),
        (status = 422, description = "idempotency_key_reused.", body = ErrorBody),
    ),
)]
pub async fn retry(
    State(state): State<AppState>,
    Path(raw): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let who = extract::admin(&headers, &state, Role::Manager)?;
    let id = fulfilment_id(&raw)?;
    match deliveries::retry(&state.db, &who.name, id).await? {
        Retried::Retried(f) => Ok(Json(f).into_response()),
        Retried::NotFailed(s) => Err(ApiError::Conflict(format!(
            "the delivery is {}, not failed",
            serde_json::to_value(s)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ))),
        Retried::NotFound => Err(ApiError::NotFound("no such fulfilment".into())),
    }
}

/// A fulfilment with its whole delivery history (viewer), oldest first: every provider call
/// with its outcome and answer, the delivery giving up, a manager's retries. 404 unknown.
#[utoipa::path(
    get,
    path = "/admin/v1/fulfilments/{id}/attempts",
    tag = "gifts",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Fulfilment id (a UUID).")),
    responses(
        (status = 200, description = "The fulfilment and its delivery history, oldest first.",
            body = DeliveryHistory),
        errors::NoFulfilment,
    ),
)]
pub async fn attempts(
    State(state): State<AppState>,
    Path(raw): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    extract::admin(&headers, &state, Role::Viewer)?;
    let id = fulfilment_id(&raw)?;
    let Some(fulfilment) = deliveries::fulfilment(&state.db, id).await? else {
        return Err(ApiError::NotFound("no such fulfilment".into()));
    };
    let attempts = history::of(&state.db, Outbox::Gift, id).await?;
    Ok(Json(DeliveryHistory {
        fulfilment,
        attempts,
    })
    .into_response())
}
