//! The edge in workerd (built worker, Miniflare) in front of a real origin: the client IP the
//! edge receives reaches the origin's per-IP guess limit (signed), and a short secret makes
//! the edge answer a documented 503 instead of running with it.

use std::time::Duration;

use flashgate_tests::support::eventually;
use flashgate_tests::support::signed_test_config;
use flashgate_tests::support::{unique, TestEdge, TestOrigin, TEST_EDGE_SECRET};
use futures::future::join_all;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_ip_guess_limit_applies_through_the_edge() {
    let mut config = signed_test_config();
    config.code_guesses_per_ip = 100;
    let o = TestOrigin::start_with(config).await;
    let ip = "203.0.113.7";
    // A bucket left by an earlier run within the hour would not be full.
    let mut redis = o.origin.state.redis.clone();
    let _: i64 = redis::cmd("DEL")
        .arg(flashgate_origin::promo::guess::ip_bucket_key(ip))
        .query_async(&mut redis)
        .await
        .unwrap();
    let e = TestEdge::start(
        &o.url,
        &[("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.to_string())],
    );
    // 110 customers, one unknown code each, all from one address, at once.
    let tries = (0..110).map(|i| {
        let http = o.http.clone();
        let url = format!(
            "{}/api/v1/codes/NOPE{}/check",
            e.url,
            unique("x").replace('-', "")
        );
        let token = o.token(&unique(&format!("guesser{i}")));
        async move {
            let r = http
                .post(url)
                .bearer_auth(token)
                .header("cf-connecting-ip", ip)
                .header("content-type", "application/json")
                .body(json!({"cart_total": 100}).to_string())
                .send()
                .await
                .expect("check through the edge");
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            (status, body)
        }
    });
    let replies = join_all(tries).await;
    let count = |s: u16| replies.iter().filter(|(st, _)| *st == s).count();
    assert_eq!(
        (count(404), count(429)),
        (100, 10),
        "{:?}",
        replies.iter().find(|(s, _)| !matches!(s, 404 | 429))
    );
    assert!(replies.iter().all(|(s, b)| b["result"]
        == if *s == 404 {
            "invalid_code"
        } else {
            "rate_limited"
        }));
    // The bucket is the client's, not the edge's loopback address.
    let left: Option<String> = redis::cmd("HGET")
        .arg(flashgate_origin::promo::guess::ip_bucket_key(ip))
        .arg("tokens")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(left.is_some(), "a bucket keyed by the client IP exists");
    drop(e);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_edge_with_a_short_secret_answers_503_and_logs_the_variable() {
    let o = TestOrigin::start().await;
    let log = std::env::temp_dir().join(format!("{}.log", unique("edge-short-secret")));
    let e = TestEdge::start_logged(
        &o.url,
        &[("FLASHGATE_CUSTOMER_TOKEN_SECRET", "too-short".to_string())],
        &log,
    );
    let r = o
        .http
        .get(format!("{}/api/v1/campaigns/{}", e.url, unique("any")))
        .send()
        .await
        .expect("status through the edge");
    assert_eq!(r.status().as_u16(), 503);
    assert_eq!(r.headers()[flashgate_shared::ANSWERED_BY_HEADER], "edge");
    let body: Value = r.json().await.expect("a JSON body");
    assert_eq!(body["result"], "unavailable");
    assert_eq!(
        body["message"],
        "the edge is misconfigured; its operator has to fix a setting"
    );
    // The log names the variable (the runtime may write it a moment after answering).
    let wait = Duration::from_secs(10);
    let text = eventually("the edge to log the short secret", wait, || async {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("FLASHGATE_CUSTOMER_TOKEN_SECRET must be at least 32 bytes long") {
            Ok(text)
        } else {
            Err(format!("edge log without the variable: {text}"))
        }
    })
    .await;
    assert!(
        !text.contains("too-short"),
        "the secret leaked into the log"
    );
    drop(e);
    let _ = std::fs::remove_file(&log);
    o.stop().await;
}
