//! Pay and release of one hold (see [`crate::holds`] for the statement pattern).

use flashgate_shared::api::{ClaimStatus, HoldReply};
use sqlx::PgPool;

use super::Returned;
use crate::claims::store::{ClaimRow, COLUMNS};

/// A claim row with the lifecycle facts the API rows do not carry.
#[derive(Debug, Clone, sqlx::FromRow)]
struct LifeRow {
    #[sqlx(flatten)]
    row: ClaimRow,
    payment_ref: Option<String>,
}

async fn find_life(db: &PgPool, claim_id: &str) -> sqlx::Result<Option<LifeRow>> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS}, payment_ref FROM claims WHERE id = $1"
    ))
    .persistent(crate::db::keep_statements())
    .bind(claim_id)
    .fetch_optional(db)
    .await
}

fn status_of(row: &ClaimRow) -> Option<ClaimStatus> {
    Some(row.status)
}

/// Pays hold `claim_id` with `payment_ref`: one `UPDATE … WHERE status = 'held' AND
/// held_until > now()` plus its `paid` ledger row. `Ok(None)`: no such claim (404).
///
/// Answers: `paid` (also for the same `payment_ref` again, even after `held_until`);
/// `hold_expired` when the hold is past `held_until`, expired or released; `already_paid` for
/// another `payment_ref`; `not_a_hold` for a giveaway coupon.
pub async fn pay(
    db: &PgPool,
    claim_id: &str,
    payment_ref: &str,
    actor: &str,
) -> sqlx::Result<Option<HoldReply>> {
    let paid: Option<ClaimRow> = sqlx::query_as(&format!(
        "WITH p AS (
            UPDATE claims SET status = 'paid', payment_ref = $2, updated_at = now()
             WHERE id = $1 AND status = 'held' AND held_until > now()
            RETURNING {COLUMNS}
         ), l AS (
            INSERT INTO ledger (claim_id, campaign_id, customer_id, event, actor, reason)
            SELECT id, campaign_id, customer_id, 'paid', $3, 'payment confirmed' FROM p
         )
         SELECT {COLUMNS} FROM p"
    ))
    .persistent(crate::db::keep_statements())
    .bind(claim_id)
    .bind(payment_ref)
    .bind(actor)
    .fetch_optional(db)
    .await?;
    if let Some(row) = paid {
        return Ok(Some(HoldReply::Paid {
            claim: row.to_claim(),
            payment_ref: payment_ref.to_string(),
        }));
    }
    let Some(life) = find_life(db, claim_id).await? else {
        return Ok(None);
    };
    Ok(Some(match status_of(&life.row) {
        Some(ClaimStatus::Paid) if life.payment_ref.as_deref() == Some(payment_ref) => {
            HoldReply::Paid {
                claim: life.row.to_claim(),
                payment_ref: payment_ref.to_string(),
            }
        }
        Some(ClaimStatus::Paid) => HoldReply::AlreadyPaid {
            claim: life.row.to_claim(),
        },
        Some(ClaimStatus::Issued | ClaimStatus::Redeemed) | None => HoldReply::NotAHold,
        Some(ClaimStatus::Held | ClaimStatus::Released | ClaimStatus::Expired) => {
            HoldReply::HoldExpired
        }
    }))
}

/// Releases hold `claim_id` (payment failed, customer or admin cancel): one statement that
/// moves it `held → released`, adds its unit back to `campaigns.remaining`, queues the gate
/// return and appends the `released` ledger row. `Ok(None)`: no such claim (404).
///
/// Answers: `released` (also for a repeated release; the second time nothing changes);
/// `hold_expired` when the sweeper expired it first (its unit is back all the same);
/// `already_paid` for a paid claim (it keeps its unit); `not_a_hold` for a giveaway coupon.
/// The second value is the unit to give back to the gate ([`super::returns::return_to_gate`]) when this call
/// made the change.
pub async fn release(
    db: &PgPool,
    claim_id: &str,
    actor: &str,
    reason: &str,
) -> sqlx::Result<Option<(HoldReply, Option<Returned>)>> {
    let released: Option<ClaimRow> = sqlx::query_as(&format!(
        "WITH r AS (
            UPDATE claims SET status = 'released', updated_at = now()
             WHERE id = $1 AND status = 'held'
            RETURNING {COLUMNS}
         ), back AS (
            UPDATE campaigns k SET remaining = k.remaining + 1, updated_at = now()
              FROM r WHERE k.id = r.campaign_id
         ), g AS (
            INSERT INTO gate_returns (claim_id, campaign_id, customer_id)
            SELECT id, campaign_id, customer_id FROM r
         ), l AS (
            INSERT INTO ledger (claim_id, campaign_id, customer_id, event, actor, reason)
            SELECT id, campaign_id, customer_id, 'released', $2, $3 FROM r
         )
         SELECT {COLUMNS} FROM r"
    ))
    .persistent(crate::db::keep_statements())
    .bind(claim_id)
    .bind(actor)
    .bind(reason)
    .fetch_optional(db)
    .await?;
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
    let reply = match status_of(&life.row) {
        Some(ClaimStatus::Released) => HoldReply::Released {
            claim: life.row.to_claim(),
        },
        Some(ClaimStatus::Paid) => HoldReply::AlreadyPaid {
            claim: life.row.to_claim(),
        },
        Some(ClaimStatus::Issued | ClaimStatus::Redeemed) | None => HoldReply::NotAHold,
        // `held` cannot be seen here unless the row changed between the two statements and
        // back, which no transition allows; answer as expired, changing nothing.
        Some(ClaimStatus::Expired | ClaimStatus::Held) => HoldReply::HoldExpired,
    };
    Ok(Some((reply, None)))
}
