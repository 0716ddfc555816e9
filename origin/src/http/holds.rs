//! `POST /api/v1/claims/{id}/pay`, `…/release` and `…/extend`: the shop's checkout backend
//! confirms, gives up or extends a sale hold (service token). The state changes are in
//! [`crate::holds`]. `GET /api/v1/claims/{id}` (service token) reads a claim back.
//!
//! Checks, in order, each answered with the documented `{"result","message"}` body and
//! changing nothing: service token (401 missing / 403 wrong), claim id shape (404), for an
//! extend the `Idempotency-Key` (400 `invalid_idempotency_key`), `Content-Type` (415), size
//! ≤ 64 KiB (413), JSON (400 `invalid_json`), shape and values (422 `validation_failed`). Then 200 / 409 with a [`HoldReply`], 404 for an unknown claim,
//! 503 `unavailable` when PostgreSQL is down.

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flashgate_shared::api::{
    codes, ClaimDetail, ErrorBody, ExtendRequest, HoldCall, HoldReply, PayRequest, ReleaseRequest,
    MAX_HOLD_EXTENSION_SECONDS, MAX_PAYMENT_REF_LEN, MAX_REASON_LEN,
};
use flashgate_shared::text;
use serde::de::DeserializeOwned;

use super::extract::{self, Path};
use crate::error::{ApiError, ApiResult};
use crate::holds::extend::Extend;
use crate::holds::{change, extend, returns};
use crate::http::openapi::errors;
use crate::idempotency::fingerprint;
use crate::reply::{Outcome, Reply};
use crate::state::AppState;

/// Ledger actor of pay and release calls made with the service token.
pub const SERVICE_ACTOR: &str = "service";
/// Ledger reason of a release that gives none.
pub const DEFAULT_RELEASE_REASON: &str = "released by the checkout backend";

pub use flashgate_shared::api::is_claim_id_shape;

/// An optional JSON body: empty means `T::default()`; anything else must be
/// `application/json` (415), at most 64 KiB (413) and parse strictly (400 / 422).
pub async fn optional_json<T: DeserializeOwned + Default>(
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<T> {
    let bytes = extract::read_body(headers, body, extract::MAX_JSON_BODY_BYTES).await?;
    if bytes.is_empty() {
        return Ok(T::default());
    }
    extract::require_json(headers)?;
    extract::parse_json(&bytes)
}

/// `reply` as its response, its claim completed with the claim's variant (one read; a pay,
/// release or extend shows the claim as `GET /api/v1/claims/{id}` does).
async fn hold_response(
    state: &AppState,
    mut reply: HoldReply,
    call: HoldCall,
) -> ApiResult<Response> {
    if let Some(claim) = reply.claim_mut() {
        claim.variant = crate::campaigns::variants::of_claim(&state.db, &claim.id).await?;
    }
    Ok(Reply::with_status(reply.http_status(call), Outcome::Hold, &reply).into_response())
}

fn no_claim(id: &str) -> ApiError {
    ApiError::NotFound(format!("no claim {id}"))
}

/// The checks a hold call starts with: the service token (401/403), then the claim id's shape
/// (404 without a query). `call` names the call in the token error and the span's outcome.
fn authorize(state: &AppState, headers: &HeaderMap, id: &str, call: &'static str) -> ApiResult<()> {
    extract::require_token(headers, &state.config.service_token, call)?;
    tracing::Span::current().record("outcome", call);
    if is_claim_id_shape(id) {
        Ok(())
    } else {
        Err(no_claim(id))
    }
}

/// A claim by id, whatever its status (`held`, `paid`, `released`, `expired`, `issued`,
/// `redeemed`): 200 with the [`ClaimDetail`] (the claim, and for a paid one its `payment_ref`
/// and `paid_at`); 401/403 the service token; 404 a malformed or unknown id; 503
/// `unavailable` when PostgreSQL is down.
#[utoipa::path(
    get,
    path = "/api/v1/claims/{id}",
    tag = "service",
    security(("service_token" = [])),
    params(("id" = String, Path, description = "Claim id (`c_` + 32 hex digits).")),
    responses(
        (status = 200, description = "The claim, in whatever status it has; `payment_ref` and \
            `paid_at` are set once it is paid.", body = ClaimDetail, example = json!({
                "id": "c_0123456789abcdef0123456789abcdef", "campaign": "tshirt",
                "customer": "ana", "status": "paid", "held_until": "2026-01-01T12:10:00Z",
                "code": null, "created_at": "2026-01-01T12:00:00Z",
                "payment_ref": "pay_4242", "paid_at": "2026-01-01T12:04:31Z"})),
        errors::NoClaim,
    ),
)]
pub async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    authorize(&state, &headers, &id, "claims")?;
    let claim = crate::claims::store::find_detail(&state.db, &id)
        .await?
        .ok_or_else(|| no_claim(&id))?;
    Ok(Json(claim).into_response())
}

