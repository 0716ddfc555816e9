//! Webhook delivery under faults, against the reference-library receiver
//! (scripts/webhook-receiver), real PostgreSQL and Redis, and two origins relaying at once on a
//! database of their own: the receiver answers 500, then 429 with `Retry-After`, then comes
//! back slowly; one origin is killed (its runtime dropped where it stands: no shutdown, no
//! settling) while its calls are in flight. Every event is delivered, none is lost, the
//! duplicates are counted and come only from calls in flight at the kill (one at most each),
//! and a receiver that applies claim events by sequence number ends with PostgreSQL's claims.
//!
//! The 410 that disables an endpoint: webhooks_receiver.rs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use flashgate_origin::config::Config;
use flashgate_shared::api::{PayRequest, ReleaseRequest};
use flashgate_tests::support::{eventually, own_services, test_config, unique, TestOrigin};
use flashgate_tests::webhooks::{self, register, Received, Receiver, ALL_TYPES};
use serde_json::json;
use sqlx::PgPool;

/// The `Retry-After` of the receiver's 429s, in seconds.
const RETRY_AFTER: u64 = 2;
/// How long the receiver holds each call once it is back, so that calls are in flight at the
/// kill, in seconds.
const SLOW_ANSWER: f64 = 2.0;
/// Calls one origin has in flight to one endpoint at most (the relay's `PER_ENDPOINT`): more
/// open calls than this at the receiver means both origins have some.
const PER_ENDPOINT: u64 = flashgate_origin::webhooks::relay::PER_ENDPOINT as u64;

/// An origin on its own runtime and thread, that can be killed: its runtime is dropped with
/// every task where it stands (requests, relay calls, timers), as a SIGKILL would leave them.
struct Doomed {
    kill: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Doomed {
    fn start(config: Config) -> Self {
        let (up_tx, up_rx) = std::sync::mpsc::channel();
        let (kill, kill_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            let origin = rt
                .block_on(flashgate_origin::server::spawn(config))
                .expect("origin starts");
            up_tx.send(()).expect("started");
            let _ = kill_rx.recv();
            rt.shutdown_background();
            drop(origin);
        });
        up_rx.recv().expect("the doomed origin starts");
        Doomed { kill, thread }
    }

    fn kill(self) {
        self.kill.send(()).expect("kill");
        self.thread.join().expect("the doomed origin's thread ends");
    }
}

async fn pay(o: &TestOrigin, id: &str) {
    let token = o.config.service_token.expose().to_string();
    let body = PayRequest {
        payment_ref: "psp-f".into(),
    };
    let (s, b) = o.claim_action(id, "pay", &token, &body).await;
    assert_eq!(s, 200, "pay {id}: {b}");
}

async fn release(o: &TestOrigin, id: &str) {
    let token = o.config.service_token.expose().to_string();
    let body = ReleaseRequest {
        reason: Some("customer_cancelled".into()),
    };
    let (s, b) = o.claim_action(id, "release", &token, &body).await;
    assert_eq!(s, 200, "release {id}: {b}");
}

async fn extend(o: &TestOrigin, id: &str) {
    let (s, b) = webhooks::extend(o, id).await;
    assert_eq!(s, 200, "extend {id}: {b}");
}

async fn claim(o: &TestOrigin, c: &str, who: &str) -> String {
    let (s, body) = o.claim(c, &unique(who), &unique("key")).await;
    assert_eq!(s, 201, "{body}");
    body["claim"]["id"].as_str().expect("claim id").to_string()
}

/// Every event id written so far.
async fn events(db: &PgPool) -> Vec<String> {
    sqlx::query_scalar("SELECT id::text FROM webhook_events ORDER BY id")
        .fetch_all(db)
        .await
        .expect("events")
}

/// Waits until every event written has `n` answers `status` at the receiver.
async fn each_answered(r: &Receiver, db: &PgPool, status: u16, n: usize, what: &str) {
    eventually(what, Duration::from_secs(60), || async {
        let mut count: HashMap<String, usize> = HashMap::new();
        for e in r.all().await.into_iter().filter(|e| e.answered == status) {
            *count.entry(e.id).or_default() += 1;
        }
        let short = events(db)
            .await
            .into_iter()
            .filter(|id| count.get(id).copied().unwrap_or(0) < n)
            .count();
        (short == 0)
            .then_some(())
            .ok_or(format!("{short} events short"))
    })
    .await;
}

