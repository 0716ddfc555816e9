//! The sold-out fast path (`flashgate_origin::http::fast`) against a real origin, PostgreSQL and
//! Redis: once the origin holds a campaign's sold-out flag and winners snapshot, a loser's claim
//! is answered before the router with the full path's very answer; every other claim (a bad
//! token, a bad header or body, a winner's retry) is handed on whole and decided as always.

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use flashgate_origin::http::fast::FastPath;
use flashgate_origin::metrics::AnsweredFrom;
use flashgate_origin::reply::Outcome;
use flashgate_tests::support::{eventually, test_config, unique, TestOrigin};
use serde_json::Value;
use tower::ServiceExt;

const WAIT: Duration = Duration::from_secs(10);

/// An origin whose campaign of stock 1 is sold out to `winner` (her first reply returned), and
/// which answers the campaign's losers from memory: its flag stays fresh for 5 s here (the
/// campaign cache time) instead of 100 ms, so the test does not race it.
/// Customers are `{run}-winner`, `{run}-loser-N` (`run` is returned): an idempotency key stays
/// one request per customer across campaigns, so every run has customers of its own.
async fn sold_out() -> (TestOrigin, String, Value, String) {
    let mut config = test_config();
    config.campaign_cache_ms = 5_000;
    let o = TestOrigin::start_with(config).await;
    let c = o.campaign("sale", 1).await;
    let run = unique("fast");
    let (s, first) = o.claim(&c, &format!("{run}-winner"), "k-win").await;
    assert_eq!(s, 201, "{first}");
    // The first loser is answered by the gate, which starts this origin's winners snapshot.
    let (s, b) = o.claim(&c, &format!("{run}-loser-0"), "k0").await;
    assert_eq!((s, b["result"].as_str()), (409, Some("sold_out")));
    let flags = o.origin.state.flags.clone();
    eventually("the winners snapshot", WAIT, || {
        let ok = flags.answers_locally(&c);
        async move { ok.then_some(()).ok_or("not loaded".to_string()) }
    })
    .await;
    (o, c, first, run)
}

/// A claim request as a client sends it, with `Content-Type: application/json`.
fn claim(c: &str, token: &str, key: &str, body: &'static str) -> axum::http::request::Builder {
    typed(c, token, key, body, "application/json")
}

