//! Claims on a campaign with variants against a real origin over HTTP, real PostgreSQL and real
//! Redis, with truly concurrent requests: never more claims of a variant than its stock, one
//! active claim per customer across the variants, units of an ended hold back to their own
//! variant. Every test reads the database back.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use flashgate_tests::support::variants::{
    claim_variant, create_variant_sale, gate_variant_remaining, variant_remaining,
};
use flashgate_tests::support::{assert_reconciled, customers, eventually, unique, TestOrigin};
use futures::future::join_all;
use futures::StreamExt;
use rand::Rng;
use serde_json::{json, Value};

/// Deadline of the polls in these tests.
const WAIT: Duration = Duration::from_secs(15);

/// Closes campaign `c` at the end of a test, so the gate audit of the origins of later tests
/// sharing the database does not keep visiting its gate.
async fn end(o: &TestOrigin, c: &str) {
    let (s, b) = o.change(c, json!({"action": "close"})).await;
    assert_eq!(s, 200, "{b}");
}

/// Held by the stampede that runs (see [`stampede`]).
static ONE_STAMPEDE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Claims on the wire at once in the stampede.
const IN_FLIGHT: usize = 200;

/// `n` variant ids `v0` .. `v{n-1}`.
fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("v{i}")).collect()
}

/// Active claims per variant of `c` in PostgreSQL.
async fn claims_by_variant(o: &TestOrigin, c: &str) -> HashMap<String, i64> {
    let rows: Vec<(Option<String>, i64)> = sqlx::query_as(
        "SELECT variant, count(*) FROM claims
          WHERE campaign_id = $1 AND status IN ('held', 'paid') GROUP BY variant",
    )
    .bind(c)
    .fetch_all(&o.db)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(v, n)| {
            (
                v.expect("every claim of a campaign with variants has one"),
                n,
            )
        })
        .collect()
}

