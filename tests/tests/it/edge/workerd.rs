//! The edge worker in the real runtime: the built worker (edge-worker/build) inside workerd via
//! Miniflare, in front of a real origin over real PostgreSQL and Redis. Requests are truly
//! concurrent where the behaviour is about concurrency. Origin-side effects are read from the
//! origin's own counters (`flashgate_status_requests_total`, `flashgate_claim_requests_total`).
//!
//! The rate limits held across isolates are shown with two copies of the worker in one plain
//! workerd (two isolates sharing the rate-limit bindings' stand-in), in front of the small
//! fake waiting-room origin (`flashgate_tests::support::fake_room`), which counts what reaches it.
//!
//! The worker is built once per run (`edge_tools_install` + `edge_build` of
//! scripts/lib/edge.sh) unless `FLASHGATE_EDGE_PREBUILT=1` says a caller already built it.

use std::time::{Duration, Instant};

use flashgate_shared::admission::{mint_admission, sign_ticket};
use flashgate_shared::api::ChangeRequest;
use flashgate_shared::queue::{ADMISSION_HEADER, TICKET_HEADER};
use flashgate_tests::support::fake_room::{start_fake, status_body, ticket, Shared};
use flashgate_tests::support::unique;
use flashgate_tests::support::until_state;
use flashgate_tests::support::{
    claims_at_once, edge_claim, edge_with as edge, get, sale_behind_edge, sell_out_at_origin,
    send_claim, status_url, winners_filter_of, ClaimReq, EdgeRuntime, EdgeSettings, Reply,
};
use flashgate_tests::support::{
    reply, repo_root, test_config, token_for, TestEdge, TEST_EDGE_SECRET,
};
use futures::future::join_all;
use serde_json::json;

const K: &[u8] = TEST_EDGE_SECRET.as_bytes();

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

/// wrangler.toml's budgets held across isolates, per customer per 10 s: joins answered with a
/// new ticket (`FLASHGATE_JOIN_LIMITER`) and claims forwarded (`FLASHGATE_CLAIM_LIMITER`).
const JOIN_BUDGET: usize = 20;
const CLAIM_BUDGET: usize = 50;
/// wrangler.toml's budget per client IP per 10 s (`FLASHGATE_IP_LIMITER`).
const IP_BUDGET: usize = 500;
const METRICS_TOKEN: &str = "rate-limit-metrics";

/// Two copies of the worker (two isolates) in one plain workerd in front of a fake waiting room
/// `drop` that admits 1,000 a second (its pace refuses nothing). Their local buckets allow a
/// second's burst as large as a whole budget (20 joins, 50 claims, 500 per IP a second), so that only the
/// budgets held across isolates can refuse a customer who spreads her requests. With
/// `without_bindings`, the repository's wrangler.toml is read without its `[[ratelimits]]` and
/// with these lines added to its `[vars]`.
async fn two_isolates(without_bindings: Option<&str>) -> (Shared, TestEdge) {
    let fake: Shared = Default::default();
    let room = json!({"now_serving": 1_000_000, "admit_per_second": 1_000,
        "admission_ttl_seconds": 120});
    let status = status_body("drop", "active", 100, Some(room));
    fake.lock().unwrap().statuses.insert("drop".into(), status);
    let origin = start_fake(fake.clone()).await;
    let mut env = vec![
        ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.to_string()),
        ("FLASHGATE_EDGE_METRICS_TOKEN", METRICS_TOKEN.to_string()),
        ("FLASHGATE_LIMIT_JOINS_PER_S", JOIN_BUDGET.to_string()),
        ("FLASHGATE_LIMIT_CLAIMS_PER_S", CLAIM_BUDGET.to_string()),
        ("FLASHGATE_LIMIT_IP_PER_S", IP_BUDGET.to_string()),
    ];
    let path = without_bindings.map(wrangler_without_bindings);
    if let Some(path) = &path {
        env.push(("FLASHGATE_WRANGLER_TOML", path.display().to_string()));
    }
    let edge = TestEdge::start_isolates(&origin, &env, 2);
    if let Some(path) = path {
        let _ = std::fs::remove_file(path);
    }
    assert_eq!(edge.isolates.len(), 2);
    (fake, edge)
}

