//! `POST /api/v1/campaigns/{id}/claims` and `GET /api/v1/campaigns/{id}/claims/mine`.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::{codes, is_valid_slug, parse_claim_body, ClaimReply};
use flashgate_shared::MAX_CLAIM_BODY_BYTES;

use super::extract::{self, Path};
use crate::claims::{service, store};
use crate::error::{ApiError, ApiResult};
use crate::metrics::Metrics;
use crate::state::AppState;

/// Claims one unit for the customer of the token. Checks, in the order the code runs them: the
/// body is read with its size bound (413 past 4 KiB), then edge signature over that body (403,
/// when configured), `Content-Type` (415), customer token (401), `Idempotency-Key` (400), body
/// `{}` (400), campaign id shape (404, without a query). Then the claim path of
/// [`service::claim`]: 201 `claimed`, 409 business results, 422 `idempotency_key_reused`, 503.
pub async fn create(
    State(state): State<AppState>,
    Path(campaign): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    Metrics::inc(&state.metrics.claim_requests);
    let span = tracing::Span::current();
    span.record("campaign", campaign.as_str());
    let body = extract::read_body(&headers, body, MAX_CLAIM_BODY_BYTES).await?;
    // The edge signs the path as sent (still percent-encoded), so it is checked as sent.
    extract::edge_signature(
        &headers,
        state.config.edge_secret.as_ref(),
        "POST",
        uri.path(),
        &body,
    )?;
    extract::require_json(&headers)?;
    let customer = extract::customer(&headers, &state.config.customer_token_secret)?;
    let key = extract::idempotency_key(&headers)?;
    parse_claim_body(&body).map_err(|e| ApiError::BadRequest(codes::INVALID_JSON, e.message))?;
    if !is_valid_slug(&campaign) {
        return Err(ApiError::NotFound(format!("no campaign {campaign}")));
    }
    let reply = service::claim(
        &state.claims(),
        service::ClaimRequest {
            campaign,
            customer,
            idempotency_key: key,
            body: body.to_vec(),
        },
    )
    .await?;
    span.record("outcome", reply.outcome.as_str());
    Ok(reply.into_response())
}

/// Her active claim on the campaign: 200 `{"result":"claimed","claim":{…}}`, 404 when she has
/// none. Lets a customer whose reply was lost (or answered `sold_out` by the edge after she
/// won) find her claim. Customer token required (401); a campaign id that is not a slug is a
/// 404 without a query.
pub async fn mine(
    State(state): State<AppState>,
    Path(campaign): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let customer = extract::customer(&headers, &state.config.customer_token_secret)?;
    if !is_valid_slug(&campaign) {
        return Err(ApiError::NotFound(
            "no active claim on this campaign".into(),
        ));
    }
    let row = store::find_active(&state.db, &campaign, &customer)
        .await?
        .ok_or_else(|| ApiError::NotFound("no active claim on this campaign".into()))?;
    let body = ClaimReply::Claimed {
        claim: row.to_claim(),
    };
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}
