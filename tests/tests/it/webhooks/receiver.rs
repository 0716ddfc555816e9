//! Signed lifecycle webhooks against a receiver written with the reference `standardwebhooks`
//! library (Python, from PyPI, pinned; scripts/webhook-receiver), a real origin over HTTP, real
//! PostgreSQL and Redis: a sale's events arrive with valid signatures and increasing sequence
//! numbers per claim; a rotation sends both signatures and either verifies; a receiver that
//! fails and throttles still gets every event; a 410 disables the endpoint; a receiver that
//! never answers delays only its own deliveries.
//!
//! Every test origin may relay every test's deliveries (one database), so receivers keep only
//! their own campaign's events, and each test deletes its endpoint at the end (the fairness
//! test runs on a database of its own).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use flashgate_shared::api::{PayRequest, ReleaseRequest};
use flashgate_tests::support::{eventually, own_services, test_config, unique, TestOrigin};
use flashgate_tests::webhooks::{
    extend, register, unregister, DeadEndpoint, Received, Receiver, ALL_TYPES,
};
use serde_json::{json, Value};

async fn pay(o: &TestOrigin, id: &str) -> u16 {
    let token = o.config.service_token.expose().to_string();
    let body = PayRequest {
        payment_ref: "psp-1".into(),
    };
    o.claim_action(id, "pay", &token, &body).await.0
}

async fn release(o: &TestOrigin, id: &str) -> u16 {
    let token = o.config.service_token.expose().to_string();
    let body = ReleaseRequest {
        reason: Some("customer_cancelled".into()),
    };
    o.claim_action(id, "release", &token, &body).await.0
}

/// Claims one unit of `c` for a new customer named after `customer`; returns the claim id.
async fn claim(o: &TestOrigin, c: &str, customer: &str) -> String {
    let customer = unique(customer);
    let (s, body) = o.claim(c, &customer, &unique("key")).await;
    assert_eq!(s, 201, "{body}");
    body["claim"]["id"].as_str().expect("claim id").to_string()
}

fn types(events: &BTreeMap<String, Received>) -> Vec<String> {
    let mut t: Vec<String> = events
        .values()
        .map(|e| e.event["type"].as_str().unwrap_or_default().to_string())
        .collect();
    t.sort();
    t
}

#[tokio::test]
async fn a_sales_events_reach_a_receiver_that_verifies_them_with_the_reference_library() {
    let o = TestOrigin::start().await;
    let r = Receiver::start().await;
    let (endpoint, secret) = register(&o, &r.url(), ALL_TYPES).await;
    r.secrets(&[&secret]).await;
    let c = o.held_sale(3, 2).await;
    let (a, b, x) = (
        claim(&o, &c, "wa").await,
        claim(&o, &c, "wb").await,
        claim(&o, &c, "wx").await,
    );
    assert_eq!(pay(&o, &a).await, 200);
    assert_eq!(release(&o, &b).await, 200);
    // `x` is left to expire (2 s hold, the sweeper every 200 ms); then a restock.
    eventually("the hold to expire", Duration::from_secs(30), || async {
        let s: String = sqlx::query_scalar("SELECT status FROM claims WHERE id = $1")
            .bind(&x)
            .fetch_one(&o.db)
            .await
            .map_err(|e| e.to_string())?;
        (s == "expired").then_some(()).ok_or(s)
    })
    .await;
    let (s, body) = o.change(&c, json!({"action": "restock", "add": 2})).await;
    assert_eq!(s, 200, "{body}");

    let got = r.delivered(&c, 8).await;
    assert_eq!(
        types(&got),
        vec![
            "campaign.restocked",
            "campaign.sold_out",
            "claim.expired",
            "claim.held",
            "claim.held",
            "claim.held",
            "claim.paid",
            "claim.released",
        ]
    );
    for e in got.values() {
        assert_eq!(e.verified, vec![0], "the library verified {}", e.id);
        assert_eq!(
            e.event["id"],
            e.id.as_str(),
            "the body's id is the webhook-id"
        );
    }
    // Per claim: held is 1, its end is 2, and the data is the claim's state after the change.
    let mut by_object: HashMap<String, Vec<(i64, String, Value)>> = HashMap::new();
    for e in got.values() {
        let ev = &e.event;
        by_object
            .entry(ev["object_id"].as_str().unwrap().to_string())
            .or_default()
            .push((
                ev["sequence"].as_i64().unwrap(),
                ev["type"].as_str().unwrap().to_string(),
                ev["data"].clone(),
            ));
    }
    for (claim, end) in [
        (&a, "claim.paid"),
        (&b, "claim.released"),
        (&x, "claim.expired"),
    ] {
        let mut seen = by_object
            .remove(claim.as_str())
            .expect("events of the claim");
        seen.sort_by_key(|s| s.0);
        let kinds: Vec<(i64, &str)> = seen.iter().map(|s| (s.0, s.1.as_str())).collect();
        assert_eq!(kinds, vec![(1, "claim.held"), (2, end)]);
        assert_eq!(seen[1].2["claim_id"], claim.as_str());
    }
    assert_eq!(
        got.values()
            .filter(|e| e.event["data"]["payment_ref"] == "psp-1")
            .count(),
        1
    );
    let mut campaign = by_object.remove(c.as_str()).expect("campaign events");
    campaign.sort_by_key(|s| s.0);
    assert_eq!(campaign[0].1, "campaign.sold_out");
    assert_eq!(campaign[0].2["remaining"], 0);
    assert_eq!(campaign[1].1, "campaign.restocked");
    assert_eq!(campaign[1].2["stock"], 5);
    unregister(&o, &endpoint).await;
    o.stop().await;
}

