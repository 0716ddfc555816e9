//! The managers' dashboard at `GET /admin`: one static page with its scripts (the campaigns'
//! and the webhook endpoints') and style sheet, embedded in the binary (`origin/assets/admin/`).
//! The page calls the admin API with the admin token the user pastes, a manager's or a
//! viewer's (kept in the tab's sessionStorage, sent as a bearer token); the page itself needs
//! no token. A strict Content-Security-Policy allows only these files
//! and calls to this origin.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

const INDEX_HTML: &str = include_str!("../../../assets/admin/index.html");
const APP_JS: &str = include_str!("../../../assets/admin/app.js");
const WEBHOOKS_JS: &str = include_str!("../../../assets/admin/webhooks.js");
const APP_CSS: &str = include_str!("../../../assets/admin/app.css");

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    res
}

/// `GET /admin`: the dashboard page.
#[utoipa::path(
    get,
    path = "/admin",
    tag = "operations",
    responses((status = 200, description = "The dashboard page (it asks for an admin token: a \
        manager's, or a viewer's to watch only).",
        content_type = "text/html", body = String)),
)]
pub async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// `GET /admin/app.js`: the dashboard's script.
#[utoipa::path(
    get,
    path = "/admin/app.js",
    tag = "operations",
    responses((status = 200, description = "The dashboard's script.",
        content_type = "text/javascript", body = String)),
)]
pub async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

/// `GET /admin/webhooks.js`: the dashboard's script of the webhook endpoints and deliveries.
#[utoipa::path(
    get,
    path = "/admin/webhooks.js",
    tag = "operations",
    responses((status = 200, description = "The dashboard's script of the webhook endpoints \
        and their deliveries.", content_type = "text/javascript", body = String)),
)]
pub async fn webhooks_js() -> Response {
    asset("text/javascript; charset=utf-8", WEBHOOKS_JS)
}

/// `GET /admin/app.css`: the dashboard's style sheet.
#[utoipa::path(
    get,
    path = "/admin/app.css",
    tag = "operations",
    responses((status = 200, description = "The dashboard's style sheet.",
        content_type = "text/css", body = String)),
)]
pub async fn app_css() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}
