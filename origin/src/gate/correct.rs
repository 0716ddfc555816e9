//! Changes to a campaign's gate that come from PostgreSQL: the correction after PostgreSQL
//! refused a take the gate allowed ([`correct_down`]), and a committed stock change
//! ([`adjust`]).
//!
//! Each shard's step is one script, but a change to several shards is several steps, so a
//! change is made safe by how it is computed, not by one transaction:
//! - **Relative moves only.** Every move is an `INCRBY`-like script on one shard that keeps
//!   what concurrent takes and give-backs did to it (a move down takes at most what is there).
//!   Nothing is ever overwritten with a value computed earlier, so a take, commit or give-back
//!   racing a change is never lost.
//! - **A correction only lowers the gate, and only by what it can prove.** Under the campaign's
//!   change lock it reads the gate (every shard's `remaining` and uncommitted takes), then
//!   PostgreSQL (`remaining`, and which of those takes already committed, in one statement),
//!   then the gate again, and removes `min(gate before, gate after) - PostgreSQL`. Units in
//!   flight between the reads can only make the gate look smaller, so the correction removes at
//!   most the real excess: Redis never ends above PostgreSQL because of it, and if it ends
//!   above (a race hid some excess), the next refused take corrects again.
//! - **Stock changes are serialised with corrections.** The admin change takes the change lock
//!   before its PostgreSQL commit and frees it after the gate followed ([`lock_changes`]), so a
//!   correction never sees a stock change in PostgreSQL that the gate has not had yet (it would
//!   remove those units a second time).
//! - **The sold-out flag** (several shards) is set only if no unit came back since the gate was
//!   read (the `returned` count), and cleared when units are left.

use crate::error::StoreError;
use std::time::Duration;

use crate::db::Db;
use flashgate_shared::api::ClaimStatus;

use super::lua::{MOVE, UNLOCK};
use super::{clear_flag, set_flag, shard_count, split, undo_dedup, Gate, Keys};

/// How long the change lock of a campaign is held at most, in milliseconds (a holder that
/// dies frees it by expiry).
pub const CHANGE_LOCK_MS: u64 = 5_000;
/// How long a stock change waits for the change lock, in milliseconds.
pub const CHANGE_LOCK_WAIT_MS: u64 = 2_000;

/// The change lock of one campaign, held until [`ChangeLock::release`] (or its expiry after
/// [`CHANGE_LOCK_MS`]).
#[must_use = "release the lock when the change is done"]
pub struct ChangeLock {
    key: String,
    token: String,
}

impl ChangeLock {
    /// Frees the lock if it is still ours.
    pub async fn release(self, gate: &mut Gate) {
        let freed: redis::RedisResult<i64> = UNLOCK
            .key(&self.key)
            .arg(&self.token)
            .invoke_async(gate)
            .await;
        if let Err(e) = freed {
            tracing::warn!(lock = %self.key, error = %e, "change lock not freed; it expires");
        }
    }
}

pub(crate) async fn try_lock(gate: &mut Gate, c: &str) -> redis::RedisResult<Option<ChangeLock>> {
    let key = Keys::of(c).changing;
    let token = format!("{:016x}", rand::random::<u64>());
    let got: Option<String> = redis::cmd("SET")
        .arg(&key)
        .arg(&token)
        .arg("NX")
        .arg("PX")
        .arg(CHANGE_LOCK_MS)
        .query_async(gate)
        .await?;
    Ok(got.map(|_| ChangeLock { key, token }))
}