#[tokio::test]
async fn an_extended_hold_sends_claim_extended_with_its_new_held_until_between_held_and_paid() {
    let o = TestOrigin::start().await;
    let r = Receiver::start().await;
    let (endpoint, secret) = register(
        &o,
        &r.url(),
        &["claim.held", "claim.extended", "claim.paid"],
    )
    .await;
    r.secrets(&[&secret]).await;
    let c = o.held_sale(2, 60).await;
    let (s, body) = o.change(&c, json!({"hold_extension_seconds": 300})).await;
    assert_eq!(s, 200, "{body}");
    let a = claim(&o, &c, "we").await;
    let (s, extended) = extend(&o, &a).await;
    assert_eq!(s, 200, "{extended}");
    assert_eq!(pay(&o, &a).await, 200);

    let got = r.delivered(&c, 3).await;
    let mut seen: Vec<(i64, String, Value)> = got
        .values()
        .map(|e| {
            assert_eq!(e.verified, vec![0], "the library verified {}", e.id);
            (
                e.event["sequence"].as_i64().unwrap(),
                e.event["type"].as_str().unwrap().to_string(),
                e.event["data"].clone(),
            )
        })
        .collect();
    seen.sort_by_key(|s| s.0);
    let kinds: Vec<(i64, &str)> = seen.iter().map(|s| (s.0, s.1.as_str())).collect();
    assert_eq!(
        kinds,
        vec![(1, "claim.held"), (2, "claim.extended"), (3, "claim.paid")]
    );
    // The event carries the end the extend answered, as the database keeps it.
    let held_until: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT held_until FROM claims WHERE id = $1")
            .bind(&a)
            .fetch_one(&o.db)
            .await
            .expect("the claim");
    let sent: chrono::DateTime<chrono::Utc> = seen[1].2["held_until"]
        .as_str()
        .expect("held_until in claim.extended")
        .parse()
        .expect("RFC 3339");
    let answered: chrono::DateTime<chrono::Utc> = extended["held_until"]
        .as_str()
        .expect("held_until in the extend answer")
        .parse()
        .expect("RFC 3339");
    assert_eq!(sent, held_until);
    assert_eq!(answered, held_until);
    let first: chrono::DateTime<chrono::Utc> = seen[0].2["held_until"]
        .as_str()
        .expect("held_until in claim.held")
        .parse()
        .expect("RFC 3339");
    assert_eq!((held_until - first).num_seconds(), 300);
    unregister(&o, &endpoint).await;
    o.stop().await;
}

