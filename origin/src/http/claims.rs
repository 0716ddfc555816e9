//! `POST /api/v1/campaigns/{id}/claims` and `GET /api/v1/campaigns/{id}/claims/mine`.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::{codes, is_valid_slug, parse_claim_body, ClaimReply};

use super::extract::{self, Path};
use crate::claims::{service, store};
use crate::error::{ApiError, ApiResult};
use crate::reply::{Outcome, Reply};
use crate::state::AppState;

/// Claims one unit for the customer of the token. Checks, in the order the code runs them: the
/// body is read with its size bound (413 past 4 KiB), then edge signature over that body (403,
/// when configured), `Content-Type` (415), customer token (401), `Idempotency-Key` (400), body
/// `{}` (400), campaign id shape (404, without a query), the admission token on a campaign
/// with a waiting room ([`crate::queue::check_claim`]: 429 `queued`, 400, 403; a genuine
/// expired token gets the recorded answer of a retried key instead, see
/// [`crate::queue::replay`]), then the pace of admitted claims ([`crate::queue::pace`]: 429
/// `queued` + `Retry-After` past `admit_per_second` plus one second's burst). Then the claim path of
/// [`service::claim`]: 201 `claimed`, 409 business results, 422 `idempotency_key_reused`, 503.
pub async fn create(
    State(state): State<AppState>,
    mut post: extract::ForwardedPost,
) -> ApiResult<Response> {
    state.metrics.claim_requests.inc();
    let body = post.signed_body(&state).await?;
    let (campaign, headers, early_asked) = (post.campaign, post.headers, post.early_asked);
    extract::require_json(&headers)?;
    let customer = extract::customer(&headers, &state).await?;
    let key = extract::idempotency_key(&headers)?;
    parse_claim_body(&body).map_err(|e| ApiError::BadRequest(codes::INVALID_JSON, e.message))?;
    let row = extract::campaign(&state, &campaign).await?;
    // A campaign with a waiting room needs the admission token.
    let admitted = match crate::queue::check_claim(&state, &row, &customer, &headers) {
        Ok(Some(seq)) => {
            if let Err(paced) = crate::queue::pace(&state, &row).await {
                return Ok(paced);
            }
            Some(seq)
        }
        Ok(None) => None,
        Err(refusal) => {
            // A genuine but expired token: a retry of a decided claim gets its recorded
            // answer; anything else stays refused.
            if refusal.expired {
                let recorded = crate::queue::replay::recorded_answer(
                    &state, &campaign, &customer, &key, &body,
                )
                .await;
                if let Some(reply) = recorded {
                    answered(&state, &campaign, &reply);
                    return Ok(reply.into_response());
                }
            }
            return Ok(*refusal.response);
        }
    };
    // Sold out from memory (or not active): answered before the claim path's handles are
    // cloned for the gate; not asked twice when the fast path asked already.
    let early = (!early_asked)
        .then(|| service::answer_early(&state.flags, &state.metrics, &row, &customer))
        .flatten();
    if let Some(reply) = early {
        answered(&state, &campaign, &reply);
        return Ok(reply.into_response());
    }
    let reply = service::claim(
        state.claims(),
        row,
        service::ClaimRequest {
            campaign: campaign.clone(),
            customer,
            idempotency_key: key,
            body: body.to_vec(),
        },
    )
    .await?;
    answered(&state, &campaign, &reply);
    if let (Some(seq), true) = (admitted, reply.status == StatusCode::CREATED) {
        let mut redis = state.redis.clone();
        if let Err(e) = crate::queue::store::mark_used(&mut redis, &campaign, seq).await {
            tracing::warn!(error = %e, "admission not marked used; it expires with its TTL");
        }
    }
    Ok(reply.into_response())
}

/// Records the outcome of a claim's answer in the request span and counts a `sold_out` in the
/// dashboard's per-second series ([`crate::telemetry::series`]).
pub(crate) fn answered(state: &AppState, campaign: &str, reply: &Reply) {
    tracing::Span::current().record("outcome", reply.outcome.as_str());
    if reply.outcome == Outcome::SoldOut {
        state.metrics.sold_out_series.record_now(campaign);
    }
}

/// Her claim on the campaign: 200 `{"result":"claimed","claim":{…}}` with the claim's real
/// `status` — her active claim if she has one, else her latest (`released`, `expired`); 404
/// when she never claimed. Lets a customer whose reply was lost (or answered `sold_out` by the
/// edge after she won) find her claim, and one whose hold ended see that it did. Customer token
/// required (401); a campaign id that is not a slug is a 404 without a query.
pub async fn mine(
    State(state): State<AppState>,
    Path(campaign): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let customer = extract::customer(&headers, &state).await?;
    let none = || ApiError::NotFound("no claim on this campaign".into());
    if !is_valid_slug(&campaign) {
        return Err(none());
    }
    let row = store::find_latest(&state.db, &campaign, &customer)
        .await?
        .ok_or_else(none)?;
    let body = ClaimReply::Claimed {
        claim: row.to_claim(),
    };
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}
