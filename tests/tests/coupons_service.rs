//! The promo code service (`/api/v1/codes/…`; `flashgate_origin::promo`) against in-process origins over HTTP with
//! the machine's real PostgreSQL and Redis. "At once" means truly concurrent requests (spawned
//! tasks on a multi-threaded runtime). Two `TestOrigin`s in one test are two origins sharing
//! PostgreSQL and Redis (separate servers, pools and caches; one OS process).

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use flashgate_origin::config::Config;
use flashgate_shared::code::ALPHABET;
use flashgate_shared::CLIENT_IP_HEADER;
use flashgate_tests::support::eventually;
use flashgate_tests::support::fresh_code_name as fresh_code;
use flashgate_tests::support::signed_test_config;
use flashgate_tests::support::{edge_headers, send_raw, unique, TestOrigin, TEST_EDGE_SECRET};
use futures::future::join_all;
use serde_json::{json, Value};

/// The manager token of the test configuration.
const ADMIN: &str = flashgate_origin::config::TEST_MANAGER_TOKEN;

/// The test configuration with the edge secret [`TEST_EDGE_SECRET`]: shoppers' requests carry
/// their client IP signed as the edge forwards it (see [`post_raw`]), so each test's per-IP
/// buckets are its own.
fn config() -> Config {
    signed_test_config()
}

/// A fresh client IP, so per-IP buckets of different tests and runs never meet.
fn fresh_ip() -> String {
    let n: u32 = rand::random();
    format!("10.{}.{}.{}", (n >> 16) & 255, (n >> 8) & 255, n & 255)
}

/// Percent-encodes a path segment (everything but ASCII letters and digits).
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

struct Reply {
    status: u16,
    body: Value,
    retry_after: Option<String>,
}

/// POSTs `body` (raw, as JSON) to `url` with a bearer token and extra headers.
async fn post_raw(
    http: &reqwest::Client,
    url: &str,
    bearer: Option<&str>,
    headers: &[(&str, String)],
    body: &str,
) -> Reply {
    let mut all = vec![("content-type", "application/json".to_string())];
    all.extend(headers.iter().cloned());
    // A request with a client IP is sent as the edge forwards it: signed.
    if let Some((_, ip)) = headers.iter().find(|(k, _)| *k == CLIENT_IP_HEADER) {
        let path = reqwest::Url::parse(url).expect("url").path().to_string();
        let auth = bearer.map(|t| format!("Bearer {t}"));
        let key = headers
            .iter()
            .find(|(k, _)| *k == "idempotency-key")
            .map(|(_, v)| v.as_str());
        for (name, value) in edge_headers(
            TEST_EDGE_SECRET,
            "POST",
            &path,
            body.as_bytes(),
            auth.as_deref(),
            key,
            Some(ip),
        ) {
            if name != CLIENT_IP_HEADER {
                all.push((name, value));
            }
        }
    }
    let r = send_raw(
        http,
        reqwest::Method::POST,
        url,
        bearer,
        &all,
        body.to_string(),
    )
    .await;
    Reply {
        status: r.status,
        retry_after: r.header("retry-after").map(str::to_string),
        body: r.body,
    }
}

/// A customer of one test: her token and client IP.
#[derive(Clone)]
struct Shopper {
    token: String,
    ip: String,
    id: String,
}

fn shopper(o: &TestOrigin) -> Shopper {
    let id = unique("shopper");
    Shopper {
        token: o.token(&id),
        ip: fresh_ip(),
        id,
    }
}

async fn check(o: &TestOrigin, s: &Shopper, code: &str, cart_total: i64) -> Reply {
    check_at(&o.http, &o.url, s, code, cart_total).await
}

async fn check_at(
    http: &reqwest::Client,
    base: &str,
    s: &Shopper,
    code: &str,
    cart_total: i64,
) -> Reply {
    post_raw(
        http,
        &format!("{base}/api/v1/codes/{}/check", enc(code)),
        Some(&s.token),
        &[(CLIENT_IP_HEADER, s.ip.clone())],
        &json!({ "cart_total": cart_total }).to_string(),
    )
    .await
}

async fn use_code(o: &TestOrigin, s: &Shopper, code: &str, cart_total: i64, key: &str) -> Reply {
    use_at(&o.http, &o.url, s, code, cart_total, key).await
}

async fn use_at(
    http: &reqwest::Client,
    base: &str,
    s: &Shopper,
    code: &str,
    cart_total: i64,
    key: &str,
) -> Reply {
    post_raw(
        http,
        &format!("{base}/api/v1/codes/{}/use", enc(code)),
        Some(&s.token),
        &[
            (CLIENT_IP_HEADER, s.ip.clone()),
            ("idempotency-key", key.to_string()),
        ],
        // One order per shopper and key: one use per (code, order) is a rule of its own.
        &json!({ "order": format!("o-{}-{key}", s.id), "cart_total": cart_total }).to_string(),
    )
    .await
}

