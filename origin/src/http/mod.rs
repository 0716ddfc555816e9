//! The HTTP surface: routes, and the layers every response passes through.

pub mod admin;
pub mod campaigns;
pub mod claims;
pub mod extract;
pub mod giveaway;
pub mod health;
pub mod holds;
pub mod promo;
pub mod reconcile;

use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderName, HeaderValue, Request};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::RequestBodyTimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::error::ApiError;
use crate::state::AppState;

/// All routes of the origin with their layers.
///
/// Every route that takes a customer, service or admin token answers with
/// `Cache-Control: private, no-store` ([`flashgate_shared::PRIVATE_CACHE_CONTROL`]), set here in
/// one layer so that errors (401, 409 `already_claimed`, ...) carry it too. Public campaign
/// status, the dashboard's static files and the health endpoints keep their own caching.
pub fn router(state: AppState) -> Router {
    // Admin writes accept an Idempotency-Key (admin::idempotency); reads pass through it.
    let once = || middleware::from_fn_with_state(state.clone(), admin::idempotency::replay_writes);
    let body_timeout = Duration::from_millis(state.config.body_read_timeout_ms);
    let request_timeout = Duration::from_millis(state.config.request_timeout_ms);
    let public = Router::new()
        .route("/api/v1/campaigns/{id}", get(campaigns::status))
        .route("/admin", get(admin::dashboard::index))
        .route("/admin/app.js", get(admin::dashboard::app_js))
        .route("/admin/app.css", get(admin::dashboard::app_css));
    let private = Router::new()
        .route("/api/v1/campaigns/{id}/claims", post(claims::create))
        .route("/api/v1/campaigns/{id}/claims/mine", get(claims::mine))
        // Promo codes.
        .route("/api/v1/codes/{code}/check", post(promo::check))
        .route("/api/v1/codes/{code}/use", post(promo::use_code))
        .route("/api/v1/uses/{id}/confirm", post(promo::confirm))
        .route("/api/v1/uses/{id}/release", post(promo::release))
        .route("/admin/v1/codes", post(promo::admin_create).layer(once()))
        .route(
            "/admin/v1/codes/batches",
            post(promo::batch_create).layer(once()),
        )
        .route("/admin/v1/codes/batches/{file}", get(promo::batch_csv))
        .route(
            "/admin/v1/codes/{code}",
            get(promo::admin_show)
                .patch(promo::admin_change)
                .layer(once()),
        )
        .route("/api/v1/claims/{id}/pay", post(holds::pay))
        .route("/api/v1/claims/{id}/release", post(holds::release))
        .route("/api/v1/coupons/{code}", get(giveaway::show))
        .route("/api/v1/coupons/{code}/redeem", post(giveaway::redeem))
        .route("/admin/v1/campaigns/{id}/reconcile", get(reconcile::report))
        .route("/admin/v1/campaigns", post(campaigns::create).layer(once()))
        .route("/admin/v1/campaigns", get(admin::list))
        .route(
            "/admin/v1/campaigns/{id}",
            get(admin::show).patch(admin::change).layer(once()),
        )
        .route("/admin/v1/campaigns/{id}/audit", get(admin::audit_trail))
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static(flashgate_shared::PRIVATE_CACHE_CONTROL),
        ));
    Router::new()
        .merge(public)
        .merge(private)
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .method_not_allowed_fallback(|| async {
            ApiError::MethodNotAllowed("method not allowed on this path".into())
        })
        .with_state(state)
        .layer(RequestBodyTimeoutLayer::new(body_timeout))
        .layer(middleware::from_fn_with_state(
            request_timeout,
            request_deadline,
        ))
        .layer(SetResponseHeaderLayer::overriding(
            HeaderName::from_static(flashgate_shared::ANSWERED_BY_HEADER),
            HeaderValue::from_static("origin"),
        ))
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
                tracing::info_span!(
                    "request",
                    method = %req.method(),
                    path = %req.uri().path(),
                    campaign = tracing::field::Empty,
                    outcome = tracing::field::Empty,
                )
            }),
        )
}

/// Answers 408 `request_timeout` when handling a request (its body included) takes longer than
/// `limit` (`FLASHGATE_REQUEST_TIMEOUT_MS`). Work the handler handed to a task of its own (a
/// claim at the gate, a code use) still finishes and records its idempotent reply.
async fn request_deadline(
    State(limit): State<Duration>,
    req: axum::extract::Request,
    next: Next,
) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(res) => res,
        Err(_) => ApiError::RequestTimeout(format!(
            "the request took longer than {} ms",
            limit.as_millis()
        ))
        .into_response(),
    }
}
