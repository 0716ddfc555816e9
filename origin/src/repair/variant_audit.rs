//! The gate audit of a campaign with variants ([`super::audit`] runs it instead of the campaign
//! check): each variant's count is compared with PostgreSQL's `remaining` of that variant, and
//! each shard's campaign count with the sum of its variants' counts.
//!
//! Under the campaign's change lock the gate is read, then PostgreSQL, then the gate again, as
//! for a campaign ([`super::audit`]):
//! - **Shards apart.** A shard's campaign count is the sum of its variants' counts (every take,
//!   give-back and change moves both in one script), so a difference seen in both reads is
//!   drift: the campaign count is moved to the sum (a raise bounded by PostgreSQL's
//!   `remaining` of the campaign). A campaign count above the sum promises units no variant
//!   has; one below it hides units a variant has.
//! - **A variant promising more** than PostgreSQL's `remaining` of it (its counts plus its
//!   takes not yet committed) in both reads is lowered at once, with the campaign count of the
//!   same shards ([`crate::gate::variants::adjust`]).
//! - **A variant promising less** in both reads is raised only when the previous audit, at least
//!   [`super::repaired::DEFICIT_APART_MS`] earlier, saw a shortfall of it too, by the smaller of
//!   the two (a unit on its way back looks like a shortfall once), with the campaign count of
//!   the same shard.
//!
//! The campaign's own check is not run on such a campaign: its counts are the sums of the
//! variants', which this one keeps.

use std::collections::HashMap;

use flashgate_shared::api::ClaimStatus;

use super::repaired::{forget_deficit, to_raise, Repaired};
use crate::db::Db;
use crate::error::StoreError;
use crate::gate::correct::move_shard;
use crate::gate::variants::{adjust, read_shard, ShardRead};
use crate::gate::{clear_flag, Gate, Keys};

/// A campaign with variants' gate as read in one pass over its shards.
pub(crate) struct VariantSnapshot {
    /// Each shard, in order.
    pub(crate) shards: Vec<ShardRead>,
}

impl VariantSnapshot {
    /// Customers with a take not yet committed, every shard.
    pub(crate) fn pending_customers(&self) -> Vec<String> {
        self.shards
            .iter()
            .flat_map(|s| s.pending.iter().map(|(who, _)| who.clone()))
            .collect()
    }

    /// Variant `i`'s (of `id`) counts over every shard and its takes not yet committed.
    pub(crate) fn variant(&self, i: usize, id: &str) -> (i64, i64) {
        let count = self.shards.iter().map(|s| s.variants[i]).sum();
        let pending = self
            .shards
            .iter()
            .flat_map(|s| &s.pending)
            .filter(|(_, v)| v == id)
            .count();
        (count, i64::try_from(pending).unwrap_or(i64::MAX))
    }
}

/// Reads every shard of `c` (of `n`) for variants `ids`, each shard in one script.
pub(crate) async fn snapshot(
    gate: &mut Gate,
    c: &str,
    n: u16,
    ids: &[String],
) -> redis::RedisResult<VariantSnapshot> {
    let mut shards = Vec::with_capacity(usize::from(n));
    for s in 0..n {
        shards.push(read_shard(gate, c, s, ids).await?);
    }
    Ok(VariantSnapshot { shards })
}

/// PostgreSQL's view of a campaign with variants from one statement: the campaign's
/// `remaining`, and each variant's (by id) with how many of the given customers hold an active
/// claim of it.
struct PgVariants {
    campaign: i64,
    variants: Vec<(String, i64, i64)>,
}

async fn pg_variants(db: &Db, c: &str, customers: &[String]) -> sqlx::Result<PgVariants> {
    let rows: Vec<(String, i64, i64, i64)> = sqlx::query_as(
        "SELECT v.id, v.remaining,
                (SELECT count(*) FROM claims a
                  WHERE a.campaign_id = v.campaign_id AND a.variant = v.id
                    AND a.customer_id = ANY($2) AND a.status = ANY($3)),
                (SELECT remaining FROM campaigns WHERE id = $1)
           FROM campaign_variants v WHERE v.campaign_id = $1 ORDER BY v.id",
    )
    .bind(c)
    .bind(customers)
    .bind(&ClaimStatus::active_names()[..])
    .fetch_all(db)
    .await?;
    Ok(PgVariants {
        campaign: rows.first().map_or(0, |r| r.3),
        variants: rows
            .into_iter()
            .map(|(id, r, done, _)| (id, r, done))
            .collect(),
    })
}

