//! The OpenAPI 3.1 document of the origin's HTTP API, served at `GET /openapi.json`
//! (docs/OPENAPI.md).
//!
//! It is generated from the code, never written by hand: the wire types of
//! `flashgate_shared::api` derive `utoipa::ToSchema` (their feature `openapi`), every handler
//! carries `#[utoipa::path]` with its method, path, parameters, bodies and answers, and the
//! router is built from those annotations ([`utoipa_axum::routes!`]), so a route is served
//! exactly when it is documented. This module adds what every operation shares
//! ([`finish`]): the security schemes, the two non-2xx shapes, the answers any request can get
//! (408 `request_timeout`, 503 `unavailable` + `Retry-After`, 401 / 403 for a token), and the
//! `Flashgate-Answered-By` and `x-request-id` headers of every answer.

pub mod edge_only;
pub mod errors;
mod links;
pub mod params;
pub mod tidy;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, ResponseBuilder};
use utoipa::OpenApi as _;

/// Where the document is served, at the origin and through the edge.
pub const PATH: &str = flashgate_shared::OPENAPI_PATH;

/// Security scheme of customer calls: `Authorization: Bearer <customer token>`, an HS256 JWT
/// (or RS256 / ES256 from an identity provider, docs/AUTH.md).
pub const CUSTOMER: &str = "customer_token";
/// Security scheme of server-to-server calls: `Authorization: Bearer <service token>`.
pub const SERVICE: &str = "service_token";
/// Security scheme of the admin API: `Authorization: Bearer <admin token>` (role `manager` or
/// `viewer`, docs/ADMIN.md).
pub const ADMIN: &str = "admin_token";

/// The document's fixed parts: title, tags, the shared components.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "flashgate",
        description = "Flash sales and giveaways at CDN scale: campaigns, claims, holds, \
            giveaway coupons, waiting rooms, promo codes, gift fulfilment and the admin API. \
            Every non-2xx answer is JSON of one of two shapes: a business result \
            `{\"result\": <code>, …}` (an answer about the campaign, code or claim) or a \
            request error `{\"result\": <code>, \"message\": <text>}` (ErrorBody). Times are \
            RFC 3339 UTC, money is integer minor units. Generated from the code \
            (docs/OPENAPI.md).",
        license(name = "Apache-2.0"),
    ),
    tags(
        (name = "public", description = "No token: campaign status."),
        (name = "customer", description = "A customer's calls, with her token (a JWT)."),
        (name = "waiting room", description = "Joining a campaign's waiting room (docs/WAITING-ROOM.md)."),
        (name = "draw", description = "Draw campaigns: entries, the commitment, the published draw (docs/DRAWS.md)."),
        (name = "service", description = "Server-to-server calls with the service token: holds, coupons, code uses, gifts."),
        (name = "admin", description = "The admin API (docs/ADMIN.md)."),
        (name = "gifts", description = "Gift fulfilment (docs/GIFTS.md)."),
        (name = "webhooks", description = "Signed lifecycle webhooks: endpoints, deliveries, replays; the body of every delivery is the `Event` schema (docs/WEBHOOKS.md)."),
        (name = "promo codes", description = "Shared and one-time promo codes."),
        (name = "edge", description = "What the edge fetches from the origin (docs/EDGE.md); never served through the edge."),
        (name = "operations", description = "Health, readiness, metrics, the dashboard and this document."),
    ),
    paths(edge_only::queue_poll, edge_only::queue_challenge),
    components(schemas(
        flashgate_shared::api::ErrorBody,
        flashgate_shared::api::webhooks::Event,
        flashgate_shared::api::webhooks::EventType,
        flashgate_shared::api::webhooks::ClaimData,
        flashgate_shared::api::webhooks::CampaignData,
        flashgate_shared::api::webhooks::CodeUseData,
        flashgate_shared::api::webhooks::GiftData,
        flashgate_shared::api::webhooks::ReleasedBy,
    ))
)]
struct Base;

