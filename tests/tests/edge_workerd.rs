//! The edge worker in the real runtime: the built worker (edge-worker/build) inside workerd via
//! Miniflare, in front of a real origin over real PostgreSQL and Redis. Requests are truly
//! concurrent where the behaviour is about concurrency. Origin-side effects are read from the
//! origin's own counters (`flashgate_status_requests_total`, `flashgate_claim_requests_total`).
//!
//! The worker is built once per run (`edge_tools_install` + `edge_build` of
//! scripts/lib/edge.sh) unless `FLASHGATE_EDGE_PREBUILT=1` says a caller already built it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use flashgate_shared::api::ChangeRequest;
use flashgate_shared::ANSWERED_BY_HEADER;
use flashgate_tests::support::until_state;
use flashgate_tests::support::{
    edge_headers, test_config, unique, TestEdge, TestOrigin, TEST_EDGE_SECRET,
};
use futures::future::join_all;
use serde_json::Value;

const EDGE_SECRET: &str = TEST_EDGE_SECRET;

/// Settings of one edge.
struct EdgeSettings {
    ttl_ms: u64,
    max_stale_ms: u64,
    timeout_ms: u64,
}

impl Default for EdgeSettings {
    fn default() -> Self {
        EdgeSettings {
            ttl_ms: 1_000,
            max_stale_ms: 30_000,
            timeout_ms: 3_000,
        }
    }
}

/// The built worker in workerd in front of `origin_url`, signing with [`EDGE_SECRET`].
fn edge(origin_url: &str, s: EdgeSettings) -> TestEdge {
    TestEdge::start(
        origin_url,
        &[
            ("FLASHGATE_STATUS_TTL_MS", s.ttl_ms.to_string()),
            ("FLASHGATE_STATUS_MAX_STALE_MS", s.max_stale_ms.to_string()),
            ("FLASHGATE_ORIGIN_TIMEOUT_MS", s.timeout_ms.to_string()),
            ("FLASHGATE_NOT_STARTED_SKEW_MS", "2000".into()),
            ("FLASHGATE_EDGE_SECRET", EDGE_SECRET.into()),
        ],
    )
}

