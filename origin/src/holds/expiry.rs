//! The expiry sweeper: holds past `held_until` become `expired` and their units go back.

use crate::db::Db;
use crate::webhooks::{self, events::NewEvent};
use flashgate_shared::api::webhooks::EventType;
use flashgate_shared::api::ClaimStatus;

use super::returns::{drain_gate_returns, return_to_gate, GateReturns};
use super::Returned;

/// Ledger actor of the expiry sweeper.
pub const SWEEPER_ACTOR: &str = "sweeper";

/// Expires at most `limit` holds of campaign `c` past `held_until`, in one statement: the rows
/// are picked with `FOR UPDATE SKIP LOCKED` (so several origins sweep side by side, and a pay
/// in progress is left to finish), moved `held → expired`, their units added back to
/// `remaining`, their gate returns queued and their `expired` ledger rows appended; then, in
/// the same transaction, their `claim.expired` events ([`crate::webhooks::events`]). One
/// campaign per statement, so two sweepers never lock campaign rows in opposite orders.
pub async fn expire_due(db: &Db, c: &str, limit: i64) -> sqlx::Result<Vec<Returned>> {
    expire(db, c, None, limit, SWEEPER_ACTOR).await
}

/// Expires hold `claim_id` of campaign `c` if it is past `held_until`, as the sweeper would
/// ([`expire_due`]): a release that comes after `held_until` ends the hold this way, so its
/// unit goes back once, whichever of the release and the sweeper locks the row first. The
/// claim, or nothing when it was not a due hold (or the sweeper holds its row). `actor` is
/// the ledger's.
pub async fn expire_one(
    db: &Db,
    c: &str,
    claim_id: &str,
    actor: &str,
) -> sqlx::Result<Option<Returned>> {
    Ok(expire(db, c, Some(claim_id), 1, actor).await?.pop())
}

/// [`expire_due`], restricted to `claim_id` when given, with `actor` in the ledger rows.
async fn expire(
    db: &Db,
    c: &str,
    claim_id: Option<&str>,
    limit: i64,
    actor: &str,
) -> sqlx::Result<Vec<Returned>> {
    let mut tx = db.begin().await?;
    let rows = sqlx::query!(
        r#"WITH due AS (
            SELECT id FROM claims
             WHERE campaign_id = $1 AND status = 'held' AND held_until <= now()
               AND ($4::text IS NULL OR id = $4)
             ORDER BY held_until
             LIMIT $2
             FOR UPDATE SKIP LOCKED
         ), x AS (
            UPDATE claims c SET status = 'expired', updated_at = now()
              FROM due WHERE c.id = due.id AND c.status = 'held'
            RETURNING c.id, c.campaign_id, c.customer_id, c.held_until
         ), back AS (
            UPDATE campaigns SET remaining = remaining + (SELECT count(*) FROM x),
                                 updated_at = now()
             WHERE id = $1 AND EXISTS (SELECT 1 FROM x)
         ), g AS (
            INSERT INTO gate_returns (claim_id, campaign_id, customer_id)
            SELECT id, campaign_id, customer_id FROM x
         ), l AS (
            INSERT INTO ledger (claim_id, campaign_id, customer_id, event, actor, reason)
            SELECT id, campaign_id, customer_id, 'expired', $3, 'hold passed held_until' FROM x
         )
         SELECT id AS "claim_id!", campaign_id AS "campaign_id!", customer_id AS "customer_id!",
                held_until
           FROM x"#,
        c,
        limit,
        actor,
        claim_id,
    )
    .fetch_all(&mut *tx)
    .await?;
    let events: Vec<NewEvent> = rows
        .iter()
        .map(|r| {
            NewEvent::claim(
                EventType::ClaimExpired,
                &r.campaign_id,
                &r.claim_id,
                &r.customer_id,
                ClaimStatus::Expired,
                r.held_until,
                None,
            )
        })
        .collect();
    webhooks::events::emit(&mut tx, &events).await?;
    tx.commit().await?;
    Ok(rows
        .into_iter()
        .map(|r| Returned {
            claim_id: r.claim_id,
            campaign_id: r.campaign_id,
            customer_id: r.customer_id,
        })
        .collect())
}

/// Campaigns with at least one hold past `held_until`.
pub async fn campaigns_with_due_holds(db: &Db) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        "SELECT DISTINCT campaign_id FROM claims WHERE status = 'held' AND held_until <= now()",
    )
    .fetch_all(db)
    .await
}
/// One pass of the expiry sweeper: expires due holds campaign by campaign in batches of
/// `batch_max` (`FLASHGATE_SWEEP_BATCH_MAX`), gives their units back to the gate, then drains
/// old `gate_returns`. Returns the number of holds expired by this origin.
///
/// A campaign whose holds cannot be expired (a statement that fails on its rows) is logged
/// (warn, with the campaign and the error) and skipped: the pass goes on with the others, so
/// one campaign cannot stop expiry for all of them. Errors: the list of campaigns or the drain
/// of `gate_returns` failed (PostgreSQL or Redis down).
pub async fn sweep(returns: &GateReturns, batch_max: i64) -> anyhow::Result<usize> {
    let batch = batch_max.max(1);
    let mut expired = 0;
    for c in campaigns_with_due_holds(&returns.db).await? {
        match sweep_campaign(returns, &c, batch).await {
            Ok(n) => expired += n,
            Err(e) => {
                tracing::warn!(campaign = %c, error = %e, "expiring holds failed; other campaigns go on")
            }
        }
    }
    drain_gate_returns(returns, batch).await?;
    Ok(expired)
}

/// Expires campaign `c`'s due holds in batches of `batch`, giving each batch's units back to
/// the gate; the number expired.
async fn sweep_campaign(returns: &GateReturns, c: &str, batch: i64) -> anyhow::Result<usize> {
    let mut expired = 0;
    loop {
        let returned = expire_due(&returns.db, c, batch).await?;
        if returned.is_empty() {
            return Ok(expired);
        }
        expired += returned.len();
        let back = return_to_gate(returns, &returned).await;
        tracing::info!(campaign = %c, expired = returned.len(), back, "expired holds");
        if (returned.len() as i64) < batch {
            return Ok(expired);
        }
    }
}