/// The document as JSON: [`Base`] with the `paths` collected from the router's annotated
/// handlers, then [`finish`]ed, with the [`links`] between operations.
pub fn document(collected: OpenApi) -> serde_json::Value {
    let mut doc = Base::openapi().merge_from(collected);
    finish(&mut doc);
    let mut doc = serde_json::to_value(doc).expect("the OpenAPI document serialises");
    links::add(&mut doc);
    for (method, path) in edge_only::EDGE_ONLY {
        doc["paths"][path][method]["x-flashgate-answered-by"] = "edge".into();
    }
    tidy::apply(&mut doc);
    doc
}

/// The document as served (pretty JSON), kept by the router for [`serve`].
#[derive(Clone)]
pub struct Served(pub std::sync::Arc<str>);

/// `GET /openapi.json`: the OpenAPI 3.1 document of this API.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operations",
    responses((status = 200, description = "This document (OpenAPI 3.1, JSON).",
        content_type = "application/json", body = Object)),
)]
pub async fn serve(Extension(doc): Extension<Served>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        doc.0.to_string(),
    )
        .into_response()
}

/// 429 `{"result":"queued"}` of a claim on a campaign with a waiting room (without an admission
/// token, or past the admit rate): claim again after `Retry-After`, with the same key.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Queued {
    /// Wait, then claim again.
    Queued,
}

/// A 429 of a claim: `{"result":"queued"}` (a waiting room: no admission token yet, or past the
/// admit rate) or, at the edge, `rate_limited` (more than 5 claims per second per customer).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum Claim429 {
    /// `{"result":"queued"}`.
    Queued(Queued),
    /// `{"result":"rate_limited","message":…}`.
    Limited(flashgate_shared::api::ErrorBody),
}

/// A 422 of a promo code call: a business result (`not_applicable` with its `reason`) or a
/// request error (`validation_failed`, `idempotency_key_reused`).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum CodeAnswer422 {
    /// `{"result":"not_applicable","reason":…}`.
    Refusal(flashgate_shared::api::promo::CodeRefusal),
    /// `{"result":…,"message":…}`.
    Request(flashgate_shared::api::ErrorBody),
}

/// Adds what every operation shares: the security schemes; 401 (and 403 for the admin and
/// service tokens) to operations that take a token; 408 and 503 to every one;
/// `Flashgate-Answered-By` and `x-request-id` on every answer. An answer an operation
/// documents itself is kept as it is.
fn finish(doc: &mut OpenApi) {
    let components = doc.components.get_or_insert_with(Default::default);
    for (name, what) in [
        (CUSTOMER, "A customer token: an HS256 JWT with `sub` and `exp`, or RS256 / ES256 from an identity provider (docs/AUTH.md)."),
        (SERVICE, "The service token (`FLASHGATE_SERVICE_TOKEN`) of server-to-server calls."),
        (ADMIN, "An admin token (`FLASHGATE_ADMIN_TOKEN` or one of `FLASHGATE_ADMIN_TOKENS`), role `manager` or `viewer`."),
    ] {
        let mut http = Http::new(HttpAuthScheme::Bearer);
        http.description = Some(what.to_string());
        if name == CUSTOMER {
            http.bearer_format = Some("JWT".to_string());
        }
        components.add_security_scheme(name, SecurityScheme::Http(http));
    }
    for (path, item) in doc.paths.paths.iter_mut() {
        for (method, op) in [
            ("get", &mut item.get),
            ("post", &mut item.post),
            ("put", &mut item.put),
            ("patch", &mut item.patch),
            ("delete", &mut item.delete),
        ] {
            if let Some(op) = op {
                op.operation_id = Some(operation_id(method, path));
                finish_operation(op);
            }
        }
    }
}

/// A unique operation id from the method and path: `post_campaigns_id_claims` for
/// `POST /api/v1/campaigns/{id}/claims`, `get_admin_campaigns` for `GET /admin/v1/campaigns`.
/// (The handlers' names repeat across modules: `show`, `create`, `release`.)
pub fn operation_id(method: &str, path: &str) -> String {
    let words = path
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && *w != "api" && *w != "v1");
    std::iter::once(method)
        .chain(words)
        .collect::<Vec<_>>()
        .join("_")
}