/// Takes the change lock of campaign `c`, waiting up to [`CHANGE_LOCK_WAIT_MS`]; `None` when
/// another change still holds it then.
pub async fn lock_changes(gate: &mut Gate, c: &str) -> redis::RedisResult<Option<ChangeLock>> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(CHANGE_LOCK_WAIT_MS);
    loop {
        if let Some(lock) = try_lock(gate, c).await? {
            return Ok(Some(lock));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The gate of a campaign as read in one pass over its shards.
pub(crate) struct Snapshot {
    remaining: Vec<i64>,
    /// Customers with an uncommitted take holding a unit, all shards.
    pub(crate) pending: Vec<String>,
    /// The `returned` count of shard 0 before the pass (several shards).
    returned: String,
}

pub(crate) async fn snapshot(gate: &mut Gate, c: &str, n: u16) -> redis::RedisResult<Snapshot> {
    let returned: Option<String> = redis::cmd("GET")
        .arg(Keys::of(c).returned)
        .query_async(gate)
        .await?;
    let mut out = Snapshot {
        remaining: Vec::with_capacity(usize::from(n)),
        pending: Vec::new(),
        returned: returned.unwrap_or_else(|| "0".into()),
    };
    for s in 0..n {
        let k = Keys::shard(c, s);
        // One transaction per shard: a take or give-back on it is seen whole, never twice.
        let (r, p): (Option<i64>, Vec<(String, f64)>) = redis::pipe()
            .atomic()
            .get(&k.remaining)
            .zrange_withscores(&k.pending, 0, -1)
            .query_async(gate)
            .await?;
        out.remaining.push(r.unwrap_or(0));
        // A score with a fraction is a take still looking for a unit on another shard
        // ([`super::lua::TAKE`]): that unit is still counted in that shard's remaining.
        out.pending.extend(
            p.into_iter()
                .filter(|(_, t)| t.fract() == 0.0)
                .map(|(who, _)| who),
        );
    }
    Ok(out)
}

/// PostgreSQL's `remaining` of `c` and how many of `customers` hold an active claim of it,
/// from one snapshot.
pub(crate) async fn pg_view(
    db: &Db,
    c: &str,
    customers: &[String],
) -> sqlx::Result<Option<(i64, i64)>> {
    let row = sqlx::query!(
        r#"SELECT c.remaining,
                  (SELECT count(*) FROM claims a
                    WHERE a.campaign_id = c.id AND a.customer_id = ANY($2)
                      AND a.status = ANY($3)) AS "committed!"
             FROM campaigns c WHERE c.id = $1"#,
        c,
        customers,
        &ClaimStatus::active_names()[..] as &[&str],
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.remaining, r.committed)))
}

/// Customers with an active claim of `c` among `customers` (a later read than [`pg_view`]).
pub(crate) async fn committed(db: &Db, c: &str, customers: &[String]) -> sqlx::Result<i64> {
    if customers.is_empty() {
        return Ok(0);
    }
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM claims
            WHERE campaign_id = $1 AND customer_id = ANY($2) AND status = ANY($3)"#,
        c,
        customers,
        &ClaimStatus::active_names()[..] as &[&str],
    )
    .fetch_one(db)
    .await
}

/// PostgreSQL's `remaining` of campaign `c`, the bound of a unit given back to its gate
/// ([`super::give_back`]); `None` when there is no such campaign.
pub async fn pg_remaining(db: &Db, c: &str) -> sqlx::Result<Option<i64>> {
    Ok(pg_view(db, c, &[]).await?.map(|(remaining, _)| remaining))
}

/// Units the gate still promises in `snap`: what is left plus the takes not yet committed
/// (`done` of them have committed already, so PostgreSQL no longer counts them).
pub(crate) fn promised(snap: &Snapshot, done: i64) -> i64 {
    let pending = i64::try_from(snap.pending.len()).unwrap_or(i64::MAX);
    snap.remaining.iter().sum::<i64>() + pending - done
}

/// PostgreSQL refused her take for lack of units: undoes her dedup entry (her pending holder
/// `token`, if it is still that), then lowers the gate by what it provably promises beyond
/// PostgreSQL (see the module documentation). Skips the lowering when another change holds the
/// campaign's change lock (the next refused take corrects again). Returns the units removed.
pub async fn correct_down(
    gate: &mut Gate,
    db: &Db,
    c: &str,
    customer: &str,
    token: &str,
) -> Result<i64, StoreError> {
    let Some(n) = shard_count(gate, c).await? else {
        return Ok(0);
    };
    let own = Keys::shard(c, super::bucket(customer, n));
    undo_dedup(gate, &own, customer, token).await?;
    let Some(lock) = try_lock(gate, c).await? else {
        return Ok(0);
    };
    let result = lower(gate, db, c, n).await;
    lock.release(gate).await;
    result
}