/// `per_isolate` requests of `customer` sent at once to each isolate of `bases` (joins of
/// `drop`, or claims with an admission token); the statuses of each isolate's answers. Every 429
/// is checked as the edge's `rate_limited` with `Retry-After` `retry_s`.
async fn spread(
    bases: &[String],
    customer: &str,
    claims: bool,
    per_isolate: usize,
    retry_s: &str,
) -> Vec<Vec<u16>> {
    let http = reqwest::Client::new();
    let token = token_for(&test_config(), customer);
    let now = chrono::Utc::now().timestamp();
    let admission = mint_admission(K, &ticket("drop", customer, 1), now, 120);
    let send = |base: String| {
        let path = if claims { "claims" } else { "queue" };
        let mut req = http
            .post(format!("{base}/api/v1/campaigns/drop/{path}"))
            .bearer_auth(&token);
        if claims {
            req = req
                .header("idempotency-key", unique("k"))
                .header("content-type", "application/json")
                .header(ADMISSION_HEADER, &admission)
                .body("{}");
        }
        async move { reply(req.send().await.expect("request")).await }
    };
    let all = join_all(bases.iter().flat_map(|base| {
        let send = &send;
        (0..per_isolate).map(move |_| send(base.clone()))
    }))
    .await;
    for r in all.iter().filter(|r| r.status == 429) {
        let got = (
            r.by.as_str(),
            r.json()["result"].clone(),
            r.header("retry-after"),
        );
        assert_eq!(got, ("edge", json!("rate_limited"), Some(retry_s)));
    }
    all.chunks(per_isolate)
        .map(|c| c.iter().map(|r| r.status).collect())
        .collect()
}

/// How many of `statuses` (of every isolate) are `code`.
fn count(statuses: &[Vec<u16>], code: u16) -> usize {
    statuses.iter().flatten().filter(|&&s| s == code).count()
}

/// `flashgate_edge_shared_limit_total{budget,outcome}` summed over the isolates.
async fn shared_counts(e: &TestEdge, budget: &str, outcome: &str) -> u64 {
    let http = reqwest::Client::new();
    let line =
        format!("flashgate_edge_shared_limit_total{{budget=\"{budget}\",outcome=\"{outcome}\"}} ");
    let mut total = 0;
    for base in &e.isolates {
        let text = http
            .get(format!("{base}/__flashgate/metrics"))
            .bearer_auth(METRICS_TOKEN)
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text");
        total += text
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .map_or(0, |n| n.parse::<u64>().expect("a count"));
    }
    total
}

/// A customer who spreads her joins and her forwarded claims over two isolates is held to the
/// one budget of the rate-limit bindings (exactly, within the 10 s period), answered 429 with
/// `Retry-After` of the period; another customer has her own budget, a crowd behind one address
/// shares the address's, and a ticket presented again does not ask the binding.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn isolates_share_the_budgets_of_the_rate_limit_bindings() {
    let (fake, e) = two_isolates(None).await;
    // 15 joins at each isolate: each alone would take them all (15 < 20 a second).
    let joins = spread(&e.isolates, "ana", false, 15, "10").await;
    assert_eq!(
        (count(&joins, 201), count(&joins, 429)),
        (JOIN_BUDGET, 30 - JOIN_BUDGET)
    );
    assert!(joins.iter().all(|at| at.contains(&201)), "{joins:?}");
    let bob = spread(&e.isolates, "bob", false, 1, "10").await;
    assert_eq!(bob, vec![vec![201], vec![201]]);
    // 30 claims at each isolate: exactly the budget reaches the origin.
    let claims = spread(&e.isolates, "ana", true, 30, "10").await;
    assert_eq!(
        (count(&claims, 201), count(&claims, 429)),
        (CLAIM_BUDGET, 60 - CLAIM_BUDGET)
    );
    assert_eq!(fake.lock().unwrap().claims.len(), CLAIM_BUDGET);
    // Every refusal came from a binding (Retry-After: one period), counted by the isolates.
    assert_eq!(shared_counts(&e, "joins", "passed").await, 22);
    assert_eq!(shared_counts(&e, "joins", "refused").await, 10);
    assert_eq!(shared_counts(&e, "claims", "passed").await, 50);
    assert_eq!(shared_counts(&e, "claims", "refused").await, 10);
    assert_eq!(shared_counts(&e, "joins", "failed").await, 0);
    // 300 customers at each isolate from one address (`CF-Connecting-IP`, passed on by plain
    // workerd as Cloudflare sets it): the address's budget.
    let http = reqwest::Client::new();
    let config = test_config();
    let crowd = join_all(e.isolates.iter().enumerate().flat_map(|(n, base)| {
        let (http, config) = (&http, &config);
        (0..300).map(move |i| {
            let req = http
                .post(format!("{base}/api/v1/campaigns/drop/queue"))
                .bearer_auth(token_for(config, &format!("crowd-{n}-{i}")))
                .header("cf-connecting-ip", "203.0.113.7");
            async move { reply(req.send().await.expect("join")).await }
        })
    }))
    .await;
    let (passed, refused) = crowd
        .iter()
        .partition::<Vec<&Reply>, _>(|r| r.status == 201);
    assert_eq!((passed.len(), refused.len()), (IP_BUDGET, 600 - IP_BUDGET));
    assert!(refused
        .iter()
        .all(|r| r.status == 429 && r.header("retry-after") == Some("10")));
    assert_eq!(shared_counts(&e, "ip", "refused").await, 100);
    let again = http
        .post(format!("{}/api/v1/campaigns/drop/queue", e.isolates[1]))
        .bearer_auth(token_for(&test_config(), "ana"))
        .send()
        .await
        .expect("join");
    assert_eq!(again.status(), 429);
    assert_eq!(again.headers()["retry-after"], "10");
    // Her ticket presented again is answered from what the edge holds, without the binding.
    let hers = sign_ticket(K, &ticket("drop", "ana", 1));
    let shown = http
        .post(format!("{}/api/v1/campaigns/drop/queue", e.isolates[1]))
        .bearer_auth(token_for(&test_config(), "ana"))
        .header(TICKET_HEADER, &hers)
        .send()
        .await
        .expect("join");
    assert_eq!(shown.status(), 200);
    assert_eq!(shared_counts(&e, "joins", "refused").await, 11);
}