/// Delivery rows not delivered yet.
async fn undelivered(db: &PgPool) -> Result<usize, String> {
    let n: i64 =
        sqlx::query_scalar("SELECT count(*) FROM webhook_deliveries WHERE status <> 'delivered'")
            .fetch_one(db)
            .await
            .map_err(|e| e.to_string())?;
    Ok(n as usize)
}

/// Rows taken and not settled: pending, leased by a take (`next_attempt_at` is exactly the
/// lease, 31 s, after `last_attempt_at`).
async fn leased(db: &PgPool) -> BTreeSet<String> {
    sqlx::query_scalar(
        "SELECT event_id::text FROM webhook_deliveries
          WHERE status = 'pending' AND next_attempt_at - last_attempt_at = interval '31 seconds'",
    )
    .fetch_all(db)
    .await
    .expect("leased rows")
    .into_iter()
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_event_survives_500s_429s_and_a_relay_killed_mid_call_in_order_by_sequence() {
    let own = own_services(test_config(), "wh_faults").await;
    let config = own.config.clone();
    let o = TestOrigin::start_with(config.clone()).await;
    let doomed = Doomed::start(config);
    let db = &o.db;
    let r = Receiver::start().await;
    let mut types = ALL_TYPES.to_vec();
    types.push("claim.extended");
    let (_, secret) = register(&o, &r.url(), &types).await;
    r.secrets(&[&secret]).await;

    // 1. The receiver answers 500. With the tests' retry divisor (1,000), every event gets two
    //    500s: what 30 s of 500s costs an event in production (the attempts at 0 s and 5 s).
    //    A mix of hold, pay, release, extend and expire, on a sale of 4 s holds.
    r.plan(json!([]), 500).await;
    let c1 = o.held_sale(12, 4).await;
    let (s, body) = o.change(&c1, json!({"hold_extension_seconds": 300})).await;
    assert_eq!(s, 200, "{body}");
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(claim(&o, &c1, &format!("f{i}")).await);
    }
    for id in &ids[6..10] {
        extend(&o, id).await;
    }
    for id in &ids[0..3] {
        pay(&o, id).await;
    }
    for id in &ids[3..6] {
        release(&o, id).await;
    }
    pay(&o, &ids[6]).await;
    pay(&o, &ids[7]).await;
    release(&o, &ids[8]).await;
    // ids[9] stays held (extended); ids[10] and ids[11] expire.
    eventually("two holds to expire", Duration::from_secs(60), || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM claims WHERE campaign_id = $1 AND status = 'expired'",
        )
        .bind(&c1)
        .fetch_one(db)
        .await
        .map_err(|e| e.to_string())?;
        (n == 2).then_some(()).ok_or(format!("{n} expired"))
    })
    .await;
    each_answered(&r, db, 500, 2, "two 500s for every event").await;

    // 2. Then 429 with Retry-After, until every event had one.
    r.plan(
        json!([]),
        json!({"status": 429, "retry_after": RETRY_AFTER}),
    )
    .await;
    each_answered(&r, db, 429, 1, "a 429 for every event").await;

    // 3. Back, slowly; a burst of 40 claims; the doomed origin is killed while both origins
    //    have calls open at the receiver.
    r.plan(json!([]), json!({"status": 200, "delay": SLOW_ANSWER}))
        .await;
    let c2 = o.held_sale(40, 600).await;
    let who: Vec<String> = (0..40).map(|i| format!("b{i}")).collect();
    futures::future::join_all(who.iter().map(|w| claim(&o, &c2, w))).await;
    eventually(
        "calls of both origins open at the receiver",
        Duration::from_secs(60),
        || async {
            let open = r.open().await;
            (open > PER_ENDPOINT)
                .then_some(())
                .ok_or(format!("{open} open"))
        },
    )
    .await;
    tokio::task::spawn_blocking(move || doomed.kill())
        .await
        .expect("killed");
    let at_kill = leased(db).await;
    assert!(!at_kill.is_empty(), "calls were in flight at the kill");
    r.plan(json!([]), 200).await;

    // The survivor delivers the rest; the killed origin's rows wait for their lease to end.
    let all = events(db).await;
    eventually(
        "every event but the killed origin's delivered",
        Duration::from_secs(60),
        || async {
            let left = undelivered(db).await?;
            let orphans = leased(db).await.len();
            (left == orphans && r.open().await == 0)
                .then_some(())
                .ok_or(format!("{left} not delivered, {orphans} leased"))
        },
    )
    .await;
    let orphans = leased(db).await;
    eventually(
        "every delivery row delivered",
        Duration::from_secs(90),
        || async {
            let left = undelivered(db).await?;
            (left == 0).then_some(()).ok_or(format!("{left} left"))
        },
    )
    .await;

    // None lost: every event has its 2xx at the receiver, verified by the library.
    let got = r.all().await;
    let mut ok: BTreeMap<String, usize> = BTreeMap::new();
    for e in got.iter().filter(|e| (200..300).contains(&e.answered)) {
        assert_eq!(e.verified, vec![0], "the library verified {}", e.id);
        *ok.entry(e.id.clone()).or_default() += 1;
    }
    let missing: Vec<&String> = all.iter().filter(|id| !ok.contains_key(*id)).collect();
    assert!(missing.is_empty(), "events never delivered: {missing:?}");
    let dups: BTreeMap<&String, usize> = ok
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, n)| (id, n - 1))
        .collect();
    let refused = |s: u16| got.iter().filter(|e| e.answered == s).count();
    println!(
        "events {}, calls {} (500: {}, 429: {}, 2xx: {}); in flight at the kill (both origins) \
         {}, left by the killed origin {}; duplicates {} (over {} events)",
        all.len(),
        got.len(),
        refused(500),
        refused(429),
        ok.values().sum::<usize>(),
        at_kill.len(),
        orphans.len(),
        dups.values().sum::<usize>(),
        dups.len(),
    );
    for (id, n) in &dups {
        assert_eq!(*n, 1, "at most one duplicate of {id}");
        assert!(
            at_kill.contains(*id),
            "{id} duplicated but not in flight at the kill"
        );
    }

    // Retry-After: no event came back sooner than it asked after a 429.
    let mut by_event: HashMap<&str, Vec<&Received>> = HashMap::new();
    for e in &got {
        by_event.entry(&e.id).or_default().push(e);
    }
    let mut min_gap = f64::MAX;
    for calls in by_event.values() {
        for w in calls.windows(2) {
            if w[0].answered == 429 {
                min_gap = min_gap.min(w[1].at - w[0].at);
            }
        }
    }
    println!("shortest wait after a 429 (Retry-After {RETRY_AFTER} s): {min_gap:.3} s");
    assert!(min_gap >= RETRY_AFTER as f64, "{min_gap} s");

    // Ordering: the receiver applies a claim event only when its sequence is above the last
    // one applied for that claim, in arrival order; it ends with PostgreSQL's claim states.
    let mut model: HashMap<String, (i64, String)> = HashMap::new();
    let (mut older, mut repeated) = (0, 0);
    for e in got.iter().filter(|e| (200..300).contains(&e.answered)) {
        let ev = &e.event;
        if !ev["type"]
            .as_str()
            .unwrap_or_default()
            .starts_with("claim.")
        {
            continue;
        }
        let seq = ev["sequence"].as_i64().expect("sequence");
        let status = ev["data"]["status"].as_str().expect("status").to_string();
        let object = ev["object_id"].as_str().expect("object_id").to_string();
        match model.get(&object) {
            Some((last, _)) if *last > seq => older += 1,
            Some((last, _)) if *last == seq => repeated += 1,
            _ => {
                model.insert(object, (seq, status));
            }
        }
    }
    let pg: Vec<(String, String)> =
        sqlx::query_as("SELECT id, status FROM claims WHERE campaign_id IN ($1, $2) ORDER BY id")
            .bind(&c1)
            .bind(&c2)
            .fetch_all(db)
            .await
            .expect("claims");
    let mut applied: Vec<(String, String)> = model.into_iter().map(|(k, (_, s))| (k, s)).collect();
    applied.sort();
    println!(
        "claims {}; dropped by the receiver's model: older than the last applied {older}, \
         repeated {repeated}",
        pg.len()
    );
    assert_eq!(applied, pg);
    let states: BTreeSet<&str> = pg.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(
        states,
        BTreeSet::from(["expired", "held", "paid", "released"])
    );

    o.stop().await;
    own.release().await;
}