#[tokio::test]
async fn after_a_rotation_both_signatures_are_sent_and_either_verifies() {
    let o = TestOrigin::start().await;
    let r = Receiver::start().await;
    let (endpoint, old) = register(&o, &r.url(), &["campaign.paused"]).await;
    let (s, body) = o
        .admin(
            reqwest::Method::POST,
            &format!("/admin/v1/webhooks/endpoints/{endpoint}/rotate"),
            Some(o.manager_token()),
            None,
        )
        .await;
    assert_eq!(s, 200, "{body}");
    let new = body["secret"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    assert!(body["previous_secret_until"].is_string(), "{body}");
    r.secrets(&[&old, &new]).await;
    let c = o.held_sale(1, 60).await;
    let (s, body) = o.change(&c, json!({"action": "pause"})).await;
    assert_eq!(s, 200, "{body}");
    let got = r.delivered(&c, 1).await;
    let e = got.values().next().unwrap();
    assert_eq!(e.signature.split(' ').count(), 2, "{}", e.signature);
    assert_eq!(e.verified, vec![0, 1], "each secret verifies on its own");
    unregister(&o, &endpoint).await;
    o.stop().await;
}

#[tokio::test]
async fn a_receiver_that_fails_then_throttles_still_gets_every_event() {
    let o = TestOrigin::start().await;
    let r = Receiver::start().await;
    let (endpoint, secret) = register(&o, &r.url(), &["claim.held"]).await;
    r.secrets(&[&secret]).await;
    r.plan(
        json!([{"status": 500}, {"status": 500}, {"status": 502}, {"status": 429, "retry_after": 1},
               {"status": 503, "retry_after": 1}]),
        200,
    )
    .await;
    let c = o.held_sale(3, 60).await;
    for who in ["f1", "f2", "f3"] {
        claim(&o, &c, who).await;
    }
    let got = r.delivered(&c, 3).await;
    assert!(got.values().all(|e| e.verified == vec![0]));
    let calls = r.received(&c).await;
    let failed = calls.iter().filter(|e| e.answered >= 300).count();
    // The plan's failures are shared with any other test's campaign's events sent meanwhile.
    assert!(failed >= 1, "the receiver refused some calls");
    println!(
        "calls {}, refused by the receiver {failed}, events delivered {}",
        calls.len(),
        got.len()
    );
    // Every event delivered exactly once with a 2xx.
    let twice: usize = calls.iter().filter(|e| e.answered < 300).count() - got.len();
    assert_eq!(twice, 0, "no event delivered twice");
    // The relay settles a row just after the receiver's answer.
    eventually(
        "every delivery row settled",
        Duration::from_secs(30),
        || async {
            let statuses: Vec<String> = sqlx::query_scalar(
            "SELECT d.status FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
              WHERE d.endpoint_id = $1::uuid AND e.campaign_id = $2",
        )
        .bind(&endpoint)
        .bind(&c)
        .fetch_all(&o.db)
        .await
        .map_err(|e| e.to_string())?;
            (statuses == vec!["delivered"; 3])
                .then_some(())
                .ok_or(format!("{statuses:?}"))
        },
    )
    .await;
    unregister(&o, &endpoint).await;
    o.stop().await;
}

#[tokio::test]
async fn a_receiver_answering_410_disables_its_endpoint_with_an_audit_row() {
    let o = TestOrigin::start().await;
    let r = Receiver::start().await;
    let (endpoint, secret) = register(&o, &r.url(), &["claim.held"]).await;
    r.secrets(&[&secret]).await;
    r.plan(json!([]), 410).await;
    let c = o.held_sale(2, 60).await;
    claim(&o, &c, "g1").await;
    let path = format!("/admin/v1/webhooks/endpoints/{endpoint}");
    let shown = eventually(
        "the endpoint to be disabled",
        Duration::from_secs(30),
        || async {
            let (_, e) = o
                .admin(reqwest::Method::GET, &path, Some(o.viewer_token()), None)
                .await;
            if e["enabled"] == false {
                Ok(e)
            } else {
                Err(e.to_string())
            }
        },
    )
    .await;
    assert!(shown["disabled_reason"].as_str().unwrap().contains("410"));
    let audit: Vec<(String, String)> = sqlx::query_as(
        "SELECT actor, action FROM webhook_audit WHERE endpoint_id = $1::uuid ORDER BY seq",
    )
    .bind(&endpoint)
    .fetch_all(&o.db)
    .await
    .unwrap();
    assert_eq!(
        audit,
        vec![
            ("admin".to_string(), "create".to_string()),
            ("relay".to_string(), "disabled_by_receiver".to_string())
        ]
    );
    // A disabled endpoint gets nothing more.
    let queued = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1::uuid",
        )
        .bind(&endpoint)
        .fetch_one(&o.db)
        .await
        .unwrap()
    };
    let before = queued().await;
    claim(&o, &c, "g2").await;
    assert_eq!(
        queued().await,
        before,
        "nothing queued for a disabled endpoint"
    );
    unregister(&o, &endpoint).await;
    o.stop().await;
}

