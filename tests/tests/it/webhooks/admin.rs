//! The webhook admin API and the outbox against a real origin, PostgreSQL and Redis: bad input
//! is refused with the documented 4xx and changes nothing; writes are audited and idempotent;
//! a stampede's losers write no event; deliveries are listed and replayed, and deleted with
//! their endpoint.

use flashgate_tests::support::{own_services, test_config, unique, TestOrigin};
use flashgate_tests::webhooks::{register, unregister};
use reqwest::Method;
use serde_json::{json, Value};

const ENDPOINTS: &str = "/admin/v1/webhooks/endpoints";

async fn endpoint_count(o: &TestOrigin) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM webhook_endpoints")
        .fetch_one(&o.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn bad_endpoint_writes_are_refused_with_422_and_change_nothing() {
    // A database of its own: the other tests of this binary create endpoints meanwhile.
    let own = own_services(test_config(), "wh_bad").await;
    let mut config = own.config.clone();
    config.webhooks.webhook_allow_private = false;
    let o = TestOrigin::start_with(config).await;
    let token = o.manager_token().to_string();
    let short = format!("whsec_{}", "AAAA".repeat(7)); // 21 bytes
    let bad: Vec<(Value, &str)> = vec![
        (
            json!({"url": "http://shop.example/h", "event_types": ["claim.held"]}),
            "https",
        ),
        (
            json!({"url": "https://127.0.0.1/h", "event_types": ["claim.held"]}),
            "private",
        ),
        (
            json!({"url": "https://169.254.169.254/latest", "event_types": ["claim.held"]}),
            "private",
        ),
        (
            json!({"url": "https://10.0.0.7/h", "event_types": ["claim.held"]}),
            "private",
        ),
        (
            json!({"url": "https://localhost/h", "event_types": ["claim.held"]}),
            "private",
        ),
        (
            json!({"url": "not a url", "event_types": ["claim.held"]}),
            "absolute",
        ),
        (
            json!({"url": "https://93.184.216.34/h", "event_types": ["claim.exploded"]}),
            "unknown event type",
        ),
        (
            json!({"url": "https://93.184.216.34/h", "event_types": []}),
            "at least one",
        ),
        (
            json!({"url": "https://93.184.216.34/h", "event_types": ["claim.held"], "secret": short}),
            "24 to 64",
        ),
        (
            json!({"url": "https://93.184.216.34/h", "event_types": ["claim.held"], "secret": "nope"}),
            "whsec_",
        ),
    ];
    let before = endpoint_count(&o).await;
    for (body, says) in bad {
        let (s, reply) = o
            .admin(Method::POST, ENDPOINTS, Some(&token), Some(body.clone()))
            .await;
        assert_eq!(s, 422, "{body} -> {reply}");
        assert_eq!(reply["result"], "validation_failed", "{reply}");
        assert!(reply["message"].as_str().unwrap().contains(says), "{reply}");
    }
    // Not JSON, an unknown field, a viewer's token, no token.
    let (s, _) = o
        .admin(
            Method::POST,
            ENDPOINTS,
            Some(&token),
            Some(json!({"url": "https://93.184.216.34/h",
            "event_types": ["claim.held"], "colour": "red"})),
        )
        .await;
    assert_eq!(s, 422);
    let ok = json!({"url": "https://93.184.216.34/h", "event_types": ["claim.held"]});
    let (s, _) = o
        .admin(
            Method::POST,
            ENDPOINTS,
            Some(o.viewer_token()),
            Some(ok.clone()),
        )
        .await;
    assert_eq!(s, 403);
    let (s, _) = o
        .admin(Method::POST, ENDPOINTS, None, Some(ok.clone()))
        .await;
    assert_eq!(s, 401);
    assert_eq!(endpoint_count(&o).await, before, "nothing was written");

    // Changes of an existing endpoint: refused the same way, the endpoint as it was.
    let (s, created) = o
        .admin(Method::POST, ENDPOINTS, Some(&token), Some(ok))
        .await;
    assert_eq!(s, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    let path = format!("{ENDPOINTS}/{id}");
    for body in [
        json!({"event_types": ["nope"]}),
        json!({"url": "http://93.184.216.34/h"}),
        json!({"description": "x".repeat(501)}),
    ] {
        let (s, reply) = o
            .admin(Method::PATCH, &path, Some(&token), Some(body.clone()))
            .await;
        assert_eq!(s, 422, "{body} -> {reply}");
    }
    let (_, shown) = o
        .admin(Method::GET, &path, Some(o.viewer_token()), None)
        .await;
    assert_eq!(shown["event_types"], json!(["claim.held"]));
    assert_eq!(shown["url"], "https://93.184.216.34/h");
    assert!(
        shown.get("secret").is_none(),
        "a read never shows the secret"
    );
    for (m, p) in [
        (Method::GET, format!("{ENDPOINTS}/not-a-uuid")),
        (
            Method::DELETE,
            format!("{ENDPOINTS}/{}", uuid::Uuid::new_v4()),
        ),
        (
            Method::POST,
            format!("{ENDPOINTS}/{}/rotate", uuid::Uuid::new_v4()),
        ),
    ] {
        let (s, reply) = o.admin(m, &p, Some(&token), None).await;
        assert_eq!(s, 404, "{p} -> {reply}");
        assert_eq!(reply["result"], "not_found");
    }
    unregister(&o, &id).await;
    o.stop().await;
    own.release().await;
}

#[tokio::test]
async fn endpoint_writes_are_audited_and_a_repeated_key_creates_one_endpoint() {
    let o = TestOrigin::start().await;
    let token = o.manager_token().to_string();
    let key = unique("idem");
    let body = json!({"url": "https://93.184.216.34/h", "event_types": ["claim.paid"],
        "description": "checkout"});
    let (s1, first, replayed1) = o
        .admin_keyed(Method::POST, ENDPOINTS, &token, Some(&key), &body)
        .await;
    let (s2, second, replayed2) = o
        .admin_keyed(Method::POST, ENDPOINTS, &token, Some(&key), &body)
        .await;
    assert_eq!((s1, s2, replayed1, replayed2), (201, 201, false, true));
    assert_eq!(first, second);
    let id = first["id"].as_str().unwrap().to_string();
    assert!(first["secret"].as_str().unwrap().starts_with("whsec_"));
    let path = format!("{ENDPOINTS}/{id}");
    let (s, changed) = o
        .admin(
            Method::PATCH,
            &path,
            Some(&token),
            Some(json!({"enabled": false,
            "event_types": ["claim.paid", "claim.released"]})),
        )
        .await;
    assert_eq!(s, 200, "{changed}");
    assert_eq!(changed["enabled"], false);
    assert_eq!(
        changed["event_types"],
        json!(["claim.paid", "claim.released"])
    );
    let (s, _) = o
        .admin(Method::POST, &format!("{path}/rotate"), Some(&token), None)
        .await;
    assert_eq!(s, 200);
    unregister(&o, &id).await;
    let (s, _) = o.admin(Method::GET, &path, Some(&token), None).await;
    assert_eq!(s, 404);
    let actions: Vec<(String, String)> = sqlx::query_as(
        "SELECT actor, action FROM webhook_audit WHERE endpoint_id = $1::uuid ORDER BY seq",
    )
    .bind(&id)
    .fetch_all(&o.db)
    .await
    .unwrap();
    let actions: Vec<&str> = actions.iter().map(|(_, a)| a.as_str()).collect();
    assert_eq!(actions, vec!["create", "change", "rotate_secret", "delete"]);
    o.stop().await;
}

#[tokio::test]
async fn a_stampedes_losers_write_no_event_and_each_winner_one() {
    let o = TestOrigin::start().await;
    let c = o.held_sale(5, 60).await;
    let customers: Vec<String> = (0..40).map(|i| unique(&format!("s{i}"))).collect();
    let replies = o.stampede(&c, &customers).await;
    let won = replies.iter().filter(|(s, _)| *s == 201).count();
    assert_eq!(won, 5);
    let events: Vec<(String, i32)> = sqlx::query_as(
        "SELECT type, sequence FROM webhook_events WHERE campaign_id = $1 ORDER BY type",
    )
    .bind(&c)
    .fetch_all(&o.db)
    .await
    .unwrap();
    let held = events
        .iter()
        .filter(|(t, s)| t == "claim.held" && *s == 1)
        .count();
    assert_eq!(held, 5, "{events:?}");
    let sold_out = events
        .iter()
        .filter(|(t, _)| t == "campaign.sold_out")
        .count();
    assert_eq!(sold_out, 1, "{events:?}");
    assert_eq!(events.len(), 6, "{events:?}");
    o.stop().await;
}

#[tokio::test]
async fn deliveries_are_listed_per_endpoint_and_an_event_can_be_replayed() {
    let o = TestOrigin::start().await;
    // An endpoint that answers nothing useful: the relay leaves its rows pending or failing;
    // it is disabled so that the list stays as written.
    let (id, _) = register(&o, "http://127.0.0.1:9/h", &["campaign.paused"]).await;
    let token = o.manager_token().to_string();
    let path = format!("{ENDPOINTS}/{id}");
    let (s, _) = o
        .admin(
            Method::PATCH,
            &path,
            Some(&token),
            Some(json!({"enabled": false})),
        )
        .await;
    assert_eq!(s, 200);
    // Disabled: a pause writes the event but no delivery for it.
    let c = o.held_sale(1, 60).await;
    let (s, _) = o.change(&c, json!({"action": "pause"})).await;
    assert_eq!(s, 200);
    let (s, list) = o
        .admin(
            Method::GET,
            &format!("{path}/deliveries"),
            Some(o.viewer_token()),
            None,
        )
        .await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list["deliveries"], json!([]));
    let event: uuid::Uuid = sqlx::query_scalar(
        "SELECT id FROM webhook_events WHERE campaign_id = $1 AND type = 'campaign.paused'",
    )
    .bind(&c)
    .fetch_one(&o.db)
    .await
    .unwrap();
    let (s, r) = o
        .admin(
            Method::POST,
            &format!("{path}/replay"),
            Some(&token),
            Some(json!({"event_id": event.to_string()})),
        )
        .await;
    assert_eq!(s, 202, "{r}");
    assert_eq!(r["queued"], 1);
    let (_, list) = o
        .admin(
            Method::GET,
            &format!("{path}/deliveries?status=pending"),
            Some(o.viewer_token()),
            None,
        )
        .await;
    assert_eq!(list["deliveries"][0]["event_id"], event.to_string());
    assert_eq!(list["deliveries"][0]["type"], "campaign.paused");
    let (s, r) = o
        .admin(
            Method::POST,
            &format!("{path}/replay"),
            Some(&token),
            Some(json!({})),
        )
        .await;
    assert_eq!((s, r["result"].as_str()), (422, Some("validation_failed")));
    let (s, _) = o
        .admin(
            Method::GET,
            &format!("{path}/deliveries?status=lost"),
            Some(o.viewer_token()),
            None,
        )
        .await;
    assert_eq!(s, 422);
    unregister(&o, &id).await;
    o.stop().await;
}

#[tokio::test]
async fn a_giveaway_coupon_writes_issued_then_redeemed_once() {
    let o = TestOrigin::start().await;
    let c = o.campaign("giveaway", 3).await;
    let (s, body) = o.claim(&c, &unique("gv"), &unique("key")).await;
    assert_eq!(s, 201, "{body}");
    let code = body["claim"]["code"].as_str().expect("code").to_string();
    let id = body["claim"]["id"].as_str().expect("id").to_string();
    // Two redeems with two keys: one redeems, the other is already_redeemed and writes nothing.
    for key in [unique("r1"), unique("r2")] {
        let res = o
            .http
            .post(format!("{}/api/v1/coupons/{code}/redeem", o.url))
            .bearer_auth(o.config.service_token.expose())
            .header("idempotency-key", key)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert!([200, 409].contains(&res.status().as_u16()));
    }
    let events: Vec<(String, i32, Value)> = sqlx::query_as(
        "SELECT type, sequence, payload FROM webhook_events WHERE object_id = $1 ORDER BY sequence",
    )
    .bind(&id)
    .fetch_all(&o.db)
    .await
    .unwrap();
    let kinds: Vec<(&str, i32)> = events.iter().map(|(t, s, _)| (t.as_str(), *s)).collect();
    assert_eq!(kinds, vec![("coupon.issued", 1), ("coupon.redeemed", 2)]);
    assert_eq!(events[1].2["status"], "redeemed");
    o.stop().await;
}

#[tokio::test]
async fn deleting_an_endpoint_deletes_its_deliveries() {
    let o = TestOrigin::start().await;
    let (id, _) = register(&o, "https://93.184.216.34/h", &["claim.held"]).await;
    let c = o.held_sale(5, 60).await;
    let (s, body) = o.claim(&c, &unique("gone"), &unique("key")).await;
    assert_eq!(s, 201, "{body}");
    // Rows of this endpoint: of this campaign's events, and of any (other tests' claims are
    // queued for it too while it exists).
    let rows = || async {
        sqlx::query_as::<_, (i64, i64)>(
            "SELECT count(*) FILTER (WHERE e.campaign_id = $2), count(*)
               FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
              WHERE d.endpoint_id = $1::uuid",
        )
        .bind(&id)
        .bind(&c)
        .fetch_one(&o.db)
        .await
        .unwrap()
    };
    // Written with the claim, in its transaction.
    assert_eq!(rows().await.0, 1);
    unregister(&o, &id).await;
    assert_eq!(rows().await, (0, 0));
    o.stop().await;
}
