//! Units going back to the Redis gate after a hold ends, and the drain of `gate_returns` that
//! repairs a lost give-back.

use std::collections::{BTreeSet, HashMap};

use futures::future::join_all;

use super::Returned;
use crate::campaigns::CampaignCache;
use crate::gate::flags::SoldOutFlags;
use crate::gate::Gate;
use crate::gate::{self, Keys};
use std::sync::Arc;

/// The handles that giving units back to the gate uses: PostgreSQL (the `gate_returns`
/// queue), the Redis gate, and this origin's sold-out flags and campaign cache (cleared so the
/// second wave starts at once).
#[derive(Clone)]
pub struct GateReturns {
    pub db: crate::db::Db,
    pub gate: Gate,
    pub flags: Arc<SoldOutFlags>,
    pub campaigns: Arc<CampaignCache>,
}

/// Age after which a queued gate return is given back again by the sweeper's drain (a no-op
/// unless the first give-back was lost), in seconds.
pub const GATE_RETURN_SETTLE_SECONDS: i32 = 5;
/// Give-backs sent to Redis at once.
const GIVE_BACK_CONCURRENCY: usize = 64;

/// Gives the units of `returned` back to the Redis gate (each at most once, see
/// [`crate::holds`]), then clears this origin's memory of the sold-out flag and its cached
/// campaign row for every campaign touched, so the second wave starts at once. A Redis failure
/// is logged and left to the sweeper's drain of `gate_returns`. Returns the units given back.
pub async fn return_to_gate(returns: &GateReturns, returned: &[Returned]) -> usize {
    let mut given = 0;
    let ceilings = ceilings(&returns.db, returned.iter().map(|r| &r.campaign_id)).await;
    for chunk in returned.chunks(GIVE_BACK_CONCURRENCY) {
        let backs = join_all(chunk.iter().cloned().map(|r| {
            let mut redis = returns.gate.clone();
            let ceiling = ceilings.get(&r.campaign_id).copied();
            async move {
                let Some(ceiling) = ceiling else {
                    return false;
                };
                let back = gate::give_back(
                    &mut redis,
                    &r.campaign_id,
                    &r.customer_id,
                    &r.claim_id,
                    None,
                    ceiling,
                )
                .await;
                back.unwrap_or_else(|e| {
                    tracing::warn!(campaign = %r.campaign_id, claim = %r.claim_id, error = %e,
                        "gate give-back failed; the sweeper's drain retries it");
                    false
                })
            }
        }))
        .await;
        given += backs.into_iter().filter(|b| *b).count();
    }
    let campaigns: BTreeSet<&str> = returned.iter().map(|r| r.campaign_id.as_str()).collect();
    for c in campaigns {
        returns.flags.clear(c);
        returns.campaigns.invalidate(c).await;
    }
    given
}
/// Gives back (again) the queued gate returns older than [`GATE_RETURN_SETTLE_SECONDS`] and
/// deletes them, at most `limit` per call. Rows are taken with `FOR UPDATE SKIP LOCKED` and
/// deleted in the same transaction, after their give-backs; a Redis failure rolls back and
/// leaves them for the next pass. A campaign whose gate is being loaded is skipped (the load's
/// snapshot may predate the return). Returns the units that actually went back now — non-zero
/// only when a first give-back had been lost.
pub async fn drain_gate_returns(returns: &GateReturns, limit: i64) -> anyhow::Result<usize> {
    let mut tx = returns.db.begin().await?;
    let rows = sqlx::query_as!(
        Returned,
        "SELECT claim_id, campaign_id, customer_id FROM gate_returns
          WHERE created_at < now() - make_interval(secs => $1)
          ORDER BY created_at
          LIMIT $2
          FOR UPDATE SKIP LOCKED",
        f64::from(GATE_RETURN_SETTLE_SECONDS),
        limit,
    )
    .fetch_all(&mut *tx)
    .await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let mut redis = returns.gate.clone();
    let mut ready = Vec::with_capacity(rows.len());
    let mut loading: BTreeSet<String> = BTreeSet::new();
    for r in rows {
        if loading.contains(&r.campaign_id) {
            continue;
        }
        let busy: bool = redis::cmd("EXISTS")
            .arg(Keys::of(&r.campaign_id).loading)
            .query_async(&mut redis)
            .await?;
        if busy {
            loading.insert(r.campaign_id.clone());
        } else {
            ready.push(r);
        }
    }
    let mut back = 0;
    let ceilings = ceilings(&returns.db, ready.iter().map(|r| &r.campaign_id)).await;
    for r in &ready {
        let Some(ceiling) = ceilings.get(&r.campaign_id).copied() else {
            continue;
        };
        if gate::give_back(
            &mut redis,
            &r.campaign_id,
            &r.customer_id,
            &r.claim_id,
            None,
            ceiling,
        )
        .await?
        {
            back += 1;
            tracing::warn!(campaign = %r.campaign_id, claim = %r.claim_id,
                "a lost gate give-back was repaired by the drain");
        }
    }
    let ids: Vec<&str> = ready.iter().map(|r| r.claim_id.as_str()).collect();
    sqlx::query!(
        "DELETE FROM gate_returns WHERE claim_id = ANY($1)",
        &ids[..] as &[&str]
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    if back > 0 {
        for c in ready
            .iter()
            .map(|r| r.campaign_id.as_str())
            .collect::<BTreeSet<_>>()
        {
            returns.flags.clear(c);
            returns.campaigns.invalidate(c).await;
        }
    }
    Ok(back)
}

/// The bound of the give-backs to each of `campaigns`' gates: PostgreSQL's `remaining` read
/// now, after the changes that freed the units ([`gate::give_back`]). A campaign whose read
/// fails is left out (logged): its units stay queued in `gate_returns` for the drain.
async fn ceilings<'a>(
    db: &crate::db::Db,
    campaigns: impl Iterator<Item = &'a String>,
) -> HashMap<String, i64> {
    let mut out = HashMap::new();
    for c in campaigns.collect::<BTreeSet<_>>() {
        match gate::pg_remaining(db, c).await {
            Ok(Some(r)) => {
                out.insert(c.clone(), r);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(campaign = %c, error = %e,
                "gate give-backs put off: PostgreSQL's remaining not read; the drain retries"),
        }
    }
    out
}
