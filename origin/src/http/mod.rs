//! The HTTP surface: routes, and the layers every response passes through.

pub mod admin;
pub mod answers;
pub mod body_deadline;
pub mod body_first;
pub mod campaigns;
pub mod claims;
pub mod cors;
pub mod draw;
pub mod extract;
pub mod fast;
pub mod gifts;
pub mod giveaway;
pub mod health;
pub mod holds;
pub mod invite;
pub mod openapi;
pub mod promo;
pub mod purge;
pub mod queue;
pub mod reconcile;
pub mod request_id;
pub mod variants;
pub mod webhooks;

use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderName, HeaderValue, Request};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::state::AppState;

/// All routes of the origin with their layers, from the outside in (a sold-out claim this
/// origin answers from memory is answered before all of them, with the same headers:
/// [`fast`]):
/// - `x-request-id`: a caller's id is kept when it is 1..=128 visible ASCII characters
///   ([`request_id::bounded`]); a request without one (or with another) gets a UUID v4
///   ([`SetRequestIdLayer`] with
///   [`RandomUuid`]); the id is
///   recorded in the `request` span and sent back on the response ([`PropagateRequestIdLayer`]);
/// - the `request` span (method, route template (never the raw path, which can carry a coupon
///   code), request id, the W3C trace id of `traceparent` or a new
///   one, whether it was continued ([`crate::telemetry::trace`]), campaign, outcome);
/// - the request metrics and access log line ([`crate::metrics::record_request`]);
/// - `Flashgate-Answered-By: origin`;
/// - the request deadline `FLASHGATE_REQUEST_TIMEOUT_MS` (408 `request_timeout`, see
///   [`request_deadline`]) and the body-read timeout `FLASHGATE_BODY_READ_TIMEOUT_MS`;
/// - a body of a declared length up to 64 KiB is read before any handler runs, so that an
///   answer given on the headers alone (401, 400, 404) is never cut off by a reset
///   ([`body_first`]);
/// - a panic in a handler is answered 503 `unavailable` + `Retry-After` with the documented
///   body ([`CatchPanicLayer`], [`panic_reply`]); its text is logged, never sent;
/// - outermost, CORS when `FLASHGATE_CORS_ORIGINS` lists origins ([`cors`]).
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
    let metrics = state.metrics.clone();
    // Every route comes from its handler's `#[utoipa::path]` (utoipa-axum's `routes!`): the
    // router and the OpenAPI document (`GET /openapi.json`, [`openapi`]) are built from the same
    // annotations, so neither can list a route the other lacks.
    let public = OpenApiRouter::new()
        .routes(routes!(campaigns::status))
        .routes(routes!(draw::status))
        .routes(routes!(admin::dashboard::index))
        .routes(routes!(admin::dashboard::app_js))
        .routes(routes!(admin::dashboard::webhooks_js))
        .routes(routes!(admin::dashboard::app_css));
    let private = OpenApiRouter::new()
        .routes(routes!(claims::create))
        .routes(routes!(claims::mine))
        .routes(routes!(queue::join))
        .routes(routes!(queue::presence))
        .routes(routes!(queue::joins))
        .routes(routes!(answers::answers))
        .routes(routes!(draw::enter))
        .routes(routes!(draw::mine))
        .routes(routes!(draw::run))
        .routes(routes!(draw::progress))
        .routes(routes!(campaigns::index))
        .routes(routes!(campaigns::winners_filter))
        // Promo codes.
        .routes(routes!(promo::check))
        .routes(routes!(promo::use_code))
        .routes(routes!(promo::confirm))
        .routes(routes!(promo::release))
        .routes(routes!(promo::admin_create).layer(once()))
        .routes(routes!(promo::batch_create).layer(once()))
        .routes(routes!(promo::batch_csv))
        .routes(routes!(promo::admin_show, promo::admin_change).layer(once()))
        .routes(routes!(holds::show))
        .routes(routes!(holds::pay))
        .routes(routes!(holds::release))
        .routes(routes!(holds::extend))
        .routes(routes!(giveaway::show))
        .routes(routes!(giveaway::redeem))
        .routes(routes!(reconcile::report))
        .routes(routes!(invite::invite_key))
        .routes(routes!(purge::purge).layer(once()))
        .routes(routes!(campaigns::create).layer(once()))
        .routes(routes!(admin::list))
        .routes(routes!(admin::show, admin::change).layer(once()))
        .routes(routes!(variants::put).layer(once()))
        .routes(routes!(admin::audit_trail))
        .routes(routes!(admin::series_of))
        .routes(routes!(admin::feed::claims))
        .routes(routes!(admin::feed::claims_csv))
        .merge(gifts::routes(&state))
        .routes(routes!(webhooks::create, webhooks::list).layer(once()))
        .routes(routes!(webhooks::show, webhooks::change, webhooks::delete).layer(once()))
        .routes(routes!(webhooks::rotate).layer(once()))
        .routes(routes!(webhooks::list_deliveries))
        .routes(routes!(webhooks::replay).layer(once()))
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static(flashgate_shared::PRIVATE_CACHE_CONTROL),
        ));
    let operations = OpenApiRouter::new()
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(health::metrics))
        .routes(routes!(openapi::serve));
    let (routes, collected) = public.merge(private).merge(operations).split_for_parts();
    let served = openapi::Served(openapi::document(collected).to_string().into());
    let mut app = Router::new();
    if state.config.debug_panic_route {
        app = app.route("/debug/panic", get(debug_panic));
    }
    let request_metrics = state.config.request_metrics;
    // Checked at start-up (Config::validate); a broken list here means no CORS.
    let cors_origins = state.config.cors_origins().unwrap_or_default();
    let app = app
        .merge(routes)
        .layer(axum::Extension(served))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .method_not_allowed_fallback(|| async {
            ApiError::MethodNotAllowed("method not allowed on this path".into())
        })
        .with_state(state)
        .layer(CatchPanicLayer::custom(panic_reply))
        .layer(middleware::from_fn(body_first::read_body_first))
        .layer(middleware::from_fn_with_state(
            body_timeout,
            body_deadline::body_deadline,
        ))
        .layer(middleware::from_fn_with_state(
            request_timeout,
            request_deadline,
        ));
    let app = if request_metrics {
        app.layer(middleware::from_fn_with_state(
            metrics,
            crate::metrics::record_request,
        ))
    } else {
        app
    };
    let app = app
        .layer(SetResponseHeaderLayer::overriding(
            HeaderName::from_static(flashgate_shared::ANSWERED_BY_HEADER),
            HeaderValue::from_static("origin"),
        ))
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
                let (trace_id, trace_continued) = crate::telemetry::trace::of(req.headers());
                // The route template, never the raw path: a path can carry a coupon code
                // (`/api/v1/codes/{code}/check`, `/api/v1/coupons/{code}`), which must not
                // reach the logs.
                let route = req
                    .extensions()
                    .get::<axum::extract::MatchedPath>()
                    .map_or("unmatched", |p| p.as_str());
                tracing::info_span!(
                    "request",
                    method = %req.method(),
                    route,
                    request_id = req
                        .headers()
                        .get(REQUEST_ID_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default(),
                    trace_id,
                    trace_continued,
                    campaign = tracing::field::Empty,
                    outcome = tracing::field::Empty,
                )
            }),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(RandomUuid))
        .layer(tower::util::MapRequestLayer::new(request_id::bounded));
    // Outermost, so that every answer (errors, timeouts, panics) carries the CORS headers.
    match cors::layer(&cors_origins) {
        Some(layer) => app
            .layer(layer)
            .layer(middleware::map_response(cors::strip_refused)),
        None => app,
    }
}