/// Pays a hold. Body `{"payment_ref": "<1..=255 visible ASCII>"}`. 200 `paid` (the same
/// `payment_ref` again gets the same 200); 409 `hold_expired` after `held_until` or the
/// sweeper's expiry; 409 `released` (with the claim) after a release; 409 `already_paid` for
/// another `payment_ref`; 409 `not_a_hold` for a giveaway coupon.
#[utoipa::path(
    post,
    path = "/api/v1/claims/{id}/pay",
    tag = "service",
    security(("service_token" = [])),
    params(("id" = String, Path, description = "Claim id.")),
    request_body(content = PayRequest, example = json!({"payment_ref": "pay_4242"})),
    responses(
        (status = 200, description = "paid (the same `payment_ref` again: the same 200).",
            body = HoldReply),
        (status = 409, description = "hold_expired (past `held_until` or expired by the \
            sweeper), released (released before, by the checkout or an admin; with the claim), \
            already_paid (with the claim), not_a_hold (a giveaway coupon).", body = HoldReply,
            examples(
                ("hold_expired" = (value = json!({"result": "hold_expired"}))),
                ("released" = (value = json!({"result": "released", "claim": {
                    "id": "c_0123456789abcdef0123456789abcdef", "campaign": "tshirt",
                    "customer": "ana", "status": "released",
                    "held_until": "2026-01-01T12:10:00Z", "code": null,
                    "created_at": "2026-01-01T12:00:00Z"}}))),
                ("not_a_hold" = (value = json!({"result": "not_a_hold"}))),
            )),
        errors::JsonBody,
        errors::NoClaim,
        (status = 422, description = "validation_failed: `payment_ref` is not 1..=255 visible \
            ASCII characters.", body = ErrorBody),
    ),
)]
pub async fn pay(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    authorize(&state, &headers, &id, "pay")?;
    let req: PayRequest = extract::json_body(&headers, body).await?;
    text::check_visible_ascii("payment_ref", &req.payment_ref, MAX_PAYMENT_REF_LEN)
        .map_err(ApiError::validation)?;
    let reply = change::pay(&state.db, &id, &req.payment_ref, SERVICE_ACTOR)
        .await?
        .ok_or_else(|| no_claim(&id))?;
    hold_response(&state, reply, HoldCall::Pay).await
}

/// Releases a hold; its unit goes back to `remaining` and to the gate, exactly once however
/// many releases and sweeps race. Optional body `{"reason": "<1..=200 characters, no control character>"}` for the
/// ledger. 200 `released` (also when repeated); 409 `hold_expired` past `held_until`, as a pay
/// is told then (the hold is expired by this call or was by the sweeper; either way its unit
/// is back, once); 409 `already_paid`; 409 `not_a_hold`.
#[utoipa::path(
    post,
    path = "/api/v1/claims/{id}/release",
    tag = "service",
    security(("service_token" = [])),
    params(("id" = String, Path, description = "Claim id.")),
    request_body(content = Option<ReleaseRequest>, description = "Optional; an empty body is `{}`.",
        example = json!({"reason": "payment_failed"})),
    responses(
        (status = 200, description = "released: the unit is back (also when repeated).",
            body = HoldReply),
        (status = 409, description = "hold_expired (past `held_until`, as `pay` answers; \
            expired by this call if the sweeper was not first; the unit is back, once), \
            already_paid, not_a_hold.", body = HoldReply),
        errors::JsonBody,
        errors::NoClaim,
        (status = 422, description = "validation_failed: a `reason` that is blank, too long or \
            has a control character.", body = ErrorBody),
    ),
)]
pub async fn release(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    authorize(&state, &headers, &id, "release")?;
    let req: ReleaseRequest = optional_json(&headers, body).await?;
    let reason = match &req.reason {
        Some(r) => {
            text::check_free_text("reason", r, MAX_REASON_LEN).map_err(ApiError::validation)?;
            r.as_str()
        }
        None => DEFAULT_RELEASE_REASON,
    };
    let (reply, returned) = change::release(&state.db, &id, SERVICE_ACTOR, reason)
        .await?
        .ok_or_else(|| no_claim(&id))?;
    if let Some(r) = returned {
        returns::return_to_gate(&state.gate_returns(), &[r]).await;
    }
    hold_response(&state, reply, HoldCall::Release).await
}

