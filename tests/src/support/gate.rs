//! Looking inside the gate and checking it against PostgreSQL: the Redis keys come from the
//! origin's own definitions ([`Keys`]), never rebuilt by hand.

use flashgate_origin::gate::Keys;
use flashgate_shared::api::ReconcileReport;

use super::{unique, TestOrigin};

/// Whether the gate's sold-out flag of campaign `c` is set, in the Redis of origin `o`.
pub async fn sold_out_flag_set(o: &TestOrigin, c: &str) -> bool {
    let mut r = o.origin.state.redis.clone();
    redis::cmd("EXISTS")
        .arg(Keys::of(c).sold_out)
        .query_async(&mut r)
        .await
        .expect("sold-out flag")
}

/// `n` new customer ids (unique to this run), `<run>-0` .. `<run>-(n-1)`.
pub fn customers(n: usize) -> Vec<String> {
    let run = unique("cust");
    (0..n).map(|i| format!("{run}-{i}")).collect()
}

/// The gate's `remaining` of campaign `c` in the Redis of origin `o`; `None` when the gate is
/// not loaded.
pub async fn gate_remaining(o: &TestOrigin, c: &str) -> Option<i64> {
    let mut r = o.origin.state.redis.clone();
    redis::cmd("GET")
        .arg(Keys::of(c).remaining)
        .query_async(&mut r)
        .await
        .expect("gate remaining")
}

/// Runs the origin's reconcile of campaign `c` (PostgreSQL against the gate) and asserts it
/// found nothing: no fault, nothing oversold, no stranded unit. Returns the report.
pub async fn assert_reconciled(o: &TestOrigin, c: &str) -> ReconcileReport {
    let mut redis = o.origin.state.gate.clone();
    let report = flashgate_origin::repair::reconcile::reconcile(
        &flashgate_origin::db::Db::from(o.db.clone()),
        &mut redis,
        c,
    )
    .await
    .expect("reconcile runs")
    .expect("campaign exists");
    assert!(report.ok, "reconcile found faults: {report:#?}");
    assert_eq!((report.oversold, report.stranded), (0, 0));
    report
}

/// Ends a test on campaign `c`: asserts a clean reconciliation ([`assert_reconciled`]), then
/// stops the origin.
pub async fn stop_reconciled(o: TestOrigin, c: &str) {
    assert_reconciled(&o, c).await;
    o.stop().await;
}

/// The Redis key of the idempotency record of `customer`'s key `key`, the origin's own
/// builder (a test that drops a record on purpose uses it).
pub use flashgate_origin::idempotency::record_key as idempotency_record_key;

/// The gate keys of campaign `c` (of its shard 0: `loaded`, `remaining`, `shards`, `holders`,
/// what a gate load writes) that exist in the Redis of origin `o`, by name.
pub async fn gate_keys_present(o: &TestOrigin, c: &str) -> Vec<String> {
    let k = Keys::of(c);
    let mut r = o.origin.state.redis.clone();
    let mut present = Vec::new();
    for key in [k.loaded, k.remaining, k.shards, k.holders] {
        let n: i64 = redis::cmd("EXISTS")
            .arg(&key)
            .query_async(&mut r)
            .await
            .expect("EXISTS");
        if n > 0 {
            present.push(key);
        }
    }
    present
}
