//! CORS for direct deployments (no edge in front): tower-http's [`CorsLayer`] with the allowed
//! origins of `FLASHGATE_CORS_ORIGINS` and the header lists of [`flashgate_shared::cors`], the
//! same answers the edge gives (the edge's `cors` module).
//!
//! - No allowed origin (the default): no layer, no CORS header; `OPTIONS` is a 405 like any
//!   method a route does not take.
//! - Otherwise every `OPTIONS` is a preflight (200, empty body), every answer carries `Vary`,
//!   and an allowed `Origin` gets `Access-Control-Allow-Origin` and the rest. tower-http would
//!   also send the preflight's methods, headers and max age to any origin; [`strip_refused`]
//!   removes every `Access-Control-*` header from an answer without `Allow-Origin`, so other
//!   origins get none.

use std::time::Duration;

use axum::http::{header, HeaderName, HeaderValue, Method};
use axum::response::Response;
use flashgate_shared::cors::{ALLOW_HEADERS, ALLOW_METHODS, EXPOSE_HEADERS, MAX_AGE_S};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The CORS layer for `origins` (from [`crate::config::Config::cors_origins`]); `None` when
/// the list is empty. An entry that is not a valid header value (never after
/// [`flashgate_shared::cors::parse_origins`]) is left out.
pub fn layer(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    let names = |list: &[&str]| -> Vec<HeaderName> {
        list.iter()
            .filter_map(|n| HeaderName::from_bytes(n.as_bytes()).ok())
            .collect()
    };
    let methods: Vec<Method> = ALLOW_METHODS
        .iter()
        .filter_map(|m| Method::from_bytes(m.as_bytes()).ok())
        .collect();
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods(methods)
            .allow_headers(names(ALLOW_HEADERS))
            .expose_headers(names(EXPOSE_HEADERS))
            .max_age(Duration::from_secs(MAX_AGE_S.into())),
    )
}

/// Removes every `Access-Control-*` header from an answer that does not allow the caller's
/// origin (no `Access-Control-Allow-Origin`).
pub async fn strip_refused(mut res: Response) -> Response {
    if !res
        .headers()
        .contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN)
    {
        let refused: Vec<HeaderName> = res
            .headers()
            .keys()
            .filter(|n| n.as_str().starts_with("access-control-"))
            .cloned()
            .collect();
        for name in refused {
            res.headers_mut().remove(name);
        }
    }
    res
}
