//! Hold extension (`POST /api/v1/claims/{id}/extend`) against a real origin over HTTP, real
//! PostgreSQL and real Redis: an extend at a hold's last second against the sweepers, a pay
//! racing the sweepers at the extended edge (200 rounds), and bad requests that change nothing
//! (the same key with another body among them, and one message for the bound of `seconds`).
//! Short holds (1–3 s) instead of a fake clock; the waits below are the scenario (requests
//! sent at set moments around a hold's end), never an assertion on time.

use std::time::Duration;

use chrono::{DateTime, Utc};
use flashgate_shared::api::{CampaignKind, ChangeRequest, NewCampaign};
use flashgate_tests::support::holds::{hold_of, second_sweeper, sleep_until};
use flashgate_tests::support::{
    assert_reconciled, eventually, gate_remaining, stop_reconciled, unique, TestOrigin,
};
use futures::future::join_all;
use serde_json::{json, Value};

/// Creates an active sale of `stock` units, holds of `hold_seconds`, extensible by
/// `extension_seconds`; returns its id.
async fn sale(o: &TestOrigin, stock: i64, hold_seconds: i64, extension_seconds: i64) -> String {
    let id = unique("ext");
    let now = Utc::now();
    o.create(&NewCampaign {
        id: id.clone(),
        name: "Extensible".into(),
        kind: CampaignKind::Sale,
        stock,
        starts_at: now - chrono::Duration::minutes(1),
        ends_at: now + chrono::Duration::hours(1),
        hold_seconds: Some(hold_seconds),
        hold_extension_seconds: Some(extension_seconds),
        gate_shards: None,
        waiting_room: None,
        access: None,
        draw: None,
        variants: None,
    })
    .await;
    id
}

