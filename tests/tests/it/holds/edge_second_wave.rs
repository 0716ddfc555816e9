//! The second wave through the edge: the built edge worker in workerd (Miniflare) in front of a
//! real origin over real PostgreSQL and Redis. Stock 100, 100 winners through the edge, 10 never
//! pay; the sweeper returns their 10 units, the flag clears, the edge shows the campaign active
//! again within its status TTL plus a round trip, exactly 10 more customers win through the
//! edge, then it is sold out again. Ends with a clean reconciliation.

use std::time::{Duration, Instant};

use flashgate_shared::api::PayRequest;
use flashgate_tests::support::{claim_via, unique, TestEdge, TestOrigin};
use flashgate_tests::support::{eventually, until_state};
use futures::future::join_all;
use serde_json::Value;

const EDGE_SECRET: &str = flashgate_tests::support::TEST_EDGE_SECRET;
/// The edge's status TTL in this test.
const TTL: Duration = Duration::from_millis(1_000);
/// Hold length of the campaign, in seconds.
const HOLD_SECONDS: i64 = 6;

/// A claim through the edge with a fresh key: status, who answered, JSON body.
async fn claim(o: &TestOrigin, e: &TestEdge, c: &str, customer: &str) -> (u16, String, Value) {
    claim_via(&o.http, &e.url, &o.token(customer), c, &unique("k")).await
}

