//! The outbox relay against the provider simulator (`provider-sim/`, in-process): with 20 %
//! timeouts and 10 % accept-then-timeout, 1,000 fulfilments end as exactly 1,000 credits, all
//! `delivered`, the outbox drained; two origins relaying at once call the provider once per
//! fulfilment and never credit twice.
//!
//! A delivery whose calls all lose their reply fails, is retried by a manager and delivered
//! once; its delivery history keeps every call, the failure and the retry, in order.
//!
//! Each test's origins run on a database of their own ([`own_services`]): a relay takes every
//! pending row of its database, so relays of two tests side by side on one database would take
//! each other's rows.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use flashgate_provider_sim::{spawn, Faults, Running};
use flashgate_tests::gifts::{campaign, fulfil, key, members, msisdn, retry};
use flashgate_tests::support::{eventually, own_services, test_config, OwnServices, TestOrigin};
use futures::future::join_all;

/// An origin on the test's services `own` whose relay calls `sim`; its lease on a taken row is
/// twice `provider_timeout_ms` plus a second (origin/src/gifts/relay.rs).
async fn relaying_origin(
    own: &OwnServices,
    sim: &Running,
    max_attempts: i32,
    provider_timeout_ms: u64,
) -> TestOrigin {
    let mut config = own.config.clone();
    config.gifts.gift_test_clock = true;
    config.gifts.gift_provider_url = Some(sim.url.clone());
    config.gifts.gift_provider_timeout_ms = provider_timeout_ms;
    config.gifts.gift_delivery_max_attempts = max_attempts;
    config.gifts.gift_retry_base_ms = 20;
    config.gifts.gift_relay_interval_ms = 50;
    config.gifts.gift_relay_batch = 128;
    TestOrigin::start_with(config).await
}

/// Grants one fulfilment to each of `n` new subscribers (waves of 100 at once); returns
/// fulfilment id → msisdn.
async fn grant(o: &TestOrigin, c: &str, n: usize) -> HashMap<String, String> {
    let subscribers: Vec<String> = (0..n).map(|_| msisdn()).collect();
    members(o, c, "s1", &subscribers).await;
    let mut out = HashMap::new();
    for wave in subscribers.chunks(100) {
        for (m, r) in join_all(
            wave.iter()
                .map(|m| async move { (m, fulfil(o, c, &key(), m).await) }),
        )
        .await
        {
            assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
            out.insert(
                r.json()["fulfilment"]["id"].as_str().unwrap().to_string(),
                m.clone(),
            );
        }
    }
    out
}

/// The ledger's credits made under our fulfilments' keys (`ours`: key → msisdn).
fn credits_of<'a>(
    ledger: &'a flashgate_provider_sim::LedgerView,
    ours: &HashMap<String, String>,
) -> Vec<&'a flashgate_provider_sim::Credit> {
    ledger
        .credits
        .iter()
        .filter(|cr| ours.contains_key(&cr.key))
        .collect()
}

/// Waits until no fulfilment of `c` is pending; returns (delivered, failed).
async fn drained(o: &TestOrigin, c: &str) -> (i64, i64) {
    eventually(
        "the outbox of the campaign to drain",
        Duration::from_secs(180),
        || async {
            let (pending, delivered, failed): (i64, i64, i64) = sqlx::query_as(
                "SELECT count(*) FILTER (WHERE o.status = 'pending'),
                    count(*) FILTER (WHERE o.status = 'delivered'),
                    count(*) FILTER (WHERE o.status = 'failed')
               FROM gift_outbox o JOIN gift_ledger l ON l.id = o.fulfilment_id
              WHERE l.campaign_id = $1",
            )
            .bind(c)
            .fetch_one(&o.db)
            .await
            .map_err(|e| e.to_string())?;
            if pending == 0 {
                Ok((delivered, failed))
            } else {
                Err(format!(
                    "{pending} pending, {delivered} delivered, {failed} failed"
                ))
            }
        },
    )
    .await
}

