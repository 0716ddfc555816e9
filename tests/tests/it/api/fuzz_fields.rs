//! Odd values in every field of every endpoint, at the origin and through the edge
//! in workerd: NUL and other control characters, lone surrogates, 10 KB strings, numbers at and
//! past the i64 and f64 limits, wrong JSON types, 200 levels of nesting. Every answer must be
//! a documented 2xx or 4xx with the documented body shape, never a 5xx, and reconcile must stay
//! clean. Deterministic (the cases are enumerated; the pairs come from a fixed seed).

use std::time::Instant;

use chrono::Utc;
use flashgate_shared::api::promo::{CheckRequest, UseRequest};
use flashgate_shared::api::{
    CampaignKind, ChangeRequest, ClaimRequest, ExtendRequest, NewCampaign, PayRequest,
    RedeemRequest, ReleaseRequest,
};
use flashgate_tests::fuzz::{self, Auth, Case, Endpoint, Target};
use flashgate_tests::support::{
    fresh_code_name, new_batch, new_code, send_raw, unique, TestEdge, TestOrigin,
};
use futures::StreamExt;
use reqwest::header::{HeaderName, HeaderValue};
use reqwest::Method;
use serde_json::{json, Value};

/// A valid body the fuzzer varies field by field: a wire type, as JSON.
fn body(b: impl serde::Serialize) -> Option<Value> {
    Some(serde_json::to_value(b).expect("body"))
}

/// Seed of the random pairs of odd fields.
const SEED: u64 = 23;
/// Random two-field cases.
const PAIRS: usize = 200;
/// Requests in flight.
const CONCURRENCY: usize = 12;

struct Fixtures {
    sale: String,
    giveaway: String,
    patched: String,
    created: String,
}

