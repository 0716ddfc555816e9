//! `POST /api/v1/claims/{id}/pay` and `POST /api/v1/claims/{id}/release`: the shop's checkout
//! backend confirms or gives up a sale hold (service token). The state changes are in
//! [`crate::holds`]. `GET /api/v1/claims/{id}` (service token) reads a claim back.
//!
//! Checks, in order, each answered with the documented `{"result","message"}` body and
//! changing nothing: service token (401 missing / 403 wrong), claim id shape (404),
//! `Content-Type` (415), size ≤ 64 KiB (413), JSON (400 `invalid_json`), shape and values
//! (422 `validation_failed`). Then 200 / 409 with a [`HoldReply`], 404 for an unknown claim,
//! 503 `unavailable` when PostgreSQL is down.

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flashgate_shared::api::{
    HoldReply, PayRequest, ReleaseRequest, MAX_PAYMENT_REF_LEN, MAX_REASON_LEN,
};
use flashgate_shared::text;
use serde::de::DeserializeOwned;

use super::extract::{self, Path};
use crate::error::{ApiError, ApiResult};
use crate::holds::{change, returns};
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

fn hold_response(reply: HoldReply) -> Response {
    Reply::with_status(reply.http_status(), Outcome::Hold, &reply).into_response()
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
/// `redeemed`): 200 with the [`flashgate_shared::api::Claim`]; 401/403 the service token; 404
/// a malformed or unknown id; 503 `unavailable` when PostgreSQL is down.
pub async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    authorize(&state, &headers, &id, "claims")?;
    let row = crate::claims::store::find(&state.db, &id)
        .await?
        .ok_or_else(|| no_claim(&id))?;
    Ok(Json(row.to_claim()).into_response())
}

/// Pays a hold. Body `{"payment_ref": "<1..=255 visible ASCII>"}`. 200 `paid` (the same
/// `payment_ref` again gets the same 200); 409 `hold_expired` after `held_until` or a release;
/// 409 `already_paid` for another `payment_ref`; 409 `not_a_hold` for a giveaway coupon.
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
    Ok(hold_response(reply))
}

/// Releases a hold; its unit goes back to `remaining` and to the gate, exactly once however
/// many releases and sweeps race. Optional body `{"reason": "<1..=200 characters, no control character>"}` for the
/// ledger. 200 `released` (also when repeated); 409 `hold_expired` when the sweeper expired it
/// first (its unit is back all the same); 409 `already_paid`; 409 `not_a_hold`.
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
    Ok(hold_response(reply))
}
