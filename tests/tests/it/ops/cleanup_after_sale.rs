//! Clean-up after the sale against a real origin, PostgreSQL and Redis: the Redis keys of an
//! ended campaign whose last hold is settled expire after the grace period (shortened here),
//! reconcile still answers from PostgreSQL, and a purge is refused while the campaign is live
//! or holds are outstanding and changes nothing then.
//!
//! Each test runs its origin on a database and a Redis database of its own (database 0,
//! shared, on a cluster: the tests look only at their own campaigns' keys).

use std::time::Duration;

use chrono::Utc;
use flashgate_origin::repair::keys;
use flashgate_shared::api::{CampaignKind, ChangeAction, ChangeRequest, NewCampaign};
use flashgate_tests::support::room;
use flashgate_tests::support::scrape::Scrape;
use flashgate_tests::support::{
    eventually, own_services, queue_config, redis_of, unique, OwnServices, TestOrigin,
};
use reqwest::Method;
use serde_json::Value;

/// Deadline of the polls in these tests.
const WAIT: Duration = Duration::from_secs(60);

/// An origin (signed claims, as behind the edge) on services of its own ([`own_services`]:
/// the clean-up counts every key of its Redis database), keeping ended campaigns' keys
/// `grace_seconds`; returns it and its services.
async fn origin(tag: &str, grace_seconds: u64) -> (TestOrigin, OwnServices) {
    let own = own_services(queue_config(), tag).await;
    let mut config = own.config.clone();
    config.ended_keys_grace_seconds = grace_seconds;
    (TestOrigin::start_with(config).await, own)
}

/// A sale of `stock` units started a minute ago, ending in an hour, holds of `hold_seconds`,
/// a gate of `shards` shards and optionally a waiting room; returns its id.
async fn sale(o: &TestOrigin, stock: i64, hold_seconds: i64, shards: i64, room: bool) -> String {
    let id = unique("clean");
    let now = Utc::now();
    o.create(&NewCampaign {
        id: id.clone(),
        name: format!("Campaign {id}"),
        kind: CampaignKind::Sale,
        stock,
        starts_at: now - chrono::Duration::minutes(1),
        ends_at: now + chrono::Duration::hours(1),
        hold_seconds: Some(hold_seconds),
        hold_extension_seconds: None,
        gate_shards: Some(shards),
        waiting_room: room.then(|| room::room(100)),
        access: None,
        draw: None,
        variants: None,
    })
    .await;
    id
}

/// Every Redis key under campaign `c`'s hash tags, sorted.
async fn keys_of(o: &TestOrigin, c: &str) -> Vec<String> {
    let redis = redis_of(&o.config).await;
    let mut found = Vec::new();
    keys::scan(&redis, &format!("fg:{{{c}*"), |batch| {
        found.extend(
            batch
                .into_iter()
                .filter(|k| keys::campaign_of(k) == Some(c)),
        );
    })
    .await
    .expect("SCAN");
    found.sort();
    found.dedup();
    found
}

/// `flashgate_redis_campaign_keys` of `o`: live, ended, expiring.
async fn keys_by_state(o: &TestOrigin) -> [u64; 3] {
    let m = Scrape::of(&o.http, &o.url).await;
    ["live", "ended", "expiring"].map(|s| m.count("flashgate_redis_campaign_keys", &[("state", s)]))
}

/// Ends campaign `c` now (manager's close); panics unless 200.
async fn close(o: &TestOrigin, c: &str) {
    let (s, b) = o
        .change(c, ChangeRequest::action(ChangeAction::Close))
        .await;
    assert_eq!(s, 200, "{b}");
}

/// `POST /admin/v1/campaigns/{c}/purge` as a manager: status and body.
async fn purge(o: &TestOrigin, c: &str) -> (u16, Value) {
    let path = format!("/admin/v1/campaigns/{c}/purge");
    o.admin(Method::POST, &path, Some(o.manager_token()), None)
        .await
}

/// Claims `n` units of `c` for new customers (signed as the edge); returns the claim ids.
async fn claims(o: &TestOrigin, c: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let r = o.signed_claim(c, &format!("{c}-buyer-{i}"), None).await;
        assert_eq!(r.status, 201, "{}", r.body);
        ids.push(
            r.body["claim"]["id"]
                .as_str()
                .expect("claim id")
                .to_string(),
        );
    }
    ids
}