/// `n` new customers claim through the edge at once; returns the 201 claims and the number of
/// 409 `sold_out`.
async fn wave(o: &TestOrigin, e: &TestEdge, c: &str, n: usize) -> (Vec<Value>, usize) {
    let run = unique("edge-wave");
    let people: Vec<String> = (0..n).map(|i| format!("{run}-{i}")).collect();
    let replies: Vec<(u16, String, Value)> =
        join_all(people.iter().map(|p| claim(o, e, c, p))).await;
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    for (s, by, b) in &replies {
        *seen.entry(format!("{s} {by} {}", b["result"])).or_default() += 1;
    }
    println!("wave of {n}: {seen:?}");
    let won = replies
        .iter()
        .filter(|(s, _, _)| *s == 201)
        .map(|(_, _, b)| b["claim"].clone())
        .collect();
    let sold_out = replies
        .iter()
        .filter(|(s, _, b)| *s == 409 && b["result"] == "sold_out")
        .count();
    (won, sold_out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn second_wave_through_the_edge_sells_exactly_the_returned_units() {
    let o = TestOrigin::start_signed().await;
    let c = unique("edge-hold");
    let now = chrono::Utc::now();
    let (starts, ends) = (
        now - chrono::Duration::minutes(1),
        now + chrono::Duration::hours(1),
    );
    // Holds long enough for the first wave and the payments to finish on a loaded machine,
    // short enough for the test to wait for the unpaid ones to expire.
    o.create_campaign(&c, "sale", 100, starts, ends, Some(HOLD_SECONDS))
        .await;
    let env = [
        ("FLASHGATE_STATUS_TTL_MS", TTL.as_millis().to_string()),
        ("FLASHGATE_EDGE_SECRET", EDGE_SECRET.to_string()),
    ];
    let e = TestEdge::start(&o.url, &env);

    let (winners, lost) = wave(&o, &e, &c, 150).await;
    assert_eq!((winners.len(), lost), (100, 50));
    until_state(&o.http, &e.url, &c, "sold_out", Instant::now()).await;

    // 90 pay at the origin (the checkout backend's service call); 10 never do.
    let service = o.config.service_token.expose().to_string();
    let pays = join_all(winners[..90].iter().map(|w| {
        let url = format!("{}/api/v1/claims/{}/pay", o.url, w["id"].as_str().unwrap());
        o.http
            .post(url)
            .bearer_auth(&service)
            .json(&PayRequest {
                payment_ref: unique("psp"),
            })
            .send()
    }))
    .await;
    assert!(pays
        .iter()
        .all(|r| r.as_ref().unwrap().status().as_u16() == 200));

    // The sweeper returns the 10 units; the edge shows the campaign active again.
    let deadline = Duration::from_secs(HOLD_SECONDS as u64 + 8);
    eventually("the sweeper to expire the holds", deadline, || async {
        match o.claim_rows(&c, &["held"]).await {
            0 => Ok(()),
            n => Err(format!("{n} claims still held")),
        }
    })
    .await;
    assert_eq!(o.remaining(&c).await, 10);
    let took = until_state(&o.http, &e.url, &c, "active", Instant::now()).await;
    println!("edge showed the returned units after {took:?} (TTL {TTL:?})");
    assert!(took <= TTL + Duration::from_millis(1_000), "{took:?}");

    // The second wave through the edge: exactly 10 win, then sold out again.
    let (winners2, lost2) = wave(&o, &e, &c, 60).await;
    assert_eq!((winners2.len(), lost2), (10, 50));
    assert_eq!(o.remaining(&c).await, 0);
    assert_eq!(o.claim_rows(&c, &["held", "paid"]).await, 100);
    assert_eq!(o.claim_rows(&c, &["expired"]).await, 10);
    until_state(&o.http, &e.url, &c, "sold_out", Instant::now()).await;

    let mut redis = o.origin.state.gate.clone();
    let r = flashgate_origin::repair::reconcile::reconcile(
        &flashgate_origin::db::Db::from(o.db.clone()),
        &mut redis,
        &c,
    )
    .await
    .expect("reconcile runs")
    .expect("campaign exists");
    assert!(r.ok, "{r:#?}");
    drop(e);
    o.stop().await;
}

/// The edge's public status of campaign `c`: its `state` and `remaining`.
async fn edge_status(o: &TestOrigin, e: &TestEdge, c: &str) -> (String, i64) {
    let url = format!("{}/api/v1/campaigns/{c}", e.url);
    let b: Value = o.http.get(url).send().await.unwrap().json().await.unwrap();
    (
        b["state"].as_str().unwrap_or_default().to_string(),
        b["remaining"].as_i64().unwrap_or(-1),
    )
}

/// Stock 1, holds of 2 s, real waits in workerd: B's `sold_out` replayed with her idempotency
/// key after A's hold expired is her first answer again, but it teaches the edge nothing (the
/// origin marks it `Idempotent-Replayed`), so the returned unit stays claimable at the edge:
/// the edge's status stays `active` and C wins it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replayed_sold_out_does_not_close_the_edge() {
    let o = TestOrigin::start_signed().await;
    let c = unique("edge-replay");
    let now = chrono::Utc::now();
    o.create_campaign(
        &c,
        "sale",
        1,
        now - chrono::Duration::minutes(1),
        now + chrono::Duration::hours(1),
        Some(2),
    )
    .await;
    let env = [
        ("FLASHGATE_STATUS_TTL_MS", TTL.as_millis().to_string()),
        ("FLASHGATE_EDGE_SECRET", EDGE_SECRET.to_string()),
    ];
    let e = TestEdge::start(&o.url, &env);
    let run = unique("p");
    let (a, b, cc) = (format!("{run}-a"), format!("{run}-b"), format!("{run}-c"));
    until_state(&o.http, &e.url, &c, "active", Instant::now()).await;

    let (s, _, _) = claim(&o, &e, &c, &a).await;
    assert_eq!(s, 201);
    let b_key = unique("kb");
    let first = claim_via(&o.http, &e.url, &o.token(&b), &c, &b_key).await;
    assert_eq!(
        (first.0, first.2["result"].as_str()),
        (409, Some("sold_out"))
    );

    // A never pays: her hold expires, the unit comes back, the edge shows it.
    eventually("A's hold to expire", Duration::from_secs(12), || async {
        match o.claim_rows(&c, &["held"]).await {
            0 => Ok(()),
            n => Err(format!("{n} claims still held")),
        }
    })
    .await;
    assert_eq!(o.remaining(&c).await, 1);
    until_state(&o.http, &e.url, &c, "active", Instant::now()).await;

    // B's app retries her old request with her key: her first answer, from the origin.
    let again = claim_via(&o.http, &e.url, &o.token(&b), &c, &b_key).await;
    assert_eq!(
        (again.0, again.1.as_str(), again.2["result"].as_str()),
        (409, "origin", Some("sold_out"))
    );
    // The edge still says what the origin says, and a new customer wins the unit at once.
    assert_eq!(edge_status(&o, &e, &c).await, ("active".to_string(), 1));
    let (s, by, body) = claim(&o, &e, &c, &cc).await;
    assert_eq!((s, by.as_str()), (201, "origin"), "{body}");
    assert_eq!(o.remaining(&c).await, 0);
    drop(e);
    o.stop().await;
}
