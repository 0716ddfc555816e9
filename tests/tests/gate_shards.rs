//! The sharded gate (`gate_shards`) against a real origin over HTTP, real PostgreSQL and real
//! Redis (one server, or the cluster when `REDIS_URL` names one): the shard caps sum to the
//! stock, a stampede claims exactly min(stock, customers) with nothing stranded, one claim per
//! customer across shards under concurrent double taps, returned units are taken again, and
//! reconciliation reports each shard.

use std::collections::HashMap;

use chrono::Utc;
use flashgate_origin::gate;
use flashgate_shared::api::{CampaignKind, ChangeRequest, NewCampaign, ReleaseRequest};
use flashgate_tests::support::{count_replies, customers, redis_conn, unique, TestOrigin};
use futures::future::join_all;
use reqwest::Method;
use serde_json::json;

async fn shard_remaining(c: &str) -> Vec<i64> {
    let mut r = redis_conn().await;
    gate::shard_states(&mut r, c)
        .await
        .unwrap()
        .iter()
        .map(|s| s.remaining)
        .collect()
}

/// Claim rows per customer in PostgreSQL (every status).
async fn claims_per_customer(o: &TestOrigin, c: &str) -> HashMap<String, i64> {
    sqlx::query_as("SELECT customer_id, count(*) FROM claims WHERE campaign_id = $1 GROUP BY 1")
        .bind(c)
        .fetch_all(&o.db)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_caps_sum_to_the_stock_and_gate_shards_is_checked() {
    let o = TestOrigin::start().await;
    let c = o.sharded_campaign("giveaway", 1_003, 16).await;
    let caps = shard_remaining(&c).await;
    assert_eq!(caps.len(), 16);
    assert_eq!(caps.iter().sum::<i64>(), 1_003);
    assert!(caps.iter().all(|u| *u == 62 || *u == 63), "{caps:?}");
    // The default follows the stock.
    let now = Utc::now();
    for (stock, shards) in [(10, 1), (50_000, 4), (200_000, 16)] {
        let id = unique("dflt");
        let body = o
            .create(&NewCampaign {
                id: id.clone(),
                name: "default shards".into(),
                kind: CampaignKind::Giveaway,
                stock,
                starts_at: now,
                ends_at: now + chrono::Duration::hours(1),
                hold_seconds: None,
                gate_shards: None,
                waiting_room: None,
            })
            .await;
        assert_eq!(body["gate_shards"], shards, "stock {stock}: {body}");
        assert_eq!(shard_remaining(&id).await.iter().sum::<i64>(), stock);
    }
    // Out of range: 422 with the documented body, nothing created.
    let token = o.manager_token().to_string();
    for bad in [json!(0), json!(1025), json!(-1), json!("4")] {
        let id = unique("bad");
        let body = json!({"id": id, "name": "x", "kind": "giveaway", "stock": 5,
            "starts_at": now, "ends_at": now + chrono::Duration::hours(1), "gate_shards": bad});
        let (s, b) = o
            .admin(
                Method::POST,
                "/admin/v1/campaigns",
                Some(&token),
                Some(body),
            )
            .await;
        assert!(s == 422 || s == 400, "{bad}: {s} {b}");
        assert!(b["result"].is_string() && b["message"].is_string(), "{b}");
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM campaigns WHERE id = $1")
            .bind(&id)
            .fetch_one(&o.db)
            .await
            .unwrap();
        assert_eq!(n, 0);
    }
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stampede_on_16_shards_claims_min_of_stock_and_customers() {
    let o = TestOrigin::start().await;
    // Demand above stock: every unit goes, none stranded on a shard.
    for (stock, people) in [(40, 160), (90, 60)] {
        let c = o.sharded_campaign("giveaway", stock, 16).await;
        let replies = o.stampede(&c, &customers(people)).await;
        let want = stock.min(people as i64) as usize;
        assert_eq!(count_replies(&replies, 201, "claimed"), want, "{replies:?}");
        assert_eq!(count_replies(&replies, 409, "sold_out"), people - want);
        assert_eq!(o.remaining(&c).await, stock - want as i64);
        let per = claims_per_customer(&o, &c).await;
        assert_eq!(per.values().sum::<i64>(), want as i64);
        assert!(per.values().all(|n| *n == 1), "{per:?}");
        assert_eq!(
            shard_remaining(&c).await.iter().sum::<i64>(),
            stock - want as i64
        );
        let rep = o.reconcile(&c).await;
        assert_eq!(rep["ok"], true, "{rep}");
        assert_eq!(rep["gate"]["shards"].as_array().unwrap().len(), 16, "{rep}");
    }
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_double_taps_make_one_claim_per_customer_across_shards() {
    let o = TestOrigin::start().await;
    let c = o.sharded_campaign("giveaway", 1_000, 16).await;
    let people = customers(25);
    // Each customer taps four times at once, each tap with its own idempotency key.
    let taps = join_all(people.iter().flat_map(|p| {
        (0..4).map(|i| {
            let (o, c, p) = (&o, c.clone(), p.clone());
            async move { o.claim(&c, &p, &format!("tap-{i}")).await }
        })
    }))
    .await;
    let per = claims_per_customer(&o, &c).await;
    assert_eq!(per.len(), 25, "{taps:?}");
    assert!(per.values().all(|n| *n == 1), "{per:?}");
    for (s, b) in &taps {
        assert!(*s == 201 || *s == 200 || *s == 409, "{s} {b}");
    }
    assert_eq!(o.remaining(&c).await, 975);
    assert_eq!(shard_remaining(&c).await.iter().sum::<i64>(), 975);
    assert_eq!(o.reconcile(&c).await["ok"], true);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn returned_units_are_taken_again_and_reconcile_reports_each_shard() {
    let o = TestOrigin::start().await;
    let c = o.sharded_campaign("sale", 12, 8).await;
    let first = o.stampede(&c, &customers(30)).await;
    assert_eq!(count_replies(&first, 201, "claimed"), 12);
    // Release five holds at once: their units go back to the gate.
    let token = o.config.service_token.expose().to_string();
    let released = join_all(
        first
            .iter()
            .filter(|(s, _)| *s == 201)
            .take(5)
            .map(|(_, b)| {
                let id = b["claim"]["id"].as_str().unwrap().to_string();
                let (o, token) = (&o, token.clone());
                async move {
                    let body = ReleaseRequest {
                        reason: Some("customer_cancelled".into()),
                    };
                    o.claim_action(&id, "release", &token, &body).await
                }
            }),
    )
    .await;
    assert!(released.iter().all(|(s, _)| *s == 200), "{released:?}");
    assert_eq!(shard_remaining(&c).await.iter().sum::<i64>(), 5);
    let rep = o.reconcile(&c).await;
    assert_eq!(rep["ok"], true, "{rep}");
    let shards = rep["gate"]["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 8);
    let per_shard: i64 = shards
        .iter()
        .map(|s| s["remaining"].as_i64().unwrap())
        .sum();
    assert_eq!(per_shard, 5);
    assert_eq!(rep["gate"]["remaining"], 5);
    // A second wave takes exactly the five units back.
    let second = o.stampede(&c, &customers(30)).await;
    assert_eq!(count_replies(&second, 201, "claimed"), 5, "{second:?}");
    assert_eq!(o.remaining(&c).await, 0);
    assert!(shard_remaining(&c).await.iter().all(|u| *u == 0));
    // A restock of the sold-out campaign spreads its units over the shards and clears the flag.
    let (s, b) = o.change(&c, ChangeRequest::restock(4)).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["gate"], "updated", "{b}");
    assert_eq!(shard_remaining(&c).await.iter().sum::<i64>(), 4);
    let third = o.stampede(&c, &customers(20)).await;
    assert_eq!(count_replies(&third, 201, "claimed"), 4, "{third:?}");
    assert_eq!(o.reconcile(&c).await["ok"], true);
    o.stop().await;
}