#[tokio::test]
async fn provider_faults_still_end_in_exactly_one_credit_each_and_two_relays_never_credit_twice() {
    let own = own_services(test_config(), "gift_relay").await;
    // 1. 1,000 fulfilments, 20 % timeouts, 10 % accept-then-timeout.
    let sim = spawn(
        "127.0.0.1:0".parse().unwrap(),
        Faults {
            timeout_rate: 0.2,
            error_rate: 0.0,
            accept_then_timeout_rate: 0.1,
            hang_ms: 1_000,
        },
    )
    .await
    .unwrap();
    let o = relaying_origin(&own, &sim, 20, 300).await;
    let c = campaign(&o, &[("s1", 2_000, &[])]).await;
    let ours = grant(&o, &c, 1_000).await;
    assert_eq!(
        drained(&o, &c).await,
        (1_000, 0),
        "every fulfilment delivered"
    );
    let ledger = sim.sim.ledger();
    let credited = credits_of(&ledger, &ours);
    assert_eq!(credited.len(), 1_000, "exactly one credit per fulfilment");
    let subscribers: HashSet<&str> = credited.iter().map(|cr| cr.msisdn.as_str()).collect();
    assert_eq!(subscribers.len(), 1_000, "no subscriber credited twice");
    for cr in &credited {
        assert_eq!(ours[&cr.key], cr.msisdn);
        assert_eq!((cr.amount, cr.currency.as_str()), (2_000, "EGP"));
    }
    let calls: u64 = credited.iter().map(|cr| cr.calls).sum();
    assert!(
        calls > 1_000,
        "faults made the relay call again ({calls} calls)"
    );
    assert!(ledger.timeouts > 0 && ledger.accept_then_timeouts > 0);
    let refs: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT o.provider_ref) FROM gift_outbox o JOIN gift_ledger l ON l.id = o.fulfilment_id
          WHERE l.campaign_id = $1 AND o.provider_ref IS NOT NULL",
    )
    .bind(&c)
    .fetch_one(&o.db)
    .await
    .unwrap();
    assert_eq!(refs, 1_000);
    let metrics = o.origin.state.metrics.render();
    println!(
        "1,000 fulfilments: {calls} provider calls, {} timeouts, {} accept-then-timeout",
        ledger.timeouts, ledger.accept_then_timeouts
    );
    assert!(metrics.contains("flashgate_gift_provider_retries_total"));
    o.stop().await;
    sim.stop();

    // 2. Two origins relaying at once, no fault: one call per fulfilment.
    let sim = spawn("127.0.0.1:0".parse().unwrap(), Faults::none())
        .await
        .unwrap();
    // A lease (5 s) no batch outlasts, even on a loaded machine: the assertion below is that
    // two relays never take the same row, not that a lapsed lease is never taken over (which
    // the relay allows on purpose, the provider's idempotency key making it safe).
    let a = relaying_origin(&own, &sim, 20, 2_000).await;
    let b = relaying_origin(&own, &sim, 20, 2_000).await;
    let c = campaign(&a, &[("s1", 5_000, &[])]).await;
    let (first, second) = futures::join!(grant(&a, &c, 300), async {
        // B grants to subscribers of its own at the same time (same campaign).
        tokio::time::sleep(Duration::from_millis(1)).await;
        grant(&b, &c, 300).await
    });
    let ours: HashMap<String, String> = first.into_iter().chain(second).collect();
    assert_eq!(ours.len(), 600);
    assert_eq!(drained(&a, &c).await, (600, 0));
    let ledger = sim.sim.ledger();
    let credited = credits_of(&ledger, &ours);
    assert_eq!(credited.len(), 600);
    assert!(
        credited.iter().all(|cr| cr.calls == 1),
        "each fulfilment was called once: the relays never took the same row"
    );
    let delivered_by = |o: &TestOrigin| {
        o.origin
            .state
            .metrics
            .render()
            .lines()
            .find(|l| l.starts_with("flashgate_gift_delivered_total "))
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    println!(
        "two relays: origin A delivered {}, origin B {}",
        delivered_by(&a),
        delivered_by(&b)
    );
    a.stop().await;
    b.stop().await;
    sim.stop();

    // 3. A provider that answers 5xx every time: failed after the last attempt; a manager
    //    sees it and retries it once the provider is back.
    let sim = spawn(
        "127.0.0.1:0".parse().unwrap(),
        Faults {
            error_rate: 1.0,
            ..Faults::none()
        },
    )
    .await
    .unwrap();
    let o = relaying_origin(&own, &sim, 4, 300).await;
    let c = campaign(&o, &[("s1", 2_000, &[])]).await;
    let ours = grant(&o, &c, 3).await;
    assert_eq!(drained(&o, &c).await, (0, 3));
    let path = format!("/admin/v1/gift-campaigns/{c}/fulfilments?status=failed");
    let (s, listed) = o
        .admin(reqwest::Method::GET, &path, Some(o.viewer_token()), None)
        .await;
    assert_eq!(s, 200);
    let failed: HashSet<String> = listed["fulfilments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(failed, ours.keys().cloned().collect());
    let calls: u64 = sim.sim.ledger().calls;
    assert!(calls >= 12, "4 attempts each ({calls} calls)");
    assert_eq!(sim.sim.ledger().count, 0);
    sim.sim.set_faults(Faults::none());
    let one = failed.iter().next().unwrap();
    let retry = format!("/admin/v1/fulfilments/{one}/retry");
    let (s, _) = o
        .admin(reqwest::Method::POST, &retry, Some(o.viewer_token()), None)
        .await;
    assert_eq!(s, 403, "a viewer may not retry");
    let (s, b) = o
        .admin(reqwest::Method::POST, &retry, Some(o.manager_token()), None)
        .await;
    assert_eq!((s, b["status"].as_str()), (200, Some("pending")), "{b}");
    assert_eq!(drained(&o, &c).await, (1, 2));
    let (s, _) = o
        .admin(reqwest::Method::POST, &retry, Some(o.manager_token()), None)
        .await;
    assert_eq!(s, 409, "a delivered one is not retried");
    assert_eq!(sim.sim.ledger().count, 1);
    o.stop().await;
    sim.stop();
    own.release().await;
}

/// One history entry as the test compares it: outcome, attempt, answer, actor.
type Entry = (String, Option<i64>, Option<String>, Option<String>);

#[tokio::test]
async fn a_retried_delivery_keeps_every_failed_attempt_in_its_history() {
    let own = own_services(test_config(), "gift_relay").await;
    // Every call credits, then its reply is lost (the provider hangs past the origin's 300 ms
    // timeout): 8 attempts, then `failed`.
    let sim = spawn(
        "127.0.0.1:0".parse().unwrap(),
        Faults {
            accept_then_timeout_rate: 1.0,
            hang_ms: 2_000,
            ..Faults::none()
        },
    )
    .await
    .unwrap();
    let o = relaying_origin(&own, &sim, 8, 300).await;
    let c = campaign(&o, &[("s1", 2_000, &[])]).await;
    let ours = grant(&o, &c, 1).await;
    let id = ours.keys().next().unwrap().clone();
    assert_eq!(drained(&o, &c).await, (0, 1));
    // A manager retries it once the provider answers again: delivered, credited once.
    sim.sim.set_faults(Faults::none());
    let (s, b) = retry(&o, &id).await;
    assert_eq!((s, b["status"].as_str()), (200, Some("pending")), "{b}");
    assert_eq!(drained(&o, &c).await, (1, 0));
    let ledger = sim.sim.ledger();
    let credits = credits_of(&ledger, &ours);
    assert_eq!(credits.len(), 1, "credited once");
    let credit_id = credits[0].credit_id.clone();
    // The outbox row holds the current round only...
    let (attempts, status): (i32, String) =
        sqlx::query_as("SELECT attempts, status FROM gift_outbox WHERE fulfilment_id = $1::uuid")
            .bind(&id)
            .fetch_one(&o.db)
            .await
            .unwrap();
    assert_eq!((attempts, status.as_str()), (1, "delivered"));
    // ...its history all of it, in order, as the admin API shows it (a viewer may read it).
    let path = format!("/admin/v1/fulfilments/{id}/attempts");
    let (s, h) = o
        .admin(reqwest::Method::GET, &path, Some(o.viewer_token()), None)
        .await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(h["fulfilment"]["id"].as_str(), Some(id.as_str()));
    assert_eq!(h["fulfilment"]["status"].as_str(), Some("delivered"));
    let actor: String = sqlx::query_scalar(
        "SELECT actor FROM gift_audit WHERE campaign_id = $1 AND action = 'retry_delivery'",
    )
    .bind(&c)
    .fetch_one(&o.db)
    .await
    .unwrap();
    let entries: Vec<Entry> = h["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let text = |k: &str| e[k].as_str().map(str::to_string);
            (
                text("outcome").unwrap(),
                e["attempt"].as_i64(),
                text("answer"),
                text("actor"),
            )
        })
        .collect();
    let mut expected: Vec<Entry> = (1..=8)
        .map(|n| ("error".into(), Some(n), Some("timed out".into()), None))
        .collect();
    expected.push(("failed".into(), None, Some("timed out".into()), None));
    expected.push(("retried".into(), None, None, Some(actor)));
    expected.push(("delivered".into(), Some(1), Some(credit_id), None));
    assert_eq!(entries, expected);
    let times: Vec<&str> = h["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["at"].as_str().unwrap())
        .collect();
    let parsed: Vec<chrono::DateTime<chrono::Utc>> =
        times.iter().map(|t| t.parse().unwrap()).collect();
    assert!(
        parsed.windows(2).all(|w| w[0] <= w[1]),
        "in time order: {times:?}"
    );
    // The history is append-only: PostgreSQL refuses to change or drop it.
    let changed = sqlx::query("DELETE FROM delivery_attempts WHERE outbox_id = $1::uuid")
        .bind(&id)
        .execute(&o.db)
        .await;
    assert!(changed.is_err(), "the history cannot be deleted");
    // Unknown and malformed ids: 404, no token: 401.
    for bad in [uuid_like(), "not-a-uuid".to_string()] {
        let (s, _) = o
            .admin(
                reqwest::Method::GET,
                &format!("/admin/v1/fulfilments/{bad}/attempts"),
                Some(o.viewer_token()),
                None,
            )
            .await;
        assert_eq!(s, 404, "{bad}");
    }
    let (s, _) = o.admin(reqwest::Method::GET, &path, None, None).await;
    assert_eq!(s, 401);
    o.stop().await;
    sim.stop();
    own.release().await;
}

/// A fulfilment id nobody was granted.
fn uuid_like() -> String {
    "00000000-0000-4000-8000-000000000000".to_string()
}
