//! The gate audit's check of the holders (docs/ARCHITECTURE.md, "Gate audit"): every
//! customer in a gate's holders names her active claim in PostgreSQL, and every active claim
//! has its holder.
//!
//! Run by [`super::audit`] under the campaign's change lock. The gate is read first, PostgreSQL
//! after, so a claim that commits meanwhile is seen with its pending holder already written (a
//! take writes the holder before the commit); pending holders are the settlement's
//! ([`super::settle`]) and are left alone. Every repair is conditional, as the steps it stands
//! in for:
//! - **a holder naming no active claim of hers** (a give-back a promoted replica lost, or one
//!   that failed): when PostgreSQL has that claim released or expired, her unit is owed to the
//!   gate and goes back through [`crate::gate::give_back`] (only while her holder is still that claim,
//!   so a release's own give-back racing it returns the unit once; bounded by PostgreSQL's
//!   `remaining`); when PostgreSQL has no such claim of hers, the holder is dropped without a
//!   unit (the count check handles units). Her active claim, if she has another, becomes her
//!   holder.
//! - **an active claim without a holder** (a confirmation a promoted replica lost): her holder
//!   is written only if she has none by then (`HSETNX`), so a take of hers that started
//!   meanwhile keeps its pending holder.
//!
//! Cost: the count of committed holders (every shard's `HLEN` less its takes in flight, read
//! together) plus the takes in flight that PostgreSQL already has as active claims (committed,
//! their confirmation not yet run) is compared with PostgreSQL's count of active claims first
//! (one statement gives both PostgreSQL counts); holders are compared one by one when the two
//! differ, or always on a campaign of at most [`HOLDERS_COMPARED_ALWAYS`] active claims.
//! Counting the committed takes in flight keeps a campaign in a stampede, where some takes are
//! always between their commit and their confirmation, from reading all its holders and all its
//! active claims at every pass (the cost of a pass stays with the takes in flight, not with
//! the claims made).

use std::collections::HashSet;

use crate::claims::store as claims;
use crate::db::Db;
use flashgate_shared::api::ClaimStatus;

use crate::error::StoreError;
use crate::gate::correct::pg_remaining;
use crate::gate::PENDING_PREFIX;
use crate::gate::{bucket, give_back, holders_of, replace_holder, Gate, Keys};

/// Up to this many active claims, the holders are compared one by one at every audit.
pub const HOLDERS_COMPARED_ALWAYS: i64 = 1_000;

/// Holders the audit repaired on one campaign.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HolderRepairs {
    /// Holders that named no active claim of their customer, dropped (their unit given back
    /// when PostgreSQL had released it).
    pub dropped: i64,
    /// Active claims whose missing holder was written.
    pub restored: i64,
}

/// Checks and repairs the holders of campaign `c` (of `n` shards); see the module doc.
pub(super) async fn check_holders(
    gate: &mut Gate,
    db: &Db,
    c: &str,
    n: u16,
) -> Result<HolderRepairs, StoreError> {
    let mut out = HolderRepairs::default();
    let Some((holders, in_flight)) = holders_and_takes(gate, c, n).await? else {
        // Not loaded, or a load under way: the load writes PostgreSQL's holders itself.
        return Ok(out);
    };
    let committed_holders = holders - i64::try_from(in_flight.len()).unwrap_or(i64::MAX);
    let (active, done) = active_counts(db, c, &in_flight).await?;
    if committed_holders + done == active && active > HOLDERS_COMPARED_ALWAYS {
        return Ok(out);
    }
    let mut held = Vec::new();
    for s in 0..n {
        held.extend(holders_of(gate, c, s).await?);
    }
    let active = claims::active_holders(db, c).await?;
    let mut ceiling = None;
    let seen: HashSet<&str> = held.iter().map(|(who, _)| who.as_str()).collect();
    for (customer, holder) in &held {
        if holder.starts_with(PENDING_PREFIX) || active.get(customer) == Some(holder) {
            continue;
        }
        let hers = active.get(customer).map(String::as_str);
        let owed = claims::find(db, holder).await?.is_some_and(|row| {
            row.customer_id == *customer && row.campaign_id == c && !row.is_active()
        });
        let repaired = if owed {
            let bound = match ceiling {
                Some(b) => b,
                None => {
                    let Some(b) = pg_remaining(db, c).await? else {
                        return Ok(out);
                    };
                    *ceiling.insert(b)
                }
            };
            give_back(gate, c, customer, holder, hers, bound).await?
        } else {
            let k = Keys::shard(c, bucket(customer, n));
            replace_holder(gate, &k, customer, holder, hers).await?
        };
        if repaired {
            out.dropped += 1;
            tracing::warn!(campaign = c, %customer, %holder, owed,
                "gate audit: a holder naming no active claim was dropped");
        }
    }
    for (customer, id) in &active {
        if seen.contains(customer.as_str()) {
            continue;
        }
        let written: bool = redis::cmd("HSETNX")
            .arg(Keys::shard(c, bucket(customer, n)).holders)
            .arg(customer)
            .arg(id)
            .query_async(gate)
            .await?;
        if written {
            // On a campaign with variants, her variant goes with her holder, so the unit of
            // a later give-back returns to its variant.
            if let Some(v) = crate::campaigns::variants::of_claim(db, id).await? {
                let _: () = redis::cmd("HSET")
                    .arg(Keys::shard(c, bucket(customer, n)).holder_variants)
                    .arg(customer)
                    .arg(v)
                    .query_async(gate)
                    .await?;
            }
            out.restored += 1;
            tracing::warn!(campaign = c, %customer, claim = %id,
                "gate audit: the missing holder of an active claim was written");
        }
    }
    Ok(out)
}

/// Every shard's holders of `c` (committed and pending) and the customers with a take in
/// flight, each shard read in one transaction so a take or confirmation is seen whole; `None`
/// when a shard is not loaded (no gate, or a load under way).
async fn holders_and_takes(
    gate: &mut Gate,
    c: &str,
    n: u16,
) -> redis::RedisResult<Option<(i64, Vec<String>)>> {
    let (mut holders, mut in_flight) = (0, Vec::new());
    for s in 0..n {
        let k = Keys::shard(c, s);
        let (loaded, h, p): (bool, i64, Vec<String>) = redis::pipe()
            .atomic()
            .exists(&k.loaded)
            .hlen(&k.holders)
            .zrange(&k.pending, 0, -1)
            .query_async(gate)
            .await?;
        if !loaded {
            return Ok(None);
        }
        holders += h;
        in_flight.extend(p);
    }
    Ok(Some((holders, in_flight)))
}

/// PostgreSQL's count of active claims of `c`, and how many of them belong to `in_flight`
/// (read in one statement, so at one instant).
async fn active_counts(db: &Db, c: &str, in_flight: &[String]) -> sqlx::Result<(i64, i64)> {
    let row = sqlx::query!(
        r#"SELECT count(*) AS "active!",
                  count(*) FILTER (WHERE customer_id = ANY($3)) AS "done!"
             FROM claims WHERE campaign_id = $1 AND status = ANY($2)"#,
        c,
        &ClaimStatus::active_names()[..] as &[&str],
        in_flight,
    )
    .fetch_one(db)
    .await?;
    Ok((row.active, row.done))
}
