//! A manager's changes to a draw campaign against a real origin over HTTP, real PostgreSQL and
//! real Redis: the rules of creation hold for a `PATCH` too (no waiting room, an end after the
//! entry window), entries stop when the campaign ends, and a manager's early draw is audited.
//! (An entry window already closed at creation is among the bad options of `origin.rs`.)

use chrono::{Duration, SubsecRound, Utc};
use flashgate_tests::support::draws::{
    audit_trail, draw_campaign, enter, entries_in_db, open_draw, origin, patch, run_now,
};
use flashgate_tests::support::{unique, TestOrigin};
use serde_json::{json, Value};

/// Campaign `c`'s `ends_at` and waiting room, as stored.
async fn stored(o: &TestOrigin, c: &str) -> (chrono::DateTime<Utc>, Option<Value>) {
    sqlx::query_as("SELECT ends_at, waiting_room FROM campaigns WHERE id = $1")
        .bind(c)
        .fetch_one(&o.db)
        .await
        .expect("campaign row")
}

fn assert_refused(reply: &(u16, Value), status: u16, result: &str, message: &str) {
    let (s, b) = reply;
    assert_eq!((*s, b["result"].as_str()), (status, Some(result)), "{b}");
    let text = b["message"].as_str().unwrap_or_default();
    assert!(text.contains(message), "{message}: {b}");
}

#[tokio::test]
async fn a_draw_is_refused_a_waiting_room_by_patch_as_at_creation() {
    let o = origin().await;
    let c = open_draw(&o, "no-room", 2).await;
    let before = stored(&o, &c).await;
    let reply = patch(&o, &c, json!({"waiting_room": {"admit_per_second": 5}})).await;
    assert_refused(
        &reply,
        422,
        "validation_failed",
        "a draw campaign has no waiting_room",
    );
    // Nothing changed: no waiting room, no audit row, no queue to join, no claim without
    // having won.
    assert_eq!(stored(&o, &c).await, before);
    let trail = audit_trail(&o, &c).await;
    assert_eq!(
        trail.iter().map(|(a, _)| a.as_str()).collect::<Vec<_>>(),
        ["create"]
    );
    let (s, b) = o.join(&c, "walk-in").await;
    assert!((400..500).contains(&s), "joined a draw's queue: {s} {b}");
    let r = o.signed_claim(&c, "walk-in", None).await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    o.stop().await;
}

#[tokio::test]
async fn an_end_before_the_entry_window_closes_is_refused_by_patch() {
    let o = origin().await;
    let c = unique("end");
    let now = Utc::now();
    // Whole seconds: the window is stored to the microsecond.
    let close = (now + Duration::minutes(30)).trunc_subsecs(0);
    o.create(&draw_campaign(&c, 2, now - Duration::seconds(1), close))
        .await;
    let before = stored(&o, &c).await;
    // Creation demands entries_close_at < ends_at: so does the PATCH.
    for ends_at in [close - Duration::minutes(10), close] {
        let reply = patch(&o, &c, json!({ "ends_at": ends_at })).await;
        assert_refused(&reply, 422, "validation_failed", "ends_at");
        assert_refused(&reply, 422, "validation_failed", "draw.entries_close_at");
        assert_eq!(stored(&o, &c).await, before);
    }
    assert_eq!(audit_trail(&o, &c).await.len(), 1);
    // An end after the window is taken, and entries go on.
    let later = close + Duration::minutes(1);
    let (s, b) = patch(&o, &c, json!({ "ends_at": later })).await;
    assert_eq!((s, &b["changed"]), (200, &json!(true)), "{b}");
    assert_eq!(enter(&o, &c, "ana").await.0, 201);
    o.stop().await;
}

#[tokio::test]
async fn entries_stop_when_the_campaign_is_closed() {
    let o = origin().await;
    let c = open_draw(&o, "closed", 2).await;
    let (s, first) = enter(&o, &c, "ana").await;
    assert_eq!(s, 201, "{first}");
    let (s, b) = patch(&o, &c, json!({"action": "close"})).await;
    assert_eq!(s, 200, "{b}");
    // The campaign has ended: a new entry is refused as one outside the entry window.
    let reply = enter(&o, &c, "bea").await;
    assert_refused(&reply, 409, "conflict", "closed at");
    assert_refused(&reply, 409, "conflict", "ended");
    assert_eq!(entries_in_db(&o, &c).await, 1);
    // Ana keeps her receipt.
    let (s, again) = enter(&o, &c, "ana").await;
    assert_eq!(
        (s, &again["entry_id"]),
        (200, &first["entry_id"]),
        "{again}"
    );
    o.stop().await;
}

#[tokio::test]
async fn a_managers_early_draw_is_audited_once() {
    let o = origin().await;
    let c = open_draw(&o, "audited", 1).await;
    for p in ["ana", "bea", "cy"] {
        assert_eq!(enter(&o, &c, p).await.0, 201);
    }
    assert_eq!(run_now(&o, &c).await.0, 200);
    // A second run changes nothing and writes nothing.
    assert_eq!(run_now(&o, &c).await.0, 200);
    let trail = audit_trail(&o, &c).await;
    let actions: Vec<&str> = trail.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(actions, ["create", "draw_run"]);
    assert_eq!(trail[1].1, trail[0].1, "the manager who ran it");
    let path = format!("/admin/v1/campaigns/{c}/audit");
    let (s, b) = o
        .admin(reqwest::Method::GET, &path, Some(o.viewer_token()), None)
        .await;
    assert_eq!(s, 200, "{b}");
    let run = &b["entries"][0];
    assert_eq!(run["action"], "draw_run", "{b}");
    assert_eq!(
        (
            &run["before"]["drawn_at"],
            &run["after"]["entry_count"],
            &run["after"]["stock"]
        ),
        (&Value::Null, &json!(3), &json!(1)),
        "{run}"
    );
    o.stop().await;
}