/// One HTTP answer: status, who answered, body bytes, and all headers.
#[derive(Debug, Clone)]
struct Reply {
    status: u16,
    by: String,
    body: Vec<u8>,
    headers: reqwest::header::HeaderMap,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

async fn reply(res: reqwest::Response) -> Reply {
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let by = headers
        .get(ANSWERED_BY_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = res.bytes().await.expect("body").to_vec();
    Reply {
        status,
        by,
        body,
        headers,
    }
}

/// A claim request as raw parts, so bad ones can be built too.
#[derive(Clone)]
struct ClaimReq {
    token: Option<String>,
    key: Option<String>,
    content_type: Option<&'static str>,
    body: Vec<u8>,
}

impl ClaimReq {
    fn good(o: &TestOrigin, customer: &str, key: &str) -> Self {
        ClaimReq {
            token: Some(o.token(customer)),
            key: Some(key.into()),
            content_type: Some("application/json"),
            body: b"{}".to_vec(),
        }
    }
}

/// Sends a claim to `base`; `sign` adds a valid edge signature (to talk to the origin directly).
async fn send_claim(
    http: &reqwest::Client,
    base: &str,
    campaign: &str,
    r: &ClaimReq,
    sign: bool,
) -> Reply {
    let path = format!("/api/v1/campaigns/{campaign}/claims");
    let mut req = http.post(format!("{base}{path}")).body(r.body.clone());
    if let Some(t) = &r.token {
        req = req.bearer_auth(t);
    }
    if let Some(k) = &r.key {
        req = req.header("idempotency-key", k);
    }
    if let Some(ct) = r.content_type {
        req = req.header("content-type", ct);
    }
    if sign {
        let auth = r.token.as_ref().map(|t| format!("Bearer {t}"));
        let headers = edge_headers(
            EDGE_SECRET,
            "POST",
            &path,
            &r.body,
            auth.as_deref(),
            r.key.as_deref(),
            None,
        );
        for (name, value) in headers {
            req = req.header(name, value);
        }
    }
    reply(req.send().await.expect("claim request")).await
}

async fn get(http: &reqwest::Client, url: &str) -> Reply {
    reply(http.get(url).send().await.expect("GET")).await
}

fn status_url(base: &str, campaign: &str) -> String {
    format!("{base}/api/v1/campaigns/{campaign}")
}

/// Sells out `campaign` by claiming its units straight at the origin (signed).
async fn sell_out_at_origin(o: &TestOrigin, campaign: &str, stock: usize) {
    for i in 0..stock {
        let c = unique("direct");
        let r = send_claim(
            &o.http,
            &o.url,
            campaign,
            &ClaimReq::good(o, &c, &format!("k{i}")),
            true,
        )
        .await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_is_fetched_at_most_once_per_ttl_under_concurrent_gets() {
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", 5).await;
    // A long TTL so that the burst fits in one TTL window: exactly one origin fetch.
    let e = edge(
        &o.url,
        EdgeSettings {
            ttl_ms: 5_000,
            ..Default::default()
        },
    );
    let before = o.status_requests();
    let t0 = Instant::now();
    let replies = join_all((0..200).map(|_| {
        let (http, url) = (o.http.clone(), status_url(&e.url, &c));
        tokio::spawn(async move { get(&http, &url).await })
    }))
    .await;
    let burst = t0.elapsed();
    let fetches = o.status_requests() - before;
    assert!(burst < Duration::from_millis(5_000), "burst took {burst:?}");
    assert_eq!(
        fetches, 1,
        "200 concurrent GETs made {fetches} origin fetches"
    );
    let direct = o.status(&c).await;
    for r in replies {
        let r = r.expect("task");
        assert_eq!((r.status, r.by.as_str()), (200, "edge"));
        assert_eq!(r.json(), direct);
        assert!(r.header("flashgate-status-age-ms").is_some());
        assert!(r.header("age").is_some());
        assert_eq!(r.header("flashgate-stale"), None);
    }
    drop(e);

    // Sustained load for 3 s with a 500 ms TTL: refreshed about every TTL, never more often.
    let e = edge(
        &o.url,
        EdgeSettings {
            ttl_ms: 500,
            ..Default::default()
        },
    );
    let before = o.status_requests();
    let t0 = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..8 {
        let (http, url) = (o.http.clone(), status_url(&e.url, &c));
        workers.push(tokio::spawn(async move {
            let mut n = 0u32;
            while t0.elapsed() < Duration::from_millis(3_000) {
                assert_eq!(get(&http, &url).await.status, 200);
                n += 1;
            }
            n
        }));
    }
    let served: u32 = join_all(workers)
        .await
        .into_iter()
        .map(|n| n.unwrap())
        .sum();
    let elapsed_ms = t0.elapsed().as_millis() as u64;
    let fetches = o.status_requests() - before;
    let most = elapsed_ms / 500 + 1;
    println!(
        "sustained: {served} edge GETs in {elapsed_ms} ms, {fetches} origin fetches (bound {most})"
    );
    assert!(fetches <= most, "{fetches} fetches in {elapsed_ms} ms");
    assert!(fetches >= 3, "only {fetches} refreshes in {elapsed_ms} ms");
    assert!(u64::from(served) > fetches * 5);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_win_at_origin_then_sold_out_is_answered_at_the_edge() {
    let o = TestOrigin::start_signed().await;
    let stock = 5;
    let c = o.campaign("sale", stock).await;
    let e = edge(&o.url, EdgeSettings::default());

    // One customer wins through the edge: the origin answered.
    let alice = unique("alice");
    let before = o.claim_requests();
    let first = send_claim(
        &o.http,
        &e.url,
        &c,
        &ClaimReq::good(&o, &alice, "k1"),
        false,
    )
    .await;
    assert_eq!((first.status, first.by.as_str()), (201, "origin"));
    assert_eq!(first.json()["result"], "claimed");
    assert_eq!(first.json()["claim"]["customer"], alice.as_str());
    assert_eq!(o.claim_requests() - before, 1);

    // 60 customers at once for the 4 units left: exactly 4 more winners.
    let status_before = o.status_requests();
    let stampede_start = Instant::now();
    let run = unique("cust");
    let replies: Vec<Reply> = join_all((0..60).map(|i| {
        let req = ClaimReq::good(&o, &format!("{run}-{i}"), "k");
        let (http, url, c) = (o.http.clone(), e.url.clone(), c.clone());
        tokio::spawn(async move { send_claim(&http, &url, &c, &req, false).await })
    }))
    .await
    .into_iter()
    .map(|r| r.expect("task"))
    .collect();
    let won = replies.iter().filter(|r| r.status == 201).count();
    let sold_out: Vec<&Reply> = replies.iter().filter(|r| r.status == 409).collect();
    assert_eq!(won, 4, "{replies:?}");
    assert_eq!(sold_out.len(), 56);
    assert!(sold_out
        .iter()
        .all(|r| r.body == br#"{"result":"sold_out"}"#));
    assert_eq!(o.claim_rows(&c, &[]).await, stock);
    assert_eq!(o.remaining(&c).await, 0);

    // The edge learned sold_out from the origin's answers: from now on it answers itself and
    // the origin receives none of the claims.
    let before = o.claim_requests();
    let late: Vec<Reply> = join_all((0..100).map(|i| {
        let req = ClaimReq::good(&o, &format!("{run}-late-{i}"), "k");
        let (http, url, c) = (o.http.clone(), e.url.clone(), c.clone());
        tokio::spawn(async move { send_claim(&http, &url, &c, &req, false).await })
    }))
    .await
    .into_iter()
    .map(|r| r.expect("task"))
    .collect();
    for r in &late {
        assert_eq!((r.status, r.by.as_str()), (409, "edge"));
        assert_eq!(r.body, br#"{"result":"sold_out"}"#);
    }
    assert_eq!(o.claim_requests() - before, 0);
    // The 160 claims shared the status refreshes: at most one per TTL (single-flight).
    let fetches = o.status_requests() - status_before;
    let most = stampede_start.elapsed().as_millis() as u64 / 1_000 + 1;
    assert!(fetches <= most, "{fetches} status fetches, bound {most}");
    // Status through the edge says sold out too.
    let st = get(&o.http, &status_url(&e.url, &c)).await;
    assert_eq!(
        (st.json()["state"].as_str(), st.json()["remaining"].as_i64()),
        (Some("sold_out"), Some(0))
    );
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sold_out_at_origin_reaches_the_edge_within_the_bound_and_clears_on_restock() {
    let o = TestOrigin::start_signed().await;
    let stock = 2;
    let c = o.campaign("sale", stock as i64).await;
    let ttl = Duration::from_millis(1_000);
    let e = edge(&o.url, EdgeSettings::default());
    // The edge caches "active".
    let st = get(&o.http, &status_url(&e.url, &c)).await;
    assert_eq!(st.json()["state"], "active");

    // The campaign sells out at the origin (claims not through this edge).
    sell_out_at_origin(&o, &c, stock).await;
    let seen = until_state(&o.http, &e.url, &c, "sold_out", Instant::now()).await;
    println!("sold-out flag reached the edge after {seen:?} (bound: TTL {ttl:?} + one round trip)");
    // The bound is TTL + one round trip; 750 ms leaves room for a loaded machine's round trip
    // and the 20 ms polling, and still fails if the edge waits a second TTL.
    assert!(seen <= ttl + Duration::from_millis(750), "took {seen:?}");

    // From then on claims are answered at the edge; the origin receives none of them.
    let before = o.claim_requests();
    for _ in 0..20 {
        let r = send_claim(
            &o.http,
            &e.url,
            &c,
            &ClaimReq::good(&o, &unique("late"), "k"),
            false,
        )
        .await;
        assert_eq!((r.status, r.by.as_str()), (409, "edge"));
        assert_eq!(r.body, br#"{"result":"sold_out"}"#);
    }
    assert_eq!(o.claim_requests() - before, 0);

    // Units come back (a restock through the admin API): the sold-out state clears at the
    // edge within the bound.
    let (code, body) = o.change(&c, ChangeRequest::restock(2)).await;
    assert_eq!(code, 200, "{body}");
    let back = Instant::now();
    let seen = until_state(&o.http, &e.url, &c, "active", Instant::now()).await;
    println!("restock reached the edge after {seen:?}");
    // The bound is TTL + one round trip; 750 ms leaves room for a loaded machine's round trip
    // and the 20 ms polling, and still fails if the edge waits a second TTL.
    assert!(seen <= ttl + Duration::from_millis(750), "took {seen:?}");
    assert!(back.elapsed() < Duration::from_secs(3));

    // Claims flow again: reach the origin and win.
    let before = o.claim_requests();
    let r = send_claim(
        &o.http,
        &e.url,
        &c,
        &ClaimReq::good(&o, &unique("after-restock"), "k"),
        false,
    )
    .await;
    assert_eq!(
        (r.status, r.by.as_str()),
        (201, "origin"),
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(o.claim_requests() - before, 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn origin_down_gives_503_for_claims_and_stale_status_within_max_stale() {
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", 5).await;
    let e = edge(
        &o.url,
        EdgeSettings {
            ttl_ms: 300,
            max_stale_ms: 3_000,
            timeout_ms: 1_000,
        },
    );
    let fresh = get(&o.http, &status_url(&e.url, &c)).await;
    assert_eq!(fresh.status, 200);
    let token = o.token(&unique("bob"));
    let http = o.http.clone();
    o.stop().await;
    let stopped = Instant::now();
    // The scenario: the edge's copy ages past its TTL (300 ms) while the origin is down.
    tokio::time::sleep(Duration::from_millis(400)).await;

    // Status: the last known one, marked stale, until max-stale.
    let stale = get(&http, &status_url(&e.url, &c)).await;
    assert_eq!((stale.status, stale.by.as_str()), (200, "edge"));
    assert_eq!(stale.header("flashgate-stale"), Some("1"));
    assert_eq!(stale.body, fresh.body);
    let age: u64 = stale
        .header("flashgate-status-age-ms")
        .unwrap()
        .parse()
        .unwrap();
    assert!((300..3_000).contains(&age), "age {age}");

    // Claims: 503 with Retry-After, never a made-up answer.
    let req = ClaimReq {
        token: Some(token),
        key: Some("k".into()),
        content_type: Some("application/json"),
        body: b"{}".to_vec(),
    };
    let r = send_claim(&http, &e.url, &c, &req, false).await;
    assert_eq!((r.status, r.by.as_str()), (503, "edge"));
    assert_eq!(r.json()["result"], "unavailable");
    assert_eq!(r.header("retry-after"), Some("1"));

    // Past max-stale: no status to serve.
    // The scenario: the copy ages past max-stale (3 s), so the wait is on purpose.
    let wait = Duration::from_millis(3_300).saturating_sub(stopped.elapsed());
    tokio::time::sleep(wait).await;
    let gone = get(&http, &status_url(&e.url, &c)).await;
    assert_eq!((gone.status, gone.by.as_str()), (503, "edge"));
    assert_eq!(gone.header("retry-after"), Some("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_claims_are_refused_at_the_edge_with_the_origins_bodies() {
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", 5).await;
    let e = edge(&o.url, EdgeSettings::default());
    let carol = unique("carol");
    let good = ClaimReq::good(&o, &carol, "k-bad");
    let expired = {
        let claims = flashgate_shared::token::CustomerClaims {
            sub: carol.clone(),
            exp: (chrono::Utc::now().timestamp() - 10).into(),
            nbf: None,
        };
        flashgate_shared::token::mint(
            &claims,
            test_config().customer_token_secret.expose().as_bytes(),
        )
    };
    let cases: Vec<(&str, ClaimReq)> = vec![
        (
            "no token",
            ClaimReq {
                token: None,
                ..good.clone()
            },
        ),
        (
            "forged token",
            ClaimReq {
                token: Some(o.token(&carol) + "x"),
                ..good.clone()
            },
        ),
        (
            "expired token",
            ClaimReq {
                token: Some(expired),
                ..good.clone()
            },
        ),
        (
            "missing key",
            ClaimReq {
                key: None,
                ..good.clone()
            },
        ),
        (
            "key too long",
            ClaimReq {
                key: Some("k".repeat(256)),
                ..good.clone()
            },
        ),
        (
            "bad JSON",
            ClaimReq {
                body: b"{".to_vec(),
                ..good.clone()
            },
        ),
        (
            "not an object",
            ClaimReq {
                body: b"[]".to_vec(),
                ..good.clone()
            },
        ),
        (
            "unknown field",
            ClaimReq {
                body: br#"{"quantity":1}"#.to_vec(),
                ..good.clone()
            },
        ),
        (
            "negative number",
            ClaimReq {
                body: br#"{"quantity":-1}"#.to_vec(),
                ..good.clone()
            },
        ),
        (
            "huge number",
            ClaimReq {
                body: br#"{"quantity":1e999999}"#.to_vec(),
                ..good.clone()
            },
        ),
        (
            "huge integer",
            ClaimReq {
                body: b"99999999999999999999999999999".to_vec(),
                ..good.clone()
            },
        ),
        (
            "oversized body",
            ClaimReq {
                body: vec![b' '; 5_000],
                ..good.clone()
            },
        ),
        (
            "wrong content type",
            ClaimReq {
                content_type: Some("text/plain"),
                ..good.clone()
            },
        ),
    ];
    let before = o.claim_requests();
    let mut at_edge = Vec::new();
    for (name, req) in &cases {
        let r = send_claim(&o.http, &e.url, &c, req, false).await;
        assert_eq!(r.by, "edge", "{name}");
        assert!((400..500).contains(&r.status), "{name}: {}", r.status);
        at_edge.push(r);
    }
    assert_eq!(o.claim_requests() - before, 0, "the origin saw a bad claim");
    // The origin gives the same status and the same bytes for each (sent to it signed).
    for ((name, req), edge) in cases.iter().zip(&at_edge) {
        let direct = send_claim(&o.http, &o.url, &c, req, true).await;
        assert_eq!(
            (edge.status, String::from_utf8_lossy(&edge.body)),
            (direct.status, String::from_utf8_lossy(&direct.body)),
            "{name}"
        );
    }
    let by_code: Vec<u16> = at_edge.iter().map(|r| r.status).collect();
    assert_eq!(
        by_code,
        [401, 401, 401, 400, 400, 400, 400, 400, 400, 400, 400, 413, 415]
    );
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retried_key_gets_the_origins_identical_first_reply() {
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("giveaway", 3).await;
    let e = edge(&o.url, EdgeSettings::default());
    let req = ClaimReq::good(&o, &unique("dave"), "retry-1");
    let before = o.claim_requests();
    let first = send_claim(&o.http, &e.url, &c, &req, false).await;
    let again = send_claim(&o.http, &e.url, &c, &req, false).await;
    assert_eq!((first.status, first.by.as_str()), (201, "origin"));
    assert_eq!((again.status, again.by.as_str()), (201, "origin"));
    assert_eq!(first.body, again.body);
    assert_eq!(o.claim_requests() - before, 2, "both reached the origin");
    assert_eq!(o.claim_rows(&c, &[]).await, 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_must_carry_the_edge_signature() {
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", 5).await;
    let req = ClaimReq::good(&o, &unique("eve"), "k-direct");
    // Straight to the origin without a signature: 403.
    let r = send_claim(&o.http, &o.url, &c, &req, false).await;
    assert_eq!((r.status, r.by.as_str()), (403, "origin"));
    assert_eq!(r.json()["result"], "forbidden");
    // With a signature under another secret: 403.
    let path = format!("/api/v1/campaigns/{c}/claims");
    let auth = format!("Bearer {}", req.token.as_deref().unwrap());
    let forged = edge_headers(
        "not-the-secret-0123456789abcdef-x",
        "POST",
        &path,
        b"{}",
        Some(&auth),
        Some("k-direct"),
        None,
    );
    let mut forged_req = o
        .http
        .post(format!("{}{path}", o.url))
        .header("authorization", &auth)
        .header("idempotency-key", "k-direct")
        .header("content-type", "application/json")
        .body("{}");
    for (name, value) in forged {
        forged_req = forged_req.header(name, value);
    }
    let r = reply(forged_req.send().await.unwrap()).await;
    assert_eq!(r.status, 403);
    assert_eq!(o.claim_rows(&c, &[]).await, 0);
    // Through the edge it is signed and wins.
    let e = edge(&o.url, EdgeSettings::default());
    let r = send_claim(&o.http, &e.url, &c, &req, false).await;
    assert_eq!((r.status, r.by.as_str()), (201, "origin"));
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn not_started_is_answered_at_the_edge_only_when_clearly_early() {
    let o = TestOrigin::start_signed().await;
    let now = chrono::Utc::now();
    let fay = unique("fay");
    let early = unique("early");
    o.create_campaign(
        &early,
        "sale",
        5,
        now + chrono::Duration::hours(1),
        now + chrono::Duration::hours(2),
        None,
    )
    .await;
    let e = edge(&o.url, EdgeSettings::default());
    let before = o.claim_requests();
    let r = send_claim(
        &o.http,
        &e.url,
        &early,
        &ClaimReq::good(&o, &fay, "k"),
        false,
    )
    .await;
    assert_eq!((r.status, r.by.as_str()), (409, "edge"));
    assert_eq!(r.json()["result"], "not_started");
    assert_eq!(o.claim_requests() - before, 0);
    // Starting within the skew allowance (1 s < 2 s): the origin's clock decides.
    let soon = unique("soon");
    let start = chrono::Utc::now() + chrono::Duration::milliseconds(1_500);
    o.create_campaign(
        &soon,
        "sale",
        5,
        start,
        start + chrono::Duration::hours(1),
        None,
    )
    .await;
    let r = send_claim(
        &o.http,
        &e.url,
        &soon,
        &ClaimReq::good(&o, &fay, "k2"),
        false,
    )
    .await;
    assert_eq!(r.by, "origin", "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["result"], "not_started");
    // Unknown campaigns: the origin's 404 body, and other API paths pass through.
    let nf = get(&o.http, &status_url(&e.url, "no-such-campaign")).await;
    let direct = get(&o.http, &status_url(&o.url, "no-such-campaign")).await;
    assert_eq!((nf.status, &nf.body), (404, &direct.body));
    let mine = reply(
        o.http
            .get(format!("{}/api/v1/campaigns/{early}/claims/mine", e.url))
            .bearer_auth(o.token(&fay))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((mine.status, mine.by.as_str()), (404, "origin"));
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_origin_that_never_answers_gives_503_after_the_timeout() {
    // An "origin" that accepts connections, counts them and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    let held = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            conns.push(sock);
        }
    });
    let e = edge(
        &format!("http://{addr}"),
        EdgeSettings {
            ttl_ms: 5_000,
            timeout_ms: 500,
            ..Default::default()
        },
    );
    let o_config = test_config();
    let token = flashgate_tests::support::token_for(&o_config, &unique("gil"));
    let http = reqwest::Client::new();
    let req = ClaimReq {
        token: Some(token),
        key: Some("k".into()),
        content_type: Some("application/json"),
        body: b"{}".to_vec(),
    };
    let t0 = Instant::now();
    let r = send_claim(&http, &e.url, "hanging", &req, false).await;
    let took = t0.elapsed();
    assert_eq!((r.status, r.by.as_str()), (503, "edge"));
    assert_eq!(r.json()["result"], "unavailable");
    assert_eq!(r.header("retry-after"), Some("1"));
    // The status refresh and the forward each wait at most the timeout.
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_millis(2_500), "{took:?}");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "one status fetch, one forward"
    );
    // Within one TTL of the failed refresh the edge leaves the origin alone: 20 concurrent
    // status GETs are answered at once, and no new connection reaches the origin.
    let t0 = Instant::now();
    let hanging = status_url(&e.url, "hanging");
    let replies = join_all((0..20).map(|_| get(&http, &hanging))).await;
    for st in &replies {
        assert_eq!((st.status, st.by.as_str()), (503, "edge"));
    }
    assert!(
        t0.elapsed() < Duration::from_millis(450),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    held.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pass_through_body_the_origin_could_never_take_is_413_at_the_edge() {
    let o = TestOrigin::start_signed().await;
    let e = edge(&o.url, EdgeSettings::default());
    for size in [70 * 1024, 2 * 1024 * 1024] {
        let res = o
            .http
            .post(format!("{}/api/v1/codes/SPRING10/check", e.url))
            .bearer_auth(o.token(&unique("ana")))
            .header("content-type", "application/json")
            .body(vec![b' '; size])
            .send()
            .await
            .expect("oversized pass-through");
        let r = reply(res).await;
        assert_eq!((r.status, r.by.as_str()), (413, "edge"), "{size} bytes");
        assert_eq!(r.json()["result"], "payload_too_large");
    }
    // A body within the limit still reaches the origin (its own answer: unknown code).
    let res = o
        .http
        .post(format!("{}/api/v1/codes/NOSUCHCODE/check", e.url))
        .bearer_auth(o.token(&unique("ana")))
        .header("content-type", "application/json")
        .body(r#"{"cart_total": 6000}"#)
        .send()
        .await
        .expect("pass-through");
    let r = reply(res).await;
    assert_eq!((r.status, r.by.as_str()), (404, "origin"), "{:?}", r.json());
    o.stop().await;
}