pub(crate) async fn lower(gate: &mut Gate, db: &Db, c: &str, n: u16) -> Result<i64, StoreError> {
    let before = snapshot(gate, c, n).await?;
    let Some((pg_remaining, done_before)) = pg_view(db, c, &before.pending).await? else {
        return Ok(0);
    };
    let after = snapshot(gate, c, n).await?;
    let done_after = committed(db, c, &after.pending).await?;
    let excess = promised(&before, done_before).min(promised(&after, done_after)) - pg_remaining;
    if excess <= 0 {
        return Ok(0);
    }
    // Largest shards first: the fewest moves, and the shards left stay the fullest.
    let mut order: Vec<u16> = (0..n).collect();
    order.sort_by_key(|s| std::cmp::Reverse(after.remaining[usize::from(*s)]));
    let (mut left, mut total) = (excess, 0i64);
    for s in order {
        let (r, moved) = move_shard(gate, c, s, n, -left.max(0), pg_remaining).await?;
        if r < 0 {
            return Ok(excess - left);
        }
        left += moved;
        total += r;
    }
    if n > 1 && total == 0 {
        set_flag(gate, c, Some(&after.returned)).await?;
    }
    tracing::warn!(
        campaign = c,
        removed = excess - left,
        pg_remaining,
        "gate corrected down to PostgreSQL"
    );
    Ok(excess - left)
}

/// Moves shard `s`'s remaining by `delta` through the gate's one bounded step ([`MOVE`]: never
/// below zero, never raised above `ceiling`; on a campaign of one shard the flag follows).
/// Returns `(remaining, moved)`, `remaining` -1 when the shard is not loaded.
pub(crate) async fn move_shard(
    gate: &mut Gate,
    c: &str,
    s: u16,
    n: u16,
    delta: i64,
    ceiling: i64,
) -> redis::RedisResult<(i64, i64)> {
    let k = Keys::shard(c, s);
    let mut inv = MOVE.key(&k.loaded);
    inv.key(&k.remaining);
    if n == 1 {
        inv.key(&k.sold_out).key(&k.sold_out_gen);
    }
    inv.arg(delta).arg(ceiling).invoke_async(gate).await
}

/// Every shard's `remaining` of `c` (of `n`), in order.
async fn shard_remaining(gate: &mut Gate, c: &str, n: u16) -> redis::RedisResult<Vec<i64>> {
    let mut out = Vec::with_capacity(usize::from(n));
    for s in 0..n {
        let r: Option<i64> = redis::cmd("GET")
            .arg(Keys::shard(c, s).remaining)
            .query_async(gate)
            .await?;
        out.push(r.unwrap_or(0));
    }
    Ok(out)
}

/// Moves the gate's remaining by `delta` (a stock change committed in PostgreSQL, or units an
/// audit found missing; call it under [`lock_changes`]), keeping the takes in flight; never
/// below zero, and never above `bound`, PostgreSQL's `remaining` of the campaign after the
/// change: each shard is raised at most to `bound` less what the other shards hold (the gate's
/// one bounded step, [`MOVE`]). Units added are split over the shards; units removed are taken
/// from the shards in order. The sold-out flag is cleared when units are left and set (with a
/// new generation) when none are, unless a unit came back meanwhile. Returns the gate's
/// remaining after the move, `None` when the gate is not loaded.
pub async fn adjust(
    gate: &mut Gate,
    c: &str,
    delta: i64,
    bound: i64,
) -> redis::RedisResult<Option<i64>> {
    let Some(n) = shard_count(gate, c).await? else {
        return Ok(None);
    };
    let returned: Option<String> = redis::cmd("GET")
        .arg(Keys::of(c).returned)
        .query_async(gate)
        .await?;
    let mut now = shard_remaining(gate, c, n).await?;
    let parts = split(delta.max(0), n);
    let mut left = delta;
    for (s, part) in (0..n).zip(parts) {
        let step = if delta < 0 { left } else { part };
        let at = usize::from(s);
        let others = now.iter().sum::<i64>() - now[at];
        let (r, moved) = move_shard(gate, c, s, n, step, bound - others).await?;
        if r < 0 {
            return Ok(None);
        }
        now[at] = r;
        left -= moved;
    }
    let total: i64 = now.iter().sum();
    if n > 1 {
        if total > 0 {
            clear_flag(gate, c).await?;
        } else {
            set_flag(gate, c, Some(returned.as_deref().unwrap_or("0"))).await?;
        }
    }
    Ok(Some(total))
}
