//! What the gate audit's two checks share, the campaign's ([`super::audit`]) and the one per
//! variant ([`super::variant_audit`]): the tally of what a check repaired ([`Repaired`]), and
//! the shortfall one pass remembers for the next ([`to_raise`], [`forget_deficit`]), so that a
//! gate is raised only when two audits in a row, at least [`DEFICIT_APART_MS`] apart, saw it
//! short.
//!
//! A sighting is kept for [`DEFICIT_KEPT_MS`], far longer than a pass: a pass over hundreds of
//! live campaigns can take seconds on a small machine, and a sighting that expired before the
//! next pass came back to its campaign would leave a lost unit unsold for good. Kept that long,
//! a stale sighting can only pair with a new one when no pass looked at the campaign in
//! between (each look that finds the gate agreeing forgets it); the raise is bounded by
//! PostgreSQL's `remaining` anyway, and an excess is lowered by the next pass.

use crate::gate::Gate;

/// How long a shortfall seen by one audit is remembered for the next, in milliseconds.
pub const DEFICIT_KEPT_MS: u64 = 60_000;

/// How much older than this sighting the previous one must be to count, in milliseconds: two
/// origins' passes that overlap (a pass longer than its turn) are not two audits in a row, and
/// a unit on its way back to the gate may be seen by both.
pub const DEFICIT_APART_MS: i64 = 500;

/// What a check repaired: units `lowered` (taken off gates promising more than PostgreSQL)
/// and `raised` (put back on gates that had lost them), holders `holders_dropped` (naming no
/// active claim) and `holders_restored` (written for an active claim that had none).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Repaired {
    pub lowered: i64,
    pub raised: i64,
    pub holders_dropped: i64,
    pub holders_restored: i64,
}

impl Repaired {
    /// True when nothing was repaired.
    pub fn is_empty(&self) -> bool {
        *self == Repaired::default()
    }

    /// The repairs as (field of [`Keys::audit_repairs`](crate::gate::Keys::audit_repairs), count)
    /// pairs.
    pub(super) fn fields(&self) -> [(&'static str, i64); 4] {
        [
            ("lowered", self.lowered),
            ("raised", self.raised),
            ("holders_dropped", self.holders_dropped),
            ("holders_restored", self.holders_restored),
        ]
    }
}

impl std::ops::AddAssign for Repaired {
    fn add_assign(&mut self, o: Repaired) {
        self.lowered += o.lowered;
        self.raised += o.raised;
        self.holders_dropped += o.holders_dropped;
        self.holders_restored += o.holders_restored;
    }
}

/// Remembers a `deficit` seen now under `key` (for [`DEFICIT_KEPT_MS`]; the value is
/// `<deficit>@<Unix time in ms>`) and returns the units to raise: the smaller of it and the one
/// the previous audit saw, `None` when no audit saw one at least [`DEFICIT_APART_MS`] earlier
/// (a unit on its way back looks like a shortfall once). A sighting too recent to count is
/// left in place, so the next audit pairs with it.
pub async fn to_raise(gate: &mut Gate, key: &str, deficit: i64) -> redis::RedisResult<Option<i64>> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let seen: Option<String> = redis::cmd("GET").arg(key).query_async(gate).await?;
    let seen = seen.as_deref().and_then(parse_sighting);
    if let Some((_, at_ms)) = seen {
        if now_ms - at_ms < DEFICIT_APART_MS {
            return Ok(None);
        }
    }
    redis::cmd("SET")
        .arg(key)
        .arg(format!("{deficit}@{now_ms}"))
        .arg("PX")
        .arg(DEFICIT_KEPT_MS)
        .query_async::<()>(gate)
        .await?;
    Ok(seen
        .map(|(d, _)| d)
        .filter(|d| *d > 0)
        .map(|d| d.min(deficit)))
}

/// `<deficit>@<Unix time in ms>` as its two numbers; `None` for anything else.
fn parse_sighting(v: &str) -> Option<(i64, i64)> {
    let (d, at) = v.split_once('@')?;
    Some((d.parse().ok()?, at.parse().ok()?))
}

/// Forgets the shortfall the last audit saw (the gate agrees again, or it was repaired).
pub async fn forget_deficit(gate: &mut Gate, key: &str) -> redis::RedisResult<()> {
    redis::cmd("DEL").arg(key).query_async(gate).await
}
