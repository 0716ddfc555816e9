//! The admin API (docs/ADMIN.md) against a real origin over HTTP, real PostgreSQL and real Redis:
//! roles (401 / 403), unknown campaigns (404), bad input (documented 4xx, nothing changed),
//! each change with its audit row, restock racing concurrent claims, and pause during a
//! stampede. Every test checks the database afterwards.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use flashgate_shared::api::{CampaignKind, ChangeAction, ChangeRequest, NewCampaign};
use flashgate_tests::support::eventually;
use flashgate_tests::support::{claim_at, unique, TestOrigin};
use flashgate_tests::support::{customers, gate_remaining};
use futures::future::join_all;
use reqwest::Method;
use serde_json::{json, Value};

/// Deadline of the polls in these tests.
const WAIT: Duration = Duration::from_secs(10);

async fn audit_rows(o: &TestOrigin, c: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM admin_audit WHERE campaign_id = $1")
        .bind(c)
        .fetch_one(&o.db)
        .await
        .unwrap()
}

/// (stock, remaining, paused, ends_at) in PostgreSQL.
async fn facts(o: &TestOrigin, c: &str) -> (i64, i64, bool, DateTime<Utc>) {
    sqlx::query_as("SELECT stock, remaining, paused, ends_at FROM campaigns WHERE id = $1")
        .bind(c)
        .fetch_one(&o.db)
        .await
        .unwrap()
}

/// Closes campaign `c` and expects 200 with the campaign `ended`.
async fn close(o: &TestOrigin, c: &str) {
    let (s, b) = o
        .change(c, ChangeRequest::action(ChangeAction::Close))
        .await;
    assert_eq!(
        (s, b["campaign"]["state"].as_str()),
        (200, Some("ended")),
        "{b}"
    );
}

