//! The edge in workerd (built worker, Miniflare) in front of a real origin: the client IP the
//! edge receives reaches the origin's per-IP guess limit (signed), and a short secret makes
//! the edge answer a documented 503 instead of running with it; the edge's own per-IP limit
//! keys an IPv6 client by its network prefix and an IPv4-mapped address by its IPv4 address.

use std::time::{Duration, Instant};

use flashgate_tests::support::eventually;
use flashgate_tests::support::signed_test_config;
use flashgate_tests::support::{room, unique, TestEdge, TestOrigin, TEST_EDGE_SECRET};
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

/// The edge's per-IP limit in these tests: joins per second per client IP (bucket key).
const IP_PER_S: u32 = 5;

/// A real origin with a started sale behind a waiting room, and [`ip_limited_edge`] in front
/// of it; returns the origin, the edge and the sale's id.
async fn room_stack() -> (TestOrigin, TestEdge, String) {
    let o = TestOrigin::start_with(signed_test_config()).await;
    let id = room::campaign(&o, 100, chrono::Duration::minutes(-1), None, room::room(10)).await;
    let e = ip_limited_edge(&o, &[]);
    (o, e, id)
}

/// The edge in front of `o` with an IP limit of [`IP_PER_S`], plus the settings in `extra`.
fn ip_limited_edge(o: &TestOrigin, extra: &[(&str, &str)]) -> TestEdge {
    let mut env = vec![
        ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.to_string()),
        ("FLASHGATE_LIMIT_IP_PER_S", IP_PER_S.to_string()),
    ];
    env.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    TestEdge::start(&o.url, &env)
}

/// Joins of the room at once, one from each client address (no customer token, so only the
/// per-IP limit applies at the edge; the origin answers the rest): how many the edge refused
/// with 429 `rate_limited`, and the whole seconds (rounded up) from the first sent to the
/// last answered in ms, in which an emptied bucket regains `IP_PER_S` tokens per second.
async fn joins_from(o: &TestOrigin, edge: &str, id: &str, ips: &[String]) -> (usize, u64) {
    let started = Instant::now();
    let joins = ips.iter().map(|ip| {
        let req = o
            .http
            .post(format!("{edge}/api/v1/campaigns/{id}/queue"))
            .header("cf-connecting-ip", ip);
        async move {
            let r = req.send().await.expect("join through the edge");
            let st = r.status().as_u16();
            let by = r.headers()[flashgate_shared::ANSWERED_BY_HEADER]
                .to_str()
                .unwrap()
                .to_string();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            (st, by, body)
        }
    });
    let replies = join_all(joins).await;
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let limited = replies
        .iter()
        .filter(|(st, by, body)| *st == 429 && by == "edge" && body["result"] == "rate_limited")
        .count();
    assert!(
        replies.iter().all(|(st, by, _)| *st != 429 || by == "edge"),
        "{replies:?}"
    );
    (limited, elapsed_ms)
}

/// Asserts that no more of the joins `from` one bucket got `through` in `ms` than the bucket
/// allows: it full, plus the whole tokens it regained meanwhile.
fn assert_one_bucket(through: usize, ms: u64, from: &str) {
    let allowed = (u64::from(IP_PER_S) * (1000 + ms) / 1000) as usize;
    assert!(
        through <= allowed,
        "{through} joins from {from} got through in {ms} ms; one bucket allows {allowed}"
    );
}

/// One request from an address no test uses, so the isolate is up before a timed burst.
async fn warm(o: &TestOrigin, edge: &str, id: &str) {
    joins_from(o, edge, id, &["192.0.2.250".to_string()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn joins_from_one_ipv6_64_share_one_ip_bucket_at_the_edge() {
    let (o, e, id) = room_stack().await;
    warm(&o, &e.url, &id).await;
    let net = format!(
        "2001:db8:{:x}:{:x}",
        rand::random::<u16>(),
        rand::random::<u16>()
    );
    let ips: Vec<String> = (1..=20).map(|i| format!("{net}::{i:x}")).collect();
    let (limited, ms) = joins_from(&o, &e.url, &id, &ips).await;
    assert_one_bucket(20 - limited, ms, "one /64");
    drop(e);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn joins_from_many_ipv6_64s_of_one_48_share_a_bucket_only_with_prefix_48() {
    let site = format!("2001:db8:{:x}", rand::random::<u16>());
    let ips: Vec<String> = (1..=20).map(|i| format!("{site}:{i:x}::1")).collect();
    // Default /64: each network has its own bucket, so none is refused.
    let (o, e, id) = room_stack().await;
    warm(&o, &e.url, &id).await;
    let (limited, _) = joins_from(&o, &e.url, &id, &ips).await;
    assert_eq!(limited, 0, "joins from 20 different /64s refused");
    drop(e);
    // /48: one bucket for the whole site.
    let e = ip_limited_edge(&o, &[("FLASHGATE_LIMIT_IPV6_PREFIX", "48")]);
    warm(&o, &e.url, &id).await;
    let (limited, ms) = joins_from(&o, &e.url, &id, &ips).await;
    assert_one_bucket(20 - limited, ms, "one /48 with prefix 48");
    drop(e);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ipv4_mapped_address_shares_its_ipv4_address_bucket_at_the_edge() {
    let (o, e, id) = room_stack().await;
    warm(&o, &e.url, &id).await;
    let v4 = format!("198.51.100.{}", 1 + rand::random::<u16>() % 250);
    let started = Instant::now();
    // Drain the IPv4 address's bucket (5 of 10 through), then join from its IPv4-mapped IPv6 form.
    let (drained, _) = joins_from(&o, &e.url, &id, &vec![v4.clone(); 10]).await;
    let mapped = vec![format!("::ffff:{v4}"); 5];
    let (refused, _) = joins_from(&o, &e.url, &id, &mapped).await;
    let ms = started.elapsed().as_millis() as u64;
    let through = (10 - drained) + (5 - refused);
    let from = format!("{v4} and ::ffff:{v4} ({refused} of the 5 mapped refused)");
    assert_one_bucket(through, ms, &from);
    drop(e);
    o.stop().await;
}
