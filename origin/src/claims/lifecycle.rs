//! The life of a claim after the claim path (seed "Flash Sale": holds and the second wave; seed
//! "6M-coupon giveaway": redeem in store):
//!
//! ```text
//! sale:      held ──pay──▶ paid
//!              ├──release──▶ released   (unit back)
//!              └──sweeper──▶ expired    (unit back, once held_until has passed)
//! giveaway:  issued ──redeem──▶ redeemed
//! ```
//!
//! Every change is one conditional SQL statement (data-modifying CTEs) that checks the current
//! status and changes it, returns the unit to `campaigns.remaining` when the claim leaves an
//! active status, queues the unit's return to the Redis gate (`gate_returns`) and appends the
//! ledger row — never read-then-write. Two changes racing on one claim are serialised by the
//! row lock; the loser's `WHERE status = 'held'` no longer matches and it changes nothing.
//! Answers for the losers (and for repeats) are then built from a plain read of the row.
//!
//! After the commit the unit goes back to the gate with [`gate::give_back`], which acts only
//! while the customer's holder still names this claim: exactly once, whoever (release, the
//! sweeper on this or another origin, the drain of `gate_returns`) calls it.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use flashgate_shared::api::{ClaimStatus, HoldReply, RedeemReply};
use futures::future::join_all;
use sqlx::PgPool;

use super::store::{ClaimRow, COLUMNS};
use crate::gate::{self, Keys};
use crate::state::AppState;

/// Ledger actor of the expiry sweeper.
pub const SWEEPER_ACTOR: &str = "sweeper";
/// Age after which a queued gate return is given back again by the sweeper's drain (a no-op
/// unless the first give-back was lost), in seconds.
pub const GATE_RETURN_SETTLE_SECONDS: i32 = 5;
/// Give-backs sent to Redis at once.
const GIVE_BACK_CONCURRENCY: usize = 64;

/// A claim whose unit went back to `remaining` in PostgreSQL and must go back to the gate.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Returned {
    /// The claim that left its active status (released or expired).
    pub claim_id: String,
    /// Its campaign.
    pub campaign_id: String,
    /// Its customer, whose gate holder names `claim_id` until the give-back.
    pub customer_id: String,
}

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
    .bind(claim_id)
    .fetch_optional(db)
    .await
}

fn status_of(row: &ClaimRow) -> Option<ClaimStatus> {
    ClaimStatus::parse(&row.status)
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
/// The second value is the unit to give back to the gate ([`return_to_gate`]) when this call
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

/// Expires at most `limit` holds of campaign `c` past `held_until`, in one statement: the rows
/// are picked with `FOR UPDATE SKIP LOCKED` (so several origins sweep side by side, and a pay
/// in progress is left to finish), moved `held → expired`, their units added back to
/// `remaining`, their gate returns queued and their `expired` ledger rows appended. One
/// campaign per statement, so two sweepers never lock campaign rows in opposite orders.
pub async fn expire_due(db: &PgPool, c: &str, limit: i64) -> sqlx::Result<Vec<Returned>> {
    sqlx::query_as(
        "WITH due AS (
            SELECT id FROM claims
             WHERE campaign_id = $1 AND status = 'held' AND held_until <= now()
             ORDER BY held_until
             LIMIT $2
             FOR UPDATE SKIP LOCKED
         ), x AS (
            UPDATE claims c SET status = 'expired', updated_at = now()
              FROM due WHERE c.id = due.id AND c.status = 'held'
            RETURNING c.id, c.campaign_id, c.customer_id
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
         SELECT id AS claim_id, campaign_id, customer_id FROM x",
    )
    .bind(c)
    .bind(limit)
    .bind(SWEEPER_ACTOR)
    .fetch_all(db)
    .await
}

/// Campaigns with at least one hold past `held_until`.
pub async fn campaigns_with_due_holds(db: &PgPool) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT DISTINCT campaign_id FROM claims WHERE status = 'held' AND held_until <= now()",
    )
    .fetch_all(db)
    .await
}