/// Audits campaign `c` (of `n` shards) per variant (see the module doc), under the change lock
/// the caller holds. `None` when the campaign has no variants (the caller runs the campaign
/// check).
pub(crate) async fn check(
    gate: &mut Gate,
    db: &Db,
    c: &str,
    n: u16,
) -> Result<Option<Repaired>, StoreError> {
    let ids: Vec<String> = pg_variants(db, c, &[])
        .await?
        .variants
        .into_iter()
        .map(|(id, _, _)| id)
        .collect();
    if ids.is_empty() {
        return Ok(None);
    }
    let before = snapshot(gate, c, n, &ids).await?;
    let pg = pg_variants(db, c, &before.pending_customers()).await?;
    let after = snapshot(gate, c, n, &ids).await?;
    let done_after = pg_variants(db, c, &after.pending_customers()).await?;
    if pg.variants.len() != ids.len() || done_after.variants.len() != ids.len() {
        return Ok(Some(Repaired::default())); // a variant added meanwhile: the next pass
    }
    let mut r = shards_apart(gate, c, n, &before, &after, pg.campaign).await?;
    for (i, id) in ids.iter().enumerate() {
        let (pg_v, done_b) = (pg.variants[i].1, pg.variants[i].2);
        let done_a = done_after.variants[i].2;
        let promised = |snap: &VariantSnapshot, done: i64| {
            let (count, pending) = snap.variant(i, id);
            count + pending - done
        };
        let (a, b) = (promised(&before, done_b), promised(&after, done_a));
        let deficit_key = format!("{}:v:{id}", Keys::of(c).audit_deficit);
        if a.min(b) > pg_v {
            forget_deficit(gate, &deficit_key).await?;
            let excess = a.min(b) - pg_v;
            adjust(gate, c, id, -excess, pg_v, pg.campaign).await?;
            tracing::warn!(campaign = c, variant = %id, excess, pg_v, "gate audit: variant lowered");
            r.lowered += excess;
            continue;
        }
        let deficit = pg_v - a.max(b);
        if deficit <= 0 {
            forget_deficit(gate, &deficit_key).await?;
            continue;
        }
        let Some(raised) = to_raise(gate, &deficit_key, deficit).await? else {
            continue;
        };
        adjust(gate, c, id, raised, pg_v, pg.campaign).await?;
        forget_deficit(gate, &deficit_key).await?;
        tracing::warn!(campaign = c, variant = %id, raised, pg_v, "gate audit: variant raised");
        r.raised += raised;
    }
    Ok(Some(r))
}

/// Moves each shard's campaign count to the sum of its variants' where both reads saw it
/// apart the same way (by the smaller difference); a raise is bounded by `pg_campaign`.
async fn shards_apart(
    gate: &mut Gate,
    c: &str,
    n: u16,
    before: &VariantSnapshot,
    after: &VariantSnapshot,
    pg_campaign: i64,
) -> redis::RedisResult<Repaired> {
    let mut r = Repaired::default();
    let sums: HashMap<u16, i64> = (0..n)
        .zip(&after.shards)
        .map(|(s, read)| (s, read.campaign))
        .collect();
    for (s, (b, a)) in (0..n).zip(before.shards.iter().zip(&after.shards)) {
        let (x, y) = (b.apart(), a.apart());
        if x == 0 || y == 0 || x.signum() != y.signum() {
            continue;
        }
        let off = if x > 0 { x.min(y) } else { x.max(y) };
        let others: i64 = sums.iter().filter(|(k, _)| **k != s).map(|(_, v)| v).sum();
        let (_, moved) = move_shard(gate, c, s, n, -off, pg_campaign - others).await?;
        if moved < 0 {
            r.lowered -= moved;
        } else {
            r.raised += moved;
        }
        tracing::warn!(
            campaign = c,
            shard = s,
            off,
            moved,
            "gate audit: shard apart from its variants"
        );
    }
    if n > 1 && r.raised > 0 {
        clear_flag(gate, c).await?;
    }
    Ok(r)
}
