//! Settlement of orphaned takes. A take whose origin died between the gate and the commit
//! leaves a pending holder. After [`STALE_TAKE_MS`], PostgreSQL decides: her claim exists → the
//! holder becomes its id; it does not → the unit goes back to the gate.

use crate::db::Db;
use crate::gate::Gate;

use crate::claims::store as claims;
use crate::gate::{self, Keys};

/// Age after which an uncommitted take is settled by the reconciler, in milliseconds.
pub const STALE_TAKE_MS: i64 = 30_000;

/// Settles takes pending longer than [`STALE_TAKE_MS`] on every shard; returns how many.
pub async fn settle_stale_takes(db: &Db, redis: &Gate) -> anyhow::Result<usize> {
    let mut settled = 0;
    let mut redis = redis.clone();
    let cutoff = chrono::Utc::now().timestamp_millis() - STALE_TAKE_MS;
    for c in crate::campaigns::store::live(db).await? {
        let Some(n) = gate::shard_count(&mut redis, &c.id).await? else {
            continue;
        };
        let mut stale: Vec<String> = Vec::new();
        for s in 0..n {
            let some: Vec<String> = redis::cmd("ZRANGEBYSCORE")
                .arg(Keys::shard(&c.id, s).pending)
                .arg("-inf")
                .arg(cutoff)
                .query_async(&mut redis)
                .await?;
            stale.extend(some);
        }
        for customer in stale {
            let Some(token) = gate::holder(&mut redis, &c.id, &customer).await? else {
                continue;
            };
            if !token.starts_with(gate::PENDING_PREFIX) {
                continue;
            }
            match claims::find_active(db, &c.id, &customer).await? {
                Some(row) => {
                    gate::confirm(&mut redis, &c.id, &customer, &token, &row.id, None).await?;
                }
                None => {
                    gate::give_back(&mut redis, &c.id, &customer, &token, None).await?;
                }
            }
            tracing::info!(campaign = %c.id, %customer, "settled a stale take");
            settled += 1;
        }
    }
    Ok(settled)
}
