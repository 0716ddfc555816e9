//! Requests the edge refuses or passes through, in the real runtime (bad claims, retried keys,
//! the edge signature, not-started, origin timeouts, oversize bodies, undocumented paths and
//! methods, percent-encoded ids and `HEAD`s answered as the plain `GET`): the built worker (edge-worker/build) inside workerd via
//! Miniflare, in front of a real origin over real PostgreSQL and Redis. Requests are truly
//! concurrent where the behaviour is about concurrency. Origin-side effects are read from the
//! origin's own counters (`flashgate_status_requests_total`, `flashgate_claim_requests_total`).
//!
//! The worker is built once per run (`edge_tools_install` + `edge_build` of
//! scripts/lib/edge.sh) unless `FLASHGATE_EDGE_PREBUILT=1` says a caller already built it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use flashgate_tests::support::{
    edge_claim, edge_with as edge, get, reply, sale_behind_edge, send_claim, status_url, ClaimReq,
    EdgeSettings,
};
use flashgate_tests::support::{edge_headers, test_config, unique, TestOrigin};
use futures::future::join_all;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_claims_are_refused_at_the_edge_with_the_origins_bodies() {
    let (o, c, e) = sale_behind_edge(5, EdgeSettings::default()).await;
    let carol = unique("carol");
    let good = ClaimReq::good(&o, &carol, "k-bad");
    let expired = {
        let claims = flashgate_shared::token::CustomerClaims {
            sub: carol.clone(),
            // Past the 30 s clock-skew leeway.
            exp: (chrono::Utc::now().timestamp() - 120).into(),
            nbf: None,
        };
        flashgate_shared::token::mint(
            &claims,
            flashgate_tests::support::customer_secret(&test_config()).as_bytes(),
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
    // Starting within the skew allowance (1 s < 2 s): the origin's clock decides. Created
    // before the edge's first request, so that its campaign index lists it (a campaign
    // created later shows within one TTL plus a round trip: edge_shield).
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
    let before = o.claim_requests();
    let r = edge_claim(&o, &e.url, &early, &fay, "k").await;
    assert_eq!((r.status, r.by.as_str()), (409, "edge"));
    assert_eq!(r.json()["result"], "not_started");
    assert_eq!(o.claim_requests() - before, 0);
    let r = edge_claim(&o, &e.url, &soon, &fay, "k2").await;
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
    // The campaign-index fetch, the status refresh and the forward each wait at most the
    // timeout (without an index the claim goes on, as an unknown id could be a campaign).
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_millis(3_000), "{took:?}");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        3,
        "one index fetch, one status fetch, one forward"
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
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
    // The edge's own /healthz answers without the origin.
    let health = get(&http, &format!("{}/healthz", e.url)).await;
    assert_eq!((health.status, health.by.as_str()), (200, "edge"));
    assert_eq!(health.json(), serde_json::json!({"status": "ok"}));
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_documented_routes_pass_unknown_paths_and_methods_are_answered_at_the_edge() {
    let o = TestOrigin::start_signed().await;
    let e = edge(&o.url, EdgeSettings::default());
    let c = o.campaign("sale", 1).await;
    let statuses = o.origin_count(|m| &m.status_requests);
    let claims = o.origin_count(|m| &m.claim_requests);
    // Unknown paths under /api/v1/: 404 at the edge.
    for path in [
        "/api/v1/nothing-here".to_string(),
        format!("/api/v1/campaigns/{c}/claims/mine/x"),
        "/api/v1/claims/c_1/x".to_string(),
        "/api/v1/coupons/".to_string(),
    ] {
        let r = get(&o.http, &format!("{}{path}", e.url)).await;
        assert_eq!((r.status, r.by.as_str()), (404, "edge"), "{path}");
        assert_eq!(r.json()["result"], "not_found", "{path}");
    }
    // Known paths, other methods: 405 with the path's methods in `Allow`, at the edge.
    for (method, path, allow) in [
        (
            reqwest::Method::PUT,
            format!("/api/v1/campaigns/{c}"),
            "GET, HEAD",
        ),
        (
            reqwest::Method::DELETE,
            format!("/api/v1/campaigns/{c}/claims"),
            "POST",
        ),
        (
            reqwest::Method::PATCH,
            format!("/api/v1/campaigns/{c}/queue"),
            "GET, HEAD, POST",
        ),
        (
            reqwest::Method::GET,
            "/api/v1/codes/SPRING10/use".to_string(),
            "POST",
        ),
    ] {
        let res = o
            .http
            .request(method.clone(), format!("{}{path}", e.url))
            .send()
            .await
            .expect("wrong method");
        let r = reply(res).await;
        let allow_header = r.headers.get("allow").map(|v| v.to_str().unwrap());
        assert_eq!((r.status, r.by.as_str()), (405, "edge"), "{method} {path}");
        assert_eq!(r.json()["result"], "method_not_allowed");
        assert_eq!(allow_header, Some(allow), "{method} {path}");
    }
    // None of them reached the origin; a documented route still does.
    assert_eq!(o.origin_count(|m| &m.status_requests), statuses);
    assert_eq!(o.origin_count(|m| &m.claim_requests), claims);
    let r = get(&o.http, &format!("{}/api/v1/coupons/NOSUCH", e.url)).await;
    assert_eq!(r.by, "origin", "{}", r.status);
    // A claim looked up by id with the service token passes through, as pay and release do.
    let won = edge_claim(&o, &e.url, &c, &unique("ana"), "k").await;
    assert_eq!(won.status, 201, "{:?}", won.json());
    let id = won.json()["claim"]["id"].as_str().unwrap().to_string();
    let service = o.config.service_token.expose().to_string();
    let res = o
        .http
        .get(format!("{}/api/v1/claims/{id}", e.url))
        .bearer_auth(&service)
        .send()
        .await
        .expect("claim lookup");
    let r = reply(res).await;
    assert_eq!((r.status, r.by.as_str()), (200, "origin"), "{:?}", r.json());
    assert_eq!(
        (r.json()["id"].as_str(), r.json()["status"].as_str()),
        (Some(id.as_str()), Some("held"))
    );
    o.stop().await;
}

/// `c` with its first character percent-encoded: the same campaign (RFC 3986 §6.2.2.2).
fn encoded(c: &str) -> String {
    format!("%{:02x}{}", c.as_bytes()[0], &c[1..])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_encoded_id_or_a_head_is_answered_at_the_edge_like_the_plain_get() {
    let stock = 3;
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", stock).await;
    let e = edge(
        &o.url,
        EdgeSettings {
            ttl_ms: 60_000,
            max_stale_ms: 120_000,
            ..Default::default()
        },
    );
    let enc = encoded(&c);
    // The status: one fetch for the plain GET, none for encoded GETs and HEADs after it.
    let plain = get(&o.http, &status_url(&e.url, &c)).await;
    assert_eq!((plain.status, plain.by.as_str()), (200, "edge"));
    let statuses = o.status_requests();
    for _ in 0..20 {
        let r = get(&o.http, &status_url(&e.url, &enc)).await;
        assert_eq!((r.status, r.by.as_str()), (200, "edge"));
        assert_eq!(r.json(), plain.json());
        for id in [&c, &enc] {
            let res = o.http.head(status_url(&e.url, id)).send().await;
            let r = reply(res.expect("HEAD")).await;
            assert_eq!((r.status, r.by.as_str()), (200, "edge"), "HEAD {id}");
            assert_eq!(r.header("content-type"), Some("application/json"));
            assert!(r.body.is_empty());
        }
    }
    assert_eq!(
        o.status_requests() - statuses,
        0,
        "status fetches for encoded/HEAD"
    );
    // An encoded id that is not a slug once decoded is 404 at the edge, like any non-slug.
    let upper = format!("%{:02X}{}", c.as_bytes()[0].to_ascii_uppercase(), &c[1..]);
    let r = get(&o.http, &status_url(&e.url, &upper)).await;
    assert_eq!((r.status, r.by.as_str()), (404, "edge"));
    // The edge's liveness answers HEAD as it answers GET.
    let res = o.http.head(format!("{}/healthz", e.url)).send().await;
    let r = reply(res.expect("HEAD /healthz")).await;
    assert_eq!((r.status, r.by.as_str()), (200, "edge"));

    // Sold out at the origin by known winners; 100 others claim on the encoded id.
    let winners: Vec<String> = (0..stock).map(|i| format!("{c}-won-{i}")).collect();
    for w in &winners {
        let r = send_claim(&o.http, &o.url, &c, &ClaimReq::good(&o, w, "k"), true).await;
        assert_eq!(r.status, 201, "{:?}", r.json());
    }
    let filter = flashgate_shared::winners_filter::WinnersFilter::build(
        winners.iter().map(String::as_str),
        flashgate_shared::winners_filter::MAX_WINNERS,
    );
    // Customers the winners filter cannot mistake for a winner: the edge answers them all.
    let late: Vec<String> = (0..)
        .map(|i| format!("{c}-late-{i}"))
        .filter(|n| !filter.may_contain(n))
        .take(100)
        .collect();
    // The edge learns sold_out on its next status refresh; a new edge has none cached.
    let e = edge(&o.url, EdgeSettings::default());
    let claims = o.claim_requests();
    let tasks = late.iter().map(|who| {
        let (http, url, enc, req) = (
            o.http.clone(),
            e.url.clone(),
            enc.clone(),
            ClaimReq::good(&o, who, "k"),
        );
        tokio::spawn(async move { send_claim(&http, &url, &enc, &req, false).await })
    });
    for r in join_all(tasks).await {
        let r = r.expect("claim task");
        assert_eq!((r.status, r.by.as_str()), (409, "edge"), "{:?}", r.json());
        assert_eq!(r.body, br#"{"result":"sold_out"}"#);
    }
    assert_eq!(o.claim_requests() - claims, 0, "claims on the encoded id");
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_callers_request_id_comes_back_from_the_origin_and_from_the_edge() {
    let (o, c, e) = sale_behind_edge(5, EdgeSettings::default()).await;
    let http = reqwest::Client::new();
    let claim = |rid: &str, token: Option<String>, key: &str| {
        let mut req = http
            .post(format!("{}/api/v1/campaigns/{c}/claims", e.url))
            .header("x-request-id", rid)
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body("{}");
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req
    };
    // A forwarded claim: the origin got the id (it sends back what it kept).
    let ana = unique("ana");
    let r = reply(
        claim("my-claim-rid-1", Some(o.token(&ana)), "k1")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((r.status, r.by.as_str()), (201, "origin"), "{r:?}");
    assert_eq!(r.header("x-request-id"), Some("my-claim-rid-1"));
    // Answers the edge makes itself echo it: a claim without a token, a non-slug id, a
    // cached status.
    let r = reply(claim("my-rid-2", None, "k2").send().await.unwrap()).await;
    assert_eq!((r.status, r.by.as_str()), (401, "edge"), "{r:?}");
    assert_eq!(r.header("x-request-id"), Some("my-rid-2"));
    for url in [
        format!("{}/api/v1/campaigns/NOT_A_SLUG", e.url),
        status_url(&e.url, &c),
    ] {
        let r = reply(
            http.get(&url)
                .header("x-request-id", "my-rid-3")
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(r.header("x-request-id"), Some("my-rid-3"), "{url}: {r:?}");
    }
    // An id the origin would not keep is not echoed by the edge either.
    let r = reply(claim("two words", None, "k3").send().await.unwrap()).await;
    assert_eq!((r.status, r.by.as_str()), (401, "edge"));
    assert_eq!(r.header("x-request-id"), None);
    o.stop().await;
}
