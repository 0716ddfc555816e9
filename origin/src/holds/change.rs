//! Pay and release of one hold (see [`crate::holds`] for the statement pattern).

use crate::db::Db;
use flashgate_shared::api::{ClaimStatus, HoldReply};

use super::{expiry, Returned};
use crate::claims::store::{self, ClaimRow};
use crate::webhooks::{self, events::NewEvent};
use flashgate_shared::api::webhooks::EventType;

/// A claim row with the lifecycle facts the API rows do not carry.
#[derive(Debug, Clone)]
pub(super) struct LifeRow {
    pub(super) row: ClaimRow,
    pub(super) payment_ref: Option<String>,
}

/// Claim `claim_id` with its `payment_ref`; `None` when unknown.
pub(super) async fn find_life(db: &Db, claim_id: &str) -> sqlx::Result<Option<LifeRow>> {
    let found = store::find_with_payment(db, claim_id).await?;
    Ok(found.map(|(row, payment_ref)| LifeRow { row, payment_ref }))
}

/// How a call ends a hold: [`pay`] or [`release`].
#[derive(Debug, Clone, Copy)]
enum Ending<'a> {
    /// `held → paid` while `held_until` is in the future; the ledger reason is fixed.
    Paid { payment_ref: &'a str },
    /// `held → released` while `held_until` is in the future, as a payment; the unit goes
    /// back to `campaigns.remaining` and its gate return is queued.
    Released { reason: &'a str },
}

/// Ends hold `claim_id` as `ending` says, in one statement: the conditional update, for a
/// release the unit back in `remaining` and the queued gate return, and the ledger row (event
/// = the new status, by `actor`); then, in the same transaction, its `claim.paid` or
/// `claim.released` event ([`crate::webhooks::events`]). The changed row, or `None` when the claim is not a hold that
/// this call may end (missing, already changed, or past `held_until`).
async fn end_hold(
    db: &Db,
    claim_id: &str,
    ending: Ending<'_>,
    actor: &str,
) -> sqlx::Result<Option<ClaimRow>> {
    let (to, payment_ref, reason) = match ending {
        Ending::Paid { payment_ref } => (ClaimStatus::Paid, Some(payment_ref), "payment confirmed"),
        Ending::Released { reason } => (ClaimStatus::Released, None, reason),
    };
    let mut tx = db.begin().await?;
    let row = sqlx::query_as!(
        ClaimRow,
        r#"WITH c AS (
            UPDATE claims
               SET status = $2, payment_ref = COALESCE($3, payment_ref), updated_at = now()
             WHERE id = $1 AND status = 'held' AND held_until > now()
            RETURNING *
         ), back AS (
            UPDATE campaigns k SET remaining = k.remaining + 1, updated_at = now()
              FROM c WHERE k.id = c.campaign_id AND c.status = 'released'
         ), g AS (
            INSERT INTO gate_returns (claim_id, campaign_id, customer_id)
            SELECT id, campaign_id, customer_id FROM c WHERE c.status = 'released'
         ), l AS (
            INSERT INTO ledger (claim_id, campaign_id, customer_id, event, actor, reason)
            SELECT id, campaign_id, customer_id, status, $4, $5 FROM c
         )
         SELECT id AS "id!", campaign_id AS "campaign_id!", customer_id AS "customer_id!",
                status AS "status!: ClaimStatus", held_until, code,
                idempotency_key AS "idempotency_key!", request_fp AS "request_fp!",
                created_at AS "created_at!"
           FROM c"#,
        claim_id,
        to.as_str(),
        payment_ref,
        actor,
        reason,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(r) = &row {
        let kind = match ending {
            Ending::Paid { .. } => EventType::ClaimPaid,
            Ending::Released { .. } => EventType::ClaimReleased,
        };
        let event = NewEvent::claim(
            kind,
            &r.campaign_id,
            &r.id,
            &r.customer_id,
            r.status,
            r.held_until,
            payment_ref,
        );
        webhooks::events::emit(&mut tx, &[event]).await?;
    }
    tx.commit().await?;
    Ok(row)
}

/// Pays hold `claim_id` with `payment_ref`: one `UPDATE … WHERE status = 'held' AND
/// held_until > now()` plus its `paid` ledger row. `Ok(None)`: no such claim (404).
///
/// Answers: `paid` (also for the same `payment_ref` again, even after `held_until`);
/// `hold_expired` when the hold is past `held_until` or expired; `released` (409, with the
/// claim) when it was released before; `already_paid` for another `payment_ref`; `not_a_hold`
/// for a giveaway coupon.
pub async fn pay(
    db: &Db,
    claim_id: &str,
    payment_ref: &str,
    actor: &str,
) -> sqlx::Result<Option<HoldReply>> {
    let paid = end_hold(db, claim_id, Ending::Paid { payment_ref }, actor).await?;
    if let Some(row) = paid {
        return Ok(Some(HoldReply::Paid {
            claim: row.to_claim(),
            payment_ref: payment_ref.to_string(),
        }));
    }
    let Some(life) = find_life(db, claim_id).await? else {
        return Ok(None);
    };
    Ok(Some(match life.row.status {
        ClaimStatus::Paid if life.payment_ref.as_deref() == Some(payment_ref) => HoldReply::Paid {
            claim: life.row.to_claim(),
            payment_ref: payment_ref.to_string(),
        },
        ClaimStatus::Paid => HoldReply::AlreadyPaid {
            claim: life.row.to_claim(),
        },
        ClaimStatus::Issued | ClaimStatus::Redeemed => HoldReply::NotAHold,
        ClaimStatus::Released => HoldReply::Released {
            claim: life.row.to_claim(),
        },
        ClaimStatus::Held | ClaimStatus::Expired => HoldReply::HoldExpired,
    }))
}

/// Releases hold `claim_id` (payment failed, customer or admin cancel): one statement that
/// moves it `held → released`, adds its unit back to `campaigns.remaining`, queues the gate
/// return and appends the `released` ledger row. `Ok(None)`: no such claim (404).
///
/// Answers: `released` (also for a repeated release; the second time nothing changes);
/// `hold_expired` when the hold is past `held_until`, as [`pay`] answers then: a hold the
/// sweeper has not expired yet is expired by this call ([`expiry::expire_one`]), so its unit
/// goes back once, by whichever of the two comes first;
/// `already_paid` for a paid claim (it keeps its unit); `not_a_hold` for a giveaway coupon.
/// The second value is the unit to give back to the gate ([`super::returns::return_to_gate`]) when this call
/// made the change.
pub async fn release(
    db: &Db,
    claim_id: &str,
    actor: &str,
    reason: &str,
) -> sqlx::Result<Option<(HoldReply, Option<Returned>)>> {
    let released = end_hold(db, claim_id, Ending::Released { reason }, actor).await?;
    if let Some(row) = released {
        let returned = Returned {
            claim_id: row.id.clone(),
            campaign_id: row.campaign_id.clone(),
            customer_id: row.customer_id.clone(),
        };
        let reply = HoldReply::Released {
            claim: row.to_claim(),
        };
        return Ok(Some((reply, Some(returned))));
    }
    let Some(life) = find_life(db, claim_id).await? else {
        return Ok(None);
    };
    let reply = match life.row.status {
        ClaimStatus::Released => HoldReply::Released {
            claim: life.row.to_claim(),
        },
        ClaimStatus::Paid => HoldReply::AlreadyPaid {
            claim: life.row.to_claim(),
        },
        ClaimStatus::Issued | ClaimStatus::Redeemed => HoldReply::NotAHold,
        ClaimStatus::Expired => HoldReply::HoldExpired,
        // Still `held`, so past `held_until`: expired now rather than at the next sweep.
        ClaimStatus::Held => {
            let returned = expiry::expire_one(db, &life.row.campaign_id, claim_id, actor).await?;
            return Ok(Some((HoldReply::HoldExpired, returned)));
        }
    };
    Ok(Some((reply, None)))
}
