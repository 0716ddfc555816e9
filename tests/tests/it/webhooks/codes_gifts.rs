//! The promo code events (`code_use.held`, `code_use.used`, `code_use.released`) and the gift
//! events (`gift.granted`, `gift.delivered`, `gift.failed`) against a receiver written with the
//! reference `standardwebhooks` library (scripts/webhook-receiver), a real origin over HTTP,
//! real PostgreSQL and Redis, and the provider simulator (`provider-sim/`, in-process): each
//! event arrives once, with a valid signature, with sequence 1 for its start and 2 for its end,
//! and with the object's state after the change.
//!
//! Every test origin may relay every test's deliveries (one database), so receivers keep only
//! their own code's or campaign's events, and each test deletes its endpoint at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use flashgate_provider_sim::{spawn, Faults};
use flashgate_tests::gifts::{campaign, fulfil, key, members, msisdn, retry};
use flashgate_tests::support::{
    eventually, own_services, test_config, unique, OwnServices, TestOrigin,
};
use flashgate_tests::webhooks::{register, unregister, Received, Receiver};
use serde_json::Value;

/// Waits until the receiver answered 2xx to `n` distinct events that pass `keep`; returns the
/// first 2xx delivery of each by object id, in sequence order.
async fn delivered(
    r: &Receiver,
    n: usize,
    keep: impl Fn(&Value) -> bool + Copy,
) -> BTreeMap<String, Vec<Received>> {
    let got: Vec<Received> = eventually(
        "the events to reach the receiver",
        Duration::from_secs(90),
        || async move {
            let mut ok = BTreeMap::new();
            for e in r.received_where(keep).await {
                if (200..300).contains(&e.answered) {
                    ok.entry(e.id.clone()).or_insert(e);
                }
            }
            if ok.len() >= n {
                Ok(ok.into_values().collect())
            } else {
                Err(format!("{} of {n}", ok.len()))
            }
        },
    )
    .await;
    let mut by_object: BTreeMap<String, Vec<Received>> = BTreeMap::new();
    for e in got {
        let object = e.event["object_id"]
            .as_str()
            .expect("object_id")
            .to_string();
        by_object.entry(object).or_default().push(e);
    }
    for events in by_object.values_mut() {
        events.sort_by_key(|e| e.event["sequence"].as_i64());
    }
    by_object
}

/// Each event of `events` was answered 2xx exactly once and verified by the library with the
/// receiver's only secret; its body's id is its `webhook-id`.
async fn once_and_verified(r: &Receiver, events: &BTreeMap<String, Vec<Received>>) {
    let ids: Vec<&str> = events.values().flatten().map(|e| e.id.as_str()).collect();
    let all = r.received_where(|_| true).await;
    for id in ids {
        let ok: Vec<&Received> = all
            .iter()
            .filter(|e| e.id == id && (200..300).contains(&e.answered))
            .collect();
        assert_eq!(ok.len(), 1, "event {id} received once");
        assert_eq!(ok[0].verified, vec![0], "the library verified {id}");
        assert_eq!(ok[0].event["id"], id, "the body's id is the webhook-id");
    }
}

