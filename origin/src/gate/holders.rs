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
//!   gate and goes back through [`super::give_back`] (only while her holder is still that claim,
//!   so a release's own give-back racing it returns the unit once; bounded by PostgreSQL's
//!   `remaining`); when PostgreSQL has no such claim of hers, the holder is dropped without a
//!   unit (the count check handles units). Her active claim, if she has another, becomes her
//!   holder.
//! - **an active claim without a holder** (a confirmation a promoted replica lost): her holder
//!   is written only if she has none by then (`HSETNX`), so a take of hers that started
//!   meanwhile keeps its pending holder.
//!
//! Cost: the count of committed holders (every shard's `HLEN` less its `ZCARD` of takes in
//! flight) is compared with PostgreSQL's count of active claims first; holders are compared
//! one by one when the two differ, or always on a campaign of at most
//! [`HOLDERS_COMPARED_ALWAYS`] active claims.

use std::collections::HashSet;

use crate::claims::store as claims;
use crate::db::Db;
use flashgate_shared::api::ClaimStatus;

use super::correct::{pg_remaining, ChangeError};
use super::PENDING_PREFIX;
use super::{bucket, give_back, holders_of, replace_holder, shard_states, Gate, Keys};

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
) -> Result<HolderRepairs, ChangeError> {
    let mut out = HolderRepairs::default();
    let states = shard_states(gate, c).await?;
    if states.is_empty() || states.iter().any(|s| !s.loaded) {
        // Not loaded, or a load under way: the load writes PostgreSQL's holders itself.
        return Ok(out);
    }
    let committed_holders: i64 = states.iter().map(|s| s.holders - s.pending).sum();
    let active = active_count(db, c).await?;
    if committed_holders == active && active > HOLDERS_COMPARED_ALWAYS {
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
            out.restored += 1;
            tracing::warn!(campaign = c, %customer, claim = %id,
                "gate audit: the missing holder of an active claim was written");
        }
    }
    Ok(out)
}

/// PostgreSQL's count of active claims of `c`.
async fn active_count(db: &Db, c: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM claims WHERE campaign_id = $1 AND status = ANY($2)"#,
        c,
        &ClaimStatus::active_names()[..] as &[&str],
    )
    .fetch_one(db)
    .await
}