/// Extends a hold once: `held_until` moves later by `seconds` (optional body
/// `{"seconds": n}`, 1..=the campaign's `hold_extension_seconds`; empty body: all of it),
/// while the hold is still held. `Idempotency-Key` is required: the same key and body again
/// get the same 200, the same key with another body 422 `idempotency_key_reused`. 200
/// `extended` with the new `held_until`; 409 `already_extended` (another key), `hold_expired`,
/// `released`, `already_paid`, `not_a_hold`; 422 `validation_failed` when the campaign's
/// `hold_extension_seconds` is 0 (off) or `seconds` is not 1..=it (one message naming the
/// campaign's bound). A refusal changes nothing.
#[utoipa::path(
    post,
    path = "/api/v1/claims/{id}/extend",
    tag = "service",
    security(("service_token" = [])),
    params(
        ("id" = String, Path, description = "Claim id."),
        ("Idempotency-Key" = String, Header, description = "Required, 1..=255 visible ASCII \
            characters (400 `invalid_idempotency_key` otherwise). It is kept with the claim's \
            one extension and its body: the same key and body again get the 200 of that \
            extension (with the claim as it is now), the same key with another body 422 \
            `idempotency_key_reused`; another key gets 409 `already_extended`."),
    ),
    request_body(content = Option<ExtendRequest>, description = "Optional; an empty body is \
        `{}` (extend by the campaign's `hold_extension_seconds`).",
        example = json!({"seconds": 120})),
    responses(
        (status = 200, description = "extended: `held_until` is the new end of the hold, which \
            the sweeper and `pay` go by (the same `Idempotency-Key` again: the same 200).",
            body = HoldReply, example = json!({"result": "extended", "claim": {
                "id": "c_0123456789abcdef0123456789abcdef", "campaign": "tshirt",
                "customer": "ana", "status": "held", "held_until": "2026-01-01T12:15:00Z",
                "code": null, "created_at": "2026-01-01T12:00:00Z"},
                "held_until": "2026-01-01T12:15:00Z"})),
        (status = 409, description = "already_extended (once per claim; with the claim), \
            hold_expired (past `held_until` or expired), released, already_paid (with the \
            claim), not_a_hold.", body = HoldReply, examples(
                ("already_extended" = (value = json!({"result": "already_extended", "claim": {
                    "id": "c_0123456789abcdef0123456789abcdef", "campaign": "tshirt",
                    "customer": "ana", "status": "held",
                    "held_until": "2026-01-01T12:15:00Z", "code": null,
                    "created_at": "2026-01-01T12:00:00Z"}}))),
                ("hold_expired" = (value = json!({"result": "hold_expired"}))),
            )),
        (status = 400, description = "invalid_json; invalid_idempotency_key (missing or not \
            1..=255 printable ASCII).", body = ErrorBody),
        errors::NoClaim,
        errors::PayloadTooLarge,
        errors::UnsupportedMediaType,
        (status = 422, description = "validation_failed: the campaign's \
            `hold_extension_seconds` is 0 (extension off), or `seconds` is not 1..=it (the \
            message names the campaign's bound); idempotency_key_reused: the key extended \
            this hold with another body.", body = ErrorBody),
    ),
)]
pub async fn extend(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    authorize(&state, &headers, &id, "extend")?;
    let key = extract::idempotency_key(&headers)?;
    let req: ExtendRequest = optional_json(&headers, body).await?;
    // The parsed body written back, so that an empty body and `{}` are one request.
    let body = serde_json::to_vec(&req).unwrap_or_default();
    let fp = fingerprint(&format!("extend:{id}"), &body);
    // Out of any campaign's bounds: kept out of them (and in an i32), so that the statement
    // refuses it and the one message names this campaign's bound.
    let seconds = req
        .seconds
        .map(|n| n.clamp(0, MAX_HOLD_EXTENSION_SECONDS + 1) as i32);
    let outcome = extend::extend(&state.db, &id, seconds, &key, &fp, SERVICE_ACTOR)
        .await?
        .ok_or_else(|| no_claim(&id))?;
    match outcome {
        Extend::Reply(reply) => hold_response(&state, reply, HoldCall::Extend).await,
        Extend::Off => Err(ApiError::validation(
            "this campaign does not allow hold extension (its hold_extension_seconds is 0)",
        )),
        Extend::TooLong { max } => Err(ApiError::validation(format!(
            "seconds must be between 1 and the campaign's hold_extension_seconds ({max})"
        ))),
        Extend::KeyReused => Err(ApiError::Unprocessable(
            codes::IDEMPOTENCY_KEY_REUSED,
            "this Idempotency-Key extended this hold with another body".into(),
        )),
    }
}
