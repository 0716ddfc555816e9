//! The gate audit: one origin at a time, every [`AUDIT_EVERY`], compares each live campaign's
//! gate with PostgreSQL and repairs the count it finds apart (docs/ARCHITECTURE.md, "Gate
//! audit").
//!
//! Under the campaign's change lock (so a stock change is never seen half done), the gate is
//! read, then PostgreSQL, then the gate again, as the correction does
//! ([`super::correct`]): what the gate promises is its `remaining` plus the takes not yet
//! committed.
//! - Promising more than PostgreSQL's `remaining` in both reads (a take a promoted replica
//!   lost while its claim committed): the gate is lowered at once. Safe: PostgreSQL would refuse
//!   those takes anyway.
//! - Promising less in both reads (a give-back or a returned unit a promoted replica lost; such
//!   units would never be sold): the gate is raised, and the sold-out flag cleared, only when
//!   the previous audit, at most [`DEFICIT_KEPT_MS`] earlier, saw a shortfall too, and by the
//!   smaller of the two. A hold that ends is written to PostgreSQL first and given back to the
//!   gate right after, so a single sighting may be that unit on its way; a unit raised twice
//!   would only make the gate promise one more than PostgreSQL, which refuses it.

use std::time::Duration;

use super::correct::{committed, lower, pg_view, promised, snapshot, try_lock, ChangeError};
use super::{adjust, shard_count, Gate, Keys};
use crate::db::Db;

/// How often the audit runs (on one origin at a time).
pub const AUDIT_EVERY: Duration = Duration::from_secs(2);

/// How long a shortfall seen by one audit is remembered for the next, in milliseconds.
pub const DEFICIT_KEPT_MS: u64 = 5_000;

/// The audit's turn: the origin that sets it runs the pass, for a little less than
/// [`AUDIT_EVERY`].
const TURN_KEY: &str = "fg:gate_audit:turn";

/// Units the audit moved: `lowered` taken off gates, `raised` put back.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Repaired {
    pub lowered: i64,
    pub raised: i64,
}

impl std::ops::AddAssign for Repaired {
    fn add_assign(&mut self, o: Repaired) {
        self.lowered += o.lowered;
        self.raised += o.raised;
    }
}

/// Audits every live campaign when this origin gets the turn (else does nothing). A campaign
/// whose audit fails is logged and skipped. Errors: PostgreSQL or Redis failing before any
/// campaign was looked at.
pub async fn audit_live(db: &Db, gate: &Gate) -> Result<Repaired, ChangeError> {
    let mut gate = gate.clone();
    let turn: Option<String> = redis::cmd("SET")
        .arg(TURN_KEY)
        .arg(1)
        .arg("NX")
        .arg("PX")
        .arg(AUDIT_EVERY.as_millis() as u64 - 100)
        .query_async(&mut gate)
        .await?;
    let mut total = Repaired::default();
    if turn.is_none() {
        return Ok(total);
    }
    for c in crate::campaigns::store::live(db).await? {
        match audit_campaign(&mut gate, db, &c.id).await {
            Ok(r) => total += r,
            Err(e) => tracing::warn!(campaign = %c.id, error = %e, "gate audit failed"),
        }
    }
    Ok(total)
}

/// Audits campaign `c` (see the module doc). Does nothing when the gate is not loaded or
/// another change holds the campaign's change lock.
pub async fn audit_campaign(gate: &mut Gate, db: &Db, c: &str) -> Result<Repaired, ChangeError> {
    let Some(n) = shard_count(gate, c).await? else {
        return Ok(Repaired::default());
    };
    let Some(lock) = try_lock(gate, c).await? else {
        return Ok(Repaired::default());
    };
    let result = check(gate, db, c, n).await;
    lock.release(gate).await;
    result
}

async fn check(gate: &mut Gate, db: &Db, c: &str, n: u16) -> Result<Repaired, ChangeError> {
    let none = Repaired::default();
    let deficit_key = Keys::of(c).audit_deficit;
    let before = snapshot(gate, c, n).await?;
    let Some((pg_remaining, done_before)) = pg_view(db, c, &before.pending).await? else {
        return Ok(none);
    };
    let after = snapshot(gate, c, n).await?;
    let done_after = committed(db, c, &after.pending).await?;
    let (a, b) = (promised(&before, done_before), promised(&after, done_after));
    if a.min(b) > pg_remaining {
        forget_deficit(gate, &deficit_key).await?;
        let lowered = lower(gate, db, c, n).await?;
        return Ok(Repaired { lowered, raised: 0 });
    }
    let deficit = pg_remaining - a.max(b);
    if deficit <= 0 {
        forget_deficit(gate, &deficit_key).await?;
        return Ok(none);
    }
    let seen: Option<i64> = redis::cmd("SET")
        .arg(&deficit_key)
        .arg(deficit)
        .arg("PX")
        .arg(DEFICIT_KEPT_MS)
        .arg("GET")
        .query_async(gate)
        .await?;
    let Some(seen) = seen.filter(|d| *d > 0) else {
        return Ok(none);
    };
    let raised = seen.min(deficit);
    adjust(gate, c, raised).await?;
    forget_deficit(gate, &deficit_key).await?;
    tracing::warn!(
        campaign = c,
        raised,
        pg_remaining,
        "gate audit: units PostgreSQL has and the gate had lost put back"
    );
    Ok(Repaired { lowered: 0, raised })
}

/// Forgets the shortfall the last audit saw (the gate agrees again, or it was repaired).
async fn forget_deficit(gate: &mut Gate, key: &str) -> redis::RedisResult<()> {
    redis::cmd("DEL").arg(key).query_async(gate).await
}