/// 10 variants of 20, `people` customers each sending 3 claims on random variants at once
/// (each claim its own request and task, [`IN_FLIGHT`] on the wire together), on a gate of
/// `shards` shards; then
/// the reconciliation per variant.
async fn stampede(shards: i64, people: usize) {
    // One stampede at a time in this binary: two of 9,000 claims at once on a shared 2-core
    // machine (more round trips on a Redis Cluster) kept grouped commits past the 5 s a second
    // tab waits for the first, answered 503.
    let _one_at_a_time = ONE_STAMPEDE.lock().await;
    flashgate_tests::support::logs::json_logs("warn");
    let o = TestOrigin::start().await;
    let variants = ids(10);
    let spec: Vec<(&str, i64)> = variants.iter().map(|v| (v.as_str(), 20)).collect();
    let c = create_variant_sale(&o, &spec, 600, shards).await;
    let who = customers(people);
    let mut asked: Vec<(String, String, String)> = Vec::new();
    {
        let mut rng = rand::rng();
        for p in &who {
            for t in 0..3 {
                let v = variants[rng.random_range(0..variants.len())].clone();
                asked.push((p.clone(), format!("k-{p}-{t}"), v));
            }
        }
    }
    // Every claim its own task, all started at once; at most IN_FLIGHT on the wire together
    // (9,000 connects at once overflow the listen backlog of a test machine).
    let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let tasks = asked.iter().cloned().map(|(p, key, v)| {
        let (http, url, token, c) = (o.http.clone(), o.url.clone(), o.token(&p), c.clone());
        let sem = sem.clone();
        tokio::spawn(async move {
            let _slot = sem.acquire().await.expect("semaphore");
            let r = claim_variant(&http, &url, &token, &c, &key, Some(&v)).await;
            (p, v, r)
        })
    });
    let t0 = std::time::Instant::now();
    let replies: Vec<(String, String, (u16, Value))> = join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.expect("task"))
        .collect();

    let mut demand: HashMap<&str, HashSet<&str>> = HashMap::new();
    for (p, _, v) in &asked {
        demand.entry(v.as_str()).or_default().insert(p.as_str());
    }
    let (mut won, mut results) = (HashMap::<String, String>::new(), HashMap::new());
    for (p, v, (s, b)) in &replies {
        let result = b["result"].as_str().unwrap_or_default().to_string();
        *results.entry((*s, result.clone())).or_insert(0usize) += 1;
        match (*s, result.as_str()) {
            (201, "claimed") => {
                assert_eq!(b["claim"]["variant"], json!(v), "{b}");
                assert!(won.insert(p.clone(), v.clone()).is_none(), "{p} won twice");
            }
            (409, "already_claimed") => assert!(b["claim"]["variant"].is_string(), "{b}"),
            (409, "sold_out") => {
                if let Some(sold) = b["variant"].as_str() {
                    assert_eq!(sold, v, "{b}");
                }
            }
            _ => {
                let logs = flashgate_tests::support::logs::json_logs("warn").text();
                let l: Vec<&str> = logs.lines().filter(|l| l.contains("503")).take(5).collect();
                panic!("unexpected reply {s} {b} {l:?}")
            }
        }
    }
    println!(
        "shards {shards}, {people} customers x 3 claims in {:?}: {results:?}",
        t0.elapsed()
    );
    let claims = claims_by_variant(&o, &c).await;
    let mut oversold = 0;
    for v in &variants {
        let n = claims.get(v).copied().unwrap_or(0);
        let want = demand.get(v.as_str()).map_or(0, |d| d.len()).min(20) as i64;
        oversold += (n - 20).max(0);
        assert_eq!(n, want, "claims of {v}: {claims:?}");
        assert_eq!(
            variant_remaining(&o, &c, v).await,
            20 - n,
            "remaining of {v}"
        );
        let shards = u16::try_from(shards).unwrap();
        assert_eq!(gate_variant_remaining(&o, &c, v, shards).await, 20 - n);
    }
    assert_eq!(oversold, 0);
    assert_eq!(won.len() as i64, claims.values().sum::<i64>());
    let per_customer: i64 = sqlx::query_scalar(
        "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM claims
          WHERE campaign_id = $1 AND status IN ('held', 'paid') GROUP BY customer_id) x",
    )
    .bind(&c)
    .fetch_one(&o.db)
    .await
    .unwrap();
    assert!(per_customer <= 1, "a customer holds {per_customer} claims");
    assert_eq!(o.remaining(&c).await, 200 - won.len() as i64);
    let status = o.status(&c).await;
    assert_eq!(status["state"], "sold_out", "{status}");
    let listed = status["variants"].as_array().expect("variants listed");
    assert_eq!(listed.len(), 10);
    assert!(listed
        .iter()
        .all(|v| v["state"] == "sold_out" && v["remaining"] == 0));
    assert_reconciled(&o, &c).await;
    end(&o, &c).await;
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_variants_of_20_and_3000_customers_with_3_claims_each_one_shard() {
    stampede(1, 3_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_variants_of_20_and_3000_customers_with_3_claims_each_four_shards() {
    stampede(4, 3_000).await;
}

/// Two tabs, two sizes: 200 rounds of one customer claiming two variants at the same instant.
/// Exactly one claim each time; the other tab's reply is `already_claimed` with that claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_tabs_two_sizes_make_exactly_one_claim() {
    let o = TestOrigin::start().await;
    let c = create_variant_sale(&o, &[("41", 300), ("42", 300)], 600, 1).await;
    // The 200 customers are independent: 8 of them at a time, each with her two tabs racing
    // each other, so the rounds wait on PostgreSQL's commits together instead of one by one.
    futures::stream::iter(0..200)
        .for_each_concurrent(8, |round| {
            let (o, c) = (&o, &c);
            async move {
                let p = unique("tabs");
                let token = o.token(&p);
                let tab = |key: String, v: &'static str| {
                    let (http, url, token, c) =
                        (o.http.clone(), o.url.clone(), token.clone(), c.clone());
                    tokio::spawn(async move {
                        claim_variant(&http, &url, &token, &c, &key, Some(v)).await
                    })
                };
                let (a, b) = (
                    tab(format!("a{round}"), "41"),
                    tab(format!("b{round}"), "42"),
                );
                let (a, b) = (a.await.expect("tab"), b.await.expect("tab"));
                let (won, other) = match (a.0, b.0) {
                    (201, 409) => (a.1, b.1),
                    (409, 201) => (b.1, a.1),
                    _ => panic!("round {round}: {a:?} {b:?}"),
                };
                assert_eq!(other["result"], "already_claimed", "{other}");
                assert_eq!(other["claim"]["id"], won["claim"]["id"]);
                assert_eq!(other["claim"]["variant"], won["claim"]["variant"]);
                let mine = o
                    .http
                    .get(format!("{}/api/v1/campaigns/{c}/claims/mine", o.url))
                    .bearer_auth(&token)
                    .send()
                    .await
                    .unwrap()
                    .json::<Value>()
                    .await
                    .unwrap();
                assert_eq!(mine["claim"]["variant"], won["claim"]["variant"], "{mine}");
            }
        })
        .await;
    let claims = claims_by_variant(&o, &c).await;
    assert_eq!(claims.values().sum::<i64>(), 200, "{claims:?}");
    for v in ["41", "42"] {
        let n = claims.get(v).copied().unwrap_or(0);
        assert_eq!(variant_remaining(&o, &c, v).await, 300 - n);
    }
    assert_eq!(o.remaining(&c).await, 400);
    assert_reconciled(&o, &c).await;
    end(&o, &c).await;
    o.stop().await;
}

