//! The gate audit (origin/src/gate/audit.rs) repairs a gate that drifted from PostgreSQL: a
//! gate that lost units (a give-back a promoted replica lost) gets them back and its sold-out
//! flag cleared after two audits; a gate that promises more than PostgreSQL is lowered.
//! Against a real origin, PostgreSQL and Redis; the times are printed, not asserted (the
//! deadline only tells "repaired by the audit" from "never").

use std::time::{Duration, Instant};

use flashgate_origin::gate::{Gate, Keys};
use flashgate_tests::support::{eventually, gate_remaining, redis_conn, unique, TestOrigin};

const REPAIRED_WITHIN: Duration = Duration::from_secs(15);

/// Waits until the gate of `c` has `want` units; returns how long that took.
async fn gate_reaches(o: &TestOrigin, c: &str, want: i64) -> Duration {
    let started = Instant::now();
    eventually("the gate repaired", REPAIRED_WITHIN, || {
        let c = c.to_string();
        async move {
            let now = gate_remaining(o, &c).await.unwrap_or(-1);
            if now == want {
                Ok(())
            } else {
                Err(format!("gate remaining {now}, want {want}"))
            }
        }
    })
    .await;
    started.elapsed()
}

#[tokio::test]
async fn a_gate_that_lost_units_gets_them_back_and_sells_them() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 2).await;
    let mut r = Gate::new(redis_conn().await);
    // The gate lost both units and believes it sold out (as a promoted replica that missed
    // the give-backs would), while PostgreSQL still has 2.
    let k = Keys::of(&c);
    let _: () = redis::pipe()
        .set(&k.remaining, 0)
        .set(&k.sold_out, 99)
        .query_async(&mut r)
        .await
        .unwrap();
    let took = gate_reaches(&o, &c, 2).await;
    println!(
        "a gate 2 units short was repaired after {} ms",
        took.as_millis()
    );
    let flag: Option<i64> = redis::cmd("GET")
        .arg(&k.sold_out)
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(flag, None, "the sold-out flag is cleared with the units");
    // Both units are sold; a third customer is told sold_out.
    let mut results = Vec::new();
    for _ in 0..3 {
        let (_, body) = o.claim(&c, &unique("ana"), &unique("k")).await;
        results.push(body["result"].as_str().unwrap_or_default().to_string());
    }
    assert_eq!(results, ["claimed", "claimed", "sold_out"]);
    o.stop().await;
}

#[tokio::test]
async fn a_gate_that_promises_more_than_postgresql_is_lowered() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 3).await;
    let (status, _) = o.claim(&c, &unique("ana"), &unique("k")).await;
    assert_eq!(status, 201);
    let mut r = Gate::new(redis_conn().await);
    // A take a promoted replica lost while its claim committed: the gate has a unit more.
    let _: () = redis::cmd("INCRBY")
        .arg(Keys::of(&c).remaining)
        .arg(5)
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(gate_remaining(&o, &c).await.unwrap_or(-1), 7);
    let took = gate_reaches(&o, &c, 2).await;
    println!(
        "a gate 5 units over was lowered after {} ms",
        took.as_millis()
    );
    let report = o.reconcile(&c).await;
    assert_eq!(report["ok"], true, "{report}");
    o.stop().await;
}