/// A copy of the repository's wrangler.toml without its `[[ratelimits]]`, with `vars` added to
/// its `[vars]`, written to a temporary file (its path).
fn wrangler_without_bindings(vars: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(repo_root().join("wrangler.toml")).expect("wrangler.toml");
    assert!(text.contains("[[ratelimits]]"));
    let mut in_limits = false;
    let mut kept = String::new();
    for line in text.lines() {
        if line.starts_with('[') {
            in_limits = line.trim() == "[[ratelimits]]";
        }
        if !in_limits {
            kept.push_str(line);
            kept.push('\n');
            if line.trim() == "[vars]" {
                kept.push_str(vars);
            }
        }
    }
    let path = std::env::temp_dir().join(format!("{}.toml", unique("wrangler")));
    std::fs::write(&path, kept).expect("write wrangler.toml");
    path
}

/// Without `[[ratelimits]]` in wrangler.toml, each isolate holds a customer to its own local
/// buckets: spread over two she gets twice a bucket, and one isolate alone still refuses her
/// past it (429 with the bucket's `Retry-After` of a second); nothing asks a binding.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_bindings_each_isolate_keeps_its_own_buckets() {
    let (fake, e) = two_isolates(Some("")).await;
    let joins = spread(&e.isolates, "ana", false, 15, "1").await;
    assert_eq!(count(&joins, 201), 30, "{joins:?}");
    let claims = spread(&e.isolates, "ana", true, 30, "1").await;
    assert_eq!(count(&claims, 201), 60, "{claims:?}");
    assert_eq!(fake.lock().unwrap().claims.len(), 60);
    // 60 more joins at one isolate at once: past its bucket of 20 a second (5 left), refused
    // with the bucket's Retry-After.
    let more = spread(&e.isolates[..1], "ana", false, 60, "1").await;
    assert!(count(&more, 429) > 0, "{more:?}");
    assert_eq!(shared_counts(&e, "joins", "passed").await, 0);
    assert_eq!(shared_counts(&e, "claims", "passed").await, 0);
}

/// A binding that fails (here: a binding of the join budget's name that is no rate limiter)
/// does not block customers: the local verdict stands, and each failure is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_binding_leaves_the_local_verdict_and_is_counted() {
    let (_fake, e) = two_isolates(Some("FLASHGATE_JOIN_LIMITER = \"not a rate limiter\"\n")).await;
    let joins = spread(&e.isolates, "ana", false, 15, "1").await;
    assert_eq!(count(&joins, 201), 30, "{joins:?}");
    assert_eq!(shared_counts(&e, "joins", "failed").await, 30);
    assert_eq!(shared_counts(&e, "joins", "passed").await, 0);
}
