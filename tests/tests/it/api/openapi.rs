//! The OpenAPI document (`GET /openapi.json`, docs/OPENAPI.md) against the origin over HTTP and
//! the edge worker in workerd: it lists exactly the routes the origin's router serves, with the
//! shared parts every operation needs; the edge passes it through; and the inputs schemathesis
//! found failing (scripts/test-openapi) stay fixed.

use std::collections::{BTreeMap, BTreeSet};

use flashgate_origin::gate::Keys;
use flashgate_tests::support::{edge_with, get, unique, EdgeSettings, TestOrigin};
use futures::future::join_all;
use serde_json::Value;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// The origin's document, checked to be JSON of OpenAPI 3.1.
async fn document(o: &TestOrigin) -> Value {
    let r = get(&o.http, &format!("{}/openapi.json", o.url)).await;
    assert_eq!((r.status, r.by.as_str()), (200, "origin"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    let doc: Value = serde_json::from_slice(&r.body).unwrap();
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        doc["openapi"]
    );
    doc
}

/// `(path, method) → operation` of the document.
fn operations(doc: &Value) -> BTreeMap<(String, String), Value> {
    let mut ops = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            if let Some(op) = item.get(m) {
                ops.insert((path.clone(), m.to_string()), op.clone());
            }
        }
    }
    ops
}

/// A concrete path for a template: every `{param}` replaced by a value of a valid shape.
fn concrete(template: &str) -> String {
    template
        .split('/')
        .map(|s| if s.starts_with('{') { "x1" } else { s })
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether the router itself answered (no route for the path, or not this method), from the
/// body of the router's fallbacks.
fn router_refused(status: u16, body: &Value) -> Option<&'static str> {
    match (status, body["result"].as_str(), body["message"].as_str()) {
        (404, Some("not_found"), Some("no such route")) => Some("no route"),
        (405, Some("method_not_allowed"), Some("method not allowed on this path")) => {
            Some("wrong method")
        }
        _ => None,
    }
}

/// True when every documented operation of `path` is answered by the edge.
fn edge_only_path(ops: &BTreeMap<(String, String), Value>, path: &str) -> bool {
    ops.iter()
        .filter(|((p, _), _)| p == path)
        .all(|(_, op)| op["x-flashgate-answered-by"] == "edge")
}

#[tokio::test]
async fn the_document_lists_exactly_the_routes_the_origin_serves() {
    let o = TestOrigin::start().await;
    let doc = document(&o).await;
    let ops = operations(&doc);
    assert!(ops.len() >= 44, "only {} operations", ops.len());
    let mut checked = 0;
    for path in doc["paths"].as_object().unwrap().keys() {
        let url = format!("{}{}", o.url, concrete(path));
        for m in METHODS {
            let res = o
                .http
                .request(m.to_uppercase().parse().unwrap(), &url)
                .send()
                .await
                .unwrap();
            let status = res.status().as_u16();
            let body: Value = res.json().await.unwrap_or(Value::Null);
            let refused = router_refused(status, &body);
            match ops.get(&(path.clone(), m.to_string())) {
                // The origin answers 405 when another method of the path is its own, else 404.
                Some(op) if op["x-flashgate-answered-by"] == "edge" => assert_eq!(
                    refused,
                    Some(if edge_only_path(&ops, path) {
                        "no route"
                    } else {
                        "wrong method"
                    }),
                    "{m} {path} is the edge's; the origin answered {status} {body}"
                ),
                Some(_) => assert_eq!(
                    refused, None,
                    "{m} {path} is documented; the router refused it: {status} {body}"
                ),
                // A path only the edge answers is no route of the origin's at all.
                None if edge_only_path(&ops, path) => assert_eq!(
                    refused,
                    Some("no route"),
                    "{m} {path} is the edge's only; the origin answered {status} {body}"
                ),
                None => assert_eq!(
                    refused,
                    Some("wrong method"),
                    "{m} {path} is served but not documented: {status} {body}"
                ),
            }
            checked += 1;
        }
    }
    println!("{checked} method × path pairs checked against the router");
    // A path the document does not list is the router's 404.
    let res = o
        .http
        .get(format!("{}/api/v1/not-documented", o.url))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    assert_eq!(
        router_refused(status, &res.json().await.unwrap()),
        Some("no route")
    );
    o.stop().await;
}

