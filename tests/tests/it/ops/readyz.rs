//! `/readyz` against a real origin, PostgreSQL and Redis (one server, or the cluster in the
//! cluster leg of scripts/test): ready, degraded while a gate loads, not ready while a gate is
//! lost, and no flap once ready while many gates reload under concurrent probes. Each test
//! runs on a database and a Redis database of its own, so the campaigns other tests leave in
//! the suite database are not what it measures.

use std::time::Duration;

use flashgate_origin::config::Config;
use flashgate_origin::gate::{load, Gate, Keys};
use flashgate_tests::support::{
    eventually, lose_redis_state, own_services, redis_of, test_config, unique, OwnServices,
    TestOrigin,
};
use futures::future::join_all;
use redis::AsyncCommands;
use serde_json::Value;

/// Deadline of the polls in these tests.
const WAIT: Duration = Duration::from_secs(20);

/// An origin on services of its own ([`own_services`]: a database, and a Redis database, the
/// shared database 0 on a cluster); returns it, its configuration and its services.
async fn origin_on_own_services(tag: &str) -> (TestOrigin, Config, OwnServices) {
    let own = own_services(test_config(), tag).await;
    let config = own.config.clone();
    (TestOrigin::start_with(config.clone()).await, config, own)
}

/// `GET /readyz` of `o`: status and body.
async fn probe(o: &TestOrigin) -> (u16, Value) {
    let r = o
        .http
        .get(format!("{}/readyz", o.url))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Polls `/readyz` of `o` until it answers 200 `{"status":"ready"}`.
async fn until_ready(o: &TestOrigin, what: &str) {
    eventually(what, WAIT, || async {
        match probe(o).await {
            (200, b) if b["status"] == "ready" => Ok(()),
            (s, b) => Err(format!("readyz {s} {b}")),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_reports_a_lost_gate_and_reloads_it_without_any_claim() {
    let (o, config, own) = origin_on_own_services("readyz_lost").await;
    let c = o.campaign("sale", 4).await;
    until_ready(&o, "readyz before the loss").await;
    let mut r = redis_of(&config).await;
    let loaded_at: String = r.get(Keys::of(&c).loaded).await.unwrap();
    lose_redis_state(&config, &[&c], &[]).await;
    let (first, body) = probe(&o).await;
    assert_eq!(first, 503, "a lost gate is not ready: {body}");
    assert_eq!(body["status"], "not_ready");
    assert_eq!(body["gate_loaded"], false);
    assert_eq!(body["gates"]["lost"], 1, "{body}");
    until_ready(&o, "readyz to recover").await;
    let reloaded_at: String = r.get(Keys::of(&c).loaded).await.unwrap();
    assert_ne!(reloaded_at, loaded_at, "the lost gate was loaded again");
    let remaining: i64 = r.get(Keys::of(&c).remaining).await.unwrap();
    assert_eq!(remaining, 4, "the gate was reloaded from PostgreSQL");
    let (s, _) = o.claim(&c, &unique("ana"), "k").await;
    assert_eq!(s, 201);
    o.stop().await;
    own.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_degraded_not_down_while_a_gate_loads() {
    let (o, config, own) = origin_on_own_services("readyz_loading").await;
    let (c, other) = (o.campaign("sale", 4).await, o.campaign("giveaway", 4).await);
    until_ready(&o, "readyz before the load").await;
    // A load under way: its lock held, the gate not loaded yet.
    let mut r = redis_of(&config).await;
    let k = Keys::of(&c);
    let _: () = redis::pipe()
        .set_ex(&k.loading, "a load elsewhere", 30)
        .del(&k.loaded)
        .query_async(&mut r)
        .await
        .unwrap();
    let (s, body) = probe(&o).await;
    assert_eq!(
        s, 200,
        "a gate that is loading keeps the origin in rotation: {body}"
    );
    assert_eq!(body["status"], "degraded");
    assert_eq!(body["gate_loaded"], false);
    assert_eq!(body["gates"]["loading"], 1, "{body}");
    assert_eq!(body["gates"]["loaded"], 1, "{body}");
    // Its claims wait for the load (503 + Retry-After); the other campaign sells.
    let (s, _) = o.claim(&c, &unique("ana"), "k").await;
    assert_eq!(s, 503);
    let (s, _) = o.claim(&other, &unique("bo"), "k").await;
    assert_eq!(s, 201);
    // The load "elsewhere" died without finishing: the lock goes, the gate is lost, and the
    // origin loads it.
    let _: () = r.del(&k.loading).await.unwrap();
    until_ready(&o, "readyz once the gate is loaded").await;
    let remaining: i64 = r.get(&k.remaining).await.unwrap();
    assert_eq!(remaining, 4);
    o.stop().await;
    own.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_ready_origin_stays_ready_while_many_gates_reload_under_concurrent_probes() {
    let (o, config, own) = origin_on_own_services("readyz_many").await;
    let mut campaigns = Vec::new();
    for i in 0..12 {
        campaigns.push(o.campaign("sale", 5 + i).await);
        campaigns.push(o.sharded_campaign("giveaway", 400 + i, 4).await);
    }
    let names: Vec<&str> = campaigns.iter().map(String::as_str).collect();
    // Every gate lost at once; rounds of 16 concurrent probes (several balancers) reload them.
    lose_redis_state(&config, &names, &[]).await;
    let round = || join_all((0..16).map(|_| probe(&o)));
    eventually("a round of probes all ready", WAIT, || async {
        let not_ready: Vec<_> = round()
            .await
            .into_iter()
            .filter(|(s, b)| *s != 200 || b["status"] != "ready")
            .collect();
        match not_ready.first() {
            None => Ok(()),
            Some(p) => Err(format!("{} probes not ready, e.g. {p:?}", not_ready.len())),
        }
    })
    .await;
    // Once ready, it stays ready: no probe finds a gate unloaded (lost, or loading again), and
    // no gate is loaded again. ("degraded" with gates counted `unreachable` is a probe whose
    // Redis answers took longer than its budget on a busy machine: still in rotation.)
    let first = loaded_at_all(&config, &names).await;
    for _ in 0..20 {
        for (s, b) in round().await {
            assert_eq!(s, 200, "{b}");
            assert!(b["status"] == "ready" || b["status"] == "degraded", "{b}");
            for unloaded in ["lost", "loading"] {
                assert!(b["gates"].get(unloaded).is_none(), "{b}");
            }
        }
    }
    // The scenario: time for a reload to show if one were coming; an absence cannot be polled.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        loaded_at_all(&config, &names).await,
        first,
        "no gate was loaded again"
    );
    o.stop().await;
    own.release().await;
}

/// The `loaded` time of shard 0 of each campaign.
async fn loaded_at_all(config: &Config, campaigns: &[&str]) -> Vec<Option<String>> {
    let mut r = redis_of(config).await;
    let mut at = Vec::new();
    for c in campaigns {
        at.push(r.get(Keys::of(c).loaded).await.unwrap());
    }
    at
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_for_a_gate_seen_unloaded_leaves_a_loaded_gate_alone() {
    // What a probe or a claim that saw the gate unloaded just before another load finished
    // does: `load_missing` checks again under the load lock and leaves the gate loaded (a full
    // reload would unload every shard for its duration: the /readyz flap). A reload on purpose
    // (`load`) still replaces it.
    let (o, config, own) = origin_on_own_services("readyz_missing").await;
    let c = o.sharded_campaign("giveaway", 40, 4).await;
    let mut gate = Gate::new(redis_of(&config).await);
    let db = flashgate_origin::db::Db::from(o.db.clone());
    let at = loaded_at_all(&config, &[&c]).await;
    assert!(at[0].is_some(), "loaded at creation");
    let loaded = load::load_missing(&db, &mut gate, &c).await.unwrap();
    assert!(!loaded, "a loaded gate is not loaded again");
    assert_eq!(loaded_at_all(&config, &[&c]).await, at);
    let loaded = load::load(&db, &mut gate, &c).await.unwrap();
    assert!(loaded, "a reload on purpose replaces the gate");
    assert_ne!(loaded_at_all(&config, &[&c]).await, at);
    // One shard lost: `load_missing` loads the gate again, every shard.
    let mut r = redis_of(&config).await;
    let _: () = r.del(Keys::shard(&c, 2).loaded).await.unwrap();
    let before = loaded_at_all(&config, &[&c]).await;
    assert!(load::load_missing(&db, &mut gate, &c).await.unwrap());
    assert_ne!(loaded_at_all(&config, &[&c]).await, before);
    assert!(load::is_loaded(&mut gate, &c).await.unwrap());
    o.stop().await;
    own.release().await;
}
