//! The promo code service (`/api/v1/codes/…`; `flashgate_origin::promo`): its rules and the
//! checks of its requests, against in-process origins over HTTP with the machine's real
//! PostgreSQL and Redis — discount arithmetic, typed forms of a code, local end times, batch
//! code draws, bad input, the client IP it trusts and the bucket of the per-IP guess limit
//! (IPv6 per prefix, IPv4-mapped as IPv4). Concurrency is in
//! `coupons_concurrency.rs`.

use chrono::{DateTime, Utc};
use flashgate_shared::api::promo::NewCode;
use flashgate_shared::CLIENT_IP_HEADER;
use flashgate_tests::support::fresh_code_name as fresh_code;
use flashgate_tests::support::{
    fresh_ip, new_code, one_time_rules, post_raw, signed_test_config, RawReply, TestOrigin,
};
use serde_json::json;

/// The manager token of the test configuration.
const ADMIN: &str = flashgate_origin::config::TEST_MANAGER_TOKEN;

/// A code body of 10 % off in EUR, 10 uses, ending at `ends_at` (an instant or a local
/// time with its zone).
fn euro_code(code: &str, ends_at: String) -> NewCode {
    let mut body = new_code(code, 10);
    body.offer.currency = "EUR".into();
    body.offer.ends_at = ends_at;
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimum_order_and_discount_arithmetic() {
    let o = TestOrigin::start_with(signed_test_config()).await;
    let s = o.shopper();
    let code = o.shared_code_with(1000, |c| c.offer.min_order = 5000).await;
    let r = o.check(&s, &code, 5000).await;
    assert_eq!(
        (r.status, r.body.clone()),
        (200, json!({"discount": 500, "total": 4500}))
    );
    let r = o.check(&s, &code, 4999).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.body,
        json!({"result": "not_applicable", "reason": "below_minimum"})
    );
    let r = o.check(&s, &code, 5556).await;
    assert_eq!(
        (r.status, r.body),
        (200, json!({"discount": 556, "total": 5000}))
    );
    let r = o.check(&s, &code, 6000).await;
    assert_eq!(r.body, json!({"discount": 600, "total": 5400}));

    // The issue's other examples, through the API.
    let c15 = o
        .shared_code_with(10, |c| c.offer.percent_off = Some(1500))
        .await;
    let r = o.check(&s, &c15, 3490).await;
    assert_eq!(r.body, json!({"discount": 524, "total": 2966}));
    let c75 = o
        .shared_code_with(10, |c| c.offer.percent_off = Some(750))
        .await;
    assert_eq!(o.check(&s, &c75, 999_999).await.body["discount"], 75_000);
    assert_eq!(o.check(&s, &code, 1).await.body["reason"], "below_minimum");
    let c10 = o.shared_code_with(10, |_| {}).await;
    assert_eq!(
        o.check(&s, &c10, 1).await.body,
        json!({"discount": 0, "total": 1})
    );
    let amount = o
        .shared_code_with(10, |c| {
            c.offer.percent_off = None;
            c.offer.amount_off = Some(2000);
        })
        .await;
    assert_eq!(
        o.check(&s, &amount, 1500).await.body,
        json!({"discount": 1500, "total": 0})
    );

    // Check changes nothing.
    assert_eq!(o.uses_left(&code).await, 1000);
    assert_eq!(o.use_rows(&code, "held").await, 0);
    let (st, shown) = o.admin_code(&code).await;
    assert_eq!(st, 200);
    assert_eq!(shown["uses_left"], 1000);
    assert_eq!(shown["min_order"], 5000);
    assert_eq!(shown["percent_off"], 1000);
    assert_eq!(shown["once_per_customer"], true);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_forms_find_spring10_and_a_cyrillic_look_alike_does_not() {
    let o = TestOrigin::start_with(signed_test_config()).await;
    // SPRING10 itself; it may exist from an earlier run (409), with the same far end.
    let mut spring = new_code("SPRING10", 1000);
    spring.offer.min_order = 5000;
    spring.offer.ends_at = "2099-01-04T23:59 Europe/Paris".into();
    let r = o.create_code(&spring).await;
    assert!(r.status == 201 || r.status == 409, "{}", r.body);
    let s = o.shopper();
    for typed in [
        " spring10 ",
        "Spring10",
        "\u{FF33}\u{FF30}\u{FF32}\u{FF29}\u{FF2E}\u{FF27}\u{FF11}\u{FF10}",
    ] {
        let r = o.check(&s, typed, 6000).await;
        assert_eq!(r.status, 200, "{typed:?}: {}", r.body);
        assert_eq!(r.body, json!({"discount": 600, "total": 5400}));
    }
    assert_eq!(o.admin_code(" spring10 ").await.1["code"], "SPRING10");
    // Cyrillic С (U+0421) and Р (U+0420) in place of Latin S and P.
    let r = o.check(&s, "\u{0421}\u{0420}RING10", 6000).await;
    assert_eq!((r.status, r.body), (404, json!({"result": "invalid_code"})));
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ends_at_as_local_time_in_a_daylight_saving_zone() {
    use flashgate_origin::promo::rules::parse_instant;
    let o = TestOrigin::start_with(signed_test_config()).await;
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
    let r = o
        .create_code(&euro_code(&code, format!("{local} Europe/Paris")))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["ends_at"], json!(end));
    let s = o.shopper();
    // The scenario: the clock passes the code's end, so these waits are on purpose.
    let wait_until = |t: DateTime<Utc>| async move {
        let d = (t - Utc::now()).to_std().unwrap_or_default();
        tokio::time::sleep(d).await;
    };
    wait_until(end - chrono::Duration::seconds(1)).await;
    let r = o.check(&s, &code, 6000).await;
    assert_eq!(r.status, 200, "one second before: {}", r.body);
    wait_until(end + chrono::Duration::seconds(1)).await;
    let r = o.check(&s, &code, 6000).await;
    assert_eq!(r.status, 422, "one second after: {}", r.body);
    assert_eq!(r.body["reason"], "expired");

    // The admin API's weekday form, and the instants across Paris's spring switch (UTC+1 to
    // UTC+2 on 2026-03-29 at 02:00 local).
    let code = fresh_code("SUN");
    let r = o
        .create_code(&euro_code(&code, "Sunday 23:59 Europe/Paris".into()))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_code_is_redrawn() {
    use flashgate_origin::promo::batch;
    let o = TestOrigin::start_with(signed_test_config()).await;
    let rules = one_time_rules(2000);
    let first = batch::generate(&o.origin.state.db, &rules, 3)
        .await
        .unwrap();
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
    let second = batch::generate_with(&o.origin.state.db, &rules, 5, &mut draw)
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
    let o = TestOrigin::start_with(signed_test_config()).await;
    let code = o.shared_code_with(5, |_| {}).await;
    let s = o.shopper();
    let url = |p: &str| format!("{}{p}", o.url);
    let check_url = url(&format!("/api/v1/codes/{code}/check"));
    let use_url = url(&format!("/api/v1/codes/{code}/use"));
    let ip = [(CLIENT_IP_HEADER, s.ip.clone())];
    let key = [
        (CLIENT_IP_HEADER, s.ip.clone()),
        ("idempotency-key", "k".to_string()),
    ];
    let cases: Vec<(RawReply, u16, &str)> = vec![
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
    assert_eq!(o.uses_left(&code).await, 5);
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
    let o = TestOrigin::start_with(signed_test_config()).await;
    let s = o.shopper();
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
            .arg(flashgate_origin::promo::guess::ip_bucket_key(ip))
            .clone()
    };
    let spoofed_bucket: i64 = exists(&spoofed).query_async(&mut redis).await.unwrap();
    let peer_bucket: i64 = exists("127.0.0.1").query_async(&mut redis).await.unwrap();
    assert_eq!(spoofed_bucket, 0, "no bucket keyed by the spoofed IP");
    assert_eq!(peer_bucket, 1, "the TCP peer's bucket was used");
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guesses_from_one_ipv6_64_or_a_mapped_ipv4_address_share_one_ip_bucket() {
    let mut config = signed_test_config();
    config.code_guesses_per_ip = 3;
    let o = TestOrigin::start_with(config).await;
    let guess_from = |ip: String| {
        let o = &o;
        async move {
            let mut s = o.shopper();
            s.ip = ip;
            o.check(&s, &fresh_code("NOPE"), 100).await.status
        }
    };
    // Six addresses of one fresh /64, each her own customer, one unknown code each.
    let n: u32 = rand::random();
    let prefix = format!("2001:db8:{:x}:{:x}", n >> 16, n & 0xffff);
    let mut statuses = Vec::new();
    for i in 1..=6 {
        statuses.push(guess_from(format!("{prefix}:{i:x}::{i:x}")).await);
    }
    assert_eq!(
        statuses,
        [404, 404, 404, 429, 429, 429],
        "one /64, one bucket"
    );
    // The next /64 is another client.
    let next = format!("2001:db8:{:x}:{:x}::1", n >> 16, (n & 0xffff) ^ 1);
    assert_eq!(guess_from(next).await, 404);
    // An IPv4 address's drained bucket also refuses its IPv4-mapped IPv6 form.
    let v4 = fresh_ip();
    for _ in 0..3 {
        assert_eq!(guess_from(v4.clone()).await, 404);
    }
    assert_eq!(guess_from(format!("::ffff:{v4}")).await, 429);
    assert_eq!(guess_from(v4).await, 429);
    o.stop().await;
}
