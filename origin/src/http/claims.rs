//! `POST /api/v1/campaigns/{id}/claims` and `GET /api/v1/campaigns/{id}/claims/mine`.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::{
    codes, is_valid_slug, parse_claim_body, ClaimReply, ClaimRequest, ClaimStatus, ErrorBody,
    MineReply,
};

use super::extract::{self, Path};
use super::openapi::params::{Admission, IdempotencyKey};
use super::openapi::Claim429;
use crate::claims::{service, store};
use crate::error::{ApiError, ApiResult};
use crate::http::openapi::errors;
use crate::reply::{Outcome, Reply};
use crate::state::AppState;

/// Claims one unit for the customer of the token. Checks, in the order the code runs them: the
/// body is read with its size bound (413 past 4 KiB), then edge signature over that body (403,
/// when configured), `Content-Type` (415), customer token (401), `Idempotency-Key` (400), body
/// `{}` or `{"variant": …}` (400), campaign id shape (404, without a query), the variant (on a
/// campaign with variants: 422 `validation_failed` without one or with an unknown one; on one
/// without: 400 `invalid_json` with one), the admission token on a campaign
/// with a waiting room or a draw's ([`crate::queue::check_claim`]: 429 `queued`, 400, 403; a genuine
/// expired token gets the recorded answer of a retried key instead, see
/// [`crate::queue::replay`]), then the pace of admitted claims ([`crate::queue::pace`]: 429
/// `queued` + `Retry-After` past `admit_per_second` plus one second's burst). Then the claim path of
/// [`service::claim`]: 201 `claimed`, 409 business results, 422 `idempotency_key_reused`, 503.
#[utoipa::path(
    post,
    path = "/api/v1/campaigns/{id}/claims",
    tag = "customer",
    security(("customer_token" = [])),
    params(
        ("id" = String, Path, description = "Campaign id, a slug `[a-z0-9-]{1,64}`."),
        IdempotencyKey,
        Admission,
    ),
    request_body(content = ClaimRequest, description = "The empty JSON object `{}`, or on a \
        campaign with variants `{\"variant\": \"<id>\"}` (at most 4 KiB).",
        example = json!({})),
    responses(
        (status = 201, description = "claimed: she won a unit; a sale's claim is a hold until \
            `held_until`, a giveaway's an issued coupon.", body = ClaimReply,
            example = json!({"result": "claimed", "claim": {"id": "c_0190aa3b7c6e7d2f8a4b5c6d7e8f9a0b",
                "campaign": "tshirt", "customer": "ana", "status": "held",
                "held_until": "2026-01-01T12:10:00Z", "code": null,
                "created_at": "2026-01-01T12:00:00Z"}})),
        (status = 409, description = "A business result: sold_out, already_claimed (with her \
            claim), not_started (with `starts_at`), ended, paused, or in_progress (with \
            `Retry-After`: the first request with this key is still running).",
            body = ClaimReply, headers(("Retry-After" = u32, description = "With in_progress.")),
            examples(
                ("sold_out" = (value = json!({"result": "sold_out"}))),
                ("variant_sold_out" = (value = json!({"result": "sold_out", "variant": "42"}))),
                ("not_started" = (value = json!({"result": "not_started", "starts_at": "2026-01-01T12:00:00Z"}))),
                ("in_progress" = (value = json!({"result": "in_progress"}))),
            )),
        (status = 400, description = "invalid_json (the body is not `{}`), \
            invalid_idempotency_key, invalid_request (an admission token that is not one).",
            body = ErrorBody),
        (status = 403, description = "forbidden: no valid edge signature on an origin with an \
            edge secret; a forged, expired or another customer's or campaign's admission token, \
            or one a winning claim used already; on a draw campaign, no admission token (only admitted winners claim).",
            body = ErrorBody),
        errors::NoCampaign,
        errors::PayloadPast4KiB,
        errors::NotJson,
        (status = 422, description = "idempotency_key_reused: this key was sent with another \
            body or campaign; validation_failed naming `variant`: a campaign with variants \
            claimed without one, or with one it does not have.", body = ErrorBody),
        (status = 429, description = "With a waiting room: `{\"result\":\"queued\"}` without an \
            admission token, or past the admit rate; claim again after `Retry-After`. At the \
            edge, `rate_limited` past 5 claims per second per customer.",
            body = Claim429, headers(("Retry-After" = u32))),
    ),
)]
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
    let asked = parse_claim_body(&body)
        .map_err(|e| ApiError::BadRequest(codes::INVALID_JSON, e.message))?;
    let row = extract::campaign(&state, &campaign).await?;
    let variant = check_variant(&state, &campaign, asked.variant).await?;
    // A campaign with a waiting room, or a draw, needs the admission token.
    let draw = row.waiting_room.is_none()
        && crate::access::admit::is_draw(&state.draw_kinds, &state.db, &row.id).await?;
    let mut checked = crate::queue::check_claim(&state, &row, draw, &customer, &headers);
    // A waiting room's token admits one winning claim (a draw winner's holds for her buying
    // window).
    if let (Ok(Some(seq)), false) = (&checked, draw) {
        if let Err(spent) = crate::queue::check_unspent(&state, &campaign, *seq).await {
            checked = Err(spent);
        }
    }
    let admitted = match checked {
        Ok(Some(seq)) => {
            if let Err(paced) = crate::queue::pace(&state, &row).await {
                return Ok(paced);
            }
            Some(seq)
        }
        Ok(None) => None,
        Err(refusal) => {
            // A genuine token, expired or spent: a retry of a decided claim gets its recorded
            // answer; anything else stays refused.
            if refusal.replayable {
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
            variant,
        },
    )
    .await?;
    answered(&state, &campaign, &reply);
    if let (Some(seq), true, false) = (admitted, reply.status == StatusCode::CREATED, draw) {
        let mut redis = state.redis.clone();
        if let Err(e) = crate::queue::store::mark_used(&mut redis, &campaign, seq).await {
            tracing::warn!(error = %e, "admission not marked used; it expires with its TTL");
        }
    }
    Ok(reply.into_response())
}

