//! The edge worker in the real runtime: the built worker (edge-worker/build) inside workerd via
//! Miniflare, in front of a real origin over real PostgreSQL and Redis. Requests are truly
//! concurrent where the behaviour is about concurrency. Origin-side effects are read from the
//! origin's own counters (`flashgate_status_requests_total`, `flashgate_claim_requests_total`).
//!
//! The worker is built once per run (`edge_tools_install` + `edge_build` of
//! scripts/lib/edge.sh) unless `FLASHGATE_EDGE_PREBUILT=1` says a caller already built it.

use std::time::{Duration, Instant};

use flashgate_shared::api::ChangeRequest;
use flashgate_tests::support::unique;
use flashgate_tests::support::until_state;
use flashgate_tests::support::{
    claims_at_once, edge_claim, edge_with as edge, get, sale_behind_edge, sell_out_at_origin,
    send_claim, status_url, winners_filter_of, ClaimReq, EdgeRuntime, EdgeSettings, Reply,
};
use futures::future::join_all;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_is_fetched_at_most_once_per_ttl_under_concurrent_gets() {
    // A long TTL so that the burst fits in one TTL window: exactly one origin fetch.
    let settings = EdgeSettings {
        ttl_ms: 5_000,
        ..Default::default()
    };
    let (o, c, e) = sale_behind_edge(5, settings).await;
    let before = o.status_requests();
    let t0 = Instant::now();
    let replies = join_all((0..200).map(|_| {
        let (http, url) = (o.http.clone(), status_url(&e.url, &c));
        tokio::spawn(async move { get(&http, &url).await })
    }))
    .await;
    let burst = t0.elapsed();
    let fetches = o.status_requests() - before;
    // One fetch per TTL window the burst spans: exactly one when it fits in one TTL (the
    // usual case), more only on a machine so loaded that the burst outlasts a TTL.
    println!("200 concurrent status GETs took {burst:?}, {fetches} origin fetch(es)");
    let most = burst.as_millis() as u64 / 5_000 + 1;
    assert!(
        (1..=most).contains(&fetches),
        "200 concurrent GETs made {fetches} origin fetches, at most {most} for a burst of {burst:?}"
    );
    let direct = o.status(&c).await;
    for r in replies {
        let r = r.expect("task");
        assert_eq!((r.status, r.by.as_str()), (200, "edge"));
        assert_eq!(r.json(), direct);
        assert!(r.header("flashgate-status-age-ms").is_some());
        assert!(r.header("age").is_some());
        assert_eq!(r.header("flashgate-stale"), None);
    }
    drop(e);

    // Sustained load for 3 s with a 500 ms TTL: refreshed about every TTL, never more often.
    let e = edge(
        &o.url,
        EdgeSettings {
            ttl_ms: 500,
            ..Default::default()
        },
    );
    let before = o.status_requests();
    let t0 = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..8 {
        let (http, url) = (o.http.clone(), status_url(&e.url, &c));
        workers.push(tokio::spawn(async move {
            let mut n = 0u32;
            while t0.elapsed() < Duration::from_millis(3_000) {
                assert_eq!(get(&http, &url).await.status, 200);
                n += 1;
            }
            n
        }));
    }
    let served: u32 = join_all(workers)
        .await
        .into_iter()
        .map(|n| n.unwrap())
        .sum();
    let elapsed_ms = t0.elapsed().as_millis() as u64;
    let fetches = o.status_requests() - before;
    let most = elapsed_ms / 500 + 1;
    println!(
        "sustained: {served} edge GETs in {elapsed_ms} ms, {fetches} origin fetches (bound {most})"
    );
    assert!(fetches <= most, "{fetches} fetches in {elapsed_ms} ms");
    assert!(fetches >= 3, "only {fetches} refreshes in {elapsed_ms} ms");
    assert!(u64::from(served) > fetches * 5);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_win_at_origin_then_sold_out_is_answered_at_the_edge() {
    claims_then_sold_out_at_the_edge(EdgeRuntime::Miniflare).await;
}

/// The same in plain workerd, as the scripts run the edge (a configuration generated from
/// wrangler.toml): the origin reached through its network service, the bindings given.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_plain_workerd_claims_win_at_origin_then_sold_out_is_answered_at_the_edge() {
    claims_then_sold_out_at_the_edge(EdgeRuntime::Workerd).await;
}

