//! Redeem in store of a giveaway coupon, and the coupon lookup.

use crate::db::Db;
use flashgate_shared::api::{ClaimStatus, RedeemReply};

use crate::reply::{status_code, Outcome, Reply};
use crate::webhooks::{self, events::NewEvent};
use flashgate_shared::api::webhooks::EventType;

/// What a redeem decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redeem {
    /// The reply to send (status and exact body), first or replayed for the same key.
    Reply(Reply),
    /// The key was first used with another code (422 `idempotency_key_reused`).
    KeyReused,
    /// No coupon with this code (404); nothing stored, so the key stays free.
    NotFound,
}

/// Redeems coupon `code` for POS idempotency key `key`, in one transaction:
/// 1. `INSERT INTO redeem_requests … ON CONFLICT DO NOTHING` claims the key; a concurrent
///    request with the same key waits here for the first to commit, then finds its reply;
/// 2. `UPDATE claims SET status = 'redeemed' … WHERE code = $1 AND status = 'issued'` plus the
///    `redeemed` ledger row — of two redeems of one coupon at once, exactly one matches — and
///    its `coupon.redeemed` event ([`crate::webhooks::events`]);
/// 3. the reply (`redeemed` 200, or `already_redeemed` 409 with the first `redeemed_at`) is
///    stored with the key.
///
/// Keys are global to the service token (POS terminals are expected to send unique keys).
pub async fn redeem(
    db: &Db,
    key: &str,
    code: &str,
    actor: &str,
    reason: &str,
) -> sqlx::Result<Redeem> {
    let mut tx = db.begin().await?;
    let fresh = sqlx::query_scalar!(
        "INSERT INTO redeem_requests (idempotency_key, code, status, body)
         VALUES ($1, $2, 0, '') ON CONFLICT DO NOTHING RETURNING idempotency_key",
        key,
        code,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if fresh.is_none() {
        tx.rollback().await?;
        let first = sqlx::query!(
            "SELECT code, status, body FROM redeem_requests WHERE idempotency_key = $1",
            key
        )
        .fetch_one(db)
        .await?;
        if first.code != code {
            return Ok(Redeem::KeyReused);
        }
        return Ok(Redeem::Reply(Reply {
            status: status_code(first.status as u16),
            body: first.body.into(),
            outcome: Outcome::Replay,
        }));
    }
    let redeemed = sqlx::query!(
        r#"WITH r AS (
            UPDATE claims SET status = 'redeemed', redeemed_at = now(), updated_at = now()
             WHERE code = $1 AND status = 'issued'
            RETURNING id, campaign_id, customer_id, redeemed_at
         ), l AS (
            INSERT INTO ledger (claim_id, campaign_id, customer_id, event, actor, reason)
            SELECT id, campaign_id, customer_id, 'redeemed', $2, $3 FROM r
         )
         SELECT id, campaign_id, customer_id, redeemed_at AS "redeemed_at!" FROM r"#,
        code,
        actor,
        reason,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let reply = match redeemed {
        Some(r) => {
            let event = NewEvent::claim(
                EventType::CouponRedeemed,
                &r.campaign_id,
                &r.id,
                &r.customer_id,
                ClaimStatus::Redeemed,
                None,
                None,
            );
            webhooks::events::emit(&mut tx, &[event]).await?;
            RedeemReply::Redeemed {
                code: code.to_string(),
                redeemed_at: r.redeemed_at,
            }
        }
        None => {
            let first = sqlx::query_scalar!("SELECT redeemed_at FROM claims WHERE code = $1", code)
                .fetch_optional(&mut *tx)
                .await?;
            match first {
                Some(Some(at)) => RedeemReply::AlreadyRedeemed { redeemed_at: at },
                _ => {
                    tx.rollback().await?;
                    return Ok(Redeem::NotFound);
                }
            }
        }
    };
    let reply = Reply::with_status(reply.http_status(), Outcome::Redeem, &reply);
    let body = std::str::from_utf8(&reply.body).expect("JSON is UTF-8");
    sqlx::query!(
        "UPDATE redeem_requests SET status = $2, body = $3 WHERE idempotency_key = $1",
        key,
        reply.status.as_u16() as i16,
        body,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Redeem::Reply(reply))
}

/// A coupon by code, with its QR payload. `Ok(None)`: no coupon with this code.
pub async fn coupon(db: &Db, code: &str) -> sqlx::Result<Option<flashgate_shared::api::Coupon>> {
    let row = sqlx::query!(
        r#"SELECT campaign_id, customer_id, status AS "status: ClaimStatus", created_at,
                  redeemed_at
             FROM claims WHERE code = $1"#,
        code
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| flashgate_shared::api::Coupon {
        code: code.to_string(),
        campaign: r.campaign_id,
        customer: r.customer_id,
        status: r.status,
        issued_at: r.created_at,
        redeemed_at: r.redeemed_at,
        qr: flashgate_shared::api::coupon_qr_payload(code),
    }))
}
