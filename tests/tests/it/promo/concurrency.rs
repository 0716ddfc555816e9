//! The promo code service (`/api/v1/codes/…`; `flashgate_origin::promo`) under concurrency,
//! against in-process origins over HTTP with the machine's real PostgreSQL and Redis: the use
//! limit, release and the sweeper, idempotent retries, guess limiting across origins and
//! one-time batches. "At once" means truly concurrent requests (spawned tasks on a
//! multi-threaded runtime). Two `TestOrigin`s in one test are two origins sharing PostgreSQL
//! and Redis (separate servers, pools and caches; one OS process). The rules and request
//! checks are in `coupons_service.rs`.

use std::collections::HashSet;
use std::time::Duration;

use flashgate_shared::code::ALPHABET;
use flashgate_tests::support::scrape::Scrape;
use flashgate_tests::support::{
    eventually, fresh_ip, new_batch, post_raw, signed_test_config, use_at, use_body, Shopper,
    TestOrigin,
};
use futures::future::join_all;
use serde_json::{json, Value};

/// The manager token of the test configuration.
const ADMIN: &str = flashgate_origin::config::TEST_MANAGER_TOKEN;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn limit_3_with_20_customers_at_once_and_one_customer_twice() {
    let o = TestOrigin::start_with(signed_test_config()).await;
    for round in 0..3 {
        let code = o.shared_code_with(3, |_| {}).await;
        let twice = o.shopper();
        let mut tries: Vec<(Shopper, String)> = (0..20)
            .map(|i| (o.shopper(), format!("k{round}-{i}")))
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
        assert_eq!(o.uses_left(&code).await, 0);
        assert_eq!(o.use_rows(&code, "held").await, 3);
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
        let late = o.shopper();
        let r = o.check(&late, &code, 6000).await;
        assert_eq!(
            r.body,
            json!({"result": "not_applicable", "reason": "used_up"})
        );
        let r = o.use_as(&late, &code, 6000, "late").await;
        assert_eq!((r.status, r.body), (409, json!({"result": "used_up"})));
        let flag: Option<String> =
            redis_hget(&flashgate_origin::promo::flags::key(&code), "out").await;
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
    let o = TestOrigin::start_with(signed_test_config()).await;
    let code = o.shared_code_with(1, |_| {}).await;
    let (ana, bob) = (o.shopper(), o.shopper());
    let first = o.use_as(&ana, &code, 6000, "a1").await;
    assert_eq!(first.status, 201, "{}", first.body);
    // A retry with the same key gets the same reply; another key is already_used.
    let again = o.use_as(&ana, &code, 6000, "a1").await;
    assert_eq!((again.status, &again.body), (201, &first.body));
    let r = o.use_as(&ana, &code, 6000, "a2").await;
    assert_eq!(
        (r.status, r.body),
        (
            409,
            json!({"result": "already_used", "use": first.body["use"]})
        )
    );
    let r = o.check(&ana, &code, 6000).await;
    assert_eq!(r.body["reason"], "already_used");
    let r = o.use_as(&bob, &code, 6000, "b1").await;
    assert_eq!((r.status, r.body), (409, json!({"result": "used_up"})));

    let id = first.body["use"].as_str().unwrap();
    let r = o.use_call(id, "release").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "released");
    let r = o.use_call(id, "release").await;
    assert_eq!((r.status, &r.body["status"]), (200, &json!("released")));
    assert_eq!(o.uses_left(&code).await, 1);
    let r = o.use_call(id, "confirm").await;
    assert_eq!((r.status, r.body), (409, json!({"result": "use_released"})));

    // She can try again: a check applies and a new use is taken.
    assert_eq!(o.check(&ana, &code, 6000).await.status, 200);
    let second = o.use_as(&ana, &code, 6000, "a3").await;
    assert_eq!(second.status, 201, "{}", second.body);
    let id2 = second.body["use"].as_str().unwrap();
    let r = o.use_call(id2, "confirm").await;
    assert_eq!((r.status, &r.body["status"]), (200, &json!("used")));
    let r = o.use_call(id2, "confirm").await;
    assert_eq!(r.status, 200);
    let r = o.use_call(id2, "release").await;
    assert_eq!(
        (r.status, r.body),
        (409, json!({"result": "use_confirmed"}))
    );
    assert_eq!(o.uses_left(&code).await, 0);
    assert_eq!(o.use_rows(&code, "used").await, 1);
    assert_eq!(o.use_rows(&code, "released").await, 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_key_at_once_gets_the_first_reply_or_in_progress_with_retry_after() {
    use flashgate_origin::idempotency::{self, Begin};

    let o = TestOrigin::start_with(signed_test_config()).await;
    let code = o.shared_code_with(5, |_| {}).await;
    let ana = o.shopper();
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
            201 => assert_eq!(r.header("retry-after"), None),
            409 => assert_eq!(
                (&r.body, r.header("retry-after")),
                (&json!({"result": "in_progress"}), Some("1"))
            ),
            st => panic!("unexpected {st} {}", r.body),
        }
    }
    assert_eq!(o.use_rows(&code, "held").await, 1);
    assert_eq!(o.uses_left(&code).await, 4);
    // Once done, the key replays the first reply.
    let again = o.use_as(&ana, &code, 6000, "same").await;
    assert_eq!((again.status, &again.body), (201, winners[0]));

    // Deterministically: while a first request with the key is running (its pending record
    // held here), a retry gets `in_progress` + `Retry-After: 1` and changes nothing.
    let bob = o.shopper();
    let body = use_body(&bob, 6000, "held");
    let fp = idempotency::fingerprint(&format!("code-use:{code}"), body.as_bytes());
    let mut redis = flashgate_tests::support::redis_conn().await;
    assert_eq!(
        idempotency::begin(&mut redis, &bob.id, "held", &fp)
            .await
            .unwrap(),
        Begin::New
    );
    let r = o.use_as(&bob, &code, 6000, "held").await;
    assert_eq!(
        (r.status, &r.body, r.header("retry-after")),
        (409, &json!({"result": "in_progress"}), Some("1"))
    );
    assert_eq!(o.uses_left(&code).await, 4);
    // The first request gives up (its record goes): the retry is decided.
    idempotency::abandon(&mut redis, &bob.id, "held")
        .await
        .unwrap();
    let r = o.use_as(&bob, &code, 6000, "held").await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(o.uses_left(&code).await, 3);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sweeper_releases_unconfirmed_uses_exactly_once_even_racing_release() {
    let mut config = signed_test_config();
    config.code_use_hold_seconds = 1;
    config.sweep_interval_ms = 100;
    let o = TestOrigin::start_with(config).await;
    let code = o.shared_code_with(10, |_| {}).await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let r = o.use_as(&o.shopper(), &code, 6000, &format!("k{i}")).await;
        assert_eq!(r.status, 201, "{}", r.body);
        ids.push(r.body["use"].as_str().unwrap().to_string());
    }
    assert_eq!(o.uses_left(&code).await, 4);
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
                let url = format!("{url}/api/v1/uses/{id}/release");
                post_raw(&http, &url, Some(&token), &[], "").await.status
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
        match o_ref.use_rows(code_ref, "released").await {
            6 => Ok(()),
            n => Err(format!("{n} released")),
        }
    })
    .await;
    assert_eq!(
        o.uses_left(&code).await,
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
    let a = TestOrigin::start_with(signed_test_config()).await;
    let b = TestOrigin::start_with(signed_test_config()).await;
    let code = a.shared_code_with(1000, |_| {}).await;
    let eve = a.shopper();
    // Five failures, alternating origins, then the sixth is refused.
    for i in 0..5 {
        let o = if i % 2 == 0 { &a } else { &b };
        let r = o.check(&eve, &format!("NOPE{i}"), 6000).await;
        assert_eq!(
            (r.status, r.body),
            (404, json!({"result": "invalid_code"})),
            "try {i}"
        );
    }
    let r = b.check(&eve, "NOPE5", 6000).await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.body["result"], "rate_limited");
    let after: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=720).contains(&after), "{after}");
    let r = a.use_as(&eve, "NOPE6", 6000, "e1").await;
    assert_eq!(r.status, 429);
    // A spent customer is refused even for a valid code, so a limited script learns nothing.
    assert_eq!(a.check(&eve, &code, 6000).await.status, 429);

    // Successes are never limited and spend nothing: 30 valid checks and a use, then still
    // five failures before the limit.
    let ann = a.shopper();
    for i in 0..30 {
        let o = if i % 2 == 0 { &a } else { &b };
        assert_eq!(o.check(&ann, &code, 6000).await.status, 200);
    }
    assert_eq!(b.use_as(&ann, &code, 6000, "ann").await.status, 201);
    for i in 0..5 {
        assert_eq!(a.check(&ann, &format!("TYPO{i}"), 6000).await.status, 404);
    }
    assert_eq!(b.check(&ann, "TYPO5", 6000).await.status, 429);

    // Per IP: many accounts behind one address share its bucket.
    let mut cfg = signed_test_config();
    cfg.code_guesses_per_ip = 3;
    let c = TestOrigin::start_with(cfg).await;
    let ip = fresh_ip();
    for i in 0..3 {
        let mut s = c.shopper();
        s.ip = ip.clone();
        assert_eq!(c.check(&s, &format!("BAD{i}"), 1).await.status, 404);
    }
    let mut s = c.shopper();
    s.ip = ip.clone();
    assert_eq!(c.check(&s, "BAD3", 1).await.status, 429);
    s.ip = fresh_ip();
    assert_eq!(c.check(&s, "BAD4", 1).await.status, 404);

    // Each origin counted the refusals it gave, by the bucket that was spent: on a, eve's use
    // and valid check; on b, eve's sixth try and ann's; on c, the shared address's.
    for (o, customer, ip) in [(&a, 2.0, 0.0), (&b, 2.0, 0.0), (&c, 0.0, 1.0)] {
        let m = Scrape::of(&o.http, &o.url).await;
        let n = |bucket| m.sum("flashgate_guess_refusals_total", &[("bucket", bucket)]);
        assert_eq!((n("customer"), n("ip")), (customer, ip));
    }
    a.stop().await;
    b.stop().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_time_batch_of_10000_unique_well_formed_and_each_usable_once() {
    let o = TestOrigin::start_with(signed_test_config()).await;
    let batch = new_batch(10_000, 2000);
    let r = post_raw(
        &o.http,
        &format!("{}/admin/v1/codes/batches", o.url),
        Some(ADMIN),
        &[],
        &serde_json::to_string(&batch).unwrap(),
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
    let (st, shown) = o.admin_code(codes[0]).await;
    assert_eq!(st, 200);
    assert_eq!(shown["kind"], "one_time");
    assert_eq!(shown["limit"], 1);
    assert_eq!(shown["batch"], r.body["id"]);

    // Each code is usable once: 150 codes, each tried by two customers at once.
    let sample: Vec<String> = codes.iter().take(150).map(|c| c.to_string()).collect();
    let tries = sample.iter().flat_map(|c| {
        let (s1, s2) = (o.shopper(), o.shopper());
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
