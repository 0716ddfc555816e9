//! What a checkout is told about a hold that is over, against a real origin over HTTP: a hold
//! that was released answers `released` to a pay or an extend, distinct from a hold that timed
//! out (`hold_expired`), and neither answer changes anything. A release that comes after
//! `held_until` is told `hold_expired` as a pay is, also before the sweeper ran, and the unit
//! comes back once.

use chrono::Utc;
use flashgate_shared::api::{CampaignKind, NewCampaign, PayRequest, ReleaseRequest};
use flashgate_tests::support::{eventually, stop_reconciled, test_config, unique, TestOrigin};
use serde_json::{json, Value};
use std::time::Duration;

async fn sale(o: &TestOrigin, hold_seconds: i64, stock: i64) -> String {
    let id = unique("rel");
    let now = Utc::now();
    o.create(&NewCampaign {
        id: id.clone(),
        name: "Release answers".into(),
        kind: CampaignKind::Sale,
        stock,
        starts_at: now - chrono::Duration::minutes(1),
        ends_at: now + chrono::Duration::hours(1),
        hold_seconds: Some(hold_seconds),
        hold_extension_seconds: Some(60),
        gate_shards: None,
        waiting_room: None,
        access: None,
        draw: None,
        variants: None,
    })
    .await;
    id
}

async fn action(o: &TestOrigin, id: &str, what: &str, body: Value) -> (u16, Value) {
    let res = o
        .http
        .post(format!("{}/api/v1/claims/{id}/{what}", o.url))
        .bearer_auth(o.config.service_token.expose())
        .header("idempotency-key", format!("k-{what}"))
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn pay(o: &TestOrigin, id: &str) -> (u16, Value) {
    let body = serde_json::to_value(PayRequest {
        payment_ref: "psp-1".into(),
    })
    .unwrap();
    action(o, id, "pay", body).await
}

async fn row(o: &TestOrigin, id: &str) -> (String, Option<String>, i64) {
    sqlx::query_as(
        "SELECT status, payment_ref, (SELECT count(*) FROM ledger WHERE claim_id = $1)
           FROM claims WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&o.db)
    .await
    .expect("claim row")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pay_after_release_answers_released_not_hold_expired() {
    let o = TestOrigin::start().await;
    let c = sale(&o, 600, 5).await;
    let (s, b) = o.claim(&c, &unique("ana"), "k").await;
    assert_eq!(s, 201, "{b}");
    let id = b["claim"]["id"].as_str().unwrap().to_string();
    let reason = serde_json::to_value(ReleaseRequest {
        reason: Some("customer_cancelled".into()),
    })
    .unwrap();
    let (s, released) = action(&o, &id, "release", reason).await;
    assert_eq!((s, released["result"].as_str()), (200, Some("released")));
    let before = row(&o, &id).await;

    let (s, b) = pay(&o, &id).await;
    assert_eq!((s, b["result"].as_str()), (409, Some("released")), "{b}");
    assert_eq!(
        b["claim"], released["claim"],
        "the claim as the release left it"
    );
    let (s, b) = action(&o, &id, "extend", json!({})).await;
    assert_eq!((s, b["result"].as_str()), (409, Some("released")), "{b}");
    // A second release is still the release's 200.
    let (s, b) = action(&o, &id, "release", json!({})).await;
    assert_eq!((s, b["result"].as_str()), (200, Some("released")), "{b}");
    assert_eq!(row(&o, &id).await, before, "nothing changed");
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pay_release_and_extend_after_the_sweeper_answer_hold_expired() {
    let o = TestOrigin::start().await;
    let c = sale(&o, 1, 5).await;
    let (s, b) = o.claim(&c, &unique("ben"), "k").await;
    assert_eq!(s, 201, "{b}");
    let id = b["claim"]["id"].as_str().unwrap().to_string();
    eventually(
        "the sweeper to expire the hold",
        Duration::from_secs(6),
        || async {
            match row(&o, &id).await.0.as_str() {
                "expired" => Ok(()),
                other => Err(other.to_string()),
            }
        },
    )
    .await;
    let before = row(&o, &id).await;
    for what in ["pay", "release", "extend"] {
        let body = if what == "pay" {
            json!({"payment_ref": "psp-1"})
        } else {
            json!({})
        };
        let (s, b) = action(&o, &id, what, body).await;
        assert_eq!((s, b), (409, json!({"result": "hold_expired"})), "{what}");
    }
    assert_eq!(row(&o, &id).await, before, "nothing changed");
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_past_held_until_before_the_sweep_answers_hold_expired_and_gives_back_once() {
    let mut config = test_config();
    // This origin's sweeper runs at start only: the release comes before any sweep of it.
    config.sweep_interval_ms = 3_600_000;
    let o = TestOrigin::start_with(config).await;
    let c = sale(&o, 600, 1).await;
    let (s, b) = o.claim(&c, &unique("ana"), "k").await;
    assert_eq!(s, 201, "{b}");
    let id = b["claim"]["id"].as_str().unwrap().to_string();
    sqlx::query("UPDATE claims SET held_until = now() - interval '1 second' WHERE id = $1")
        .bind(&id)
        .execute(&o.db)
        .await
        .expect("held_until in the past");
    for what in ["release", "pay", "release"] {
        let body = if what == "pay" {
            json!({"payment_ref": "psp-1"})
        } else {
            json!({"reason": "payment_failed"})
        };
        let (s, b) = action(&o, &id, what, body).await;
        assert_eq!((s, b), (409, json!({"result": "hold_expired"})), "{what}");
    }
    let (remaining, expired, released): (i64, i64, i64) = sqlx::query_as(
        "SELECT remaining,
                (SELECT count(*) FROM ledger WHERE claim_id = $2 AND event = 'expired'),
                (SELECT count(*) FROM ledger WHERE claim_id = $2 AND event = 'released')
           FROM campaigns WHERE id = $1",
    )
    .bind(&c)
    .bind(&id)
    .fetch_one(&o.db)
    .await
    .expect("campaign row");
    assert_eq!(row(&o, &id).await.0, "expired");
    assert_eq!(
        (remaining, expired, released),
        (1, 1, 0),
        "the unit back once"
    );
    // Back at the gate too: the next customer gets the campaign's one unit.
    let (s, b) = o.claim(&c, &unique("ben"), "k").await;
    assert_eq!(s, 201, "{b}");
    stop_reconciled(o, &c).await;
}
