//! Sale holds against a real origin over HTTP, real PostgreSQL and real Redis: pay, release,
//! expiry by the sweeper, re-claim, and the second wave. Concurrent where it matters; short
//! holds (1–2 s) instead of a fake clock. Every test reads the database back and ends with a
//! clean reconciliation.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use flashgate_origin::holds::returns::GATE_RETURN_SETTLE_SECONDS;
use flashgate_shared::api::{PayRequest, ReleaseRequest};
use flashgate_tests::support::eventually;
use flashgate_tests::support::holds::{hold_of, second_sweeper, sleep_until};
use flashgate_tests::support::{
    assert_reconciled, gate_remaining, sold_out_flag_set, stop_reconciled,
};
use flashgate_tests::support::{unique, TestOrigin};
use futures::future::join_all;
use serde_json::{json, Value};

/// Starts an origin with an active sale of `stock` units and holds of `hold_seconds`; returns
/// both (the sale's id).
async fn origin_with_sale(stock: i64, hold_seconds: i64) -> (TestOrigin, String) {
    let o = TestOrigin::start().await;
    let id = unique("hold");
    let now = Utc::now();
    o.create_campaign(
        &id,
        "sale",
        stock,
        now - chrono::Duration::minutes(1),
        now + chrono::Duration::hours(1),
        Some(hold_seconds),
    )
    .await;
    (o, id)
}

async fn pay(o: &TestOrigin, id: &str, payment_ref: &str) -> (u16, Value) {
    let token = o.config.service_token.expose().to_string();
    o.claim_action(
        id,
        "pay",
        &token,
        &PayRequest {
            payment_ref: payment_ref.into(),
        },
    )
    .await
}

async fn release(o: &TestOrigin, id: &str) -> (u16, Value) {
    let token = o.config.service_token.expose().to_string();
    o.claim_action(
        id,
        "release",
        &token,
        &ReleaseRequest {
            reason: Some("customer_cancelled".into()),
        },
    )
    .await
}

/// Asserts that campaign `c` has `n` units left, in PostgreSQL and in the gate alike.
async fn assert_left(o: &TestOrigin, c: &str, n: i64) {
    assert_eq!(o.remaining(c).await, n, "remaining in PostgreSQL");
    assert_eq!(gate_remaining(o, c).await, Some(n), "remaining in the gate");
}

/// Claims and expects a 201; returns the claim.
async fn won(o: &TestOrigin, c: &str, customer: &str, key: &str) -> Value {
    let (s, b) = o.claim(c, customer, key).await;
    assert_eq!(s, 201, "{b}");
    b["claim"].clone()
}

/// An origin with a sale of `stock` units held 600 s, and the hold of one fresh customer
/// (named after `who`) on it: the origin, the sale's id and the claim's id.
async fn sale_with_one_hold(stock: i64, who: &str) -> (TestOrigin, String, String) {
    let (o, c) = origin_with_sale(stock, 600).await;
    let claim = won(&o, &c, &unique(who), "k").await;
    let id = claim["id"].as_str().expect("claim id").to_string();
    (o, c, id)
}

async fn status_of(o: &TestOrigin, claim: &str) -> String {
    sqlx::query_scalar("SELECT status FROM claims WHERE id = $1")
        .bind(claim)
        .fetch_one(&o.db)
        .await
        .expect("claim row")
}

/// Ledger rows of `claim` with `event`.
async fn ledger(o: &TestOrigin, claim: &str, event: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM ledger WHERE claim_id = $1 AND event = $2")
        .bind(claim)
        .bind(event)
        .fetch_one(&o.db)
        .await
        .expect("ledger")
}

/// `ms` milliseconds from now.
fn ms_from_now(ms: i64) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::milliseconds(ms)
}