/// Gives the units of `returned` back to the Redis gate (each at most once, see the module
/// documentation), then clears this origin's memory of the sold-out flag and its cached
/// campaign row for every campaign touched, so the second wave starts at once. A Redis failure
/// is logged and left to the sweeper's drain of `gate_returns`. Returns the units given back.
pub async fn return_to_gate(state: &AppState, returned: &[Returned]) -> usize {
    let mut given = 0;
    for chunk in returned.chunks(GIVE_BACK_CONCURRENCY) {
        let backs = join_all(chunk.iter().cloned().map(|r| {
            let mut redis = state.redis.clone();
            async move {
                let back = gate::give_back(
                    &mut redis,
                    &r.campaign_id,
                    &r.customer_id,
                    &r.claim_id,
                    None,
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
        state.flags.clear(c);
        state.campaigns.invalidate(c);
    }
    given
}

/// One pass of the expiry sweeper: expires due holds campaign by campaign in batches of
/// `config.sweep_batch_max`, gives their units back to the gate, then drains old
/// `gate_returns`. Returns the number of holds expired by this origin.
pub async fn sweep(state: &AppState) -> anyhow::Result<usize> {
    let batch = state.config.sweep_batch_max.max(1);
    let mut expired = 0;
    for c in campaigns_with_due_holds(&state.db).await? {
        loop {
            let returned = expire_due(&state.db, &c, batch).await?;
            if returned.is_empty() {
                break;
            }
            expired += returned.len();
            let back = return_to_gate(state, &returned).await;
            tracing::info!(campaign = %c, expired = returned.len(), back, "expired holds");
            if (returned.len() as i64) < batch {
                break;
            }
        }
    }
    drain_gate_returns(state, batch).await?;
    Ok(expired)
}

/// Gives back (again) the queued gate returns older than [`GATE_RETURN_SETTLE_SECONDS`] and
/// deletes them, at most `limit` per call. Rows are taken with `FOR UPDATE SKIP LOCKED` and
/// deleted in the same transaction, after their give-backs; a Redis failure rolls back and
/// leaves them for the next pass. A campaign whose gate is being loaded is skipped (the load's
/// snapshot may predate the return). Returns the units that actually went back now — non-zero
/// only when a first give-back had been lost.
pub async fn drain_gate_returns(state: &AppState, limit: i64) -> anyhow::Result<usize> {
    let mut tx = state.db.begin().await?;
    let rows: Vec<Returned> = sqlx::query_as(
        "SELECT claim_id, campaign_id, customer_id FROM gate_returns
          WHERE created_at < now() - make_interval(secs => $1)
          ORDER BY created_at
          LIMIT $2
          FOR UPDATE SKIP LOCKED",
    )
    .bind(GATE_RETURN_SETTLE_SECONDS)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let mut redis = state.redis.clone();
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
    for r in &ready {
        if gate::give_back(
            &mut redis,
            &r.campaign_id,
            &r.customer_id,
            &r.claim_id,
            None,
        )
        .await?
        {
            back += 1;
            tracing::warn!(campaign = %r.campaign_id, claim = %r.claim_id,
                "a lost gate give-back was repaired by the drain");
        }
    }
    let ids: Vec<&str> = ready.iter().map(|r| r.claim_id.as_str()).collect();
    sqlx::query("DELETE FROM gate_returns WHERE claim_id = ANY($1)")
        .bind(&ids)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    if back > 0 {
        for c in ready
            .iter()
            .map(|r| r.campaign_id.as_str())
            .collect::<BTreeSet<_>>()
        {
            state.flags.clear(c);
            state.campaigns.invalidate(c);
        }
    }
    Ok(back)
}

/// What a redeem decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redeem {
    /// The reply to send (status and exact body), first or replayed for the same key.
    Reply { status: u16, body: String },
    /// The key was first used with another code (422 `idempotency_key_reused`).
    KeyReused,
    /// No coupon with this code (404); nothing stored, so the key stays free.
    NotFound,
}

/// Redeems coupon `code` for POS idempotency key `key`, in one transaction:
/// 1. `INSERT INTO redeem_requests … ON CONFLICT DO NOTHING` claims the key; a concurrent
///    request with the same key waits here for the first to commit, then finds its reply;
/// 2. `UPDATE claims SET status = 'redeemed' … WHERE code = $1 AND status = 'issued'` plus the
///    `redeemed` ledger row — of two redeems of one coupon at once, exactly one matches;
/// 3. the reply (`redeemed` 200, or `already_redeemed` 409 with the first `redeemed_at`) is
///    stored with the key.
///
/// Keys are global to the service token (POS terminals are expected to send unique keys).
pub async fn redeem(
    db: &PgPool,
    key: &str,
    code: &str,
    actor: &str,
    reason: &str,
) -> sqlx::Result<Redeem> {
    let mut tx = db.begin().await?;
    let fresh: Option<(String,)> = sqlx::query_as(
        "INSERT INTO redeem_requests (idempotency_key, code, status, body)
         VALUES ($1, $2, 0, '') ON CONFLICT DO NOTHING RETURNING idempotency_key",
    )
    .bind(key)
    .bind(code)
    .fetch_optional(&mut *tx)
    .await?;
    if fresh.is_none() {
        tx.rollback().await?;
        let (first_code, status, body): (String, i16, String) = sqlx::query_as(
            "SELECT code, status, body FROM redeem_requests WHERE idempotency_key = $1",
        )
        .bind(key)
        .fetch_one(db)
        .await?;
        if first_code != code {
            return Ok(Redeem::KeyReused);
        }
        return Ok(Redeem::Reply {
            status: status as u16,
            body,
        });
    }
    let redeemed: Option<(DateTime<Utc>,)> = sqlx::query_as(
        "WITH r AS (
            UPDATE claims SET status = 'redeemed', redeemed_at = now(), updated_at = now()
             WHERE code = $1 AND status = 'issued'
            RETURNING id, campaign_id, customer_id, redeemed_at
         ), l AS (
            INSERT INTO ledger (claim_id, campaign_id, customer_id, event, actor, reason)
            SELECT id, campaign_id, customer_id, 'redeemed', $2, $3 FROM r
         )
         SELECT redeemed_at FROM r",
    )
    .bind(code)
    .bind(actor)
    .bind(reason)
    .fetch_optional(&mut *tx)
    .await?;
    let reply = match redeemed {
        Some((at,)) => RedeemReply::Redeemed {
            code: code.to_string(),
            redeemed_at: at,
        },
        None => {
            let first: Option<(Option<DateTime<Utc>>,)> =
                sqlx::query_as("SELECT redeemed_at FROM claims WHERE code = $1")
                    .bind(code)
                    .fetch_optional(&mut *tx)
                    .await?;
            match first {
                Some((Some(at),)) => RedeemReply::AlreadyRedeemed { redeemed_at: at },
                _ => {
                    tx.rollback().await?;
                    return Ok(Redeem::NotFound);
                }
            }
        }
    };
    let status = reply.http_status();
    let body = serde_json::to_string(&reply).expect("redeem reply serialises");
    sqlx::query("UPDATE redeem_requests SET status = $2, body = $3 WHERE idempotency_key = $1")
        .bind(key)
        .bind(status as i16)
        .bind(&body)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Redeem::Reply { status, body })
}

/// Campaign, customer, status, issued and redeemed times of a coupon.
type CouponRow = (String, String, String, DateTime<Utc>, Option<DateTime<Utc>>);

/// A coupon by code, with its QR payload. `Ok(None)`: no coupon with this code.
pub async fn coupon(
    db: &PgPool,
    code: &str,
) -> sqlx::Result<Option<flashgate_shared::api::Coupon>> {
    let row: Option<CouponRow> = sqlx::query_as(
        "SELECT campaign_id, customer_id, status, created_at, redeemed_at
           FROM claims WHERE code = $1",
    )
    .bind(code)
    .fetch_optional(db)
    .await?;
    Ok(
        row.and_then(|(campaign, customer, status, issued_at, redeemed_at)| {
            Some(flashgate_shared::api::Coupon {
                code: code.to_string(),
                campaign,
                customer,
                status: ClaimStatus::parse(&status)?,
                issued_at,
                redeemed_at,
                qr: flashgate_shared::api::coupon_qr_payload(code),
            })
        }),
    )
}