/// A claim request with `Content-Type: content_type`.
fn typed(
    c: &str,
    token: &str,
    key: &str,
    body: &'static str,
    content_type: &str,
) -> axum::http::request::Builder {
    Request::post(format!("/api/v1/campaigns/{c}/claims"))
        .header("authorization", format!("Bearer {token}"))
        .header("idempotency-key", key)
        .header("content-type", content_type)
        .header("content-length", body.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_losers_answer_is_the_full_paths_byte_for_byte() {
    let (o, c, _, run) = sold_out().await;
    let state = o.origin.state.clone();
    let fast = FastPath::new(state.clone()).expect("no CORS origins: the fast path is on");
    let m = state.metrics.clone();
    let from_memory = m.claims_of(Outcome::SoldOut, AnsweredFrom::Memory);
    let requests = m.claim_requests.get();
    // A caller's id is sent back; none, or one past 128 characters, gets a new UUID v4.
    let too_long = "r".repeat(129);
    for request_id in [Some("req-7"), None, Some(too_long.as_str())] {
        let token = o.token(&format!("{run}-loser-1"));
        let make = || {
            let mut b = claim(&c, &token, "k1", "{}");
            if let Some(id) = request_id {
                b = b.header("x-request-id", id);
            }
            b.body(Body::from("{}")).expect("request")
        };
        let quick = match fast.answer(make()).await {
            Ok(res) => res,
            Err(_) => panic!("the fast path handed a loser's claim on"),
        };
        let full = flashgate_origin::http::router(state.clone())
            .oneshot(make())
            .await
            .expect("router");
        assert_eq!(quick.status(), 409);
        assert_eq!(quick.status(), full.status());
        let names = |r: &axum::response::Response| {
            let mut n: Vec<String> = r.headers().keys().map(|k| k.to_string()).collect();
            n.sort();
            n
        };
        assert_eq!(names(&quick), names(&full));
        for name in ["content-type", "cache-control", "flashgate-answered-by"] {
            assert_eq!(quick.headers()[name], full.headers()[name], "{name}");
        }
        let id = quick.headers()["x-request-id"].to_str().expect("ascii");
        match request_id {
            Some(sent) if sent.len() <= 128 => {
                assert_eq!(id, sent);
                assert_eq!(full.headers()["x-request-id"], sent);
            }
            _ => {
                for made in [id, full.headers()["x-request-id"].to_str().expect("ascii")] {
                    assert_eq!(
                        uuid::Uuid::parse_str(made).expect("uuid").get_version_num(),
                        4
                    );
                }
            }
        }
        let quick = axum::body::to_bytes(quick.into_body(), 1024).await.unwrap();
        let full = axum::body::to_bytes(full.into_body(), 1024).await.unwrap();
        assert_eq!(quick, full);
        assert_eq!(quick, r#"{"result":"sold_out"}"#);
    }
    // Both paths count each answer alike: 3 rounds of one fast and one full answer.
    let memory = m.claims_of(Outcome::SoldOut, AnsweredFrom::Memory);
    assert_eq!(memory, from_memory + 6);
    assert_eq!(m.claim_requests.get(), requests + 6);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_other_claim_is_handed_on_whole_and_decided_as_always() {
    let (o, c, first, run) = sold_out().await;
    let fast = FastPath::new(o.origin.state.clone()).expect("fast path");
    let other_secret = flashgate_shared::token::mint(
        &flashgate_shared::token::CustomerClaims {
            sub: format!("{run}-loser-2"),
            exp: (chrono::Utc::now().timestamp() + 600).into(),
            nbf: None,
        },
        b"another secret, another signature, 32+ bytes",
    );
    let good = o.token(&format!("{run}-loser-2"));
    let winner = o.token(&format!("{run}-winner"));
    // (request, status and result over HTTP)
    let cases: Vec<(Request<Body>, u16, &str)> = vec![
        (
            claim(&c, &other_secret, "k2", "{}")
                .body(Body::from("{}"))
                .unwrap(),
            401,
            "unauthorized",
        ),
        (
            typed(&c, &good, "k2", "{}", "text/plain")
                .body(Body::from("{}"))
                .unwrap(),
            415,
            "unsupported_media_type",
        ),
        (
            claim(&c, &good, "k2", "[]").body(Body::from("[]")).unwrap(),
            400,
            "invalid_json",
        ),
        (
            claim(&c, &good, "", "{}").body(Body::from("{}")).unwrap(),
            400,
            "invalid_idempotency_key",
        ),
        // Her retry gets her first reply; a new key her claim as already_claimed.
        (
            claim(&c, &winner, "k-win", "{}")
                .body(Body::from("{}"))
                .unwrap(),
            201,
            "claimed",
        ),
        (
            claim(&c, &winner, "k-new", "{}")
                .body(Body::from("{}"))
                .unwrap(),
            409,
            "already_claimed",
        ),
    ];
    for (req, status, result) in cases {
        let (parts, body) = match fast.answer(req).await {
            Ok(res) => panic!("the fast path answered {}", res.status()),
            Err(passed) => passed.into_parts(),
        };
        // Handed on with its body as sent, then sent over HTTP as the client would.
        let body = axum::body::to_bytes(body, 1024).await.expect("body");
        let mut send = o.http.post(format!("{}{}", o.url, parts.uri));
        for (name, value) in parts.headers.iter().filter(|(n, _)| *n != "content-length") {
            send = send.header(name.as_str(), value.as_bytes());
        }
        let res = send.body(body.clone()).send().await.expect("request");
        assert_eq!(res.status().as_u16(), status, "{parts:?} {body:?}");
        let reply: Value = res.json().await.expect("json");
        assert_eq!(reply["result"], result, "{reply}");
        if status == 201 {
            assert_eq!(reply, first, "her retry gets her first reply");
        }
    }
    o.stop().await;
}
