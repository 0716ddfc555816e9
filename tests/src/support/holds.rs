//! What the hold races share: a second sweeper (as another origin runs one), requests sent at
//! set moments around a hold's end, and a claim reply's id and `held_until`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use flashgate_origin::holds::{expiry, returns};
use serde_json::Value;

use super::TestOrigin;

/// A second sweeper (as another origin would run) expiring due holds of `c` in batches of
/// `batch` every few milliseconds until `until`; returns how many it expired.
pub async fn second_sweeper(o: &TestOrigin, c: &str, until: DateTime<Utc>, batch: i64) -> usize {
    let mut expired = 0;
    while Utc::now() < until {
        let r = expiry::expire_due(&o.origin.state.db, c, batch)
            .await
            .expect("second sweeper");
        expired += r.len();
        returns::return_to_gate(&o.origin.state.gate_returns(), &r).await;
        // The scenario: a sweeper that runs every few milliseconds, not a wait for a condition.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    expired
}

/// Sleeps until `offset_ms` after `at` (at once when that is past): the races send each
/// request at a set moment around a hold's end, so these waits are the scenario.
pub async fn sleep_until(at: DateTime<Utc>, offset_ms: i64) {
    let at = at + chrono::Duration::milliseconds(offset_ms);
    tokio::time::sleep((at - Utc::now()).to_std().unwrap_or_default()).await;
}

/// The id of claim `cl` (a claim reply's `claim`) and its `held_until`.
pub fn hold_of(cl: &Value) -> (String, DateTime<Utc>) {
    let id = cl["id"].as_str().expect("claim id").to_string();
    let until = cl["held_until"].as_str().expect("held_until");
    (id, until.parse().expect("RFC 3339 held_until"))
}
