//! What the gate audit's two checks share, the campaign's ([`super::audit`]) and the one per
//! variant ([`super::variant_audit`]): the tally of what a check repaired ([`Repaired`]), and
//! the shortfall one pass remembers for the next ([`to_raise`], [`forget_deficit`]), so that a
//! gate is raised only when two audits in a row saw it short.

use crate::gate::Gate;

/// How long a shortfall seen by one audit is remembered for the next, in milliseconds.
pub const DEFICIT_KEPT_MS: u64 = 5_000;

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

/// Remembers a `deficit` seen now under `key` (for [`DEFICIT_KEPT_MS`]) and returns the units
/// to raise: the smaller of it and the one the previous audit saw, `None` when that audit saw
/// none (a unit on its way back looks like a shortfall once).
pub(crate) async fn to_raise(
    gate: &mut Gate,
    key: &str,
    deficit: i64,
) -> redis::RedisResult<Option<i64>> {
    let seen: Option<i64> = redis::cmd("SET")
        .arg(key)
        .arg(deficit)
        .arg("PX")
        .arg(DEFICIT_KEPT_MS)
        .arg("GET")
        .query_async(gate)
        .await?;
    Ok(seen.filter(|d| *d > 0).map(|seen| seen.min(deficit)))
}

/// Forgets the shortfall the last audit saw (the gate agrees again, or it was repaired).
pub(crate) async fn forget_deficit(gate: &mut Gate, key: &str) -> redis::RedisResult<()> {
    redis::cmd("DEL").arg(key).query_async(gate).await
}
