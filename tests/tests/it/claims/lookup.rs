//! `GET /api/v1/claims/{id}` with the service token: a claim read back by id whatever its
//! status (a paid one with its `payment_ref` and `paid_at`), and the customer's own
//! `claims/mine` (which says when her hold expired), against a real origin, PostgreSQL and
//! Redis.

use chrono::Utc;
use flashgate_shared::api::{PayRequest, ReleaseRequest};
use flashgate_tests::support::{unique, TestOrigin};
use serde_json::Value;

/// Status and body of `GET /api/v1/claims/{id}` with `token` (none: no Authorization).
async fn lookup(o: &TestOrigin, id: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = o.http.get(format!("{}/api/v1/claims/{id}", o.url));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let res = req.send().await.expect("lookup");
    let private = res.headers().get("cache-control").cloned();
    assert_eq!(
        private.as_ref().and_then(|v| v.to_str().ok()),
        Some(flashgate_shared::PRIVATE_CACHE_CONTROL)
    );
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_token_reads_a_claim_by_id_in_every_status() {
    let o = TestOrigin::start().await;
    let c = unique("look");
    let now = Utc::now();
    o.create_campaign(
        &c,
        "sale",
        5,
        now - chrono::Duration::minutes(1),
        now + chrono::Duration::hours(1),
        Some(600),
    )
    .await;
    let service = o.config.service_token.expose().to_string();
    let (ana, bea) = (unique("ana"), unique("bea"));
    let mut ids = Vec::new();
    for who in [&ana, &bea] {
        let (s, b) = o.claim(&c, who, "k1").await;
        assert_eq!(s, 201, "{b}");
        ids.push(b["claim"]["id"].as_str().unwrap().to_string());
    }
    let (s, b) = lookup(&o, &ids[0], Some(&service)).await;
    assert_eq!((s, b["status"].as_str()), (200, Some("held")), "{b}");
    assert_eq!(
        (b["customer"].as_str(), b["campaign"].as_str()),
        (Some(ana.as_str()), Some(c.as_str()))
    );
    let pay = PayRequest {
        payment_ref: "psp-1".into(),
    };
    let (s, b) = o.claim_action(&ids[0], "pay", &service, &pay).await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = o
        .claim_action(&ids[1], "release", &service, &ReleaseRequest::default())
        .await;
    assert_eq!(s, 200, "{b}");
    for (id, status) in [(&ids[0], "paid"), (&ids[1], "released")] {
        let (s, b) = lookup(&o, id, Some(&service)).await;
        assert_eq!(
            (s, b["status"].as_str(), b["id"].as_str()),
            (200, Some(status), Some(id.as_str())),
            "{b}"
        );
    }
    // The paid one carries its payment: the reference as sent, and when (its ledger row's time).
    let (_, b) = lookup(&o, &ids[0], Some(&service)).await;
    let paid_at: chrono::DateTime<Utc> =
        sqlx::query_scalar("SELECT at FROM ledger WHERE claim_id = $1 AND event = 'paid'")
            .bind(&ids[0])
            .fetch_one(&o.db)
            .await
            .expect("the paid ledger row");
    assert_eq!(b["payment_ref"].as_str(), Some("psp-1"), "{b}");
    let shown: chrono::DateTime<Utc> = b["paid_at"].as_str().expect("paid_at").parse().unwrap();
    assert_eq!(shown, paid_at);
    let (_, b) = lookup(&o, &ids[1], Some(&service)).await;
    assert_eq!(
        (&b["payment_ref"], &b["paid_at"]),
        (&Value::Null, &Value::Null),
        "{b}"
    );
    // A third hold runs past held_until: whether the sweeper got to it yet or not, her lookup
    // says it expired.
    let cy = unique("cy");
    let (s, b) = o.claim(&c, &cy, "k1").await;
    assert_eq!(s, 201, "{b}");
    sqlx::query("UPDATE claims SET held_until = now() - interval '1 second' WHERE id = $1")
        .bind(b["claim"]["id"].as_str().unwrap())
        .execute(&o.db)
        .await
        .expect("held_until in the past");
    let res = o
        .http
        .get(format!("{}/api/v1/campaigns/{c}/claims/mine", o.url))
        .bearer_auth(o.token(&cy))
        .send()
        .await
        .expect("mine");
    let s = res.status().as_u16();
    let b: Value = res.json().await.unwrap_or(Value::Null);
    assert_eq!((s, b["result"].as_str()), (200, Some("expired")), "{b}");
    // claims/mine with her customer token gives the same real status, the released one too.
    for (who, status) in [(&ana, "paid"), (&bea, "released")] {
        let res = o
            .http
            .get(format!("{}/api/v1/campaigns/{c}/claims/mine", o.url))
            .bearer_auth(o.token(who))
            .send()
            .await
            .expect("mine");
        let s = res.status().as_u16();
        let b: Value = res.json().await.unwrap_or(Value::Null);
        assert_eq!(
            (s, b["result"].as_str(), b["claim"]["status"].as_str()),
            (200, Some("claimed"), Some(status)),
            "{b}"
        );
    }
    // Refusals: no token, another token, an unknown id, a malformed one.
    let unknown = format!("c_{}", "0".repeat(32));
    let cases = [
        (ids[0].as_str(), None, 401, "unauthorized"),
        (ids[0].as_str(), Some(o.manager_token()), 403, "forbidden"),
        (unknown.as_str(), Some(service.as_str()), 404, "not_found"),
        ("not-a-claim", Some(service.as_str()), 404, "not_found"),
    ];
    for (id, token, status, result) in cases {
        let (s, b) = lookup(&o, id, token).await;
        assert_eq!(
            (s, b["result"].as_str()),
            (status, Some(result)),
            "{id}: {b}"
        );
    }
    o.stop().await;
}