/// Pay and release (and extend) answer with the claim as `GET /api/v1/claims/{id}` shows it: with
/// its variant.
#[tokio::test]
async fn pay_and_release_replies_name_the_claims_variant() {
    let o = TestOrigin::start().await;
    let c = create_variant_sale(&o, &[("s", 5), ("m", 5)], 600, 1).await;
    let service = o.config.service_token.expose().to_string();
    let mut ids = Vec::new();
    for v in ["s", "m"] {
        let token = o.token(&unique("buyer"));
        let (s, b) = claim_variant(&o.http, &o.url, &token, &c, &unique("k"), Some(v)).await;
        assert_eq!(s, 201, "{b}");
        ids.push(b["claim"]["id"].as_str().unwrap().to_string());
    }
    let (s, paid) = o
        .claim_action(&ids[0], "pay", &service, &json!({"payment_ref": "order-1"}))
        .await;
    assert_eq!(
        (s, &paid["result"], &paid["claim"]["variant"]),
        (200, &json!("paid"), &json!("s")),
        "{paid}"
    );
    let (s, again) = o
        .claim_action(&ids[0], "release", &service, &json!({}))
        .await;
    assert_eq!(
        (s, &again["result"], &again["claim"]["variant"]),
        (409, &json!("already_paid"), &json!("s")),
        "{again}"
    );
    let (s, released) = o
        .claim_action(&ids[1], "release", &service, &json!({}))
        .await;
    assert_eq!(
        (s, &released["result"], &released["claim"]["variant"]),
        (200, &json!("released"), &json!("m")),
        "{released}"
    );
    assert_eq!(variant_remaining(&o, &c, "m").await, 5);
    assert_eq!(variant_remaining(&o, &c, "s").await, 4);
    end(&o, &c).await;
    o.stop().await;
}

