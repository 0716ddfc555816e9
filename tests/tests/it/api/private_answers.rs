//! Answers that depend on who asks carry `Cache-Control: private, no-store`,
//! so no shared cache between a customer and the edge or origin keeps or shares them; public
//! campaign status keeps its own caching. At the origin over HTTP and through the worker in
//! workerd.

use flashgate_shared::PRIVATE_CACHE_CONTROL;
use flashgate_tests::support::{send_raw, unique, RawReply, TestEdge, TestOrigin};
use reqwest::Method;

/// A request to one server (origin or edge).
struct Client<'a> {
    http: &'a reqwest::Client,
    base: String,
}

impl Client<'_> {
    /// `method base+path` with an optional bearer token and JSON body.
    async fn call(
        &self,
        method: Method,
        path: &str,
        bearer: Option<&str>,
        body: Option<&str>,
    ) -> RawReply {
        let headers = match body {
            Some(_) => vec![("content-type", "application/json".to_string())],
            None => Vec::new(),
        };
        let url = format!("{}{path}", self.base);
        send_raw(
            self.http,
            method,
            &url,
            bearer,
            &headers,
            body.unwrap_or("").to_string(),
        )
        .await
    }

    /// A claim with body `{}` and `Idempotency-Key: key`.
    async fn claim(&self, campaign: &str, bearer: Option<&str>, key: &str) -> RawReply {
        let url = format!("{}/api/v1/campaigns/{campaign}/claims", self.base);
        let headers = [
            ("content-type", "application/json".to_string()),
            ("idempotency-key", key.to_string()),
        ];
        send_raw(self.http, Method::POST, &url, bearer, &headers, "{}").await
    }

    async fn get(&self, path: &str, bearer: Option<&str>) -> RawReply {
        self.call(Method::GET, path, bearer, None).await
    }
}

fn assert_private(what: &str, r: &RawReply, status: u16) {
    assert_eq!(r.status, status, "{what}: {}", r.body);
    assert_eq!(
        r.header("cache-control"),
        Some(PRIVATE_CACHE_CONTROL),
        "{what} ({status}) must not be kept by a shared cache"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_customer_answers_at_the_origin_are_private_no_store_and_status_stays_public() {
    let o = TestOrigin::start().await;
    let at = Client {
        http: &o.http,
        base: o.url.clone(),
    };
    let c = o.campaign("sale", 5).await;
    let ana = o.token(&unique("ana"));
    let bea = o.token(&unique("bea"));
    let service = o.config.service_token.expose().to_string();
    let admin = o.manager_token().to_string();
    let mine = format!("/api/v1/campaigns/{c}/claims/mine");

    let won = at.claim(&c, Some(&ana), "k1").await;
    assert_private("claim 201", &won, 201);
    let again = at.claim(&c, Some(&ana), "k2").await;
    assert_eq!(again.body["result"], "already_claimed");
    assert_private("claim already_claimed", &again, 409);
    assert_private(
        "claim without a token",
        &at.claim(&c, None, "k3").await,
        401,
    );
    assert_private("mine 200", &at.get(&mine, Some(&ana)).await, 200);
    assert_private("mine 404", &at.get(&mine, Some(&bea)).await, 404);
    assert_private("mine 401", &at.get(&mine, None).await, 401);
    let claim_id = won.body["claim"]["id"].as_str().expect("claim id");
    let pay = format!("/api/v1/claims/{claim_id}/pay");
    let paid = at
        .call(
            Method::POST,
            &pay,
            Some(&service),
            Some(r#"{"payment_ref":"p1"}"#),
        )
        .await;
    assert_private("pay 200", &paid, 200);
    let release = at
        .call(
            Method::POST,
            "/api/v1/claims/c_nope/release",
            Some(&service),
            None,
        )
        .await;
    assert_private("release 404", &release, 404);
    assert_private(
        "admin list",
        &at.get("/admin/v1/campaigns", Some(&admin)).await,
        200,
    );
    let reconcile = format!("/admin/v1/campaigns/{c}/reconcile");
    assert_private("reconcile", &at.get(&reconcile, Some(&admin)).await, 200);
    assert_private(
        "admin 403",
        &at.get("/admin/v1/campaigns", Some("wrong")).await,
        403,
    );
    let status = at.get(&format!("/api/v1/campaigns/{c}"), None).await;
    assert_eq!(status.status, 200);
    assert_eq!(status.header("cache-control"), Some("public, max-age=1"));
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_customer_answers_through_the_edge_are_private_no_store() {
    let o = TestOrigin::start().await;
    let e = TestEdge::start(&o.url, &[("FLASHGATE_STATUS_TTL_MS", "200".into())]);
    let at = Client {
        http: &o.http,
        base: e.url.clone(),
    };
    let c = o.campaign("sale", 1).await;
    let ana = o.token(&unique("ana"));

    let won = at.claim(&c, Some(&ana), "k1").await;
    assert_eq!(won.header("flashgate-answered-by"), Some("origin"));
    assert_private("claim 201 relayed by the edge", &won, 201);
    let refused = at.claim(&c, None, "k1").await;
    assert_eq!(refused.header("flashgate-answered-by"), Some("edge"));
    assert_private("claim without a token, answered by the edge", &refused, 401);
    // Sold out: the first answers come from the origin, then the edge answers itself; every
    // one of them is private.
    let mut by_edge = false;
    for i in 0..20 {
        let bea = o.token(&unique("bea"));
        let r = at.claim(&c, Some(&bea), "k").await;
        assert_eq!(r.body["result"], "sold_out", "try {i}: {}", r.body);
        assert_private("sold_out", &r, 409);
        if r.header("flashgate-answered-by") == Some("edge") {
            by_edge = true;
            break;
        }
    }
    assert!(by_edge, "the edge learned the sell-out and answered itself");
    let mine = at
        .get(&format!("/api/v1/campaigns/{c}/claims/mine"), Some(&ana))
        .await;
    assert_private("mine through the edge", &mine, 200);
    let status = at.get(&format!("/api/v1/campaigns/{c}"), None).await;
    assert_eq!(status.status, 200);
    assert!(
        status
            .header("cache-control")
            .is_some_and(|v| v.starts_with("public")),
        "status stays publicly cacheable: {:?}",
        status.header("cache-control")
    );
    drop(e);
    o.stop().await;
}
