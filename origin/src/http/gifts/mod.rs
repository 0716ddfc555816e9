//! The gift routes: the subscriber-facing calls of an operator's back-end ([`subscriber`],
//! service token) and the managers' admin calls ([`admin`], admin tokens), with the checks of
//! their path and query values ([`params`]). The fulfilment itself is [`crate::gifts`]
//! (docs/GIFTS.md).

pub mod admin;
pub mod params;
pub mod subscriber;

use axum::middleware;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use crate::state::AppState;

/// The gift routes, merged into the router's private (token-bearing) routes.
pub fn routes(state: &AppState) -> OpenApiRouter<AppState> {
    let once = || {
        middleware::from_fn_with_state(
            state.clone(),
            crate::http::admin::idempotency::replay_writes,
        )
    };
    OpenApiRouter::new()
        .routes(routes!(subscriber::eligibility))
        .routes(routes!(subscriber::fulfil))
        .routes(routes!(subscriber::show))
        .routes(routes!(admin::create_campaign).layer(once()))
        .routes(routes!(admin::show_campaign))
        .routes(routes!(admin::create_segment).layer(once()))
        .routes(routes!(admin::set_caps).layer(once()))
        // No admin Idempotency-Key layer: PUT is idempotent by itself, and its body is larger
        // than the layer reads.
        .routes(routes!(admin::add_members))
        .routes(routes!(admin::list_fulfilments))
        .routes(routes!(admin::retry).layer(once()))
        .routes(routes!(admin::attempts))
}
