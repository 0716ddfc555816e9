//! The sharded gate (`gate_shards`) against a real origin over HTTP, real PostgreSQL and real
//! Redis (one server, or the cluster when `REDIS_URL` names one): the shard caps sum to the
//! stock, a stampede claims exactly min(stock, customers) with nothing stranded, one claim per
//! customer across shards under concurrent double taps, returned units are taken again,
//! reconciliation reports each shard, and corrections of the gate (PostgreSQL refused a take)
//! race claims and restocks without leaving the gate above or below PostgreSQL.

use std::collections::HashMap;

use chrono::Utc;
use flashgate_origin::gate;
use flashgate_shared::api::{CampaignKind, ChangeRequest, NewCampaign, ReleaseRequest};
use flashgate_tests::support::{count_replies, customers, redis_conn, unique, TestOrigin};
use futures::future::join_all;
use reqwest::Method;
use serde_json::json;

async fn shard_remaining(c: &str) -> Vec<i64> {
    let mut r = gate::Gate::new(redis_conn().await);
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
                hold_extension_seconds: None,
                gate_shards: None,
                waiting_room: None,
                access: None,
                draw: None,
                variants: None,
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
    // Each give-back is capped by the units PostgreSQL showed free when it read them: of five
    // concurrent releases one may read before another's commit and find its unit's place taken
    // by that one's give-back; the sweeper's drain of `gate_returns` gives it back after
    // GATE_RETURN_SETTLE_SECONDS (5 s). So the gate holds all five within the drain's bound.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut back = shard_remaining(&c).await.iter().sum::<i64>();
    while back < 5 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        back = shard_remaining(&c).await.iter().sum::<i64>();
    }
    assert_eq!(back, 5);
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

/// Sets PostgreSQL's `remaining` of `c` by hand (as if claims had committed that the gate
/// does not know of).
async fn set_pg_remaining(o: &TestOrigin, c: &str, remaining: i64) {
    sqlx::query("UPDATE campaigns SET remaining = $2 WHERE id = $1")
        .bind(c)
        .bind(remaining)
        .execute(&o.db)
        .await
        .unwrap();
}

async fn sold_out_flag(r: &mut gate::Gate, c: &str) -> Option<i64> {
    redis::cmd("GET")
        .arg(gate::Keys::of(c).sold_out)
        .query_async(r)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correct_down_keeps_the_takes_still_committing_on_one_or_several_shards() {
    let o = TestOrigin::start().await;
    for shards in [1, 4] {
        let c = o.sharded_campaign("giveaway", 10, shards).await;
        let mut r = gate::Gate::new(redis_conn().await);
        let tokens: Vec<String> = (0..3).map(|_| gate::pending_token()).collect();
        for (who, t) in ["ana", "bob", "cid"].iter().zip(&tokens) {
            assert_eq!(
                gate::take(&mut r, &c, who, t).await.unwrap(),
                gate::Take::Taken
            );
        }
        // PostgreSQL says 5 remain: ana's take is dropped, bob's and cid's still commit, so
        // the gate keeps 5 - 2 = 3.
        set_pg_remaining(&o, &c, 5).await;
        let removed = gate::correct_down(&mut r, &o.origin.state.db, &c, "ana", &tokens[0])
            .await
            .unwrap();
        assert_eq!(removed, 4, "{shards} shards: 7 left + 2 committing - 5");
        assert_eq!(shard_remaining(&c).await.iter().sum::<i64>(), 3);
        assert_eq!(gate::holder(&mut r, &c, "ana").await.unwrap(), None);
        assert_eq!(sold_out_flag(&mut r, &c).await, None, "{shards} shards");
        // PostgreSQL says 1 remains with two takes committing: zero, never below, flag set.
        set_pg_remaining(&o, &c, 1).await;
        gate::correct_down(&mut r, &o.origin.state.db, &c, "bob", "p:not-hers")
            .await
            .unwrap();
        assert!(shard_remaining(&c).await.iter().all(|u| *u == 0));
        assert!(sold_out_flag(&mut r, &c).await.is_some(), "{shards} shards");
        assert_eq!(
            gate::holder(&mut r, &c, "bob").await.unwrap(),
            Some(tokens[1].clone()),
            "a holder that is not the token is kept"
        );
        // A gate that promises no more than PostgreSQL is left alone.
        set_pg_remaining(&o, &c, 7).await;
        let removed = gate::correct_down(&mut r, &o.origin.state.db, &c, "cid", "p:not-hers")
            .await
            .unwrap();
        assert_eq!(removed, 0, "{shards} shards");
    }
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn corrections_racing_claims_and_restocks_leave_the_gate_equal_to_postgresql() {
    let o = TestOrigin::start().await;
    let c = o.sharded_campaign("giveaway", 100, 16).await;
    // The gate promises 32 units PostgreSQL does not have (as after a lost correction).
    let mut r = gate::Gate::new(redis_conn().await);
    for s in 0..16u16 {
        let _: i64 = redis::cmd("INCRBY")
            .arg(gate::Keys::shard(&c, s).remaining)
            .arg(2)
            .query_async(&mut r)
            .await
            .unwrap();
    }
    // A crowd of 200 and four restocks of 5 at once: PostgreSQL refuses the takes it cannot
    // cover, each refusal corrects the gate while other takes, commits and restocks run.
    let crowd = customers(200);
    let restocks = join_all((0..4).map(|_| o.change(&c, json!({"action": "restock", "add": 5}))));
    let (first, restocked) = tokio::join!(o.stampede(&c, &crowd), restocks);
    assert!(restocked.iter().all(|(s, _)| *s == 200), "{restocked:?}");
    let won_first = count_replies(&first, 201, "claimed");
    assert!(won_first <= 120, "{won_first} claims for a stock of 120");
    // A second crowd takes whatever PostgreSQL still has: nothing was taken off twice.
    let late: Vec<String> = (0..200).map(|i| format!("late-{i}-{c}")).collect();
    let second = o.stampede(&c, &late).await;
    let won = won_first + count_replies(&second, 201, "claimed");
    assert_eq!(won, 120, "claims = min(stock 120, customers 400)");
    assert_eq!(o.remaining(&c).await, 0);
    let per = claims_per_customer(&o, &c).await;
    assert_eq!(per.values().sum::<i64>(), 120);
    assert!(per.values().all(|n| *n == 1), "{per:?}");
    // The gate ends equal to PostgreSQL: not above (it would allow more), not below.
    assert!(shard_remaining(&c).await.iter().all(|u| *u == 0));
    assert!(sold_out_flag(&mut r, &c).await.is_some());
    let rep = o.reconcile(&c).await;
    assert_eq!(rep["ok"], true, "{rep}");
    o.stop().await;
}