/// `POST /api/v1/claims/{id}/extend` with the service token (`token` overrides it; `""`: none),
/// `Idempotency-Key: key` when given, and `body` as `application/json` (`ctype` overrides).
async fn extend_raw(
    o: &TestOrigin,
    id: &str,
    token: Option<&str>,
    key: Option<&str>,
    ctype: &str,
    body: &str,
) -> (u16, Value) {
    let service = o.config.service_token.expose().to_string();
    let mut req = o
        .http
        .post(format!("{}/api/v1/claims/{id}/extend", o.url))
        .header("content-type", ctype)
        .body(body.to_string());
    match token.unwrap_or(&service) {
        "" => {}
        t => req = req.bearer_auth(t),
    }
    if let Some(k) = key {
        req = req.header("idempotency-key", k);
    }
    let res = req.send().await.expect("request");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn extend(o: &TestOrigin, id: &str, key: &str) -> (u16, Value) {
    extend_raw(o, id, None, Some(key), "application/json", "{}").await
}

async fn pay(o: &TestOrigin, id: &str) -> (u16, Value) {
    let res = o
        .http
        .post(format!("{}/api/v1/claims/{id}/pay", o.url))
        .bearer_auth(o.config.service_token.expose())
        .json(&json!({"payment_ref": format!("psp-{id}")}))
        .send()
        .await
        .expect("pay");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The claim's stored status, `held_until`, whether it was extended, and its ledger events.
async fn row(o: &TestOrigin, id: &str) -> (String, DateTime<Utc>, bool, Vec<String>) {
    let (status, until, extended): (String, DateTime<Utc>, bool) = sqlx::query_as(
        "SELECT status, held_until, extended_at IS NOT NULL FROM claims WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&o.db)
    .await
    .expect("claim row");
    let events: Vec<String> =
        sqlx::query_scalar("SELECT event FROM ledger WHERE claim_id = $1 ORDER BY seq")
            .bind(id)
            .fetch_all(&o.db)
            .await
            .expect("ledger");
    (status, until, extended, events)
}

/// When the claim's ledger row `event` was written (PostgreSQL's clock).
async fn ledger_at(o: &TestOrigin, id: &str, event: &str) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT at FROM ledger WHERE claim_id = $1 AND event = $2")
        .bind(id)
        .bind(event)
        .fetch_one(&o.db)
        .await
        .expect("ledger row")
}

/// Waits until no claim of `c` is held and the gate has every unit back.
async fn wait_no_holds(o: &TestOrigin, c: &str, secs: u64) {
    eventually("the holds to expire", Duration::from_secs(secs), || async {
        let held = o.claim_rows(c, &["held"]).await;
        let (pg, gate) = (o.remaining(c).await, gate_remaining(o, c).await);
        if held == 0 && gate == Some(pg) {
            Ok(())
        } else {
            Err(format!("{held} held; remaining {pg}, gate {gate:?}"))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_extend_at_the_holds_last_second_cannot_expire_before_its_new_held_until() {
    let (n, hold, ext) = (40, 2, 2);
    let o = TestOrigin::start().await;
    let c = sale(&o, n, hold, ext).await;
    let holds: Vec<_> = o
        .winners(&c, n as usize)
        .await
        .iter()
        .map(hold_of)
        .collect();
    let last = holds.iter().map(|h| h.1).max().unwrap();
    // Each extend is sent between 900 ms before and 100 ms after its hold's end, while this
    // origin's sweeper and a second one expire due holds.
    let sweeper = second_sweeper(&o, &c, last + chrono::Duration::milliseconds(300), 10);
    let extends = join_all(holds.iter().enumerate().map(|(i, (id, until))| {
        let o = &o;
        async move {
            sleep_until(*until, (i as i64 % 21 - 18) * 50).await;
            (id.clone(), *until, extend(o, id, "k").await)
        }
    }));
    let (replies, _) = tokio::join!(extends, sweeper);
    wait_no_holds(&o, &c, 10).await;

    let mut extended = 0;
    for (id, until, (s, b)) in &replies {
        let (status, stored_until, was_extended, events) = row(&o, id).await;
        assert_eq!(status, "expired", "claim {id}");
        match *s {
            200 => {
                assert_eq!(b["result"], "extended", "{b}");
                let new: DateTime<Utc> = b["held_until"].as_str().unwrap().parse().unwrap();
                assert_eq!(new, *until + chrono::Duration::seconds(ext), "claim {id}");
                assert_eq!(b["claim"]["held_until"], b["held_until"]);
                assert_eq!(stored_until, new, "the stored end is the answered one");
                assert!(was_extended);
                assert_eq!(events, ["claimed", "extended", "expired"], "claim {id}");
                let expired_at = ledger_at(&o, id, "expired").await;
                assert!(
                    expired_at >= new,
                    "claim {id} expired at {expired_at}, before its new held_until {new}"
                );
                extended += 1;
            }
            409 => {
                assert_eq!(b, &json!({"result": "hold_expired"}), "claim {id}");
                assert_eq!((stored_until, was_extended), (*until, false), "claim {id}");
                assert_eq!(events, ["claimed", "expired"], "claim {id}");
            }
            other => panic!("claim {id}: {other} {b}"),
        }
    }
    println!("last-second extends: {extended} extended of {n}");
    assert!(extended > 0, "some extends must land before the end");
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pay_racing_the_sweeper_at_the_extended_edge_gets_one_outcome_200_rounds() {
    let rounds = 200;
    let o = TestOrigin::start().await;
    let c = sale(&o, rounds, 4, 1).await;
    let claims = o.winners(&c, rounds as usize).await;
    // Every hold is extended at once, long before its end: each answers 200.
    let extends = join_all(claims.iter().map(|cl| {
        let o = &o;
        async move { extend(o, cl["id"].as_str().unwrap(), "k").await }
    }))
    .await;
    let holds: Vec<(String, DateTime<Utc>)> = extends
        .iter()
        .map(|(s, b)| {
            assert_eq!(*s, 200, "{b}");
            let id = b["claim"]["id"].as_str().unwrap().to_string();
            (id, b["held_until"].as_str().unwrap().parse().unwrap())
        })
        .collect();
    let last = holds.iter().map(|h| h.1).max().unwrap();

    // Each pay is sent between 300 ms before and 100 ms after its extended held_until, while
    // this origin's sweeper and a second one expire due holds.
    let sweeper = second_sweeper(&o, &c, last + chrono::Duration::milliseconds(300), 10);
    let pays = join_all(holds.iter().enumerate().map(|(i, (id, until))| {
        let o = &o;
        async move {
            sleep_until(*until, (i as i64 % 21 - 15) * 20).await;
            (id.clone(), *until, pay(o, id).await)
        }
    }));
    let (replies, by_second) = tokio::join!(pays, sweeper);
    wait_no_holds(&o, &c, 10).await;

    let (mut paid, mut expired) = (0, 0);
    for (id, until, (s, b)) in &replies {
        let (status, stored_until, _, events) = row(&o, id).await;
        assert_eq!(stored_until, *until, "claim {id}: the extended end is kept");
        match (*s, status.as_str()) {
            (200, "paid") => {
                assert_eq!(b["result"], "paid", "{b}");
                assert_eq!(events, ["claimed", "extended", "paid"], "claim {id}");
                assert!(ledger_at(&o, id, "paid").await < *until, "claim {id}");
                paid += 1;
            }
            (409, "expired") => {
                assert_eq!(b, &json!({"result": "hold_expired"}), "claim {id}");
                assert_eq!(events, ["claimed", "extended", "expired"], "claim {id}");
                assert!(ledger_at(&o, id, "expired").await >= *until, "claim {id}");
                expired += 1;
            }
            other => panic!("claim {id}: reply and row disagree: {other:?} {b}"),
        }
    }
    println!("pays at the extended edge: {paid} paid, {expired} expired ({by_second} by the second sweeper)");
    assert_eq!(paid + expired, rounds);
    assert!(paid > 0 && expired > 0, "the race must go both ways");
    let r = assert_reconciled(&o, &c).await;
    assert_eq!((r.claims.paid, r.claims.expired), (paid, expired));
    o.stop().await;
}

/// A bad extend: status, result, token, key, Content-Type, body.
type Case<'a> = (
    u16,
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    &'a str,
    &'a str,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_extend_requests_get_documented_answers_and_change_nothing() {
    let o = TestOrigin::start().await;
    let c = sale(&o, 5, 600, 60).await;
    let claims = o.winners(&c, 3).await;
    let ids: Vec<&str> = claims.iter().map(|cl| cl["id"].as_str().unwrap()).collect();
    let (x, paid, w) = (ids[0], ids[1], ids[2]);

    // Extend once: 200 with the new end; the same key again: the same 200; another: 409.
    let before_x = row(&o, x).await;
    let (s, first) = extend(&o, x, "k1").await;
    assert_eq!(
        (s, first["result"].as_str()),
        (200, Some("extended")),
        "{first}"
    );
    let new: DateTime<Utc> = first["held_until"].as_str().unwrap().parse().unwrap();
    assert_eq!(new, before_x.1 + chrono::Duration::seconds(60));
    let (s, again) = extend(&o, x, "k1").await;
    assert_eq!((s, &again), (200, &first), "the same key gets the same 200");
    let json_ct = "application/json";
    let (s, again) = extend_raw(&o, x, None, Some("k1"), json_ct, "").await;
    assert_eq!((s, &again), (200, &first), "an empty body is {{}}");
    let (s, b) = extend_raw(&o, x, None, Some("k1"), json_ct, r#"{"seconds":30}"#).await;
    assert_eq!(
        (s, b["result"].as_str()),
        (422, Some("idempotency_key_reused")),
        "the same key with another body: {b}"
    );
    let (s, twice) = extend(&o, x, "k2").await;
    assert_eq!(
        (s, twice["result"].as_str()),
        (409, Some("already_extended"))
    );
    assert_eq!(twice["claim"]["held_until"], first["held_until"]);
    assert_eq!(row(&o, x).await.3, ["claimed", "extended"]);

    // A paid claim.
    let (s, _) = pay(&o, paid).await;
    assert_eq!(s, 200);
    let (s, b) = extend(&o, paid, "k1").await;
    assert_eq!(
        (s, b["result"].as_str()),
        (409, Some("already_paid")),
        "{b}"
    );

    // Bad requests on claim `w`: (status, result, token, key, Content-Type, body).
    #[rustfmt::skip]
    let cases: [Case<'_>; 10] = [
        (401, "unauthorized", Some(""), Some("k"), json_ct, "{}"),
        (403, "forbidden", Some("nope"), Some("k"), json_ct, "{}"),
        (400, "invalid_idempotency_key", None, None, json_ct, "{}"),
        (400, "invalid_json", None, Some("k"), json_ct, "{"),
        (415, "unsupported_media_type", None, Some("k"), "text/plain", "{}"),
        (422, "validation_failed", None, Some("k"), json_ct, r#"{"seconds":61}"#),
        (422, "validation_failed", None, Some("k"), json_ct, r#"{"seconds":0}"#),
        (422, "validation_failed", None, Some("k"), json_ct, r#"{"seconds":3601}"#),
        (422, "validation_failed", None, Some("k"), json_ct, r#"{"seconds":"5"}"#),
        (422, "validation_failed", None, Some("k"), json_ct, r#"{"seconds":5,"x":1}"#),
    ];
    let before_w = row(&o, w).await;
    for (want, result, token, key, ctype, body) in cases {
        let (s, b) = extend_raw(&o, w, token, key, ctype, body).await;
        assert_eq!(
            (s, b["result"].as_str()),
            (want, Some(result)),
            "{body}: {b}"
        );
        assert!(b["message"].is_string(), "{b}");
    }
    for bad in ["c_nope", "c_0000000000000000000000000000000f"] {
        let (s, b) = extend(&o, bad, "k").await;
        assert_eq!((s, b["result"].as_str()), (404, Some("not_found")), "{bad}");
    }
    // One rule, one message, naming this campaign's bound whatever side it is missed on.
    let mut messages = Vec::new();
    for n in [0, 61, 3601, -1] {
        let body = format!(r#"{{"seconds":{n}}}"#);
        let (_, b) = extend_raw(&o, w, None, Some("k"), json_ct, &body).await;
        messages.push(b["message"].as_str().unwrap_or_default().to_string());
    }
    messages.dedup();
    assert_eq!(
        messages,
        ["seconds must be between 1 and the campaign's hold_extension_seconds (60)"]
    );
    assert_eq!(row(&o, w).await, before_w, "nothing changed");

    // A campaign with extension off (the default), and a giveaway coupon.
    let off = sale(&o, 2, 600, 0).await;
    let z = o.winners(&off, 1).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let before_z = row(&o, &z).await;
    let (s, b) = extend(&o, &z, "k").await;
    assert_eq!(
        (s, b["result"].as_str()),
        (422, Some("validation_failed")),
        "{b}"
    );
    assert!(b["message"]
        .as_str()
        .unwrap()
        .contains("hold_extension_seconds"));
    assert_eq!(row(&o, &z).await, before_z, "nothing changed");
    let g = o.campaign("giveaway", 1).await;
    let coupon = o.winners(&g, 1).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (s, b) = extend(&o, &coupon, "k").await;
    assert_eq!((s, b), (409, json!({"result": "not_a_hold"})));
    assert_reconciled(&o, &off).await;
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managers_set_hold_extension_on_create_and_change_within_its_range() {
    let o = TestOrigin::start().await;
    let c = sale(&o, 2, 600, 120).await;
    let (s, view) = o
        .admin(
            reqwest::Method::GET,
            &format!("/admin/v1/campaigns/{c}"),
            Some(o.viewer_token()),
            None,
        )
        .await;
    assert_eq!(
        (s, view["hold_extension_seconds"].as_i64()),
        (200, Some(120))
    );

    let (s, b) = o.change(&c, ChangeRequest::hold_extension(30)).await;
    assert_eq!((s, b["changed"].as_bool()), (200, Some(true)), "{b}");
    assert_eq!(b["campaign"]["hold_extension_seconds"], 30);
    assert_eq!(b["audit"]["action"], "set_hold_extension");
    let (s, b) = o.change(&c, ChangeRequest::hold_extension(30)).await;
    assert_eq!((s, b["changed"].as_bool()), (200, Some(false)), "{b}");
    // Extends now go by the new limit.
    let id = o.winners(&c, 1).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (s, _) = extend_raw(
        &o,
        &id,
        None,
        Some("k"),
        "application/json",
        r#"{"seconds":31}"#,
    )
    .await;
    assert_eq!(s, 422);
    let (s, b) = extend_raw(
        &o,
        &id,
        None,
        Some("k"),
        "application/json",
        r#"{"seconds":30}"#,
    )
    .await;
    assert_eq!((s, b["result"].as_str()), (200, Some("extended")), "{b}");

    for bad in [
        json!({"hold_extension_seconds": 3601}),
        json!({"hold_extension_seconds": -1}),
    ] {
        let (s, b) = o.change(&c, bad).await;
        assert_eq!(
            (s, b["result"].as_str()),
            (422, Some("validation_failed")),
            "{b}"
        );
    }
    let g = o.campaign("giveaway", 1).await;
    let (s, b) = o.change(&g, ChangeRequest::hold_extension(60)).await;
    assert_eq!(
        (s, b["result"].as_str()),
        (422, Some("validation_failed")),
        "{b}"
    );
    let now = Utc::now();
    let mut new = json!({
        "id": unique("ext-bad"), "name": "Bad", "kind": "sale", "stock": 1,
        "starts_at": now, "ends_at": now + chrono::Duration::hours(1),
        "hold_extension_seconds": 3601
    });
    let token = o.manager_token().to_string();
    let (s, b) = o
        .admin(
            reqwest::Method::POST,
            "/admin/v1/campaigns",
            Some(&token),
            Some(new.clone()),
        )
        .await;
    assert_eq!(
        (s, b["result"].as_str()),
        (422, Some("validation_failed")),
        "{b}"
    );
    new["kind"] = json!("giveaway");
    new["hold_extension_seconds"] = json!(60);
    let (s, b) = o
        .admin(
            reqwest::Method::POST,
            "/admin/v1/campaigns",
            Some(&token),
            Some(new),
        )
        .await;
    assert_eq!(
        (s, b["result"].as_str()),
        (422, Some("validation_failed")),
        "{b}"
    );
    stop_reconciled(o, &c).await;
}