/// The variant of a claim body on campaign `c`: on a campaign with variants it must name one
/// of them (422 `validation_failed` naming `variant` otherwise); on one without, a body with
/// `variant` is refused as any unknown field is (400 `invalid_json`).
async fn check_variant(
    state: &AppState,
    c: &str,
    asked: Option<String>,
) -> ApiResult<Option<String>> {
    let variants = state.campaigns.variants(&state.db, c).await?;
    match asked {
        None if variants.is_empty() => Ok(None),
        Some(_) if variants.is_empty() => Err(ApiError::invalid_json(
            "claim body must be a JSON object without unknown fields: unknown field `variant`, \
             this campaign has no variants",
        )),
        None => Err(ApiError::validation(
            "variant: this campaign has variants; name one ({\"variant\": \"<id>\"})",
        )),
        Some(v) if variants.iter().any(|x| x.id == v) => Ok(Some(v)),
        Some(_) => Err(ApiError::validation(
            "variant: no such variant in this campaign",
        )),
    }
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
/// `status` — her active claim if she has one, else her latest (`released`) — or
/// `{"result":"expired","claim":{…}}` when that is a hold past `held_until` (expired, or not
/// swept yet); 404 when she never claimed. Lets a customer whose reply was lost (or answered
/// `sold_out` by the edge after she won) find her claim, and one whose hold ended see that it
/// did. Customer token required (401); a campaign id that is not a slug is a 404 without a
/// query.
#[utoipa::path(
    get,
    path = "/api/v1/campaigns/{id}/claims/mine",
    tag = "customer",
    security(("customer_token" = [])),
    params(("id" = String, Path, description = "Campaign id.")),
    responses(
        (status = 200, description = "Her claim on the campaign with its real status: her \
            active claim if she has one, else her latest; `result` `claimed`, or `expired` when \
            it is a hold past `held_until`.", body = MineReply),
        (status = 404, description = "not_found: she never claimed (or no such campaign).",
            body = ErrorBody),
    ),
)]
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
    let mut claim = row.to_claim();
    if !state
        .campaigns
        .variants(&state.db, &campaign)
        .await?
        .is_empty()
    {
        claim.variant = crate::campaigns::variants::of_claim(&state.db, &row.id).await?;
    }
    let expired = claim.status == ClaimStatus::Expired
        || (claim.status == ClaimStatus::Held
            && claim.held_until.is_some_and(|t| t <= chrono::Utc::now()));
    let body = if expired {
        MineReply::Expired { claim }
    } else {
        MineReply::Claimed { claim }
    };
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}
