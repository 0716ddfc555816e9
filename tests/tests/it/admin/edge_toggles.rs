//! Managers' toggles reach the edge within its staleness bound (status TTL + one origin round
//! trip): the built edge worker in workerd (Miniflare, edge-worker/run-miniflare.mjs) in front
//! of a real origin over real PostgreSQL and Redis, the toggles made through the admin API.
//! - pause → claims at the edge are answered `paused` (by the edge itself, the origin sees
//!   none) within the bound; resume → claims flow again;
//! - restock of a sold-out campaign → the edge clears `sold_out` within the bound and sells.
//!
//! The worker is built once per run with scripts/lib/edge.sh unless `FLASHGATE_EDGE_PREBUILT=1`
//! ([`TestEdge`](flashgate_tests::support::TestEdge)).

use std::time::{Duration, Instant};

use flashgate_shared::api::{ChangeAction, ChangeRequest};
use flashgate_tests::support::{claim_via, unique, TestEdge as Edge, TestOrigin};
use flashgate_tests::support::{eventually, until_state};
use serde_json::Value;

const EDGE_SECRET: &str = flashgate_tests::support::TEST_EDGE_SECRET;
/// The edge's status TTL in these tests.
const TTL: Duration = Duration::from_millis(1_000);
/// Allowance for one origin round trip (and the test's polling step).
const ROUND_TRIP: Duration = Duration::from_millis(500);

/// A claim through the edge with a fresh key: status, who answered, JSON body.
async fn claim(o: &TestOrigin, edge: &Edge, c: &str, customer: &str) -> (u16, String, Value) {
    claim_via(&o.http, &edge.url, &o.token(customer), c, &unique("k")).await
}

/// Sends claims through the edge until one is answered by the edge with `result`; returns how
/// long after `since` that was.
async fn until_edge_answers(
    o: &TestOrigin,
    e: &Edge,
    c: &str,
    result: &str,
    since: Instant,
) -> Duration {
    let what = format!("the edge to answer {result}");
    eventually(&what, Duration::from_secs(10), || async {
        let (s, by, b) = claim(o, e, c, &unique("probe")).await;
        if by == "edge" && b["result"] == result {
            assert_eq!(s, 409);
            Ok(since.elapsed())
        } else {
            Err(format!("{s} answered by {by:?}: {b}"))
        }
    })
    .await
}

fn edge_env() -> Vec<(&'static str, String)> {
    vec![
        ("FLASHGATE_STATUS_TTL_MS", TTL.as_millis().to_string()),
        ("FLASHGATE_EDGE_SECRET", EDGE_SECRET.to_string()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pause_reaches_the_edge_within_the_bound_and_resume_lets_claims_flow() {
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("giveaway", 1_000).await;
    let e = Edge::start(&o.url, &edge_env());
    let (s, by, b) = claim(&o, &e, &c, &unique("first")).await;
    assert_eq!((s, by.as_str()), (201, "origin"), "{b}");

    let (s, b) = o
        .change(&c, ChangeRequest::action(ChangeAction::Pause))
        .await;
    assert_eq!(s, 200, "{b}");
    let paused = Instant::now();
    // Any claim from now on is refused: by the origin until the edge refreshes, then by the
    // edge itself within the bound.
    let seen = until_edge_answers(&o, &e, &c, "paused", paused).await;
    println!("pause reached the edge after {seen:?} (bound: TTL {TTL:?} + one round trip)");
    assert!(seen <= TTL + ROUND_TRIP, "took {seen:?}");
    let before = o.claim_requests();
    for _ in 0..10 {
        let (s, by, b) = claim(&o, &e, &c, &unique("late")).await;
        assert_eq!(
            (s, by.as_str(), b["result"].as_str()),
            (409, "edge", Some("paused"))
        );
    }
    assert_eq!(
        o.claim_requests(),
        before,
        "the origin saw claims of a paused campaign"
    );
    assert_eq!(o.claim_rows(&c, &[]).await, 1);

    let (s, b) = o
        .change(&c, ChangeRequest::action(ChangeAction::Resume))
        .await;
    assert_eq!(s, 200, "{b}");
    let resumed = Instant::now();
    let seen = until_state(&o.http, &e.url, &c, "active", resumed).await;
    println!("resume reached the edge after {seen:?}");
    assert!(seen <= TTL + ROUND_TRIP, "took {seen:?}");
    let (s, by, b) = claim(&o, &e, &c, &unique("again")).await;
    assert_eq!((s, by.as_str()), (201, "origin"), "{b}");
    assert_eq!(o.claim_rows(&c, &[]).await, 2);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restock_of_a_sold_out_campaign_reaches_the_edge_and_sells_again() {
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", 2).await;
    let e = Edge::start(&o.url, &edge_env());
    for i in 0..2 {
        let (s, by, b) = claim(&o, &e, &c, &format!("{}-{i}", unique("buyer"))).await;
        assert_eq!((s, by.as_str()), (201, "origin"), "{b}");
    }
    let sold = Instant::now();
    until_edge_answers(&o, &e, &c, "sold_out", sold).await;

    let (s, b) = o.change(&c, ChangeRequest::restock(3)).await;
    assert_eq!((s, b["gate"].as_str()), (200, Some("updated")), "{b}");
    let restocked = Instant::now();
    let seen = until_state(&o.http, &e.url, &c, "active", restocked).await;
    println!("restock reached the edge after {seen:?} (bound: TTL {TTL:?} + one round trip)");
    assert!(seen <= TTL + ROUND_TRIP, "took {seen:?}");
    for i in 0..3 {
        let (s, by, b) = claim(&o, &e, &c, &format!("{}-{i}", unique("after"))).await;
        assert_eq!((s, by.as_str()), (201, "origin"), "{b}");
    }
    let (s, _, b) = claim(&o, &e, &c, &unique("one-too-many")).await;
    assert_eq!((s, b["result"].as_str()), (409, Some("sold_out")));
    assert_eq!(o.claim_rows(&c, &[]).await, 5);
    assert_eq!(o.remaining(&c).await, 0);
    o.stop().await;
}
