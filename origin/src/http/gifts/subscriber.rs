//! The subscriber-facing gift calls, made by an operator's back-end with the service token:
//! - `GET /api/v1/gift-campaigns/{id}/eligibility?msisdn=…`: the preview;
//! - `POST /api/v1/gift-campaigns/{id}/fulfilments` (`Idempotency-Key`, `{"msisdn"}`);
//! - `GET /api/v1/fulfilments/{id}`.
//!
//! Every answer carries `Cache-Control: private, no-store` (the router's private layer).

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use flashgate_shared::api::codes;
use flashgate_shared::api::gifts::{
    Eligibility, Fulfilment, FulfilmentReply, FulfilmentRequest, Refusal,
};

use super::params::{campaign_id, fulfilment_id, msisdn, unknown_campaign};
use crate::error::{ApiError, ApiResult};
use crate::gifts::deliveries;
use crate::gifts::fulfil::{self, Fulfil};
use crate::gifts::verdict::{self, Verdict};
use crate::http::extract::{self, Path};
use crate::http::openapi::errors;
use crate::http::openapi::params::IdempotencyKey;
use crate::state::AppState;
use flashgate_shared::api::ErrorBody;

/// The query of the eligibility preview.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EligibilityQuery {
    /// The subscriber: E.164 digits without `+`, 8 to 15.
    pub msisdn: String,
}

/// The preview: 200 [`Eligibility`]; it changes nothing. Service token (401/403); 404 unknown
/// campaign; 422 a missing or malformed `msisdn`.
#[utoipa::path(
    get,
    path = "/api/v1/gift-campaigns/{id}/eligibility",
    tag = "gifts",
    security(("service_token" = [])),
    params(("id" = String, Path, description = "Gift campaign id."), EligibilityQuery),
    responses(
        (status = 200, description = "The preview; changes nothing.", body = Eligibility),
        errors::NoGiftCampaign,
        (status = 422, description = "validation_failed: a missing or malformed `msisdn`.",
            body = ErrorBody),
    ),
)]
pub async fn eligibility(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    q: Result<Query<EligibilityQuery>, QueryRejection>,
) -> ApiResult<Response> {
    extract::require_token(&headers, &state.config.service_token, "gift eligibility")?;
    campaign_id(&id)?;
    let Query(q) = q.map_err(|_| ApiError::validation("the query must be ?msisdn=<digits>"))?;
    msisdn(&q.msisdn)?;
    let g = state.gifts();
    let decision = verdict::decide(&g.db, &id, &q.msisdn, g.test_clock).await?;
    let refused = |reason| Eligibility {
        eligible: false,
        gift: None,
        reason: Some(reason),
        next_eligible_at: None,
    };
    let answer = match decision.verdict {
        Verdict::UnknownCampaign => return Err(unknown_campaign(&id)),
        Verdict::NotActive => refused(Refusal::CampaignNotActive),
        Verdict::NotInSegment => refused(Refusal::NotInSegment),
        Verdict::CapReached { next_eligible_at } => Eligibility {
            next_eligible_at: Some(next_eligible_at),
            ..refused(Refusal::CapReached)
        },
        Verdict::Eligible { gift, .. } => Eligibility {
            eligible: true,
            gift: Some(gift),
            reason: None,
            next_eligible_at: None,
        },
    };
    Ok(Json(answer).into_response())
}

/// A fulfilment (module [`fulfil`]). Checks in order: service token (401/403),
/// `Idempotency-Key` (400), `Content-Type` (415), body size (413, at most
/// [`flashgate_shared::MAX_CLAIM_BODY_BYTES`]), JSON (400/422), campaign id shape (404),
/// MSISDN (422). Answers: 201 granted; 409 `cap_reached` / `not_in_segment` /
/// `campaign_not_active`; the same key again → the first 201 byte for byte; the key used for
/// another MSISDN → 422 `idempotency_key_reused`; 404 unknown campaign.
#[utoipa::path(
    post,
    path = "/api/v1/gift-campaigns/{id}/fulfilments",
    tag = "gifts",
    security(("service_token" = [])),
    params(("id" = String, Path, description = "Gift campaign id."), IdempotencyKey),
    request_body(content = FulfilmentRequest, example = json!({"msisdn": "33612345678"})),
    responses(
        (status = 201, description = "granted (the same key again: the first 201 byte for byte).",
            body = FulfilmentReply),
        (status = 409, description = "cap_reached (with `next_eligible_at`), not_in_segment, \
            campaign_not_active.", body = FulfilmentReply),
        errors::KeyedJsonBody,
        errors::NoGiftCampaign,
        (status = 422, description = "validation_failed (a malformed MSISDN: E.164 digits \
            without `+`, 8–15), idempotency_key_reused.", body = ErrorBody),
    ),
)]
pub async fn fulfil(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    extract::require_token(&headers, &state.config.service_token, "gift fulfilment")?;
    let key = extract::idempotency_key(&headers)?;
    extract::require_json(&headers)?;
    let bytes = extract::read_body(&headers, body, flashgate_shared::MAX_CLAIM_BODY_BYTES).await?;
    let req: FulfilmentRequest = extract::parse_json(&bytes)?;
    campaign_id(&id)?;
    msisdn(&req.msisdn)?;
    match fulfil::fulfil(&state.gifts(), &id, &key, &req.msisdn).await? {
        Fulfil::Reply(reply) => {
            tracing::Span::current().record("outcome", reply.outcome.as_str());
            Ok(reply.into_response())
        }
        Fulfil::KeyReused => Err(ApiError::Unprocessable(
            codes::IDEMPOTENCY_KEY_REUSED,
            "this Idempotency-Key was used for another msisdn".into(),
        )),
        Fulfil::UnknownCampaign => Err(unknown_campaign(&id)),
    }
}

/// 200 [`flashgate_shared::api::gifts::Fulfilment`] with its delivery status; 404 unknown.
/// Service token (401/403).
#[utoipa::path(
    get,
    path = "/api/v1/fulfilments/{id}",
    tag = "gifts",
    security(("service_token" = [])),
    params(("id" = String, Path, description = "Fulfilment id (a UUID).")),
    responses(
        (status = 200, description = "The fulfilment with its delivery status.", body = Fulfilment),
        errors::NoFulfilment,
    ),
)]
pub async fn show(
    State(state): State<AppState>,
    Path(raw): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    extract::require_token(&headers, &state.config.service_token, "fulfilments")?;
    let id = fulfilment_id(&raw)?;
    let f = deliveries::fulfilment(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::NotFound("no such fulfilment".into()))?;
    Ok((StatusCode::OK, Json(f)).into_response())
}