/// Second wave per variant: an expired hold of size 42 comes back as size 42 only.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_expired_hold_returns_to_its_own_variant() {
    let o = TestOrigin::start().await;
    let c = create_variant_sale(&o, &[("41", 1), ("42", 1)], 1, 1).await;
    let (ana, ben, cid) = (unique("ana"), unique("ben"), unique("cid"));
    let claim = |p: &str, key: &str, v: &'static str| {
        let (http, url, token, c) = (o.http.clone(), o.url.clone(), o.token(p), c.clone());
        let key = key.to_string();
        async move { claim_variant(&http, &url, &token, &c, &key, Some(v)).await }
    };
    let (s, b) = claim(&ana, "a1", "42").await;
    assert_eq!(
        (s, b["claim"]["variant"].as_str()),
        (201, Some("42")),
        "{b}"
    );
    let (s, b) = claim(&ben, "b1", "42").await;
    assert_eq!(
        (s, b),
        (409, json!({"result": "sold_out", "variant": "42"}))
    );
    assert_eq!(variant_remaining(&o, &c, "41").await, 1);

    let what = "ana's hold to expire and its unit to reach variant 42 in the gate";
    eventually(what, WAIT, || async {
        let (pg, gate) = (
            variant_remaining(&o, &c, "42").await,
            gate_variant_remaining(&o, &c, "42", 1).await,
        );
        if (pg, gate) == (1, 1) {
            Ok(())
        } else {
            Err(format!("variant 42: PostgreSQL {pg}, gate {gate}"))
        }
    })
    .await;
    assert_eq!(variant_remaining(&o, &c, "41").await, 1, "41 untouched");
    assert_eq!(gate_variant_remaining(&o, &c, "41", 1).await, 1);

    let (s, b) = claim(&ben, "b2", "42").await;
    assert_eq!(
        (s, b["claim"]["variant"].as_str()),
        (201, Some("42")),
        "{b}"
    );
    let (s, b) = claim(&cid, "c1", "42").await;
    assert_eq!(
        (s, b),
        (409, json!({"result": "sold_out", "variant": "42"}))
    );
    let (s, b) = claim(&cid, "c2", "41").await;
    assert_eq!(
        (s, b["claim"]["variant"].as_str()),
        (201, Some("41")),
        "{b}"
    );
    assert_eq!(o.remaining(&c).await, 0);
    assert_reconciled(&o, &c).await;
    o.stop().await;
}

/// The claim body on a campaign with variants names one of them (422 naming `variant`
/// otherwise); a campaign without variants refuses a `variant` as an unknown field (400).
/// Nothing is claimed by a refused body.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_claim_body_names_a_variant_of_the_campaign() {
    let o = TestOrigin::start().await;
    let c = create_variant_sale(&o, &[("s", 2), ("m", 2)], 600, 1).await;
    let p = unique("body");
    let token = o.token(&p);
    let (s, b) = claim_variant(&o.http, &o.url, &token, &c, "k1", None).await;
    assert_eq!(
        (s, b["result"].as_str()),
        (422, Some("validation_failed")),
        "{b}"
    );
    assert!(b["message"].as_str().unwrap().contains("variant"), "{b}");
    let (s, b) = claim_variant(&o.http, &o.url, &token, &c, "k2", Some("xl")).await;
    assert_eq!(
        (s, b["result"].as_str()),
        (422, Some("validation_failed")),
        "{b}"
    );
    assert!(b["message"].as_str().unwrap().contains("variant"), "{b}");
    assert_eq!(o.claim_rows(&c, &[]).await, 0);

    let plain = o.campaign("sale", 2).await;
    let (s, b) = claim_variant(&o.http, &o.url, &token, &plain, "k3", Some("s")).await;
    assert_eq!(
        (s, b["result"].as_str()),
        (400, Some("invalid_json")),
        "{b}"
    );
    assert_eq!(o.claim_rows(&plain, &[]).await, 0);
    // The same campaign without a variant claims as always, and its status has no variants.
    let (s, b) = o.claim(&plain, &p, "k4").await;
    assert_eq!(s, 201, "{b}");
    assert!(b["claim"].get("variant").is_none(), "{b}");
    assert!(o.status(&plain).await.get("variants").is_none());

    let status = o.status(&c).await;
    assert_eq!(status["stock"], 4);
    assert_eq!(
        status["variants"],
        json!([
            {"id": "m", "name": "Size m", "stock": 2, "remaining": 2, "state": "active"},
            {"id": "s", "name": "Size s", "stock": 2, "remaining": 2, "state": "active"},
        ])
    );
    o.stop().await;
}
