//! `POST /api/v1/coupons/{code}/redeem` (a store's POS redeems a giveaway coupon) and
//! `GET /api/v1/coupons/{code}` (the coupon with its QR payload), both with the service token
//! ([`crate::giveaway`]: redeem in store, single use).
//!
//! The code in the path is normalised (trim, NFKC, uppercase; [`flashgate_shared::code`]);
//! anything that is not a 12-symbol generated code is a 404 without a query.

use super::extract::Path;
use crate::http::openapi::errors;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::{codes, Coupon, ErrorBody, RedeemReply, RedeemRequest, MAX_REASON_LEN};
use flashgate_shared::code;

use super::openapi::params::IdempotencyKey;
use super::{extract, holds};
use crate::error::{ApiError, ApiResult};
use crate::giveaway::redeem::{self, Redeem};
use crate::state::AppState;

fn coupon_code(raw: &str) -> ApiResult<String> {
    code::normalise(raw)
        .filter(|c| code::is_generated_shape(c))
        .ok_or_else(|| ApiError::NotFound("no coupon with this code".into()))
}

/// Redeems a coupon. Headers: service token (401/403), `Idempotency-Key` of the POS (1..=255
/// visible ASCII; 400 `invalid_idempotency_key`). Optional body `{"store": "<1..=200 visible
/// ASCII>"}` names the store in the ledger. Answers: 200 `{"result":"redeemed","code",
/// "redeemed_at"}`; 409 `{"result":"already_redeemed","redeemed_at"}`; the same key again gets
/// the same status and body; the key used before with another code → 422
/// `idempotency_key_reused`; 404 unknown code.
#[utoipa::path(
    post,
    path = "/api/v1/coupons/{code}/redeem",
    tag = "service",
    security(("service_token" = [])),
    params(
        ("code" = String, Path, description = "The coupon's code (normalised: trimmed, NFKC, uppercase)."),
        IdempotencyKey,
    ),
    request_body(content = Option<RedeemRequest>, description = "Optional: the store, for the ledger.",
        example = json!({"store": "paris-01"})),
    responses(
        (status = 200, description = "redeemed (the same key again: the same reply).",
            body = RedeemReply),
        (status = 409, description = "already_redeemed, with when.", body = RedeemReply),
        errors::KeyedJsonBody,
        errors::NoCoupon,
        (status = 422, description = "validation_failed (`store`), idempotency_key_reused (the \
            key was used with another code).", body = ErrorBody),
    ),
)]
pub async fn redeem(
    State(state): State<AppState>,
    Path(raw): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    extract::require_token(&headers, &state.config.service_token, "redeem")?;
    let key = extract::idempotency_key(&headers)?;
    let code = coupon_code(&raw)?;
    let req: RedeemRequest = holds::optional_json(&headers, body).await?;
    let actor = match &req.store {
        Some(s) => {
            flashgate_shared::text::check_visible_ascii("store", s, MAX_REASON_LEN)
                .map_err(ApiError::validation)?;
            format!("pos:{s}")
        }
        None => "pos".to_string(),
    };
    tracing::Span::current().record("outcome", "redeem");
    match redeem::redeem(&state.db, &key, &code, &actor, "redeemed in store").await? {
        Redeem::Reply(reply) => Ok(reply.into_response()),
        Redeem::KeyReused => Err(ApiError::Unprocessable(
            codes::IDEMPOTENCY_KEY_REUSED,
            "this Idempotency-Key was used with another coupon".into(),
        )),
        Redeem::NotFound => Err(ApiError::NotFound("no coupon with this code".into())),
    }
}

/// The coupon: 200 [`flashgate_shared::api::Coupon`] with `qr`, the payload its QR code
/// encodes; 404 unknown code. Service token (401/403).
#[utoipa::path(
    get,
    path = "/api/v1/coupons/{code}",
    tag = "service",
    security(("service_token" = [])),
    params(("code" = String, Path, description = "The coupon's code.")),
    responses(
        (status = 200, description = "The coupon with `qr`, its QR payload \
            (`flashgate:coupon:<CODE>`).", body = Coupon),
        errors::NoCoupon,
    ),
)]
pub async fn show(
    State(state): State<AppState>,
    Path(raw): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    extract::require_token(&headers, &state.config.service_token, "coupons")?;
    let code = coupon_code(&raw)?;
    let coupon = redeem::coupon(&state.db, &code)
        .await?
        .ok_or_else(|| ApiError::NotFound("no coupon with this code".into()))?;
    Ok((StatusCode::OK, axum::Json(coupon)).into_response())
}