#[tokio::test]
async fn every_operation_has_its_id_security_errors_and_headers() {
    let o = TestOrigin::start().await;
    let doc = document(&o).await;
    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    assert_eq!(
        schemes.keys().collect::<BTreeSet<_>>(),
        BTreeSet::from([
            &"admin_token".to_string(),
            &"customer_token".to_string(),
            &"service_token".to_string()
        ])
    );
    for s in schemes.values() {
        assert_eq!(
            (&s["type"], &s["scheme"]),
            (&"http".into(), &"bearer".into())
        );
    }
    let error = &doc["components"]["schemas"]["ErrorBody"];
    assert_eq!(error["required"], serde_json::json!(["result", "message"]));
    let mut ids = BTreeSet::new();
    for ((path, method), op) in operations(&doc) {
        let id = op["operationId"].as_str().unwrap().to_string();
        assert!(ids.insert(id.clone()), "operationId {id} twice");
        let answers = op["responses"].as_object().unwrap();
        for must in ["408", "503"] {
            assert!(answers.contains_key(must), "{method} {path}: no {must}");
        }
        if path != "/readyz" {
            assert!(
                answers["503"]["headers"].get("Retry-After").is_some(),
                "{method} {path}: 503 without Retry-After"
            );
        }
        let secured = op
            .get("security")
            .and_then(Value::as_array)
            .is_some_and(|s| {
                s.iter()
                    .any(|r| r.as_object().is_some_and(|r| !r.is_empty()))
            });
        assert_eq!(
            answers.contains_key("401"),
            secured,
            "{method} {path}: 401 iff it takes a token"
        );
        if op.get("requestBody").is_some() {
            for must in ["400", "413", "415", "422"] {
                assert!(answers.contains_key(must), "{method} {path}: no {must}");
            }
        }
        for (status, answer) in answers {
            assert!(
                answer["headers"].get("flashgate-answered-by").is_some(),
                "{method} {path} {status}: no Flashgate-Answered-By"
            );
        }
    }
    // The claim: its headers, its business results and its example from the tests.
    let claim = &doc["paths"]["/api/v1/campaigns/{id}/claims"]["post"];
    let params: BTreeSet<_> = claim["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        params,
        BTreeSet::from(["id", "Idempotency-Key", "Flashgate-Admission"])
    );
    assert_eq!(
        claim["security"],
        serde_json::json!([{"customer_token": []}])
    );
    let sold_out =
        &claim["responses"]["409"]["content"]["application/json"]["examples"]["sold_out"]["value"];
    assert_eq!(sold_out, &serde_json::json!({"result": "sold_out"}));
    // The links schemathesis follows: create campaign → claim → pay.
    let created = &doc["paths"]["/admin/v1/campaigns"]["post"]["responses"]["201"]["links"];
    assert_eq!(created["claim"]["operationId"], "post_campaigns_id_claims");
    assert_eq!(created["claim"]["parameters"]["id"], "$response.body#/id");
    let claimed = &claim["responses"]["201"]["links"];
    assert_eq!(claimed["pay"]["operationId"], "post_claims_id_pay");
    o.stop().await;
}