/// `(type, sequence, data.status)` of an object's events, in sequence order.
fn story(events: &[Received]) -> Vec<(String, i64, String)> {
    events
        .iter()
        .map(|e| {
            (
                e.event["type"].as_str().unwrap_or_default().to_string(),
                e.event["sequence"].as_i64().unwrap_or_default(),
                e.event["data"]["status"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

fn s(t: &str, n: i64, status: &str) -> (String, i64, String) {
    (t.to_string(), n, status.to_string())
}

/// Puts fulfilment `id` first in the gift relay's line (due a day ago): the relay takes the
/// oldest due rows of the whole database first, and other tests leave grants pending (no
/// provider), thousands in a full run.
async fn first_in_line(o: &TestOrigin, id: &str) {
    sqlx::query(
        "UPDATE gift_outbox SET next_attempt_at = now() - interval '1 day'
          WHERE fulfilment_id = $1::uuid AND status = 'pending'",
    )
    .bind(id)
    .execute(&o.db)
    .await
    .expect("move the row up");
}

/// Uses `code` for a new customer on a new order; returns the use id.
async fn use_once(o: &TestOrigin, code: &str) -> String {
    let (st, body) = o
        .use_code(code, &unique("cu"), &unique("order"), &unique("key"))
        .await;
    assert_eq!(st, 201, "{body}");
    body["use"].as_str().expect("use id").to_string()
}

#[tokio::test]
async fn code_uses_send_held_then_used_or_released_by_the_shop_or_the_sweeper() {
    let o = TestOrigin::start().await;
    // A second origin whose uses wait 1 s for their confirm: its sweeper releases them.
    let mut config = test_config();
    config.code_use_hold_seconds = 1;
    let short = TestOrigin::start_with(config).await;
    let r = Receiver::start().await;
    let types = ["code_use.held", "code_use.used", "code_use.released"];
    let (endpoint, secret) = register(&o, &r.url(), &types).await;
    r.secrets(&[&secret]).await;
    let code = o.shared_code(10, false).await;

    let used = use_once(&o, &code).await;
    assert_eq!(o.use_call(&used, "confirm").await.status, 200);
    let released = use_once(&o, &code).await;
    assert_eq!(o.use_call(&released, "release").await.status, 200);
    let swept = use_once(&short, &code).await;

    let ours = |e: &Value| e["data"]["code"] == code.as_str();
    let got = delivered(&r, 6, ours).await;
    assert_eq!(got.len(), 3, "three uses: {:?}", got.keys());
    assert_eq!(
        story(&got[&used]),
        vec![s("code_use.held", 1, "held"), s("code_use.used", 2, "used")]
    );
    for id in [&released, &swept] {
        assert_eq!(
            story(&got[id]),
            vec![
                s("code_use.held", 1, "held"),
                s("code_use.released", 2, "released")
            ],
            "use {id}"
        );
    }
    let released_by = |id: &str| got[id][1].event["data"]["released_by"].clone();
    assert_eq!(released_by(&released), "service");
    assert_eq!(released_by(&swept), "sweeper");
    for e in got.values().flatten() {
        let ev = &e.event;
        assert_eq!(ev.get("campaign"), None, "a code use has no campaign: {ev}");
        assert_eq!(ev["data"]["use_id"], ev["object_id"]);
        assert!(ev["data"]["customer"]
            .as_str()
            .is_some_and(|c| c.starts_with("cu")));
        assert!(ev["data"]["held_until"].is_string());
    }
    once_and_verified(&r, &got).await;
    let rows: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM webhook_events e JOIN coupon_uses u ON u.id = e.object_id
          WHERE e.object_kind = 'code_use' AND u.code = $1",
    )
    .bind(&code)
    .fetch_one(&o.db)
    .await
    .unwrap();
    assert_eq!(rows, 6, "one outbox row per change");
    unregister(&o, &endpoint).await;
}

/// A gift campaign (segment `s1`, 2,000 minor units) on an origin relaying to the provider
/// simulator (one attempt per delivery), and a receiver subscribed to the `gift.*` events.
/// The origin runs on a database of its own ([`own_services`]): a gift relay takes every
/// pending row of its database, so two tests' relays on one database would call each other's
/// simulators.
struct GiftSale {
    own: OwnServices,
    sim: flashgate_provider_sim::Running,
    o: TestOrigin,
    r: Receiver,
    endpoint: String,
    c: String,
}

impl GiftSale {
    async fn start() -> Self {
        let own = own_services(test_config(), "gift_events").await;
        let sim = spawn("127.0.0.1:0".parse().unwrap(), Faults::none())
            .await
            .unwrap();
        let mut config = own.config.clone();
        config.gifts.gift_test_clock = true;
        config.gifts.gift_provider_url = Some(sim.url.clone());
        config.gifts.gift_provider_timeout_ms = 2_000;
        config.gifts.gift_delivery_max_attempts = 1;
        config.gifts.gift_relay_interval_ms = 50;
        let o = TestOrigin::start_with(config).await;
        let r = Receiver::start().await;
        let types = ["gift.granted", "gift.delivered", "gift.failed"];
        let (endpoint, secret) = register(&o, &r.url(), &types).await;
        r.secrets(&[&secret]).await;
        let c = campaign(&o, &[("s1", 2_000, &[])]).await;
        GiftSale {
            own,
            sim,
            o,
            r,
            endpoint,
            c,
        }
    }
}

#[tokio::test]
async fn a_gift_grant_sends_granted_then_delivered_or_failed_as_the_provider_settles_it() {
    let GiftSale {
        own,
        sim,
        o,
        r,
        endpoint,
        c,
    } = GiftSale::start().await;
    let (ok, ko) = (msisdn(), msisdn());
    members(&o, &c, "s1", &[ok.clone(), ko.clone()]).await;
    let ours = |e: &Value| e["campaign"] == c.as_str();

    // 1. The provider credits it: granted, then delivered with the provider's reference.
    let g = fulfil(&o, &c, &key(), &ok).await;
    assert_eq!(g.status, 201, "{}", String::from_utf8_lossy(&g.body));
    let delivered_id = g.json()["fulfilment"]["id"].as_str().unwrap().to_string();
    first_in_line(&o, &delivered_id).await;
    let got = delivered(&r, 2, ours).await;
    assert_eq!(
        story(&got[&delivered_id]),
        vec![
            s("gift.granted", 1, "pending"),
            s("gift.delivered", 2, "delivered")
        ]
    );
    let ledger = sim.sim.ledger();
    let credit = ledger
        .credits
        .iter()
        .find(|cr| cr.key == delivered_id)
        .expect("the credit");
    assert_eq!(
        got[&delivered_id][1].event["data"]["provider_ref"],
        credit.credit_id.as_str()
    );

    // 2. The provider fails every call, and one attempt is all there is: granted, then failed.
    sim.sim.set_faults(Faults {
        error_rate: 1.0,
        ..Faults::none()
    });
    let g = fulfil(&o, &c, &key(), &ko).await;
    assert_eq!(g.status, 201, "{}", String::from_utf8_lossy(&g.body));
    let failed_id = g.json()["fulfilment"]["id"].as_str().unwrap().to_string();
    first_in_line(&o, &failed_id).await;
    let got = delivered(&r, 4, ours).await;
    assert_eq!(got.len(), 2, "two fulfilments: {:?}", got.keys());
    assert_eq!(
        story(&got[&failed_id]),
        vec![
            s("gift.granted", 1, "pending"),
            s("gift.failed", 2, "failed")
        ]
    );
    let failed = &got[&failed_id][1].event["data"];
    assert!(failed["error"].is_string(), "{failed}");
    assert_eq!(failed.get("provider_ref"), None);
    for (id, m) in [(&delivered_id, &ok), (&failed_id, &ko)] {
        for e in &got[id] {
            let data = &e.event["data"];
            assert_eq!(data["fulfilment_id"], id.as_str());
            assert_eq!(data["msisdn"], m.as_str());
            assert_eq!(
                (data["segment"].as_str(), data["amount"].as_i64()),
                (Some("s1"), Some(2_000))
            );
            assert_eq!(data["currency"], "EGP");
        }
    }
    once_and_verified(&r, &got).await;
    unregister(&o, &endpoint).await;
    sim.stop();
    o.stop().await;
    own.release().await;
}

#[tokio::test]
async fn a_managers_retry_of_a_failed_gift_sends_granted_again_then_delivered() {
    let GiftSale {
        own,
        sim,
        o,
        r,
        endpoint,
        c,
    } = GiftSale::start().await;
    let m = msisdn();
    members(&o, &c, "s1", std::slice::from_ref(&m)).await;
    let ours = |e: &Value| e["campaign"] == c.as_str();
    // The provider fails its one attempt: granted, then failed.
    sim.sim.set_faults(Faults {
        error_rate: 1.0,
        ..Faults::none()
    });
    let g = fulfil(&o, &c, &key(), &m).await;
    assert_eq!(g.status, 201, "{}", String::from_utf8_lossy(&g.body));
    let id = g.json()["fulfilment"]["id"].as_str().unwrap().to_string();
    first_in_line(&o, &id).await;
    delivered(&r, 2, ours).await;
    // The provider answers again and a manager retries: the retry's own event says the
    // delivery is pending again, then the relay's says it was delivered.
    sim.sim.set_faults(Faults::none());
    let (st, b) = retry(&o, &id).await;
    assert_eq!((st, b["status"].as_str()), (200, Some("pending")), "{b}");
    first_in_line(&o, &id).await;
    let got = delivered(&r, 4, ours).await;
    assert_eq!(
        story(&got[&id]),
        vec![
            s("gift.granted", 1, "pending"),
            s("gift.failed", 2, "failed"),
            s("gift.granted", 3, "pending"),
            s("gift.delivered", 4, "delivered")
        ]
    );
    let again = &got[&id][2].event["data"];
    assert_eq!(
        (again["msisdn"].as_str(), again["amount"].as_i64()),
        (Some(m.as_str()), Some(2_000))
    );
    assert_eq!(
        (again.get("error"), again.get("provider_ref")),
        (None, None)
    );
    once_and_verified(&r, &got).await;
    unregister(&o, &endpoint).await;
    sim.stop();
    o.stop().await;
    own.release().await;
}