/// Campaigns, a hold, a coupon, a shared code and a use the endpoints act on.
async fn fixtures(o: &TestOrigin) -> (Fixtures, Vec<Endpoint>) {
    let sale = o.campaign("sale", 1_000).await;
    let giveaway = o.campaign("giveaway", 1_000).await;
    let patched = o.campaign("sale", 1_000).await;
    let created = unique("fz");
    let hold = o.claim(&sale, &unique("holder"), "k").await.1["claim"]["id"]
        .as_str()
        .expect("hold id")
        .to_string();
    let coupon = o.claim(&giveaway, &unique("gift"), "k").await.1["claim"]["code"]
        .as_str()
        .expect("coupon code")
        .to_string();
    let code = o.shared_code(1_000, true).await;
    let used = send_raw(
        &o.http,
        Method::POST,
        &format!("{}/api/v1/codes/{code}/use", o.url),
        Some(&o.token(&unique("user"))),
        &[
            ("content-type", "application/json".into()),
            ("idempotency-key", "k".into()),
        ],
        r#"{"order":"o1","cart_total":6000}"#,
    )
    .await;
    let use_id = used.body["use"]
        .as_str()
        .unwrap_or_else(|| panic!("use id: {} {}", used.status, used.body))
        .to_string();
    let now = Utc::now();
    let later = now + chrono::Duration::hours(2);
    let ep = |name, method, path: &str, param: &str, auth, keyed, body: Option<Value>| Endpoint {
        name,
        method,
        path: path.into(),
        param: param.into(),
        auth,
        keyed,
        body,
    };
    use Auth::*;
    let endpoints = vec![
        ep(
            "status",
            Method::GET,
            "/api/v1/campaigns/{p}",
            &sale,
            None,
            false,
            Option::None,
        ),
        ep(
            "claim",
            Method::POST,
            "/api/v1/campaigns/{p}/claims",
            &sale,
            Customer,
            true,
            body(ClaimRequest::default()),
        ),
        ep(
            "mine",
            Method::GET,
            "/api/v1/campaigns/{p}/claims/mine",
            &sale,
            Customer,
            false,
            Option::None,
        ),
        ep(
            "pay",
            Method::POST,
            "/api/v1/claims/{p}/pay",
            &hold,
            Service,
            false,
            body(PayRequest {
                payment_ref: "p-1".into(),
            }),
        ),
        ep(
            "release",
            Method::POST,
            "/api/v1/claims/{p}/release",
            &hold,
            Service,
            false,
            body(ReleaseRequest {
                reason: Some("payment_failed".into()),
            }),
        ),
        ep(
            "extend",
            Method::POST,
            "/api/v1/claims/{p}/extend",
            &hold,
            Service,
            true,
            body(ExtendRequest { seconds: Some(60) }),
        ),
        ep(
            "coupon",
            Method::GET,
            "/api/v1/coupons/{p}",
            &coupon,
            Service,
            false,
            Option::None,
        ),
        ep(
            "redeem",
            Method::POST,
            "/api/v1/coupons/{p}/redeem",
            &coupon,
            Service,
            true,
            body(RedeemRequest {
                store: Some("s-1".into()),
            }),
        ),
        ep(
            "check",
            Method::POST,
            "/api/v1/codes/{p}/check",
            &code,
            Customer,
            false,
            body(CheckRequest {
                cart_total: 6000,
                currency: Some("USD".into()),
            }),
        ),
        ep(
            "use",
            Method::POST,
            "/api/v1/codes/{p}/use",
            &code,
            Customer,
            true,
            body(UseRequest {
                order: "o-2".into(),
                cart_total: 6000,
                currency: Some("USD".into()),
            }),
        ),
        ep(
            "use confirm",
            Method::POST,
            "/api/v1/uses/{p}/confirm",
            &use_id,
            Service,
            false,
            Option::None,
        ),
        ep(
            "use release",
            Method::POST,
            "/api/v1/uses/{p}/release",
            &use_id,
            Service,
            false,
            Option::None,
        ),
        ep(
            "create campaign",
            Method::POST,
            "/admin/v1/campaigns{p}",
            "",
            Admin,
            false,
            body(NewCampaign {
                id: created.clone(),
                name: "Fuzz drop".into(),
                kind: CampaignKind::Sale,
                stock: 5,
                starts_at: now,
                ends_at: later,
                hold_seconds: Some(60),
                hold_extension_seconds: Option::None,
                gate_shards: Option::None,
                waiting_room: Option::None,
                access: Option::None,
                draw: Option::None,
                variants: Option::None,
            }),
        ),
        ep(
            "list",
            Method::GET,
            "/admin/v1/campaigns{p}",
            "",
            Admin,
            false,
            Option::None,
        ),
        ep(
            "show",
            Method::GET,
            "/admin/v1/campaigns/{p}",
            &sale,
            Admin,
            false,
            Option::None,
        ),
        ep(
            "patch restock",
            Method::PATCH,
            "/admin/v1/campaigns/{p}",
            &patched,
            Admin,
            false,
            body(ChangeRequest::restock(1)),
        ),
        ep(
            "patch stock",
            Method::PATCH,
            "/admin/v1/campaigns/{p}",
            &patched,
            Admin,
            false,
            body(ChangeRequest::set_stock(2000)),
        ),
        ep(
            "patch end",
            Method::PATCH,
            "/admin/v1/campaigns/{p}",
            &patched,
            Admin,
            false,
            body(ChangeRequest::ends_at(later)),
        ),
        ep(
            "audit",
            Method::GET,
            "/admin/v1/campaigns/{p}/audit",
            &sale,
            Admin,
            false,
            Option::None,
        ),
        ep(
            "reconcile",
            Method::GET,
            "/admin/v1/campaigns/{p}/reconcile",
            &sale,
            Admin,
            false,
            Option::None,
        ),
        ep(
            "create code",
            Method::POST,
            "/admin/v1/codes{p}",
            "",
            Admin,
            false,
            body({
                let mut code = new_code(&fresh_code_name("FZ"), 10);
                code.offer.currency = "EUR".into();
                code.offer.starts_at = Some(now.to_rfc3339());
                code.offer.ends_at = "Sunday 23:59 Europe/Paris".into();
                code
            }),
        ),
        ep(
            "show code",
            Method::GET,
            "/admin/v1/codes/{p}",
            &code,
            Admin,
            false,
            Option::None,
        ),
        ep(
            "batch",
            Method::POST,
            "/admin/v1/codes/batches{p}",
            "",
            Admin,
            false,
            body({
                let mut batch = new_batch(2, 500);
                batch.offer.currency = "EUR".into();
                batch.offer.ends_at = later.to_rfc3339();
                batch
            }),
        ),
        ep(
            "batch csv",
            Method::GET,
            "/admin/v1/codes/batches/{p}",
            "b_00000000000000000000000000000000.csv",
            Admin,
            false,
            Option::None,
        ),
    ];
    (
        Fixtures {
            sale,
            giveaway,
            patched,
            created,
        },
        endpoints,
    )
}