async fn pay(o: &TestOrigin, claim: &str) {
    let (s, b) = o.pay(claim).await;
    assert_eq!(s, 200, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ended_sale_leaves_no_redis_key_after_the_grace_and_reconcile_still_answers() {
    let (o, db) = origin("cleanup_grace", 1).await;
    // Two shards (hash tags {c} and {c:1}); one hold paid, one left to expire (3 s), a loser.
    let c = sale(&o, 2, 3, 2, false).await;
    let won = claims(&o, &c, 2).await;
    pay(&o, &won[0]).await;
    let lost = o.signed_claim(&c, &format!("{c}-late"), None).await;
    assert_eq!(lost.body["result"], "sold_out", "{}", lost.body);
    // A waiting room's keys, on a campaign nobody claimed.
    let q = sale(&o, 5, 1, 1, true).await;
    let (s, b) = o.join(&q, &format!("{q}-fan")).await;
    assert!(s == 200 || s == 201, "join {s} {b}");
    let before = keys_of(&o, &c).await;
    for family in [":remaining", ":holders", ":idem:", ":sold_out"] {
        assert!(
            before.iter().any(|k| k.contains(family)),
            "{family} in {before:?}"
        );
    }
    assert!(before
        .iter()
        .any(|k| k.starts_with(&format!("fg:{{{c}:1}}:"))));
    let queue_before = keys_of(&o, &q).await;
    assert!(
        queue_before.iter().any(|k| k.contains(":q:seq")),
        "{queue_before:?}"
    );
    // The gauge counts them as live (this database has only these two campaigns).
    let ours = (before.len() + queue_before.len()) as u64;
    eventually("the live keys counted", WAIT, || async {
        match keys_by_state(&o).await {
            [live, 0, 0] if live >= ours => Ok(()),
            seen => Err(format!("live, ended, expiring: {seen:?}; ours {ours}")),
        }
    })
    .await;

    close(&o, &c).await;
    close(&o, &q).await;
    // The hold expires (sweeper), then the grace passes: every key goes.
    for campaign in [&c, &q] {
        eventually("the ended campaign's keys to expire", WAIT, || async {
            match keys_of(&o, campaign).await {
                k if k.is_empty() => Ok(()),
                k => Err(format!("{} keys left: {k:?}", k.len())),
            }
        })
        .await;
    }
    eventually("no key counted", WAIT, || async {
        match keys_by_state(&o).await {
            [0, 0, 0] => Ok(()),
            seen => Err(format!("live, ended, expiring: {seen:?}")),
        }
    })
    .await;
    // PostgreSQL keeps everything: reconcile answers from it, clean, without a gate.
    let r = o.reconcile(&c).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(
        (r["stock"].as_i64(), r["remaining"].as_i64()),
        (Some(2), Some(1)),
        "{r}"
    );
    assert_eq!(r["claims"]["paid"], 1, "{r}");
    assert_eq!(r["claims"]["expired"], 1, "{r}");
    assert_eq!(r["gate"], Value::Null, "{r}");
    // A purge now finds nothing left.
    let (s, b) = purge(&o, &c).await;
    assert_eq!((s, b["keys_deleted"].as_u64()), (200, Some(0)), "{b}");
    o.stop().await;
    db.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_purge_is_refused_while_live_or_held_and_then_deletes_every_key() {
    // The default grace (24 h): nothing expires by itself during the test.
    let (o, db) = origin("cleanup_purge", 86_400).await;
    let c = sale(&o, 3, 600, 1, false).await;
    let held = claims(&o, &c, 2).await;
    pay(&o, &held[0]).await;
    let keys_before = keys_of(&o, &c).await;
    assert!(!keys_before.is_empty());

    let (s, b) = purge(&o, &c).await;
    assert_eq!((s, b["result"].as_str()), (409, Some("conflict")), "{b}");
    assert!(b["message"].as_str().unwrap_or("").contains("live"), "{b}");
    assert_eq!(
        keys_of(&o, &c).await,
        keys_before,
        "a refused purge changes nothing"
    );
    let live = o.signed_claim(&c, &format!("{c}-after"), None).await;
    assert_eq!(live.status, 201, "the gate still sells: {}", live.body);

    close(&o, &c).await;
    let (s, b) = purge(&o, &c).await;
    assert_eq!((s, b["result"].as_str()), (409, Some("conflict")), "{b}");
    assert!(
        b["message"].as_str().unwrap_or("").contains("2 hold(s)"),
        "{b}"
    );
    assert!(!keys_of(&o, &c).await.is_empty());

    let token = o.config.service_token.expose().to_string();
    for claim in [
        &held[1],
        &live.body["claim"]["id"].as_str().unwrap().to_string(),
    ] {
        let body = flashgate_shared::api::ReleaseRequest { reason: None };
        let (s, b) = o.claim_action(claim, "release", &token, &body).await;
        assert_eq!(s, 200, "{b}");
    }
    let n = keys_of(&o, &c).await.len() as u64;
    let (s, b) = purge(&o, &c).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["keys_deleted"].as_u64(), Some(n), "{b}");
    assert_eq!(keys_of(&o, &c).await, Vec::<String>::new());
    let r = o.reconcile(&c).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(
        (r["claims"]["paid"].as_i64(), r["remaining"].as_i64()),
        (Some(1), Some(2))
    );

    let (s, b) = purge(&o, "no-such-campaign").await;
    assert_eq!(s, 404, "{b}");
    o.stop().await;
    db.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn flashgate_admin_purge_exits_refused_while_live_and_ok_once_ended() {
    use flashgate_origin::cli::admin::{run, AdminArgs, AdminCommand};
    use flashgate_origin::cli::exit;
    let (o, db) = origin("cleanup_cli", 86_400).await;
    let c = sale(&o, 2, 600, 1, false).await;
    let purge = |campaign: &str| AdminArgs {
        origin_url: o.url.clone(),
        token: Some(flashgate_origin::secret::Secret::new(o.manager_token())),
        idempotency_key: None,
        command: AdminCommand::Purge {
            campaign: campaign.to_string(),
        },
    };
    let keys_before = keys_of(&o, &c).await;
    assert!(!keys_before.is_empty());
    assert_eq!(run(purge(&c)).await, exit::REFUSED);
    assert_eq!(keys_of(&o, &c).await, keys_before);
    close(&o, &c).await;
    assert_eq!(run(purge(&c)).await, exit::OK);
    assert_eq!(keys_of(&o, &c).await, Vec::<String>::new());
    assert_eq!(run(purge("no-such-campaign")).await, exit::NOT_FOUND);
    o.stop().await;
    db.release().await;
}