async fn use_call(o: &TestOrigin, id: &str, what: &str) -> Reply {
    post_raw(
        &o.http,
        &format!("{}/api/v1/uses/{id}/{what}", o.url),
        Some(o.config.service_token.expose()),
        &[],
        "",
    )
    .await
}

async fn create_code(o: &TestOrigin, body: Value) -> Reply {
    post_raw(
        &o.http,
        &format!("{}/admin/v1/codes", o.url),
        Some(ADMIN),
        &[],
        &body.to_string(),
    )
    .await
}

/// Creates a shared code (10 % off unless `extra` says otherwise), active for an hour.
async fn shared_code(o: &TestOrigin, limit: i64, extra: Value) -> String {
    let code = fresh_code("T");
    let mut body = json!({
        "code": code, "percent_off": 1000, "currency": "USD", "limit": limit,
        "ends_at": Utc::now() + chrono::Duration::hours(1),
    });
    if let Value::Object(m) = extra {
        for (k, v) in m {
            if v.is_null() {
                body.as_object_mut().unwrap().remove(&k);
            } else {
                body[k] = v;
            }
        }
    }
    let r = create_code(o, body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    code
}

async fn admin_get(o: &TestOrigin, code: &str) -> (u16, Value) {
    let res = o
        .http
        .get(format!("{}/admin/v1/codes/{}", o.url, enc(code)))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

async fn uses_left(o: &TestOrigin, code: &str) -> i64 {
    sqlx::query_scalar("SELECT uses_left FROM coupon_codes WHERE code = $1")
        .bind(code)
        .fetch_one(&o.db)
        .await
        .unwrap()
}

async fn use_rows(o: &TestOrigin, code: &str, status: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM coupon_uses WHERE code = $1 AND status = $2")
        .bind(code)
        .bind(status)
        .fetch_one(&o.db)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimum_order_and_discount_arithmetic() {
    let o = TestOrigin::start_with(config()).await;
    let s = shopper(&o);
    let code = shared_code(&o, 1000, json!({ "min_order": 5000 })).await;
    let r = check(&o, &s, &code, 5000).await;
    assert_eq!(
        (r.status, r.body.clone()),
        (200, json!({"discount": 500, "total": 4500}))
    );
    let r = check(&o, &s, &code, 4999).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.body,
        json!({"result": "not_applicable", "reason": "below_minimum"})
    );
    let r = check(&o, &s, &code, 5556).await;
    assert_eq!(
        (r.status, r.body),
        (200, json!({"discount": 556, "total": 5000}))
    );
    let r = check(&o, &s, &code, 6000).await;
    assert_eq!(r.body, json!({"discount": 600, "total": 5400}));

    // The issue's other examples, through the API.
    let c15 = shared_code(&o, 10, json!({ "percent_off": 1500 })).await;
    let r = check(&o, &s, &c15, 3490).await;
    assert_eq!(r.body, json!({"discount": 524, "total": 2966}));
    let c75 = shared_code(&o, 10, json!({ "percent_off": 750 })).await;
    assert_eq!(check(&o, &s, &c75, 999_999).await.body["discount"], 75_000);
    assert_eq!(
        check(&o, &s, &code, 1).await.body["reason"],
        "below_minimum"
    );
    let c10 = shared_code(&o, 10, json!({})).await;
    assert_eq!(
        check(&o, &s, &c10, 1).await.body,
        json!({"discount": 0, "total": 1})
    );
    let amount = shared_code(&o, 10, json!({ "percent_off": null, "amount_off": 2000 })).await;
    assert_eq!(
        check(&o, &s, &amount, 1500).await.body,
        json!({"discount": 1500, "total": 0})
    );

    // Check changes nothing.
    assert_eq!(uses_left(&o, &code).await, 1000);
    assert_eq!(use_rows(&o, &code, "held").await, 0);
    let (st, shown) = admin_get(&o, &code).await;
    assert_eq!(st, 200);
    assert_eq!(shown["uses_left"], 1000);
    assert_eq!(shown["min_order"], 5000);
    assert_eq!(shown["percent_off"], 1000);
    assert_eq!(shown["once_per_customer"], true);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_forms_find_spring10_and_a_cyrillic_look_alike_does_not() {
    let o = TestOrigin::start_with(config()).await;
    // SPRING10 itself; it may exist from an earlier run (409), with the same far end.
    let r = create_code(
        &o,
        json!({"code": "SPRING10", "percent_off": 1000, "currency": "USD", "min_order": 5000,
               "limit": 1000, "ends_at": "2099-01-04T23:59 Europe/Paris"}),
    )
    .await;
    assert!(r.status == 201 || r.status == 409, "{}", r.body);
    let s = shopper(&o);
    for typed in [
        " spring10 ",
        "Spring10",
        "\u{FF33}\u{FF30}\u{FF32}\u{FF29}\u{FF2E}\u{FF27}\u{FF11}\u{FF10}",
    ] {
        let r = check(&o, &s, typed, 6000).await;
        assert_eq!(r.status, 200, "{typed:?}: {}", r.body);
        assert_eq!(r.body, json!({"discount": 600, "total": 5400}));
    }
    assert_eq!(admin_get(&o, " spring10 ").await.1["code"], "SPRING10");
    // Cyrillic С (U+0421) and Р (U+0420) in place of Latin S and P.
    let r = check(&o, &s, "\u{0421}\u{0420}RING10", 6000).await;
    assert_eq!((r.status, r.body), (404, json!({"result": "invalid_code"})));
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ends_at_as_local_time_in_a_daylight_saving_zone() {
    use flashgate_origin::promo::rules::parse_instant;
    let o = TestOrigin::start_with(config()).await;
    // The instant: three whole seconds from now, given as Paris wall-clock time (UTC+1 in
    // winter, UTC+2 in summer: the offset that maps back to the instant).
    let end: DateTime<Utc> = DateTime::from_timestamp(Utc::now().timestamp() + 3, 0).unwrap();
    let paris = |t: DateTime<Utc>| {
        [1, 2]
            .into_iter()
            .map(|h| (t + chrono::Duration::hours(h)).naive_utc())
            .find(|n| {
                parse_instant(
                    &format!("{} Europe/Paris", n.format("%Y-%m-%dT%H:%M:%S")),
                    t,
                ) == Ok(t)
            })
            .expect("Paris is UTC+1 or UTC+2")
    };
    let local = paris(end).format("%Y-%m-%dT%H:%M:%S").to_string();
    let code = fresh_code("DST");
    let r = create_code(
        &o,
        json!({"code": code, "percent_off": 1000, "currency": "EUR", "limit": 10,
               "ends_at": format!("{local} Europe/Paris")}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["ends_at"], json!(end));
    let s = shopper(&o);
    // The scenario: the clock passes the code's end, so these waits are on purpose.
    let wait_until = |t: DateTime<Utc>| async move {
        let d = (t - Utc::now()).to_std().unwrap_or_default();
        tokio::time::sleep(d).await;
    };
    wait_until(end - chrono::Duration::seconds(1)).await;
    let r = check(&o, &s, &code, 6000).await;
    assert_eq!(r.status, 200, "one second before: {}", r.body);
    wait_until(end + chrono::Duration::seconds(1)).await;
    let r = check(&o, &s, &code, 6000).await;
    assert_eq!(r.status, 422, "one second after: {}", r.body);
    assert_eq!(r.body["reason"], "expired");

    // The admin API's weekday form, and the instants across Paris's spring switch (UTC+1 to
    // UTC+2 on 2026-03-29 at 02:00 local).
    let code = fresh_code("SUN");
    let r = create_code(
        &o,
        json!({"code": code, "percent_off": 1000, "currency": "EUR", "limit": 10,
               "ends_at": "Sunday 23:59 Europe/Paris"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let ends: DateTime<Utc> = serde_json::from_value(r.body["ends_at"].clone()).unwrap();
    assert_eq!(paris(ends).format("%A %H:%M").to_string(), "Sunday 23:59");
    assert!(ends > Utc::now() && ends - Utc::now() <= chrono::Duration::days(7));
    let wed = "2026-03-25T10:00:00Z".parse::<DateTime<Utc>>().unwrap();
    let sun = parse_instant("Sunday 23:59 Europe/Paris", wed).unwrap();
    assert_eq!(
        sun,
        "2026-03-29T21:59:00Z".parse::<DateTime<Utc>>().unwrap()
    );
    let sat = parse_instant("2026-03-28T23:59 Europe/Paris", wed).unwrap();
    assert_eq!(
        sat,
        "2026-03-28T22:59:00Z".parse::<DateTime<Utc>>().unwrap()
    );
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn limit_3_with_20_customers_at_once_and_one_customer_twice() {
    let o = TestOrigin::start_with(config()).await;
    for round in 0..3 {
        let code = shared_code(&o, 3, json!({})).await;
        let twice = shopper(&o);
        let mut tries: Vec<(Shopper, String)> = (0..20)
            .map(|i| (shopper(&o), format!("k{round}-{i}")))
            .collect();
        tries.push((twice.clone(), format!("k{round}-a")));
        tries.push((twice.clone(), format!("k{round}-b")));
        let replies = join_all(tries.into_iter().map(|(s, key)| {
            let (http, url, code) = (o.http.clone(), o.url.clone(), code.clone());
            tokio::spawn(async move {
                let r = use_at(&http, &url, &s, &code, 6000, &key).await;
                (s.id, r.status, r.body)
            })
        }))
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect::<Vec<_>>();
        let won: Vec<_> = replies.iter().filter(|(_, st, _)| *st == 201).collect();
        assert_eq!(won.len(), 3, "{replies:?}");
        assert!(won.iter().filter(|(c, _, _)| *c == twice.id).count() <= 1);
        for (_, st, body) in &replies {
            match st {
                201 => {
                    assert_eq!(body["discount"], 600);
                    assert!(body["use"].as_str().unwrap().starts_with("u_"));
                    assert!(body["held_until"].is_string());
                }
                409 => assert!(
                    body["result"] == "used_up" || body["result"] == "already_used",
                    "{body}"
                ),
                _ => panic!("unexpected {st} {body}"),
            }
        }
        assert_eq!(uses_left(&o, &code).await, 0);
        assert_eq!(use_rows(&o, &code, "held").await, 3);
        let hers: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM coupon_uses WHERE code = $1 AND customer_id = $2",
        )
        .bind(&code)
        .bind(&twice.id)
        .fetch_one(&o.db)
        .await
        .unwrap();
        assert!(hers <= 1);
        // Used up: the flag answers check and use.
        let late = shopper(&o);
        let r = check(&o, &late, &code, 6000).await;
        assert_eq!(
            r.body,
            json!({"result": "not_applicable", "reason": "used_up"})
        );
        let r = use_code(&o, &late, &code, 6000, "late").await;
        assert_eq!((r.status, r.body), (409, json!({"result": "used_up"})));
        let flag: Option<String> = redis_hget(&format!("fg:code:{{{code}}}"), "out").await;
        assert_eq!(flag.as_deref(), Some("1"));
    }
    o.stop().await;
}

async fn redis_hget(key: &str, field: &str) -> Option<String> {
    let mut c = flashgate_tests::support::redis_conn().await;
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query_async(&mut c)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_puts_the_use_back_and_she_can_use_it_again() {
    let o = TestOrigin::start_with(config()).await;
    let code = shared_code(&o, 1, json!({})).await;
    let (ana, bob) = (shopper(&o), shopper(&o));
    let first = use_code(&o, &ana, &code, 6000, "a1").await;
    assert_eq!(first.status, 201, "{}", first.body);
    // A retry with the same key gets the same reply; another key is already_used.
    let again = use_code(&o, &ana, &code, 6000, "a1").await;
    assert_eq!((again.status, &again.body), (201, &first.body));
    let r = use_code(&o, &ana, &code, 6000, "a2").await;
    assert_eq!(
        (r.status, r.body),
        (
            409,
            json!({"result": "already_used", "use": first.body["use"]})
        )
    );
    let r = check(&o, &ana, &code, 6000).await;
    assert_eq!(r.body["reason"], "already_used");
    let r = use_code(&o, &bob, &code, 6000, "b1").await;
    assert_eq!((r.status, r.body), (409, json!({"result": "used_up"})));

    let id = first.body["use"].as_str().unwrap();
    let r = use_call(&o, id, "release").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "released");
    let r = use_call(&o, id, "release").await;
    assert_eq!((r.status, &r.body["status"]), (200, &json!("released")));
    assert_eq!(uses_left(&o, &code).await, 1);
    let r = use_call(&o, id, "confirm").await;
    assert_eq!((r.status, r.body), (409, json!({"result": "use_released"})));

    // She can try again: a check applies and a new use is taken.
    assert_eq!(check(&o, &ana, &code, 6000).await.status, 200);
    let second = use_code(&o, &ana, &code, 6000, "a3").await;
    assert_eq!(second.status, 201, "{}", second.body);
    let id2 = second.body["use"].as_str().unwrap();
    let r = use_call(&o, id2, "confirm").await;
    assert_eq!((r.status, &r.body["status"]), (200, &json!("used")));
    let r = use_call(&o, id2, "confirm").await;
    assert_eq!(r.status, 200);
    let r = use_call(&o, id2, "release").await;
    assert_eq!(
        (r.status, r.body),
        (409, json!({"result": "use_confirmed"}))
    );
    assert_eq!(uses_left(&o, &code).await, 0);
    assert_eq!(use_rows(&o, &code, "used").await, 1);
    assert_eq!(use_rows(&o, &code, "released").await, 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_key_at_once_gets_the_first_reply_or_in_progress_with_retry_after() {
    use flashgate_origin::idempotency::{self, Begin};

    let o = TestOrigin::start_with(config()).await;
    let code = shared_code(&o, 5, json!({})).await;
    let ana = shopper(&o);
    // One customer sends the same use with the same key 12 times at once: every answer is
    // the first reply (201, identical) or 409 `in_progress` + `Retry-After: 1` (as a claim).
    let replies = join_all((0..12).map(|_| {
        let (http, url, code, s) = (o.http.clone(), o.url.clone(), code.clone(), ana.clone());
        tokio::spawn(async move { use_at(&http, &url, &s, &code, 6000, "same").await })
    }))
    .await
    .into_iter()
    .map(|r| r.unwrap())
    .collect::<Vec<_>>();
    let winners: Vec<&Value> = replies
        .iter()
        .filter(|r| r.status == 201)
        .map(|r| &r.body)
        .collect();
    assert!(!winners.is_empty(), "no 201 among the replies");
    assert!(winners.iter().all(|w| *w == winners[0]), "identical 201s");
    assert_eq!(winners[0]["discount"], 600);
    for r in &replies {
        match r.status {
            201 => assert_eq!(r.retry_after, None),
            409 => assert_eq!(
                (&r.body, r.retry_after.as_deref()),
                (&json!({"result": "in_progress"}), Some("1"))
            ),
            st => panic!("unexpected {st} {}", r.body),
        }
    }
    assert_eq!(use_rows(&o, &code, "held").await, 1);
    assert_eq!(uses_left(&o, &code).await, 4);
    // Once done, the key replays the first reply.
    let again = use_code(&o, &ana, &code, 6000, "same").await;
    assert_eq!((again.status, &again.body), (201, winners[0]));

    // Deterministically: while a first request with the key is running (its pending record
    // held here), a retry gets `in_progress` + `Retry-After: 1` and changes nothing.
    let bob = shopper(&o);
    let body = json!({ "order": format!("o-{}-held", bob.id), "cart_total": 6000 }).to_string();
    let fp = idempotency::fingerprint(&format!("code-use:{code}"), body.as_bytes());
    let mut redis = flashgate_tests::support::redis_conn().await;
    assert_eq!(
        idempotency::begin(&mut redis, &bob.id, "held", &fp)
            .await
            .unwrap(),
        Begin::New
    );
    let r = use_code(&o, &bob, &code, 6000, "held").await;
    assert_eq!(
        (r.status, &r.body, r.retry_after.as_deref()),
        (409, &json!({"result": "in_progress"}), Some("1"))
    );
    assert_eq!(uses_left(&o, &code).await, 4);
    // The first request gives up (its record goes): the retry is decided.
    idempotency::abandon(&mut redis, &bob.id, "held")
        .await
        .unwrap();
    let r = use_code(&o, &bob, &code, 6000, "held").await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(uses_left(&o, &code).await, 3);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sweeper_releases_unconfirmed_uses_exactly_once_even_racing_release() {
    let mut config = config();
    config.code_use_hold_seconds = 1;
    config.sweep_interval_ms = 100;
    let o = TestOrigin::start_with(config).await;
    let code = shared_code(&o, 10, json!({})).await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let r = use_code(&o, &shopper(&o), &code, 6000, &format!("k{i}")).await;
        assert_eq!(r.status, 201, "{}", r.body);
        ids.push(r.body["use"].as_str().unwrap().to_string());
    }
    assert_eq!(uses_left(&o, &code).await, 4);
    // The first three are only swept; the other three also get release calls, fired
    // repeatedly around the moment their hold ends, racing the sweeper.
    let racing = ids[3..].to_vec();
    let end = std::time::Instant::now() + Duration::from_millis(2_500);
    let mut calls = Vec::new();
    while std::time::Instant::now() < end {
        for id in &racing {
            let (http, url, token, id) = (
                o.http.clone(),
                o.url.clone(),
                o.config.service_token.expose().to_string(),
                id.clone(),
            );
            calls.push(tokio::spawn(async move {
                post_raw(
                    &http,
                    &format!("{url}/api/v1/uses/{id}/release"),
                    Some(&token),
                    &[],
                    "",
                )
                .await
                .status
            }));
        }
        // The scenario: a wave of releases every 40 ms, not a wait for a condition.
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    for c in calls {
        assert_eq!(c.await.unwrap(), 200);
    }
    // The sweeper releases the three without release calls.
    let (o_ref, code_ref) = (&o, &code);
    eventually("six released uses", Duration::from_secs(5), || async move {
        match use_rows(o_ref, code_ref, "released").await {
            6 => Ok(()),
            n => Err(format!("{n} released")),
        }
    })
    .await;
    assert_eq!(
        uses_left(&o, &code).await,
        10,
        "every use came back exactly once"
    );
    let swept: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM coupon_uses WHERE code = $1 AND released_by = 'sweeper'",
    )
    .bind(&code)
    .fetch_one(&o.db)
    .await
    .unwrap();
    assert!(
        swept >= 3,
        "the three without release calls were swept ({swept})"
    );
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn guess_limiting_holds_across_two_origins() {
    let a = TestOrigin::start_with(config()).await;
    let b = TestOrigin::start_with(config()).await;
    let code = shared_code(&a, 1000, json!({})).await;
    let eve = shopper(&a);
    // Five failures, alternating origins, then the sixth is refused.
    for i in 0..5 {
        let o = if i % 2 == 0 { &a } else { &b };
        let r = check(o, &eve, &format!("NOPE{i}"), 6000).await;
        assert_eq!(
            (r.status, r.body),
            (404, json!({"result": "invalid_code"})),
            "try {i}"
        );
    }
    let r = check(&b, &eve, "NOPE5", 6000).await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.body["result"], "rate_limited");
    let after: u64 = r.retry_after.expect("Retry-After").parse().unwrap();
    assert!((1..=720).contains(&after), "{after}");
    let r = use_code(&a, &eve, "NOPE6", 6000, "e1").await;
    assert_eq!(r.status, 429);
    // A spent customer is refused even for a valid code, so a limited script learns nothing.
    assert_eq!(check(&a, &eve, &code, 6000).await.status, 429);

    // Successes are never limited and spend nothing: 30 valid checks and a use, then still
    // five failures before the limit.
    let ann = shopper(&a);
    for i in 0..30 {
        let o = if i % 2 == 0 { &a } else { &b };
        assert_eq!(check(o, &ann, &code, 6000).await.status, 200);
    }
    assert_eq!(use_code(&b, &ann, &code, 6000, "ann").await.status, 201);
    for i in 0..5 {
        assert_eq!(check(&a, &ann, &format!("TYPO{i}"), 6000).await.status, 404);
    }
    assert_eq!(check(&b, &ann, "TYPO5", 6000).await.status, 429);

    // Per IP: many accounts behind one address share its bucket.
    let mut cfg = config();
    cfg.code_guesses_per_ip = 3;
    let c = TestOrigin::start_with(cfg).await;
    let ip = fresh_ip();
    for i in 0..3 {
        let mut s = shopper(&c);
        s.ip = ip.clone();
        assert_eq!(check(&c, &s, &format!("BAD{i}"), 1).await.status, 404);
    }
    let mut s = shopper(&c);
    s.ip = ip.clone();
    assert_eq!(check(&c, &s, "BAD3", 1).await.status, 429);
    s.ip = fresh_ip();
    assert_eq!(check(&c, &s, "BAD4", 1).await.status, 404);
    a.stop().await;
    b.stop().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_time_batch_of_10000_unique_well_formed_and_each_usable_once() {
    let o = TestOrigin::start_with(config()).await;
    let r = post_raw(
        &o.http,
        &format!("{}/admin/v1/codes/batches", o.url),
        Some(ADMIN),
        &[],
        &json!({"count": 10_000, "amount_off": 2000, "currency": "USD",
                "ends_at": Utc::now() + chrono::Duration::days(30)})
        .to_string(),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["count"], 10_000);
    let csv = o
        .http
        .get(format!("{}{}", o.url, r.body["csv"].as_str().unwrap()))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(csv.status(), 200);
    assert!(csv.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    let text = csv.text().await.unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("code"));
    let codes: Vec<&str> = lines.collect();
    assert_eq!(codes.len(), 10_000);
    let unique: HashSet<&&str> = codes.iter().collect();
    assert_eq!(unique.len(), 10_000);
    for c in &codes {
        assert_eq!(c.len(), 12, "{c}");
        assert!(c.bytes().all(|b| ALPHABET.contains(&b)), "{c}");
    }
    let (st, shown) = admin_get(&o, codes[0]).await;
    assert_eq!(st, 200);
    assert_eq!(shown["kind"], "one_time");
    assert_eq!(shown["limit"], 1);
    assert_eq!(shown["batch"], r.body["id"]);

    // Each code is usable once: 150 codes, each tried by two customers at once.
    let sample: Vec<String> = codes.iter().take(150).map(|c| c.to_string()).collect();
    let tries = sample.iter().flat_map(|c| {
        let (s1, s2) = (shopper(&o), shopper(&o));
        [(c.clone(), s1), (c.clone(), s2)]
    });
    let replies = join_all(tries.map(|(code, s)| {
        let (http, url) = (o.http.clone(), o.url.clone());
        tokio::spawn(async move {
            let r = use_at(&http, &url, &s, &code, 3000, "k").await;
            (code, r.status, r.body)
        })
    }))
    .await
    .into_iter()
    .map(|r| r.unwrap())
    .collect::<Vec<_>>();
    for code in &sample {
        let won: Vec<_> = replies
            .iter()
            .filter(|(c, st, _)| c == code && *st == 201)
            .collect();
        assert_eq!(won.len(), 1, "{code}: {replies:?}");
        assert_eq!(won[0].2["discount"], 2000);
        assert_eq!(won[0].2["total"], 1000);
    }
    let left: i64 = sqlx::query_scalar(
        "SELECT sum(uses_left)::bigint FROM coupon_codes c JOIN coupon_batches b ON b.rules_id = c.rules_id
          WHERE b.id = $1",
    )
    .bind(r.body["id"].as_str().unwrap())
    .fetch_one(&o.db)
    .await
    .unwrap();
    assert_eq!(left, 10_000 - 150);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_code_is_redrawn() {
    use flashgate_origin::promo::batch;
    use flashgate_origin::promo::rules::NewRules;
    use flashgate_shared::api::coupons::CodeKind;
    let o = TestOrigin::start_with(config()).await;
    let rules = NewRules {
        kind: CodeKind::OneTime,
        percent_off_bp: None,
        amount_off: Some(2000),
        currency: "USD".into(),
        min_order: 0,
        starts_at: Utc::now(),
        ends_at: Utc::now() + chrono::Duration::days(1),
        use_limit: 1,
        once_per_customer: true,
    };
    let first = batch::generate(&o.db, &rules, 3).await.unwrap();
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT code FROM coupon_codes WHERE rules_id = $1")
            .bind(first.rules_id)
            .fetch_all(&o.db)
            .await
            .unwrap();
    // The source repeats a stored code, then repeats its own first draw.
    let mut script = vec![stored[0].clone()];
    let mine = flashgate_origin::giveaway::draw::draw_code();
    script.push(mine.clone());
    script.push(mine.clone());
    script.reverse();
    let mut draw = move || {
        script
            .pop()
            .unwrap_or_else(flashgate_origin::giveaway::draw::draw_code)
    };
    let second = batch::generate_with(&o.db, &rules, 5, &mut draw)
        .await
        .unwrap();
    assert!(second.redrawn >= 2, "{second:?}");
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM coupon_codes WHERE rules_id = $1")
        .bind(second.rules_id)
        .fetch_one(&o.db)
        .await
        .unwrap();
    assert_eq!(n, 5);
    let owner: i64 = sqlx::query_scalar("SELECT rules_id FROM coupon_codes WHERE code = $1")
        .bind(&stored[0])
        .fetch_one(&o.db)
        .await
        .unwrap();
    assert_eq!(owner, first.rules_id, "the stored code keeps its batch");
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_documented_4xx_and_changes_nothing() {
    let o = TestOrigin::start_with(config()).await;
    let code = shared_code(&o, 5, json!({})).await;
    let s = shopper(&o);
    let url = |p: &str| format!("{}{p}", o.url);
    let check_url = url(&format!("/api/v1/codes/{code}/check"));
    let use_url = url(&format!("/api/v1/codes/{code}/use"));
    let ip = [(CLIENT_IP_HEADER, s.ip.clone())];
    let key = [
        (CLIENT_IP_HEADER, s.ip.clone()),
        ("idempotency-key", "k".to_string()),
    ];
    let cases: Vec<(Reply, u16, &str)> = vec![
        (post_raw(&o.http, &check_url, None, &ip, r#"{"cart_total":1}"#).await, 401, "unauthorized"),
        (post_raw(&o.http, &check_url, Some("nope"), &ip, r#"{"cart_total":1}"#).await, 401, "unauthorized"),
        (post_raw(&o.http, &check_url, Some(&s.token), &ip, "{").await, 400, "invalid_json"),
        (post_raw(&o.http, &check_url, Some(&s.token), &ip, r#"{"cart_total":-1}"#).await, 422, "validation_failed"),
        (post_raw(&o.http, &check_url, Some(&s.token), &ip, r#"{"cart_total":"60"}"#).await, 422, "validation_failed"),
        (post_raw(&o.http, &check_url, Some(&s.token), &ip, r#"{"cart_total":1,"x":1}"#).await, 422, "validation_failed"),
        (post_raw(&o.http, &check_url, Some(&s.token), &ip, r#"{"cart_total":1e99}"#).await, 422, "validation_failed"),
        (post_raw(&o.http, &check_url, Some(&s.token), &ip, r#"{"cart_total":1,"currency":"usd"}"#).await, 422, "validation_failed"),
        (post_raw(&o.http, &use_url, Some(&s.token), &ip, r#"{"order":"o1","cart_total":1}"#).await, 400, "invalid_idempotency_key"),
        (post_raw(&o.http, &use_url, Some(&s.token), &key, r#"{"order":"","cart_total":1}"#).await, 422, "validation_failed"),
        (post_raw(&o.http, &use_url, Some(&s.token), &key, r#"{"cart_total":1}"#).await, 422, "validation_failed"),
        (post_raw(&o.http, &use_url, Some(&s.token), &key, &"x".repeat(5000)).await, 413, "payload_too_large"),
        (post_raw(&o.http, &url("/api/v1/uses/u_00000000000000000000000000000000/confirm"), Some(&s.token), &[], "").await, 403, "forbidden"),
        (post_raw(&o.http, &url("/api/v1/uses/u_00000000000000000000000000000000/release"), Some(o.config.service_token.expose()), &[], "").await, 404, "not_found"),
        (post_raw(&o.http, &url("/api/v1/uses/%FF%FE/release"), Some(o.config.service_token.expose()), &[], "").await, 404, "not_found"),
        (post_raw(&o.http, &url("/admin/v1/codes"), Some(ADMIN), &[], &json!({"code": fresh_code("B"), "percent_off": 1000, "amount_off": 5, "currency": "USD", "limit": 1, "ends_at": "2099-01-01T00:00:00Z"}).to_string()).await, 422, "validation_failed"),
        (post_raw(&o.http, &url("/admin/v1/codes"), Some(ADMIN), &[], &json!({"code": fresh_code("B"), "percent_off": 0, "currency": "USD", "limit": 1, "ends_at": "2099-01-01T00:00:00Z"}).to_string()).await, 422, "validation_failed"),
        (post_raw(&o.http, &url("/admin/v1/codes"), Some(ADMIN), &[], &json!({"code": fresh_code("B"), "percent_off": 10, "currency": "USD", "limit": 1, "ends_at": "Sunday 23:59 Mars/Olympus"}).to_string()).await, 422, "validation_failed"),
        (post_raw(&o.http, &url("/admin/v1/codes"), Some(ADMIN), &[], &json!({"code": fresh_code("B"), "percent_off": 10, "currency": "USD", "limit": 1, "ends_at": "2026-03-29T02:30 Europe/Paris"}).to_string()).await, 422, "validation_failed"),
        (post_raw(&o.http, &url("/admin/v1/codes"), Some(ADMIN), &[], &json!({"code": fresh_code("B"), "percent_off": 10, "currency": "USD", "limit": 1, "starts_at": "2099-01-02T00:00:00Z", "ends_at": "2099-01-01T00:00:00Z"}).to_string()).await, 422, "validation_failed"),
        (post_raw(&o.http, &url("/admin/v1/codes"), Some(ADMIN), &[], &json!({"code": "ÄÖ-1", "percent_off": 10, "currency": "USD", "limit": 1, "ends_at": "2099-01-01T00:00:00Z"}).to_string()).await, 422, "validation_failed"),
        (post_raw(&o.http, &url("/admin/v1/codes"), Some(ADMIN), &[], &json!({"code": code.to_lowercase(), "percent_off": 10, "currency": "USD", "limit": 1, "ends_at": "2099-01-01T00:00:00Z"}).to_string()).await, 409, "conflict"),
        (post_raw(&o.http, &url("/admin/v1/codes"), Some(&s.token), &[], "{}").await, 403, "forbidden"),
        (post_raw(&o.http, &url("/admin/v1/codes/batches"), Some(ADMIN), &[], &json!({"count": 0, "amount_off": 2000, "currency": "USD", "ends_at": "2099-01-01T00:00:00Z"}).to_string()).await, 422, "validation_failed"),
        (post_raw(&o.http, &url("/admin/v1/codes"), Some(ADMIN), &[], &json!({"code": fresh_code("B"), "percent_off": 10, "currency": "USD", "limit": 1, "ends_at": "2099-01-01T00:00:00Z", "count": 1}).to_string()).await, 422, "validation_failed"),
        (post_raw(&o.http, &url("/admin/v1/codes/batches"), Some(ADMIN), &[], &json!({"count": 1, "amount_off": 2000, "currency": "USD", "ends_at": "2099-01-01T00:00:00Z", "limit": 1}).to_string()).await, 422, "validation_failed"),
        (post_raw(&o.http, &url("/admin/v1/codes/batches"), Some(ADMIN), &[], &json!({"count": 1, "amount_off": 2000, "ends_at": "2099-01-01T00:00:00Z"}).to_string()).await, 422, "validation_failed"),
        (post_raw(&o.http, &url("/admin/v1/codes/batches"), Some(ADMIN), &[], &json!({"count": 1_000_001, "amount_off": 2000, "currency": "USD", "ends_at": "2099-01-01T00:00:00Z"}).to_string()).await, 422, "validation_failed"),
    ];
    for (i, (r, status, result)) in cases.iter().enumerate() {
        assert_eq!(
            (r.status, r.body["result"].as_str()),
            (*status, Some(*result)),
            "case {i}: {}",
            r.body
        );
    }
    let res = o
        .http
        .post(&check_url)
        .bearer_auth(&s.token)
        .body(r#"{"cart_total":1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 415);
    let res = o
        .http
        .get(url("/admin/v1/codes/batches/b_nope.csv"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let res = o
        .http
        .get(url("/admin/v1/codes/NOSUCHCODE"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    // Nothing changed.
    assert_eq!(uses_left(&o, &code).await, 5);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM coupon_uses WHERE customer_id = $1")
        .bind(&s.id)
        .fetch_one(&o.db)
        .await
        .unwrap();
    assert_eq!(rows, 0);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_client_ip_headers_are_ignored_and_the_tcp_peer_is_used() {
    let o = TestOrigin::start_with(config()).await;
    let s = shopper(&o);
    let spoofed = fresh_ip();
    let r = post_raw(
        &o.http,
        &format!("{}/api/v1/codes/{}/check", o.url, fresh_code("NOPE")),
        Some(&s.token),
        &[
            ("cf-connecting-ip", spoofed.clone()),
            ("x-forwarded-for", spoofed.clone()),
        ],
        r#"{"cart_total":100}"#,
    )
    .await;
    // 404, or 429 when earlier runs spent the loopback bucket; a guess either way.
    assert!(matches!(r.status, 404 | 429), "{} {}", r.status, r.body);
    let mut redis = o.origin.state.redis.clone();
    let exists = |ip: &str| {
        redis::cmd("EXISTS")
            .arg(format!("fg:guess:ip:{ip}"))
            .clone()
    };
    let spoofed_bucket: i64 = exists(&spoofed).query_async(&mut redis).await.unwrap();
    let peer_bucket: i64 = exists("127.0.0.1").query_async(&mut redis).await.unwrap();
    assert_eq!(spoofed_bucket, 0, "no bucket keyed by the spoofed IP");
    assert_eq!(peer_bucket, 1, "the TCP peer's bucket was used");
    o.stop().await;
}
