//! OpenAPI links between operations (OpenAPI 3.1 §4.8.20): how the id an answer carries feeds
//! the next call, so that a client generator or a stateful fuzzer (schemathesis, in
//! `scripts/test-openapi`) can follow a campaign from its creation to a claim, a claim to its
//! payment or release, a code to its use and the use to its confirm.

use serde_json::{json, Value};

use super::operation_id;

/// Where a link starts: method, path, status of the answer.
type From = (&'static str, &'static str, &'static str);
/// Where it goes: link name, method, path, the parameter it fills, its runtime expression.
type To = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

/// Every link of the document.
const LINKS: &[(From, To)] = &[
    // Create campaign → status, claim, her claim.
    (
        ("post", "/admin/v1/campaigns", "201"),
        (
            "status",
            "get",
            "/api/v1/campaigns/{id}",
            "id",
            "$response.body#/id",
        ),
    ),
    (
        ("post", "/admin/v1/campaigns", "201"),
        (
            "claim",
            "post",
            "/api/v1/campaigns/{id}/claims",
            "id",
            "$response.body#/id",
        ),
    ),
    (
        ("post", "/admin/v1/campaigns", "201"),
        (
            "change",
            "patch",
            "/admin/v1/campaigns/{id}",
            "id",
            "$response.body#/id",
        ),
    ),
    (
        ("post", "/admin/v1/campaigns", "201"),
        (
            "reconcile",
            "get",
            "/admin/v1/campaigns/{id}/reconcile",
            "id",
            "$response.body#/id",
        ),
    ),
    // Claim → pay, release, show.
    (
        ("post", "/api/v1/campaigns/{id}/claims", "201"),
        (
            "pay",
            "post",
            "/api/v1/claims/{id}/pay",
            "id",
            "$response.body#/claim/id",
        ),
    ),
    (
        ("post", "/api/v1/campaigns/{id}/claims", "201"),
        (
            "release",
            "post",
            "/api/v1/claims/{id}/release",
            "id",
            "$response.body#/claim/id",
        ),
    ),
    (
        ("post", "/api/v1/campaigns/{id}/claims", "201"),
        (
            "extend",
            "post",
            "/api/v1/claims/{id}/extend",
            "id",
            "$response.body#/claim/id",
        ),
    ),
    (
        ("post", "/api/v1/campaigns/{id}/claims", "201"),
        (
            "show",
            "get",
            "/api/v1/claims/{id}",
            "id",
            "$response.body#/claim/id",
        ),
    ),
    (
        ("post", "/api/v1/campaigns/{id}/claims", "201"),
        (
            "mine",
            "get",
            "/api/v1/campaigns/{id}/claims/mine",
            "id",
            "$request.path.id",
        ),
    ),
    // Pay → show.
    (
        ("post", "/api/v1/claims/{id}/pay", "200"),
        (
            "show",
            "get",
            "/api/v1/claims/{id}",
            "id",
            "$response.body#/claim/id",
        ),
    ),
    // Promo code → check, use, show; use → confirm, release.
    (
        ("post", "/admin/v1/codes", "201"),
        (
            "check",
            "post",
            "/api/v1/codes/{code}/check",
            "code",
            "$response.body#/code",
        ),
    ),
    (
        ("post", "/admin/v1/codes", "201"),
        (
            "use",
            "post",
            "/api/v1/codes/{code}/use",
            "code",
            "$response.body#/code",
        ),
    ),
    (
        ("post", "/admin/v1/codes", "201"),
        (
            "show",
            "get",
            "/admin/v1/codes/{code}",
            "code",
            "$response.body#/code",
        ),
    ),
    (
        ("post", "/admin/v1/codes", "201"),
        (
            "change",
            "patch",
            "/admin/v1/codes/{code}",
            "code",
            "$response.body#/code",
        ),
    ),
    (
        ("post", "/api/v1/codes/{code}/use", "201"),
        (
            "confirm",
            "post",
            "/api/v1/uses/{id}/confirm",
            "id",
            "$response.body#/use",
        ),
    ),
    (
        ("post", "/api/v1/codes/{code}/use", "201"),
        (
            "release",
            "post",
            "/api/v1/uses/{id}/release",
            "id",
            "$response.body#/use",
        ),
    ),
    // Gift campaign → segment, show; fulfilment → show.
    (
        ("post", "/admin/v1/gift-campaigns", "201"),
        (
            "segment",
            "post",
            "/admin/v1/gift-campaigns/{id}/segments",
            "id",
            "$response.body#/id",
        ),
    ),
    (
        ("post", "/admin/v1/gift-campaigns", "201"),
        (
            "show",
            "get",
            "/admin/v1/gift-campaigns/{id}",
            "id",
            "$response.body#/id",
        ),
    ),
    (
        ("post", "/admin/v1/gift-campaigns", "201"),
        (
            "fulfil",
            "post",
            "/api/v1/gift-campaigns/{id}/fulfilments",
            "id",
            "$response.body#/id",
        ),
    ),
    (
        ("post", "/api/v1/gift-campaigns/{id}/fulfilments", "201"),
        (
            "show",
            "get",
            "/api/v1/fulfilments/{id}",
            "id",
            "$response.body#/fulfilment/id",
        ),
    ),
];

/// Adds [`LINKS`] to the answers they start from, in the document's JSON (utoipa 5 writes a
/// link's `operationId` as `operation_id`, which OpenAPI does not know). A link from or to an
/// operation that is not in the document panics: the router is built at start-up and in every
/// test (`tests/tests/it/api/openapi.rs`), so such a mistake cannot ship.
pub fn add(doc: &mut Value) {
    for ((method, path, status), (name, to_method, to_path, param, expr)) in LINKS {
        assert!(
            doc["paths"][to_path][to_method].is_object(),
            "OpenAPI link {name} to a missing operation {to_method} {to_path}"
        );
        let answer = &mut doc["paths"][path][method]["responses"][status];
        assert!(
            answer.is_object(),
            "OpenAPI link from a missing answer {status} of {method} {path}"
        );
        answer["links"][name] = json!({
            "operationId": operation_id(to_method, to_path),
            "parameters": {*param: expr},
        });
    }
}
