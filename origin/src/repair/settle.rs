//! Settlement of orphaned takes. A take whose outcome never reached the gate (its origin died
//! between the gate and the commit, a Redis reply was lost in a failover, a confirmation or
//! give-back failed, a promoted replica lost the write) leaves a pending holder. PostgreSQL
//! decides: her claim exists → the holder becomes its id; it does not → the unit goes back to
//! the gate. When a take is orphaned is told by [`crate::gate::takes`]: at once for this origin's
//! own takes no request holds any more and for takes of an origin whose lease lapsed; after
//! [`STALE_TAKE_MS`] for the rest.

use std::collections::HashMap;

use crate::db::Db;
use crate::gate::takes::{self, Takes};
use crate::gate::Gate;

use crate::claims::store as claims;
use crate::gate::{self, Keys};

/// Age after which any uncommitted take is settled, whoever took it, in milliseconds.
pub const STALE_TAKE_MS: i64 = 30_000;

/// Age under which a pending take is not looked at (it is almost always in flight), in
/// milliseconds.
pub const SETTLE_MIN_AGE_MS: i64 = 500;

/// Settles the orphaned takes of every live campaign (see the module doc); returns how many.
pub async fn settle_orphaned_takes(db: &Db, redis: &Gate, mine: &Takes) -> anyhow::Result<usize> {
    let mut settled = 0;
    let mut redis = redis.clone();
    let now = chrono::Utc::now().timestamp_millis();
    let mut leases: HashMap<String, bool> = HashMap::new();
    for c in crate::campaigns::store::live(db).await? {
        let Some(n) = gate::shard_count(&mut redis, &c.id).await? else {
            continue;
        };
        let mut pending: Vec<(String, f64)> = Vec::new();
        for s in 0..n {
            let some: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
                .arg(Keys::shard(&c.id, s).pending)
                .arg("-inf")
                .arg(now - SETTLE_MIN_AGE_MS)
                .arg("WITHSCORES")
                .query_async(&mut redis)
                .await?;
            pending.extend(some);
        }
        for (customer, taken_at_ms) in pending {
            let Some(token) = gate::holder(&mut redis, &c.id, &customer).await? else {
                continue;
            };
            if !token.starts_with(gate::PENDING_PREFIX) {
                continue;
            }
            let age_ms = now - taken_at_ms as i64;
            let stale = age_ms >= STALE_TAKE_MS;
            let orphaned = match takes::owner(&token) {
                _ if stale => true,
                Some(origin) if origin == mine.origin() => !mine.is_live(&token),
                Some(origin) => {
                    let alive = match leases.get(origin) {
                        Some(alive) => *alive,
                        None => {
                            let alive = takes::lease_alive(&mut redis, origin).await?;
                            leases.insert(origin.to_string(), alive);
                            alive
                        }
                    };
                    !alive
                }
                None => false,
            };
            if !orphaned {
                continue;
            }
            let outcome = match claims::find_active(db, &c.id, &customer).await? {
                Some(row) => {
                    gate::confirm(&mut redis, &c.id, &customer, &token, &row.id, None).await?;
                    "kept"
                }
                None => {
                    gate::give_back_bounded(&mut redis, db, &c.id, &customer, &token, None).await?;
                    "returned"
                }
            };
            tracing::info!(campaign = %c.id, %customer, outcome, age_ms, "settled an orphaned take");
            settled += 1;
        }
    }
    Ok(settled)
}
