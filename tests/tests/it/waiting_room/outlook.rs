//! What a sold-out poll may promise: the `held_until` of the public status's `queue`, from
//! which the edge answers `outlook: may_return` (keep polling) or `final` (stop), against a real
//! origin, PostgreSQL and Redis, while a unit is on its way back to the gate.

use chrono::{DateTime, Utc};
use flashgate_origin::holds::expiry;
use flashgate_origin::holds::returns::return_to_gate;
use flashgate_shared::admission::{mint_admission, open_ticket};
use flashgate_tests::support::room::{campaign, room};
use flashgate_tests::support::{
    gate_remaining, own_services, queue_config, unique, TestOrigin, TEST_EDGE_SECRET,
};
use serde_json::Value;

const K: &[u8] = TEST_EDGE_SECRET.as_bytes();
/// The campaign's hold length, seconds.
const HOLD_S: i64 = 60;

/// The `held_until` of campaign `c`'s public `queue`, or `None` when it has none.
async fn held_until(o: &TestOrigin, c: &str) -> Option<DateTime<Utc>> {
    let q = o.status(c).await["queue"].clone();
    assert!(q.is_object(), "a waiting room's status has a queue: {q}");
    q.get("held_until")
        .map(|v| serde_json::from_value(v.clone()).expect("held_until is RFC 3339"))
}

/// Asserts `t` is one hold from about now (taken between `before` and the call).
fn one_hold_from(t: Option<DateTime<Utc>>, before: DateTime<Utc>) {
    let t = t.expect("held_until while a unit may come back");
    let hold = chrono::Duration::seconds(HOLD_S);
    assert!(
        t >= before + hold && t <= Utc::now() + hold,
        "{t} is not one hold after {before}"
    );
}

/// `customer` joins, is admitted (her token minted as the edge would), and claims; returns
/// her claim.
async fn claim(o: &TestOrigin, c: &str, customer: &str) -> Value {
    let (st, body) = o.join(c, customer).await;
    assert_eq!(st, 201, "{body}");
    let ticket = open_ticket(K, body["ticket"].as_str().expect("ticket"), c).expect("ticket");
    let token = mint_admission(K, &ticket, Utc::now().timestamp(), 60);
    let r = o.signed_claim(c, customer, Some(&token)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["claim"].clone()
}

/// Pays `claim`; panics unless 200.
async fn pay(o: &TestOrigin, claim: &Value) {
    let (st, body) = o.pay(claim["id"].as_str().expect("claim id")).await;
    assert_eq!(st, 200, "{body}");
}

/// The hold expiry in its two steps, as the sweeper runs them, with the status read between
/// them: PostgreSQL counts the unit back first, the gate gets it a moment later. In between
/// the gate says sold out and no hold is outstanding, yet the unit is coming back: a `final`
/// then sent every customer still polling away from the second wave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_until_covers_a_unit_on_its_way_back_and_goes_once_every_unit_is_paid() {
    // Services of its own, its sweeper idle: the test runs the expiry's steps itself, and no
    // other test's sweeper may run them first.
    let own = own_services(queue_config(), "outlook").await;
    let mut config = own.config.clone();
    config.sweep_interval_ms = 3_600_000;
    let o = TestOrigin::start_with(config).await;
    let c = campaign(
        &o,
        2,
        chrono::Duration::minutes(-1),
        Some(HOLD_S),
        room(100),
    )
    .await;
    let run = unique("o");

    // Active, units left: a unit the gate gives out now is held until one hold from now at
    // most, so a sell-out the edge learns from a claim's answer may still see it come back.
    let before = Utc::now();
    one_hold_from(held_until(&o, &c).await, before);

    // Ana claims and pays; Bob's hold is the one outstanding: the gate is empty, and the
    // latest end of a hold is his.
    let ana = claim(&o, &c, &format!("{run}-ana")).await;
    pay(&o, &ana).await;
    let bob = claim(&o, &c, &format!("{run}-bob")).await;
    let bobs_end: DateTime<Utc> = serde_json::from_value(bob["held_until"].clone()).unwrap();
    assert_eq!(gate_remaining(&o, &c).await, Some(0));
    assert_eq!(held_until(&o, &c).await, Some(bobs_end));

    // His hold expires: PostgreSQL's step only (the sweeper's statement), the gate not told yet.
    let bob_id = bob["id"].as_str().unwrap();
    sqlx::query("UPDATE claims SET held_until = now() - interval '1 second' WHERE id = $1")
        .bind(bob_id)
        .execute(&o.db)
        .await
        .unwrap();
    let back = expiry::expire_one(&o.origin.state.db, &c, bob_id, expiry::SWEEPER_ACTOR)
        .await
        .unwrap()
        .expect("his hold expired");
    assert_eq!(
        gate_remaining(&o, &c).await,
        Some(0),
        "the gate not told yet"
    );
    let before = Utc::now();
    one_hold_from(held_until(&o, &c).await, before);

    // The gate gets the unit back; Carol claims and pays it: every unit is paid, nothing can
    // come back, and the status has no `held_until` (the edge answers `final`).
    assert_eq!(
        return_to_gate(&o.origin.state.gate_returns(), &[back]).await,
        1
    );
    assert_eq!(gate_remaining(&o, &c).await, Some(1));
    let carol = claim(&o, &c, &format!("{run}-carol")).await;
    pay(&o, &carol).await;
    assert_eq!(held_until(&o, &c).await, None);
    o.stop().await;
    own.release().await;
}
