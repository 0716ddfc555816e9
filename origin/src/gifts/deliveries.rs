//! Fulfilments with their delivery status (the ledger row joined to its outbox row), and a
//! manager's retry of a failed delivery (with its `gift.granted` event: pending again).

use crate::db::Db;
use crate::webhooks::{self, events::NewEvent};
use chrono::{DateTime, Utc};
use flashgate_shared::api::gifts::{DeliveryStatus, Fulfilment, Gift, GiftKind};
use flashgate_shared::api::webhooks::{EventType, GiftData};
use uuid::Uuid;

use super::history::Outbox;

/// Most fulfilments one list returns (the newest).
pub const MAX_LISTED: i64 = 1_000;

struct Row {
    id: Uuid,
    campaign_id: String,
    msisdn: String,
    segment_id: String,
    amount: i64,
    currency: String,
    kind: GiftKind,
    status: DeliveryStatus,
    created_at: DateTime<Utc>,
}

impl From<Row> for Fulfilment {
    fn from(r: Row) -> Self {
        Fulfilment {
            id: r.id.to_string(),
            campaign: r.campaign_id,
            msisdn: r.msisdn,
            segment: r.segment_id,
            gift: Gift {
                amount: r.amount,
                currency: r.currency,
                kind: r.kind,
            },
            status: r.status,
            created_at: r.created_at,
        }
    }
}

/// One fulfilment; `None` when unknown.
pub async fn fulfilment(db: &Db, id: Uuid) -> sqlx::Result<Option<Fulfilment>> {
    fulfilment_in(db, id).await
}

/// [`fulfilment`] read with `e` (the pool, or a caller's transaction).
async fn fulfilment_in<'e>(
    e: impl sqlx::PgExecutor<'e>,
    id: Uuid,
) -> sqlx::Result<Option<Fulfilment>> {
    let row = sqlx::query_as!(
        Row,
        r#"SELECT l.id, l.campaign_id, l.msisdn, l.segment_id, l.amount, l.currency,
                  l.kind AS "kind: GiftKind", o.status AS "status: DeliveryStatus", l.created_at
             FROM gift_ledger l JOIN gift_outbox o ON o.fulfilment_id = l.id
            WHERE l.id = $1"#,
        id
    )
    .fetch_optional(e)
    .await?;
    Ok(row.map(Fulfilment::from))
}

/// The newest [`MAX_LISTED`] fulfilments of a campaign, of `status` when given.
pub async fn list(
    db: &Db,
    campaign: &str,
    status: Option<DeliveryStatus>,
) -> sqlx::Result<Vec<Fulfilment>> {
    let rows = sqlx::query_as!(
        Row,
        r#"SELECT l.id, l.campaign_id, l.msisdn, l.segment_id, l.amount, l.currency,
                  l.kind AS "kind: GiftKind", o.status AS "status: DeliveryStatus", l.created_at
             FROM gift_ledger l JOIN gift_outbox o ON o.fulfilment_id = l.id
            WHERE l.campaign_id = $1 AND ($2::text IS NULL OR o.status = $2)
            ORDER BY l.created_at DESC, l.id DESC LIMIT $3"#,
        campaign,
        status as _,
        MAX_LISTED,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Fulfilment::from).collect())
}

/// What a manager's retry did.
#[derive(Debug)]
pub enum Retried {
    /// The delivery is pending again, with a fresh count of attempts.
    Retried(Fulfilment),
    /// It is not `failed` (pending or delivered): nothing changed.
    NotFailed(DeliveryStatus),
    NotFound,
}

/// Puts a failed delivery back in the outbox (attempts reset, due now) with its audit row, a
/// `retried` entry in its delivery history ([`super::history`]), which keeps the attempts the
/// reset forgets, and its `gift.granted` webhook event (status `pending` again, the next
/// sequence number of the fulfilment), all in one transaction. Errors: PostgreSQL's.
pub async fn retry(db: &Db, actor: &str, id: Uuid) -> sqlx::Result<Retried> {
    let mut tx = db.begin().await?;
    let row = sqlx::query!(
        r#"WITH before AS (
                 SELECT o.fulfilment_id, o.status, l.campaign_id
                   FROM gift_outbox o JOIN gift_ledger l ON l.id = o.fulfilment_id
                  WHERE o.fulfilment_id = $1 FOR UPDATE OF o
             ), changed AS (
                 UPDATE gift_outbox o SET status = 'pending', attempts = 0,
                        next_attempt_at = now(), last_error = NULL
                   FROM before b
                  WHERE o.fulfilment_id = b.fulfilment_id AND b.status = 'failed'
                 RETURNING o.fulfilment_id
             ), history AS (
                 INSERT INTO delivery_attempts (outbox, outbox_id, outcome, actor)
                 SELECT $3, fulfilment_id, 'retried', $2 FROM changed
             ), audit AS (
                 INSERT INTO gift_audit (campaign_id, actor, action, params)
                 SELECT b.campaign_id, $2, 'retry_delivery',
                        jsonb_build_object('fulfilment', b.fulfilment_id)
                   FROM before b, changed
             )
             SELECT b.status AS "status: DeliveryStatus",
                    EXISTS (SELECT 1 FROM changed) AS "changed!"
               FROM before b"#,
        id,
        actor,
        Outbox::Gift.as_str(),
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Ok(Retried::NotFound);
    };
    if !row.changed {
        return Ok(Retried::NotFailed(row.status));
    }
    let Some(f) = fulfilment_in(&mut *tx, id).await? else {
        return Ok(Retried::NotFound);
    };
    webhooks::events::emit(&mut tx, &[granted_again(&f)]).await?;
    tx.commit().await?;
    Ok(Retried::Retried(f))
}

/// The `gift.granted` event of a fulfilment put back in the outbox (`pending`).
fn granted_again(f: &Fulfilment) -> NewEvent {
    let data = GiftData {
        fulfilment_id: f.id.clone(),
        msisdn: f.msisdn.clone(),
        segment: f.segment.clone(),
        amount: f.gift.amount,
        currency: f.gift.currency.clone(),
        status: DeliveryStatus::Pending,
        provider_ref: None,
        error: None,
    };
    NewEvent::gift(EventType::GiftGranted, &f.campaign, data)
}