fn assert_error_body(status: u16, body: &Value, want_status: u16, want_result: &str) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(body["result"], want_result, "{body}");
    assert!(body["message"].is_string(), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_roles_and_unknown_campaigns() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 5).await;
    let (manager, viewer) = (o.manager_token().to_string(), o.viewer_token().to_string());
    let one = format!("/admin/v1/campaigns/{c}");
    let reads = [
        "/admin/v1/campaigns".to_string(),
        one.clone(),
        format!("{one}/audit"),
    ];

    // No token: 401 on everything; an unknown token: 403.
    for path in &reads {
        let (s, b) = o.admin(Method::GET, path, None, None).await;
        assert_error_body(s, &b, 401, "unauthorized");
        let (s, b) = o.admin(Method::GET, path, Some("nope"), None).await;
        assert_error_body(s, &b, 403, "forbidden");
    }
    let (s, b) = o
        .admin(
            Method::PATCH,
            &one,
            None,
            Some(json!(ChangeRequest::action(ChangeAction::Pause))),
        )
        .await;
    assert_error_body(s, &b, 401, "unauthorized");

    // A viewer reads...
    for path in &reads {
        let (s, b) = o.admin(Method::GET, path, Some(&viewer), None).await;
        assert_eq!(s, 200, "{path}: {b}");
    }
    // ...and gets 403 on every write, which changes nothing.
    let writes = [
        ChangeRequest::action(ChangeAction::Pause),
        ChangeRequest::action(ChangeAction::Resume),
        ChangeRequest::action(ChangeAction::Close),
        ChangeRequest::restock(5),
        ChangeRequest::set_stock(9),
        ChangeRequest::ends_at(Utc::now() + chrono::Duration::hours(3)),
    ];
    let before = facts(&o, &c).await;
    for w in &writes {
        let (s, b) = o
            .admin(Method::PATCH, &one, Some(&viewer), Some(json!(w)))
            .await;
        assert_error_body(s, &b, 403, "forbidden");
    }
    let now = Utc::now();
    let new = NewCampaign {
        id: unique("v"),
        name: "V".into(),
        kind: CampaignKind::Sale,
        stock: 3,
        starts_at: now,
        ends_at: now + chrono::Duration::hours(1),
        hold_seconds: None,
        hold_extension_seconds: None,
        gate_shards: None,
        waiting_room: None,
        access: None,
        draw: None,
        variants: None,
    };
    let (s, b) = o
        .admin(
            Method::POST,
            "/admin/v1/campaigns",
            Some(&viewer),
            Some(json!(new)),
        )
        .await;
    assert_error_body(s, &b, 403, "forbidden");
    let created: i64 = sqlx::query_scalar("SELECT count(*) FROM campaigns WHERE id = $1")
        .bind(&new.id)
        .fetch_one(&o.db)
        .await
        .unwrap();
    assert_eq!(created, 0);
    assert_eq!(facts(&o, &c).await, before);
    // Only the campaign's `create` row.
    assert_eq!(audit_rows(&o, &c).await, 1);

    // Unknown campaign: 404 (not 500), for a well-formed and a malformed id.
    for id in ["no-such-campaign-xyz", "NOT_A_SLUG", &"a".repeat(65)] {
        let path = format!("/admin/v1/campaigns/{id}");
        for (m, body) in [
            (Method::GET, None),
            (
                Method::PATCH,
                Some(json!(ChangeRequest::action(ChangeAction::Pause))),
            ),
        ] {
            let (s, b) = o.admin(m, &path, Some(&manager), body).await;
            assert_error_body(s, &b, 404, "not_found");
        }
        let (s, b) = o
            .admin(Method::GET, &format!("{path}/audit"), Some(&manager), None)
            .await;
        assert_error_body(s, &b, 404, "not_found");
    }

    // The list shows the campaign with live counts.
    let (s, b) = o
        .admin(Method::GET, "/admin/v1/campaigns", Some(&viewer), None)
        .await;
    assert_eq!(s, 200);
    let mine = b["campaigns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == c.as_str())
        .expect("listed");
    assert_eq!(mine["remaining"], 5);
    assert_eq!(mine["state"], "active");
    assert_eq!(mine["counts"]["held"], 0);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_change_bodies_get_documented_4xx_and_change_nothing() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 5).await;
    let url = format!("{}/admin/v1/campaigns/{c}", o.url);
    let before = facts(&o, &c).await;
    let send = |ct: &'static str, body: Vec<u8>| {
        o.http
            .patch(&url)
            .bearer_auth(o.manager_token())
            .header("content-type", ct)
            .body(body)
            .send()
    };
    let json_ct = "application/json";
    // JSON bodies that parse but are not a valid change: 422 `validation_failed`.
    let invalid: [(&str, &[u8]); 15] = [
        ("duplicate keys", br#"{"action":"pause","action":"close"}"#),
        ("empty object", b"{}"),
        ("array", b"[]"),
        ("unknown field", br#"{"action":"pause","x":1}"#),
        ("unknown action", br#"{"action":"explode"}"#),
        ("restock without add", br#"{"action":"restock"}"#),
        ("negative add", br#"{"action":"restock","add":-5}"#),
        ("zero add", br#"{"action":"restock","add":0}"#),
        ("huge add", br#"{"action":"restock","add":1e300}"#),
        (
            "too big add",
            br#"{"action":"restock","add":99999999999999999999999}"#,
        ),
        ("string add", br#"{"action":"restock","add":"5"}"#),
        ("two changes", br#"{"action":"pause","set_stock":3}"#),
        ("bad date", br#"{"ends_at":"tomorrow"}"#),
        ("end before start", br#"{"ends_at":"2001-01-01T00:00:00Z"}"#),
        ("stock over max", br#"{"set_stock":10000001}"#),
    ];
    let mut cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
        ("not json", json_ct, b"{nope".to_vec(), 400, "invalid_json"),
        (
            "text/plain",
            "text/plain",
            br#"{"action":"pause"}"#.to_vec(),
            415,
            "unsupported_media_type",
        ),
        (
            "2 MB body",
            json_ct,
            vec![b' '; 2 * 1024 * 1024],
            413,
            "payload_too_large",
        ),
    ];
    for (name, body) in invalid {
        cases.push((name, json_ct, body.to_vec(), 422, "validation_failed"));
    }
    for (name, ct, body, status, result) in cases {
        let res = send(ct, body).await.unwrap();
        let s = res.status().as_u16();
        let b: Value = res.json().await.unwrap_or(Value::Null);
        assert_eq!(
            (s, b["result"].as_str()),
            (status, Some(result)),
            "{name}: {b}"
        );
        assert!(b["message"].is_string(), "{name}: {b}");
    }
    // Restocking past the maximum stock is a conflict with the campaign's facts.
    let (s, b) = o.change(&c, ChangeRequest::restock(10_000_000)).await;
    assert_error_body(s, &b, 409, "conflict");
    assert_eq!(facts(&o, &c).await, before);
    // Only the campaign's `create` row.
    assert_eq!(audit_rows(&o, &c).await, 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_change_is_audited_and_the_claim_path_follows() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 3).await;
    let people = customers(8);

    // Pause: claims answered paused; a second pause changes nothing.
    let (s, b) = o
        .change(&c, ChangeRequest::action(ChangeAction::Pause))
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        (b["changed"].as_bool(), b["campaign"]["state"].as_str()),
        (Some(true), Some("paused"))
    );
    assert_eq!(b["audit"]["actor"], "admin");
    assert_eq!(b["audit"]["action"], "pause");
    assert_eq!(b["audit"]["before"]["paused"], false);
    assert_eq!(b["audit"]["after"]["paused"], true);
    let (s, b) = o.claim(&c, &people[0], "k1").await;
    assert_eq!((s, b["result"].as_str()), (409, Some("paused")));
    let (s, b) = o
        .change(&c, ChangeRequest::action(ChangeAction::Pause))
        .await;
    assert_eq!((s, b["changed"].as_bool()), (200, Some(false)), "{b}");
    assert!(b["audit"].is_null());

    // Resume: claims flow; sell out.
    let (s, b) = o
        .change(&c, ChangeRequest::action(ChangeAction::Resume))
        .await;
    assert_eq!((s, b["campaign"]["state"].as_str()), (200, Some("active")));
    for p in &people[1..4] {
        let (s, b) = o.claim(&c, p, "k").await;
        assert_eq!(s, 201, "{b}");
    }
    let (s, b) = o.claim(&c, &people[4], "k").await;
    assert_eq!((s, b["result"].as_str()), (409, Some("sold_out")));

    // set_stock never below the 3 units claimed; to 3 is a no-op.
    let (s, b) = o.change(&c, ChangeRequest::set_stock(2)).await;
    assert_error_body(s, &b, 409, "conflict");
    let (s, b) = o.change(&c, ChangeRequest::set_stock(3)).await;
    assert_eq!((s, b["changed"].as_bool()), (200, Some(false)));

    // Restock of a sold-out campaign: it sells again at once (gate and sold-out flag followed).
    let (s, b) = o.change(&c, ChangeRequest::restock(1)).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["gate"], "updated");
    assert_eq!(
        (
            b["campaign"]["stock"].as_i64(),
            b["campaign"]["remaining"].as_i64()
        ),
        (Some(4), Some(1))
    );
    assert_eq!(gate_remaining(&o, &c).await, Some(1));
    let (s, b) = o.claim(&c, &people[5], "k").await;
    assert_eq!(s, 201, "{b}");
    let (s, _) = o.claim(&c, &people[6], "k").await;
    assert_eq!(s, 409);

    // set_stock up: remaining moves by the same difference.
    let (s, b) = o.change(&c, ChangeRequest::set_stock(6)).await;
    assert_eq!(
        (s, b["campaign"]["remaining"].as_i64()),
        (200, Some(2)),
        "{b}"
    );
    assert_eq!(gate_remaining(&o, &c).await, Some(2));
    assert_eq!(b["campaign"]["counts"]["held"], 4);
    assert_eq!(b["campaign"]["counts"]["claims_total"], 4);

    // set_stock down to the units claimed: sold out.
    let (s, b) = o.change(&c, ChangeRequest::set_stock(4)).await;
    assert_eq!(
        (s, b["campaign"]["state"].as_str()),
        (200, Some("sold_out")),
        "{b}"
    );
    assert_eq!(gate_remaining(&o, &c).await, Some(0));
    let (s, b) = o.claim(&c, &people[7], "k2").await;
    assert_eq!((s, b["result"].as_str()), (409, Some("sold_out")));

    // Move the end, then close: claims answered ended.
    let later = Utc::now() + chrono::Duration::hours(5);
    let (s, b) = o.change(&c, ChangeRequest::ends_at(later)).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(facts(&o, &c).await.3.timestamp(), later.timestamp());
    close(&o, &c).await;
    let (s, b) = o.claim(&c, &people[7], "k3").await;
    assert_eq!((s, b["result"].as_str()), (409, Some("ended")));

    // The audit trail: one row per change, newest first, with facts before and after.
    let (s, b) = o
        .admin(
            Method::GET,
            &format!("/admin/v1/campaigns/{c}/audit"),
            Some(o.viewer_token()),
            None,
        )
        .await;
    assert_eq!(s, 200);
    let actions: Vec<&str> = b["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "close",
            "set_ends_at",
            "set_stock",
            "set_stock",
            "restock",
            "resume",
            "pause",
            "create"
        ]
    );
    let restock = &b["entries"][4];
    assert_eq!(restock["params"], json!({"add": 1}));
    assert_eq!(
        (
            restock["before"]["stock"].as_i64(),
            restock["after"]["stock"].as_i64()
        ),
        (Some(3), Some(4))
    );
    assert_eq!(audit_rows(&o, &c).await, 8);
    let create = &b["entries"][7];
    assert_eq!(
        (create["actor"].as_str(), create["before"].is_null()),
        (Some("admin"), true)
    );
    assert_eq!(create["after"]["stock"].as_i64(), Some(3));
    assert_eq!(o.claim_rows(&c, &[]).await, 4);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restock_racing_concurrent_claims_loses_no_update() {
    let o = TestOrigin::start().await;
    for round in 0..5 {
        let c = o.campaign("sale", 10).await;
        let people = customers(10);
        let claims = people.iter().map(|p| {
            let (http, url, token, c) = (o.http.clone(), o.url.clone(), o.token(p), c.clone());
            tokio::spawn(async move { claim_at(&http, &url, &token, &c, "k").await })
        });
        let claims: Vec<_> = claims.collect();
        // The restock lands somewhere among the claims (a different place each round): the
        // delay is the scenario, not a wait for a condition.
        tokio::time::sleep(Duration::from_millis(round * 3)).await;
        let (s, b) = o.change(&c, ChangeRequest::restock(5)).await;
        assert_eq!(s, 200, "{b}");
        let replies: Vec<(u16, Value)> = join_all(claims)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert!(replies.iter().all(|(s, _)| *s == 201), "{replies:?}");
        let (stock, remaining, _, _) = facts(&o, &c).await;
        assert_eq!((stock, remaining), (15, 10 + 5 - 10), "round {round}");
        assert_eq!(o.claim_rows(&c, &[]).await, 10);
        assert_eq!(gate_remaining(&o, &c).await, Some(5), "round {round}");
        let (before, after): (Value, Value) = sqlx::query_as(
            "SELECT before, after FROM admin_audit WHERE campaign_id = $1 AND action = 'restock'",
        )
        .bind(&c)
        .fetch_one(&o.db)
        .await
        .unwrap();
        assert_eq!(after["stock"], 15);
        assert_eq!(
            after["remaining"].as_i64().unwrap(),
            before["remaining"].as_i64().unwrap() + 5
        );
    }
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pause_during_a_stampede_stops_claims_at_its_commit_and_resume_restarts_them() {
    let o = TestOrigin::start().await;
    let c = o.campaign("giveaway", 100_000).await;
    let stop = Arc::new(AtomicBool::new(false));
    let paused_at: Arc<std::sync::Mutex<Option<Instant>>> = Default::default();
    // 16 senders, each claiming for a new customer after the other.
    let run = unique("st");
    let senders: Vec<_> = (0..16)
        .map(|w| {
            let (http, url, c, stop) = (o.http.clone(), o.url.clone(), c.clone(), stop.clone());
            let paused_at = paused_at.clone();
            let (config, run) = (o.config.clone(), run.clone());
            tokio::spawn(async move {
                let mut late = Vec::new();
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let who = format!("{run}-{w}-{i}");
                    i += 1;
                    let token = flashgate_tests::support::token_for(&config, &who);
                    let sent = Instant::now();
                    let reply = claim_at(&http, &url, &token, &c, "k").await;
                    let after_pause = paused_at.lock().unwrap().is_some_and(|p| sent > p);
                    if after_pause {
                        late.push(reply);
                    }
                }
                late
            })
        })
        .collect();
    eventually("the stampede to make claims", WAIT, || async {
        match o.claim_rows(&c, &[]).await {
            n if n >= 50 => Ok(()),
            n => Err(format!("{n} claim rows")),
        }
    })
    .await;
    let (s, b) = o
        .change(&c, ChangeRequest::action(ChangeAction::Pause))
        .await;
    assert_eq!(s, 200, "{b}");
    *paused_at.lock().unwrap() = Some(Instant::now());
    let at: DateTime<Utc> = serde_json::from_value(b["audit"]["at"].clone()).unwrap();
    let at_pause = o.claim_rows(&c, &[]).await;
    // Claims keep coming after the pause: at least 100 more reach the handler.
    let sent_at_pause = o.claim_requests();
    eventually("100 claims after the pause", WAIT, || async {
        match o.claim_requests() - sent_at_pause {
            n if n >= 100 => Ok(()),
            n => Err(format!("{n} claims after the pause")),
        }
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let late: Vec<(u16, Value)> = join_all(senders)
        .await
        .into_iter()
        .flat_map(|r| r.unwrap())
        .collect();

    assert!(at_pause > 0, "the stampede made claims before the pause");
    assert!(!late.is_empty());
    assert!(
        late.iter()
            .all(|(s, b)| *s == 409 && b["result"] == "paused"),
        "{:?}",
        late.iter().find(|(_, b)| b["result"] != "paused")
    );
    assert_eq!(
        o.claim_rows(&c, &[]).await,
        at_pause,
        "no claim after the pause's commit"
    );
    let after_commit: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM claims WHERE campaign_id = $1 AND created_at > $2",
    )
    .bind(&c)
    .bind(at)
    .fetch_one(&o.db)
    .await
    .unwrap();
    assert_eq!(after_commit, 0);
    let (_, remaining, paused, _) = facts(&o, &c).await;
    assert!(paused);
    assert_eq!(
        remaining,
        100_000 - at_pause,
        "remaining agrees with the claims"
    );

    // Resume: claims flow again.
    let (s, b) = o
        .change(&c, ChangeRequest::action(ChangeAction::Resume))
        .await;
    assert_eq!(s, 200, "{b}");
    let fresh = customers(20);
    let replies = join_all(fresh.iter().map(|p| o.claim(&c, p, "k"))).await;
    assert!(replies.iter().all(|(s, _)| *s == 201), "{replies:?}");
    assert_eq!(o.claim_rows(&c, &[]).await, at_pause + 20);
    assert_eq!(audit_rows(&o, &c).await, 3, "create, pause, resume");
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_closed_before_its_start_keeps_the_planned_start_when_its_end_moves() {
    let o = TestOrigin::start().await;
    let c = unique("early");
    let start = Utc::now() + chrono::Duration::hours(1);
    let end = start + chrono::Duration::hours(1);
    o.create_campaign(&c, "giveaway", 5, start, end, None).await;
    close(&o, &c).await;
    // An end before the planned start is refused (as any end not after the start is) and
    // changes nothing.
    let (s, b) = o
        .change(
            &c,
            ChangeRequest::ends_at(start - chrono::Duration::minutes(1)),
        )
        .await;
    assert_error_body(s, &b, 422, "validation_failed");
    assert!(
        b["message"].as_str().unwrap().contains("planned start"),
        "{b}"
    );
    // A later end: the campaign waits for its planned start again, it does not open now.
    let later = start + chrono::Duration::hours(2);
    let (s, b) = o.change(&c, ChangeRequest::ends_at(later)).await;
    assert_eq!(s, 200, "{b}");
    let starts_at: DateTime<Utc> =
        sqlx::query_scalar("SELECT starts_at FROM campaigns WHERE id = $1")
            .bind(&c)
            .fetch_one(&o.db)
            .await
            .unwrap();
    assert_eq!(starts_at.timestamp_micros(), start.timestamp_micros());
    let (s, b) = o.claim(&c, &unique("ana"), "k1").await;
    assert_eq!((s, b["result"].as_str()), (409, Some("not_started")), "{b}");
    assert_eq!(o.claim_rows(&c, &[]).await, 0);
    o.stop().await;
}

/// The dashboard's token field is labelled for both roles, and the reads it makes answer a
/// viewer's token as a manager's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_asks_for_a_manager_or_a_viewer_token() {
    let o = TestOrigin::start().await;
    let res = o
        .http
        .get(format!("{}/admin", o.url))
        .send()
        .await
        .expect("GET /admin");
    assert_eq!(res.status().as_u16(), 200);
    let page = res.text().await.expect("the page");
    let start = page
        .find(r#"<label for="token">"#)
        .expect("the token field's label");
    let label = &page[start..start + page[start..].find("</label>").expect("its end")];
    assert!(
        label.contains("manager") && label.contains("viewer"),
        "{label}"
    );
    for token in [o.manager_token(), o.viewer_token()] {
        let (s, b) = o
            .admin(Method::GET, "/admin/v1/campaigns", Some(token), None)
            .await;
        assert_eq!(s, 200, "{b}");
    }
    o.stop().await;
}