/// schemathesis: `GET /edge/v1/campaigns/{id}/winners-filter` of a campaign whose gate is not
/// in Redis (an ended campaign's, or one Redis lost) answered 503 `unavailable` on every try:
/// nothing reloaded that gate. The request loads it now, and the filter is served.
#[tokio::test]
async fn winners_filter_of_a_campaign_whose_gate_is_not_loaded_is_served() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 3).await;
    let (status, _) = o.claim(&c, &unique("ana"), "k-1").await;
    assert_eq!(status, 201);
    // The gate is gone: what the origin's own keys say.
    let mut r = o.origin.state.gate.clone();
    let _: () = redis::cmd("DEL")
        .arg(Keys::of(&c).shards)
        .arg(Keys::shard(&c, 0).loaded)
        .arg(Keys::shard(&c, 0).holders)
        .arg(Keys::shard(&c, 0).remaining)
        .query_async(&mut r)
        .await
        .unwrap();
    let res = o
        .http
        .get(format!("{}/edge/v1/campaigns/{c}/winners-filter", o.url))
        .bearer_auth(o.config.service_token.expose())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{:?}", res.text().await);
    assert_eq!(
        res.headers()["content-type"],
        flashgate_shared::winners_filter::CONTENT_TYPE
    );
    let body = res.bytes().await.unwrap();
    let filter = flashgate_shared::winners_filter::WinnersFilter::decode(&body).expect("a filter");
    assert_eq!(filter.count(), 1, "ana's unit, reloaded from PostgreSQL");
    let reloaded: Option<i64> = redis::cmd("GET")
        .arg(Keys::of(&c).remaining)
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(reloaded, Some(2), "the gate is back: 3 units, 1 claimed");
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_passes_the_document_through() {
    let o = TestOrigin::start().await;
    let direct = get(&o.http, &format!("{}/openapi.json", o.url)).await.body;
    // Before the edge starts, so that its campaign index lists it.
    let c = o.campaign("sale", 3).await;
    let e = edge_with(&o.url, EdgeSettings::default());
    let r = get(&o.http, &format!("{}/openapi.json", e.url)).await;
    assert_eq!((r.status, r.by.as_str()), (200, "origin"));
    assert_eq!(r.body, direct, "the same bytes as at the origin");
    let res = o
        .http
        .post(format!("{}/openapi.json", e.url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405);
    assert_eq!(res.headers()["allow"], "GET, HEAD");
    assert_eq!(res.headers()["flashgate-answered-by"], "edge");

    // schemathesis through the edge: a join past the edge's limit (2 per customer per second)
    // is 429 `rate_limited` + `Retry-After`, which the join's operation did not list.
    let token = o.token(&unique("joiner"));
    let url = format!("{}/api/v1/campaigns/{c}/queue", e.url);
    let joins = join_all((0..6).map(|_| o.http.post(&url).bearer_auth(&token).send())).await;
    let mut limited = 0;
    for res in joins {
        let res = res.unwrap();
        if res.status() != 429 {
            continue;
        }
        limited += 1;
        assert_eq!(res.headers()["flashgate-answered-by"], "edge");
        assert!(res.headers().get("retry-after").is_some());
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["result"], "rate_limited");
        assert!(body["message"].is_string(), "{body}");
    }
    assert!(
        limited > 0,
        "6 joins at once, 2 allowed per second: some are 429"
    );
    let doc = document(&o).await;
    let join = &doc["paths"]["/api/v1/campaigns/{id}/queue"]["post"]["responses"]["429"];
    assert_eq!(
        join["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ErrorBody"
    );
    assert!(join["headers"].get("Retry-After").is_some());
    // The claim's 429 is either the waiting room's `queued` or the edge's `rate_limited`.
    let claim429 = &doc["components"]["schemas"]["Claim429"]["oneOf"];
    assert_eq!(claim429.as_array().map(Vec::len), Some(2), "{claim429}");

    // Every customer operation of the document (under /api/v1/) is routed by the edge: its
    // route table answers neither "no such route" nor "wrong method" for any of them (a draw's
    // routes were once missing there, and customers could not enter a draw).
    let mut routed = 0;
    for (path, m) in operations(&doc).keys() {
        if !path.starts_with("/api/v1/") {
            continue;
        }
        let res = o
            .http
            .request(
                m.to_uppercase().parse().unwrap(),
                format!("{}{}", e.url, concrete(path)),
            )
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap_or(Value::Null);
        assert_eq!(
            router_refused(status, &body),
            None,
            "{m} {path} is documented; the edge refused it: {status} {body}"
        );
        routed += 1;
    }
    assert!(routed >= 20, "only {routed} customer operations");
    drop(e);
    o.stop().await;
}

#[tokio::test]
async fn the_document_reads_as_api_text_and_marks_what_the_edge_does_not_serve() {
    use flashgate_origin::http::openapi::tidy::{ORIGIN_ONLY, SUMMARY_MAX_CHARS};
    let o = TestOrigin::start().await;
    let doc = document(&o).await;
    for ((path, method), op) in operations(&doc) {
        let summary = op["summary"].as_str().unwrap_or_default();
        let description = op["description"].as_str().unwrap_or_default();
        for text in [summary, description] {
            assert!(
                !text.contains("[`"),
                "{method} {path}: a Rust link in {text:?}"
            );
        }
        assert!(
            summary.chars().count() <= SUMMARY_MAX_CHARS || !summary.contains(". "),
            "{method} {path}: summary of more than one sentence: {summary:?}"
        );
        let public = path.starts_with("/api/v1/") || path == "/openapi.json";
        assert_eq!(
            op[ORIGIN_ONLY].as_bool().unwrap_or(false),
            !public,
            "{method} {path}"
        );
    }
    let schemas = doc["components"]["schemas"].to_string();
    assert!(
        !schemas.contains("[`"),
        "a Rust link in a schema description"
    );
    let result = doc["components"]["schemas"]["ErrorBody"]["properties"]["result"]["description"]
        .as_str()
        .unwrap();
    for code in flashgate_shared::api::codes::ALL {
        assert!(
            result.contains(&format!("`{code}`")),
            "{code} missing: {result}"
        );
    }
    // Every variant of the claim's reply has a type name for generated clients.
    let variants = doc["components"]["schemas"]["ClaimReply"]["oneOf"]
        .as_array()
        .unwrap();
    let titles: BTreeSet<&str> = variants
        .iter()
        .map(|v| v["title"].as_str().expect("a titled variant"))
        .collect();
    assert_eq!(titles.len(), variants.len(), "{titles:?}");
    assert!(titles.contains("ClaimReplySoldOut"), "{titles:?}");
    // Admin writes name the header of a replayed reply; customer claims do not have it.
    let patch = &doc["paths"]["/admin/v1/campaigns/{id}"]["patch"]["responses"]["200"];
    assert!(
        patch["headers"]["idempotent-replayed"].is_object(),
        "{patch}"
    );
    let claim = &doc["paths"]["/api/v1/campaigns/{id}/claims"]["post"]["responses"]["201"];
    assert!(claim["headers"]["idempotent-replayed"].is_null(), "{claim}");
    o.stop().await;
}