/// Sends one case to `base`; returns a failure line when the answer breaks the contract.
async fn run(o: &TestOrigin, base: &str, e: &Endpoint, case: &Case, n: usize) -> Option<String> {
    let mut req = o
        .http
        .request(
            e.method.clone(),
            format!("{base}{}", fuzz::path_of(e, &case.target)),
        )
        .header(
            "cf-connecting-ip",
            format!("10.23.{}.{}", (n / 250) % 250, n % 250),
        );
    req = match e.auth {
        Auth::None => req,
        Auth::Customer => req.bearer_auth(o.token(&format!("fz-{n}"))),
        Auth::Service => req.bearer_auth(o.config.service_token.expose()),
        Auth::Admin => req.bearer_auth(o.manager_token()),
    };
    if e.keyed {
        let key = match &case.target {
            Target::Key(k) => HeaderValue::from_bytes(k).expect("header bytes"),
            _ => HeaderValue::from_str(&format!("fz-{n}")).expect("key"),
        };
        req = req.header(HeaderName::from_static("idempotency-key"), key);
    }
    if let Some(body) = fuzz::body_of(e, &case.target) {
        req = req.header("content-type", "application/json").body(body);
    }
    let what = format!("{} {:?}", e.name, case.target);
    let res = match req.send().await {
        Ok(r) => r,
        Err(err) => return Some(format!("{what:.300}: transport error {err}")),
    };
    let status = res.status().as_u16();
    let ct = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let answered_by = res
        .headers()
        .get(flashgate_shared::ANSWERED_BY_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("?")
        .to_string();
    let body = res.bytes().await.unwrap_or_default();
    // Who answered and what, so that a failure in CI says where to look.
    fuzz::check_answer(status, ct.as_deref(), &body)
        .err()
        .map(|why| {
            format!(
                "{what:.300} → {why} (answered by {answered_by}: {:.200})",
                String::from_utf8_lossy(&body)
            )
        })
}

async fn run_all(
    o: &TestOrigin,
    base: &str,
    endpoints: &[Endpoint],
    cases: &[Case],
) -> Vec<String> {
    futures::stream::iter(cases.iter().enumerate())
        .map(|(n, c)| run(o, base, &endpoints[c.endpoint], c, n))
        .buffer_unordered(CONCURRENCY)
        .filter_map(|f| async move { f })
        .collect()
        .await
}

async fn assert_reconciles(o: &TestOrigin, campaign: &str) {
    let (status, r) = o
        .admin(
            Method::GET,
            &format!("/admin/v1/campaigns/{campaign}/reconcile"),
            Some(o.viewer_token()),
            None,
        )
        .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["ok"], true, "reconcile of {campaign}: {r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn odd_values_in_every_field_get_documented_4xx_never_5xx_and_reconcile_stays_clean() {
    let started = Instant::now();
    let o = TestOrigin::start().await;
    let (f, endpoints) = fixtures(&o).await;
    let cases = fuzz::cases(&endpoints, SEED, PAIRS);
    let mut failures = run_all(&o, &o.url, &endpoints, &cases).await;
    // Through the edge: the public paths it serves or passes to the origin.
    let edge = TestEdge::start(&o.url, &[]);
    let edge_endpoints: Vec<usize> = (0..endpoints.len())
        .filter(|&i| endpoints[i].path.starts_with("/api/v1/"))
        .collect();
    let edge_cases: Vec<Case> = cases
        .iter()
        .filter(|c| edge_endpoints.contains(&c.endpoint))
        .cloned()
        .collect();
    failures.extend(
        run_all(&o, &edge.url, &endpoints, &edge_cases)
            .await
            .into_iter()
            .map(|f| format!("edge: {f}")),
    );
    drop(edge);
    for c in [&f.sale, &f.giveaway, &f.patched] {
        assert_reconciles(&o, c).await;
    }
    let (status, _) = o
        .admin(
            Method::GET,
            &format!("/admin/v1/campaigns/{}", f.created),
            Some(o.manager_token()),
            None,
        )
        .await;
    if status == 200 {
        assert_reconciles(&o, &f.created).await;
    }
    let took = started.elapsed();
    eprintln!(
        "fuzz: {} origin + {} edge requests in {took:?}",
        cases.len(),
        edge_cases.len()
    );
    assert!(
        failures.is_empty(),
        "{} answers outside the contract, e.g.:\n{}",
        failures.len(),
        failures
            .iter()
            .take(25)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    o.stop().await;
}

/// The two inputs of the field report: a NUL in a campaign name and in a release reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_in_a_name_or_a_reason_is_422_naming_the_field_and_changes_nothing() {
    let o = TestOrigin::start().await;
    let id = unique("nul");
    let now = Utc::now();
    let (status, body) = o
        .admin(
            Method::POST,
            "/admin/v1/campaigns",
            Some(o.manager_token()),
            Some(
                json!({"id": id, "name": "bad\u{0}name", "kind": "sale", "stock": 3,
                "starts_at": now, "ends_at": now + chrono::Duration::hours(1)}),
            ),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["result"], "validation_failed");
    assert!(
        body["message"].as_str().unwrap().starts_with("name "),
        "{body}"
    );
    let (status, _) = o
        .admin(
            Method::GET,
            &format!("/admin/v1/campaigns/{id}"),
            Some(o.manager_token()),
            None,
        )
        .await;
    assert_eq!(status, 404, "no campaign was created");

    let c = o.campaign("sale", 3).await;
    let hold = o.claim(&c, &unique("ana"), "k").await.1["claim"]["id"]
        .as_str()
        .expect("hold")
        .to_string();
    let r = send_raw(
        &o.http,
        Method::POST,
        &format!("{}/api/v1/claims/{hold}/release", o.url),
        Some(o.config.service_token.expose()),
        &[("content-type", "application/json".into())],
        r#"{"reason": "r\u0000"}"#,
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.body["result"], "validation_failed");
    assert!(
        r.body["message"].as_str().unwrap().starts_with("reason "),
        "{}",
        r.body
    );
    assert_eq!(
        o.claim_rows(&c, &["held"]).await,
        1,
        "the hold is still held"
    );
    assert_eq!(o.remaining(&c).await, 2);
    o.stop().await;
}