async fn claims_then_sold_out_at_the_edge(runtime: EdgeRuntime) {
    let stock = 5;
    let settings = EdgeSettings {
        runtime,
        ..Default::default()
    };
    let (o, c, e) = sale_behind_edge(stock, settings).await;

    // One customer wins through the edge: the origin answered.
    let alice = unique("alice");
    let before = o.claim_requests();
    let first = edge_claim(&o, &e.url, &c, &alice, "k1").await;
    assert_eq!((first.status, first.by.as_str()), (201, "origin"));
    assert_eq!(first.json()["result"], "claimed");
    assert_eq!(first.json()["claim"]["customer"], alice.as_str());
    assert_eq!(o.claim_requests() - before, 1);

    // 60 customers at once for the 4 units left: exactly 4 more winners.
    let status_before = o.status_requests();
    let stampede_start = Instant::now();
    let run = unique("cust");
    let replies = claims_at_once(&o, &e.url, &c, &run, 60).await;
    let won = replies.iter().filter(|r| r.status == 201).count();
    let sold_out: Vec<&Reply> = replies.iter().filter(|r| r.status == 409).collect();
    assert_eq!(won, 4, "{replies:?}");
    assert_eq!(sold_out.len(), 56);
    assert!(sold_out
        .iter()
        .all(|r| r.body == br#"{"result":"sold_out"}"#));
    assert_eq!(o.claim_rows(&c, &[]).await, stock);
    assert_eq!(o.remaining(&c).await, 0);

    // The edge learned sold_out from the origin's answers: from now on it answers itself and
    // the origin receives none of the claims, but those its winners filter cannot tell from a
    // winner's (about 1 in 256; the origin answers them sold_out).
    let mut winners = vec![alice.clone()];
    winners.extend(
        (0..60)
            .filter(|i| replies[*i].status == 201)
            .map(|i| format!("{run}-{i}")),
    );
    let filter = flashgate_shared::winners_filter::WinnersFilter::build(
        winners.iter().map(String::as_str),
        flashgate_shared::winners_filter::MAX_WINNERS,
    );
    let before = o.claim_requests();
    let late_run = format!("{run}-late");
    let late = claims_at_once(&o, &e.url, &c, &late_run, 100).await;
    let mut passed = 0;
    for (i, r) in late.iter().enumerate() {
        let lucky = filter.may_contain(&format!("{late_run}-{i}"));
        passed += u64::from(lucky);
        let by = if lucky { "origin" } else { "edge" };
        assert_eq!((r.status, r.by.as_str()), (409, by));
        assert_eq!(r.body, br#"{"result":"sold_out"}"#);
    }
    assert_eq!(o.claim_requests() - before, passed);
    // The 160 claims shared the status refreshes: at most one per TTL (single-flight).
    let fetches = o.status_requests() - status_before;
    let most = stampede_start.elapsed().as_millis() as u64 / 1_000 + 1;
    assert!(fetches <= most, "{fetches} status fetches, bound {most}");
    // Status through the edge says sold out too.
    let st = get(&o.http, &status_url(&e.url, &c)).await;
    assert_eq!(
        (st.json()["state"].as_str(), st.json()["remaining"].as_i64()),
        (Some("sold_out"), Some(0))
    );
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sold_out_at_origin_reaches_the_edge_within_the_bound_and_clears_on_restock() {
    let stock = 2;
    let (o, c, e) = sale_behind_edge(stock as i64, EdgeSettings::default()).await;
    let ttl = Duration::from_millis(EdgeSettings::default().ttl_ms);
    // The edge caches "active".
    let st = get(&o.http, &status_url(&e.url, &c)).await;
    assert_eq!(st.json()["state"], "active");

    // The campaign sells out at the origin (claims not through this edge).
    sell_out_at_origin(&o, &c, stock).await;
    let seen = until_state(&o.http, &e.url, &c, "sold_out", Instant::now()).await;
    println!("sold-out flag reached the edge after {seen:?} (bound: TTL {ttl:?} + one round trip)");
    // The bound is TTL + one round trip; 750 ms leaves room for a loaded machine's round trip
    // and the 20 ms polling, and still fails if the edge waits a second TTL.
    assert!(seen <= ttl + Duration::from_millis(750), "took {seen:?}");

    // From then on claims are answered at the edge; the origin receives none of them but those
    // the edge's winners filter cannot tell from a winner's (about 1 in 256; the origin answers
    // them sold_out).
    let filter = winners_filter_of(&o, &c).await;
    let (before, mut passed) = (o.claim_requests(), 0);
    for _ in 0..20 {
        let late = unique("late");
        let lucky = filter.may_contain(&late);
        passed += u64::from(lucky);
        let r = edge_claim(&o, &e.url, &c, &late, "k").await;
        let by = if lucky { "origin" } else { "edge" };
        assert_eq!((r.status, r.by.as_str()), (409, by));
        assert_eq!(r.body, br#"{"result":"sold_out"}"#);
    }
    assert_eq!(o.claim_requests() - before, passed);

    // Units come back (a restock through the admin API): the sold-out state clears at the
    // edge within the bound.
    let (code, body) = o.change(&c, ChangeRequest::restock(2)).await;
    assert_eq!(code, 200, "{body}");
    let seen = until_state(&o.http, &e.url, &c, "active", Instant::now()).await;
    println!("restock reached the edge after {seen:?}");
    // The bound is TTL + one round trip; 750 ms leaves room for a loaded machine's round trip
    // and the 20 ms polling, and still fails if the edge waits a second TTL.
    assert!(seen <= ttl + Duration::from_millis(750), "took {seen:?}");

    // Claims flow again: reach the origin and win.
    let before = o.claim_requests();
    let r = edge_claim(&o, &e.url, &c, &unique("after-restock"), "k").await;
    assert_eq!(
        (r.status, r.by.as_str()),
        (201, "origin"),
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(o.claim_requests() - before, 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn origin_down_gives_503_for_claims_and_stale_status_within_max_stale() {
    let settings = EdgeSettings {
        ttl_ms: 300,
        max_stale_ms: 3_000,
        timeout_ms: 1_000,
        ..Default::default()
    };
    let (o, c, e) = sale_behind_edge(5, settings).await;
    let fresh = get(&o.http, &status_url(&e.url, &c)).await;
    assert_eq!(fresh.status, 200);
    let token = o.token(&unique("bob"));
    let http = o.http.clone();
    o.stop().await;
    let stopped = Instant::now();
    // The scenario: the edge's copy ages past its TTL (300 ms) while the origin is down.
    tokio::time::sleep(Duration::from_millis(400)).await;

    // Status: the last known one, marked stale, until max-stale.
    let stale = get(&http, &status_url(&e.url, &c)).await;
    assert_eq!((stale.status, stale.by.as_str()), (200, "edge"));
    assert_eq!(stale.header("flashgate-stale"), Some("1"));
    assert_eq!(stale.body, fresh.body);
    let age: u64 = stale
        .header("flashgate-status-age-ms")
        .unwrap()
        .parse()
        .unwrap();
    assert!((300..3_000).contains(&age), "age {age}");

    // Claims: 503 with Retry-After, never a made-up answer.
    let req = ClaimReq {
        token: Some(token),
        key: Some("k".into()),
        content_type: Some("application/json"),
        body: b"{}".to_vec(),
    };
    let r = send_claim(&http, &e.url, &c, &req, false).await;
    assert_eq!((r.status, r.by.as_str()), (503, "edge"));
    assert_eq!(r.json()["result"], "unavailable");
    assert_eq!(r.header("retry-after"), Some("1"));

    // Past max-stale: no status to serve.
    // The scenario: the copy ages past max-stale (3 s), so the wait is on purpose.
    let wait = Duration::from_millis(3_300).saturating_sub(stopped.elapsed());
    tokio::time::sleep(wait).await;
    let gone = get(&http, &status_url(&e.url, &c)).await;
    assert_eq!((gone.status, gone.by.as_str()), (503, "edge"));
    assert_eq!(gone.header("retry-after"), Some("1"));
}