fn finish_operation(op: &mut Operation) {
    let schemes: Vec<String> = op
        .security
        .iter()
        .flatten()
        .filter_map(|r| serde_json::to_value(r).ok())
        .filter_map(|v| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()))
        .flatten()
        .collect();
    let mut shared = vec![
        ("408", "request_timeout: the body or the whole request took longer than the origin's bound."),
        ("503", "unavailable: a dependency (PostgreSQL, Redis) is down or too slow; retry after `Retry-After` seconds. Also the answer of a handler that failed unexpectedly."),
    ];
    let keyed = op
        .parameters
        .iter()
        .flatten()
        .any(|p| p.name == "Idempotency-Key");
    if keyed || op.request_body.is_some() {
        shared.push(("400", "invalid_json (not JSON, duplicate keys, the wrong shape), invalid_idempotency_key (not 1..=255 visible ASCII characters), invalid_request."));
    }
    if op.request_body.is_some() {
        shared.push((
            "413",
            "payload_too_large: a body past the operation's bound.",
        ));
        shared.push((
            "415",
            "unsupported_media_type: the body is not `application/json`.",
        ));
        shared.push((
            "422",
            "validation_failed: well-formed JSON that breaks a rule (the message names the field); idempotency_key_reused: the Idempotency-Key was used with another method, path or body.",
        ));
    } else if keyed {
        shared.push((
            "422",
            "idempotency_key_reused: the Idempotency-Key was used with another method, path or body.",
        ));
    }
    if !schemes.is_empty() {
        shared.push((
            "401",
            "unauthorized: no token, or a malformed, expired or forged one.",
        ));
    }
    if schemes.iter().any(|s| s == ADMIN || s == SERVICE) {
        shared.push(("403", "forbidden: a token that may not do this (a viewer's for a manager's call, a wrong token)."));
    }
    for (status, what) in shared {
        if !op.responses.responses.contains_key(status) {
            op.responses.responses.insert(
                status.to_string(),
                RefOr::T(request_error(what, status == "503")),
            );
        }
    }
    for answer in op.responses.responses.values_mut() {
        if let RefOr::T(answer) = answer {
            answer
                .headers
                .entry(flashgate_shared::ANSWERED_BY_HEADER.to_string())
                .or_insert_with(|| {
                    HeaderBuilder::new()
                        .schema(enum_of(&["origin", "edge"]))
                        .description(Some("Who answered: the edge worker or the origin."))
                        .build()
                });
            answer
                .headers
                .entry(crate::http::REQUEST_ID_HEADER.to_string())
                .or_insert_with(|| {
                    HeaderBuilder::new()
                        .schema(String::schema_of())
                        .description(Some(
                            "The caller's request id, or a UUID made by the origin; its log lines carry it.",
                        ))
                        .build()
                });
        }
    }
}

/// A request-error answer: `ErrorBody`, with `Retry-After` when asked.
pub fn request_error(what: &str, retry_after: bool) -> utoipa::openapi::Response {
    let mut answer = ResponseBuilder::new().description(what).content(
        "application/json",
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("ErrorBody")))
            .build(),
    );
    if retry_after {
        answer = answer.header("Retry-After", retry_after_header());
    }
    answer.build()
}

/// The `Retry-After` header: whole seconds to wait (RFC 9110 §10.2.3).
pub fn retry_after_header() -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(u32::schema_of())
        .description(Some(
            "Seconds to wait before trying again (RFC 9110 §10.2.3).",
        ))
        .build()
}

/// A string schema limited to `values`.
fn enum_of(values: &[&str]) -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(values.iter().copied()))
        .build()
}

/// The inline schema of a primitive, for headers.
trait SchemaOf {
    fn schema_of() -> utoipa::openapi::schema::Object;
}

impl SchemaOf for String {
    fn schema_of() -> utoipa::openapi::schema::Object {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .build()
    }
}

impl SchemaOf for u32 {
    fn schema_of() -> utoipa::openapi::schema::Object {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::Integer)
            .minimum(Some(0))
            .build()
    }
}