/// Makes the id of a request that came without one: a UUID v4 (RFC 9562) from `rand`'s
/// thread-local generator. tower-http's `MakeRequestUuid` draws each one from the operating
/// system (`getrandom`, one system call per request: a visible share of a sold-out answer's
/// time in a profile of `bench_origin`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RandomUuid;

impl RandomUuid {
    /// A new request id: a UUID v4, lowercase and hyphenated.
    pub fn new_id() -> Option<HeaderValue> {
        let id = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
        let mut text = uuid::Uuid::encode_buffer();
        HeaderValue::from_str(id.hyphenated().encode_lower(&mut text)).ok()
    }
}

impl MakeRequestId for RandomUuid {
    fn make_request_id<B>(&mut self, _: &Request<B>) -> Option<RequestId> {
        RandomUuid::new_id().map(RequestId::new)
    }
}

/// The request id header, set on every request and response (a common convention; no RFC).
pub use flashgate_shared::request_id::REQUEST_ID_HEADER;

/// 200 with `body` as JSON and `Cache-Control: public, max-age=1`
/// ([`flashgate_shared::PUBLIC_STATUS_CACHE_CONTROL`]): the public campaign and draw status.
pub(crate) fn public_status(body: impl serde::Serialize) -> Response {
    (
        [(
            header::CACHE_CONTROL,
            flashgate_shared::PUBLIC_STATUS_CACHE_CONTROL,
        )],
        axum::Json(body),
    )
        .into_response()
}

/// The answer to a handler that panicked: 503 `unavailable` + `Retry-After` with the documented
/// body. The panic's text is logged, never sent.
pub(crate) fn panic_reply(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    tracing::error!(panic = %text, "a handler panicked");
    ApiError::Unavailable(format!("handler panicked: {text}")).into_response()
}

/// `GET /debug/panic` (only with `FLASHGATE_DEBUG_PANIC_ROUTE`): panics.
async fn debug_panic() -> Response {
    panic!("debug panic route: internal detail that must not reach the client")
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
