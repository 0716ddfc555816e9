//! A manager's changes to a draw campaign against a real origin over HTTP, real PostgreSQL and
//! real Redis: the rules of creation hold for a `PATCH` too (no waiting room, an end after the
//! entry window), an entry window already closed is refused at creation, entries stop when the
//! campaign ends, and a manager's early draw is audited.

use flashgate_tests::support::draws::{audit_trail, open_draw, origin, patch};
use flashgate_tests::support::TestOrigin;
use serde_json::{json, Value};

/// Campaign `c`'s `ends_at` and waiting room, as stored.
async fn stored(o: &TestOrigin, c: &str) -> (chrono::DateTime<chrono::Utc>, Option<Value>) {
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