/// Waits until no claim of `c` is held (the sweeper expired the unpaid ones) and the gate has
/// the units back (the sweeper commits the expiry first, then gives the units back through the
/// gate's bounded step), at most `secs`, plus the drain's settle time when the units of
/// concurrent ends are involved: a give-back refused by the gate's bound in a race (it read
/// PostgreSQL's remaining before another end committed) is retried by the sweeper's drain once
/// the return is `GATE_RETURN_SETTLE_SECONDS` old.
async fn wait_no_holds(o: &TestOrigin, c: &str, secs: u64) {
    let secs = secs + GATE_RETURN_SETTLE_SECONDS as u64;
    let what = format!("the holds of {c} to expire and their units to reach the gate");
    eventually(&what, Duration::from_secs(secs), || async {
        match o.claim_rows(c, &["held"]).await {
            0 => {}
            n => return Err(format!("{n} claims still held")),
        }
        let (pg, gate) = (o.remaining(c).await, gate_remaining(o, c).await);
        if gate == Some(pg) {
            Ok(())
        } else {
            Err(format!("PostgreSQL remaining {pg}, gate {gate:?}"))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expired_hold_goes_to_the_next_customer_and_the_late_pay_is_refused() {
    let (o, c) = origin_with_sale(1, 2).await;
    let (a, b) = (unique("ana"), unique("ben"));
    let a_claim = won(&o, &c, &a, "a1").await;
    let a_id = a_claim["id"].as_str().unwrap().to_string();
    let (s, body) = o.claim(&c, &b, "b1").await;
    assert_eq!((s, body["result"].as_str()), (409, Some("sold_out")));
    assert!(sold_out_flag_set(&o, &c).await);

    wait_no_holds(&o, &c, 6).await;
    assert_eq!(status_of(&o, &a_id).await, "expired");
    assert_left(&o, &c, 1).await;
    assert!(
        !sold_out_flag_set(&o, &c).await,
        "the sweeper clears the sold-out flag"
    );
    let actor: String =
        sqlx::query_scalar("SELECT actor FROM ledger WHERE claim_id = $1 AND event = 'expired'")
            .bind(&a_id)
            .fetch_one(&o.db)
            .await
            .unwrap();
    assert_eq!(actor, "sweeper");

    let b_claim = won(&o, &c, &b, "b2").await;
    let (s, body) = pay(&o, &a_id, "psp-late").await;
    assert_eq!((s, body), (409, json!({"result": "hold_expired"})));
    assert_eq!(status_of(&o, &a_id).await, "expired");
    assert_eq!(ledger(&o, &a_id, "paid").await, 0);

    let active = o.claim_rows(&c, &["held", "paid"]).await;
    assert_eq!(active, 1);
    assert_eq!(o.remaining(&c).await, 0);
    let (s, body) = pay(&o, b_claim["id"].as_str().unwrap(), "psp-b").await;
    assert_eq!((s, body["claim"]["status"].as_str()), (200, Some("paid")));
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_concurrent_releases_return_the_unit_once() {
    let (o, c, id) = sale_with_one_hold(5, "cy").await;
    assert_eq!(o.remaining(&c).await, 4);

    let replies = join_all((0..3).map(|_| release(&o, &id))).await;
    for (s, b) in &replies {
        assert_eq!(*s, 200, "{b}");
        assert_eq!(b["result"], "released");
        assert_eq!(b["claim"]["status"], "released");
    }
    assert_left(&o, &c, 5).await;
    assert_eq!(ledger(&o, &id, "released").await, 1);
    assert_eq!(status_of(&o, &id).await, "released");
    // Paying a released hold is refused: `released`, not `hold_expired`.
    let (s, b) = pay(&o, &id, "psp-1").await;
    assert_eq!((s, b["result"].as_str()), (409, Some("released")), "{b}");
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn releases_racing_the_sweeper_return_each_unit_once() {
    // Customer cancel, admin cancel and the sweeper at once: holds of 1 s, three releases each
    // sent right at `held_until`, while this origin's sweeper and a second one (called here)
    // expire due holds.
    let stock = 20;
    let (o, c) = origin_with_sale(stock, 1).await;
    let holds: Vec<_> = o
        .winners(&c, stock as usize)
        .await
        .iter()
        .map(hold_of)
        .collect();
    let second_sweeper = second_sweeper(&o, &c, ms_from_now(1_600), 5);
    let oref = &o;
    // Each release lands at its hold's end (three, 5 ms apart), racing the sweepers.
    let releases = join_all(holds.iter().flat_map(|(id, until)| {
        (0..3).map(move |n| async move {
            sleep_until(*until, n * 5).await;
            release(oref, id).await
        })
    }));
    let (replies, _) = tokio::join!(releases, second_sweeper);
    for (s, b) in &replies {
        assert!(
            (*s == 200 && b["result"] == "released")
                || (*s == 409 && b["result"] == "hold_expired"),
            "{s} {b}"
        );
    }
    wait_no_holds(&o, &c, 5).await;
    for (id, _) in &holds {
        let ends = ledger(&o, id, "released").await + ledger(&o, id, "expired").await;
        assert_eq!(ends, 1, "claim {id} left its hold {ends} times");
    }
    assert_left(&o, &c, stock).await;
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pay_at_the_last_instant_racing_the_sweeper_200_rounds() {
    let rounds = 200;
    let (o, c) = origin_with_sale(rounds, 1).await;
    // Every unit was taken (`winners` asserts 200 answers 201). `remaining` is not read here:
    // on a loaded machine the first 1 s holds may already have expired and given their units
    // back while the last claims were sent; the accounting below counts them.
    let claims = o.winners(&c, rounds as usize).await;

    // Each pay is sent between 300 ms before and 100 ms after its own held_until, while this
    // origin's sweeper (every 200 ms) and a second sweeper (here, every few ms) expire due holds.
    let second_sweeper = second_sweeper(&o, &c, ms_from_now(1_800), 10);
    let pays = join_all(
        claims
            .iter()
            .map(hold_of)
            .enumerate()
            .map(|(i, (id, until))| {
                let o = &o;
                async move {
                    sleep_until(until, (i as i64 % 21 - 15) * 20).await;
                    let reply = pay(o, &id, &format!("psp-{id}")).await;
                    (id, reply)
                }
            }),
    );
    let (replies, by_second_sweeper) = tokio::join!(pays, second_sweeper);
    wait_no_holds(&o, &c, 5).await;

    let (mut paid, mut expired) = (0, 0);
    for (id, (s, b)) in &replies {
        let status = status_of(&o, id).await;
        let (p, e) = (
            ledger(&o, id, "paid").await,
            ledger(&o, id, "expired").await,
        );
        match (*s, status.as_str()) {
            (200, "paid") => {
                assert_eq!(b["result"], "paid");
                assert_eq!((p, e), (1, 0), "claim {id}");
                paid += 1;
            }
            (409, "expired") => {
                assert_eq!(b["result"], "hold_expired");
                assert_eq!((p, e), (0, 1), "claim {id}");
                expired += 1;
            }
            other => panic!("claim {id}: reply and row disagree: {other:?} {b}"),
        }
    }
    println!(
        "last-instant pays: {paid} paid, {expired} expired ({by_second_sweeper} by the second sweeper)"
    );
    assert_eq!(paid + expired, rounds);
    assert!(paid > 0 && expired > 0, "the race must go both ways");
    assert_left(&o, &c, expired).await;
    let r = assert_reconciled(&o, &c).await;
    assert_eq!((r.claims.paid, r.claims.expired), (paid, expired));
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn second_wave_sells_exactly_the_units_of_unpaid_holds() {
    let (o, c) = origin_with_sale(100, 2).await;
    let run = unique("wave");
    let first: Vec<String> = (0..150).map(|i| format!("{run}-a{i}")).collect();
    let replies = join_all(first.iter().map(|p| o.claim(&c, p, "k1"))).await;
    let winners: Vec<&Value> = replies
        .iter()
        .filter(|(s, _)| *s == 201)
        .map(|(_, b)| &b["claim"])
        .collect();
    assert_eq!(winners.len(), 100);
    assert_eq!(
        replies
            .iter()
            .filter(|(s, b)| *s == 409 && b["result"] == "sold_out")
            .count(),
        50
    );
    assert!(sold_out_flag_set(&o, &c).await);

    // 90 pay, 10 never do.
    let pays = join_all(winners[..90].iter().map(|w| {
        let id = w["id"].as_str().unwrap().to_string();
        let o = &o;
        async move { pay(o, &id, &format!("psp-{id}")).await.0 }
    }))
    .await;
    assert!(pays.iter().all(|s| *s == 200));
    wait_no_holds(&o, &c, 6).await;
    assert_left(&o, &c, 10).await;
    assert!(
        !sold_out_flag_set(&o, &c).await,
        "the flag clears when units return"
    );
    assert_eq!(o.status(&c).await["state"], "active");
    assert_eq!(o.claim_rows(&c, &["expired"]).await, 10);

    // The second wave: 60 new customers at once, exactly 10 win; then sold out again.
    let second: Vec<String> = (0..60).map(|i| format!("{run}-b{i}")).collect();
    let replies = join_all(second.iter().map(|p| o.claim(&c, p, "k1"))).await;
    let won2 = replies.iter().filter(|(s, _)| *s == 201).count();
    let lost2 = replies
        .iter()
        .filter(|(s, b)| *s == 409 && b["result"] == "sold_out")
        .count();
    assert_eq!((won2, lost2), (10, 50));
    assert_eq!(o.remaining(&c).await, 0);
    assert!(sold_out_flag_set(&o, &c).await);
    assert_eq!(o.claim_rows(&c, &["held", "paid"]).await, 100);
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_customer_may_claim_again() {
    let (o, c) = origin_with_sale(2, 600).await;
    let dee = unique("dee");
    let first = won(&o, &c, &dee, "k1").await;
    let first_id = first["id"].as_str().unwrap();
    let (s, _) = release(&o, first_id).await;
    assert_eq!(s, 200);
    let mut gate = o.origin.state.gate.clone();
    let holder: Option<String> = flashgate_origin::gate::holder(&mut gate, &c, &dee)
        .await
        .unwrap();
    assert_eq!(holder, None, "release drops her gate holder");
    let second = won(&o, &c, &dee, "k2").await;
    assert_ne!(second["id"], first["id"]);
    assert_eq!(o.claim_rows(&c, &["held"]).await, 1);
    assert_eq!(o.claim_rows(&c, &["released"]).await, 1);
    assert_eq!(o.remaining(&c).await, 1);
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pay_and_release_answers() {
    let (o, c, id) = sale_with_one_hold(3, "eve").await;

    let (s, first) = pay(&o, &id, "psp-1").await;
    assert_eq!(s, 200);
    assert_eq!(first["result"], "paid");
    assert_eq!(first["payment_ref"], "psp-1");
    assert_eq!(first["claim"]["status"], "paid");
    let (s, again) = pay(&o, &id, "psp-1").await;
    assert_eq!(
        (s, &again),
        (200, &first),
        "the same payment_ref gets the same 200"
    );
    let (s, other) = pay(&o, &id, "psp-2").await;
    assert_eq!((s, other["result"].as_str()), (409, Some("already_paid")));
    let (s, rel) = release(&o, &id).await;
    assert_eq!((s, rel["result"].as_str()), (409, Some("already_paid")));
    let stored: (String, Option<String>) =
        sqlx::query_as("SELECT status, payment_ref FROM claims WHERE id = $1")
            .bind(&id)
            .fetch_one(&o.db)
            .await
            .unwrap();
    assert_eq!(stored, ("paid".into(), Some("psp-1".into())));
    assert_eq!(ledger(&o, &id, "paid").await, 1);
    assert_eq!(o.remaining(&c).await, 2);

    // A giveaway coupon is not a hold.
    let g = o.campaign("giveaway", 1).await;
    let coupon = won(&o, &g, &unique("fay"), "k").await;
    let (s, b) = pay(&o, coupon["id"].as_str().unwrap(), "psp-3").await;
    assert_eq!((s, b), (409, json!({"result": "not_a_hold"})));
    assert_reconciled(&o, &c).await;
    assert_reconciled(&o, &g).await;
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pay_and_release_requests_change_nothing() {
    let (o, c, id) = sale_with_one_hold(2, "gus").await;
    let service = o.config.service_token.expose().to_string();
    let url = |action: &str| format!("{}/api/v1/claims/{id}/{action}", o.url);
    let raw = |action: &'static str, token: Option<&str>, ctype: &str, body: &str| {
        let mut req = o
            .http
            .post(url(action))
            .header("content-type", ctype)
            .body(body.to_string());
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move {
            let res = req.send().await.expect("request");
            let status = res.status().as_u16();
            let body: Value = res.json().await.expect("a JSON body");
            (
                status,
                body["result"].as_str().unwrap_or_default().to_string(),
                body,
            )
        }
    };
    let json = "application/json";
    let (none, nope, svc) = (None, Some("nope"), Some(service.as_str()));
    // (answer, result, action, token, Content-Type, body)
    #[rustfmt::skip]
    let cases = [
        (401, "unauthorized", "pay", none, json, r#"{"payment_ref":"p"}"#),
        (403, "forbidden", "pay", nope, json, r#"{"payment_ref":"p"}"#),
        (403, "forbidden", "release", nope, json, "{}"),
        (400, "invalid_json", "pay", svc, json, "{"),
        (422, "validation_failed", "pay", svc, json, r#"{"payment_ref":"p","payment_ref":"q"}"#),
        (422, "validation_failed", "pay", svc, json, "{}"),
        (422, "validation_failed", "pay", svc, json, r#"{"payment_ref":"p","x":1}"#),
        (422, "validation_failed", "pay", svc, json, r#"{"payment_ref":"has space"}"#),
        (415, "unsupported_media_type", "pay", svc, "text/plain", r#"{"payment_ref":"p"}"#),
        (422, "validation_failed", "release", svc, json, r#"{"reason":""}"#),
        (400, "invalid_json", "release", svc, json, "["),
    ];
    for (want_status, want_result, action, token, ctype, body) in cases {
        let (status, result, reply) = raw(action, token, ctype, body).await;
        assert_eq!(
            (status, result.as_str()),
            (want_status, want_result),
            "{action} {body}: {reply}"
        );
        assert!(reply["message"].is_string(), "{reply}");
    }
    let big = format!(r#"{{"payment_ref":"{}"}}"#, "p".repeat(70 * 1024));
    let (s, r, _) = raw("pay", Some(&service), json, &big).await;
    assert_eq!((s, r.as_str()), (413, "payload_too_large"));
    for bad in ["c_nope", "../x", "c_0000000000000000000000000000000f"] {
        let (s, b) = o
            .claim_action(
                bad,
                "pay",
                &service,
                &PayRequest {
                    payment_ref: "p".into(),
                },
            )
            .await;
        assert_eq!((s, b["result"].as_str()), (404, Some("not_found")), "{bad}");
    }
    // Nothing changed.
    assert_eq!(status_of(&o, &id).await, "held");
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM ledger WHERE claim_id = $1")
        .bind(&id)
        .fetch_one(&o.db)
        .await
        .unwrap();
    assert_eq!(events, 1, "only the claimed row");
    assert_eq!(o.remaining(&c).await, 1);
    // A release with an empty body is fine.
    let res = o
        .http
        .post(url("release"))
        .bearer_auth(&service)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let counts: HashMap<String, i64> = sqlx::query_as::<_, (String, i64)>(
        "SELECT event, count(*) FROM ledger WHERE claim_id = $1 GROUP BY event",
    )
    .bind(&id)
    .fetch_all(&o.db)
    .await
    .unwrap()
    .into_iter()
    .collect();
    assert_eq!(counts.get("released"), Some(&1));
    stop_reconciled(o, &c).await;
}

/// A campaign whose holds cannot be expired (its row says every unit is left although one is
/// held, so giving that unit back would break `remaining <= stock`) does not stop the sweeper:
/// the holds of the other campaigns still expire, and the broken one's hold stays held, whole,
/// until its row is repaired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_that_cannot_expire_its_holds_does_not_stop_the_others() {
    let o = TestOrigin::start().await;
    let now = Utc::now();
    let (from, to) = (
        now - chrono::Duration::minutes(1),
        now + chrono::Duration::hours(1),
    );
    // Several broken campaigns whose ids sort before the good one's: whatever order the
    // sweeper takes them in, it meets a broken one before the good one.
    let mut broken = Vec::new();
    for i in 0..5 {
        let id = format!("a{i}-{}", unique("broken"));
        o.create_campaign(&id, "sale", 2, from, to, Some(1)).await;
        won(&o, &id, &unique("stuck"), "k").await;
        sqlx::query("UPDATE campaigns SET remaining = stock WHERE id = $1")
            .bind(&id)
            .execute(&o.db)
            .await
            .expect("break the row");
        broken.push(id);
    }
    let good = format!("z-{}", unique("good"));
    o.create_campaign(&good, "sale", 2, from, to, Some(1)).await;
    let claim = won(&o, &good, &unique("gone"), "k").await;
    let claim_id = claim["id"].as_str().expect("claim id");
    wait_no_holds(&o, &good, 20).await;
    assert_eq!(status_of(&o, claim_id).await, "expired");
    assert_left(&o, &good, 2).await;
    for id in &broken {
        assert_eq!(
            o.claim_rows(id, &["held"]).await,
            1,
            "{id}: its hold is untouched"
        );
        sqlx::query("UPDATE campaigns SET remaining = stock - 1 WHERE id = $1")
            .bind(id)
            .execute(&o.db)
            .await
            .expect("repair the row");
    }
    for id in &broken {
        wait_no_holds(&o, id, 20).await;
        assert_left(&o, id, 2).await;
    }
}