#[tokio::test]
async fn a_receiver_that_never_answers_delays_only_its_own_deliveries() {
    // A database of its own: only this origin relays, and only these two endpoints exist.
    let own = own_services(test_config(), "wh_fair").await;
    let config = own.config.clone();
    let o = TestOrigin::start_with(config).await;
    let r = Receiver::start().await;
    let dead = DeadEndpoint::start().await;
    let (_, secret) = register(&o, &r.url(), &["claim.held"]).await;
    r.secrets(&[&secret]).await;
    let (dead_id, _) = register(&o, &dead.url, &["claim.held"]).await;
    let c = o.held_sale(20, 600).await;
    // The first event's call to the dead endpoint is open (it stays so for the 15 s timeout).
    claim(&o, &c, "d0").await;
    eventually(
        "a call open on the dead endpoint",
        Duration::from_secs(60),
        || async {
            let n = dead.accepted();
            (n >= 1).then_some(()).ok_or(format!("{n} calls"))
        },
    )
    .await;
    let opened = std::time::Instant::now();
    let n = 10;
    for i in 1..=n {
        claim(&o, &c, &format!("d{i}")).await;
    }
    let got = r.delivered(&c, n + 1).await;
    let all_in = opened.elapsed();
    // Read before anything else: the dead endpoint's first call must still be open.
    let (accepted, closed) = (dead.accepted(), dead.closed());
    let lags: Vec<f64> = got
        .values()
        .map(|e| {
            let t: chrono::DateTime<chrono::Utc> =
                e.event["timestamp"].as_str().unwrap().parse().unwrap();
            e.at - t.timestamp_micros() as f64 / 1e6
        })
        .collect();
    println!(
        "healthy endpoint: {} deliveries, all in {:.0} ms after the dead call opened; lag event \
         written -> received: max {:.0} ms; dead endpoint: {accepted} calls opened, {closed} ended",
        got.len(),
        all_in.as_secs_f64() * 1e3,
        lags.iter().cloned().fold(0.0, f64::max) * 1e3,
    );
    assert_eq!(
        closed, 0,
        "every healthy delivery arrived while the dead endpoint's first call was still open"
    );
    // Meanwhile the dead endpoint's other rows wait untaken: it holds only its own deliveries.
    let attempts: Vec<i32> = sqlx::query_scalar(
        "SELECT attempts FROM webhook_deliveries WHERE endpoint_id = $1::uuid ORDER BY attempts",
    )
    .bind(&dead_id)
    .fetch_all(&o.db)
    .await
    .unwrap();
    assert_eq!(attempts.len(), n + 1);
    assert!(attempts.iter().sum::<i32>() <= 1, "{attempts:?}");
    o.stop().await;
    own.release().await;
}
