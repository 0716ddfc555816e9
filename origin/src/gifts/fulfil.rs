//! `POST /api/v1/gift-campaigns/{id}/fulfilments`: grant a subscriber her segment's gift
//! exactly once per request, through four layers in order:
//!
//! 1. **the request key**: a key whose first reply is recorded (`gift_requests`: a grant or a
//!    refusal) is answered with it, byte for byte, without a lock and without writing;
//! 2. **an advisory transaction lock** on (campaign, subscriber)
//!    (`pg_advisory_xact_lock(GIFT_LOCK_CLASS, hashtext(campaign ':' msisdn))`) serialises
//!    competing requests for her; its wait is measured ([`super::metrics`]);
//! 3. **the re-check after the lock**: the key again (the request ahead may have just
//!    committed it), then the campaign, her segment and every cap rule on PostgreSQL's clock
//!    ([`super::verdict`]);
//! 4. **the ledger's uniqueness**: `gift_ledger (campaign_id, idempotency_key)` is unique, so
//!    even if layers 1–3 were wrong a second grant for the key is refused; it then replays.
//!
//! The ledger row, the idempotency record (status and exact body) and the outbox row are
//! written by one statement in the lock's transaction, so they commit together or not at all;
//! the `gift.granted` webhook event is written in that transaction too.
//! Refusals (`cap_reached`, `not_in_segment`, `campaign_not_active`) are recorded under the key
//! in the same transaction, so a retry gets the same refusal even once the subscriber has become
//! eligible: one key, one outcome.

use super::verdict::{self, Verdict};
use super::GiftService;
use crate::reply::{Outcome, Reply};
use crate::webhooks::{self, events::NewEvent};
use flashgate_shared::api::gifts::{DeliveryStatus, Fulfilment, FulfilmentReply};
use flashgate_shared::api::webhooks::{EventType, GiftData};

/// The first key of the two-key advisory locks of gift fulfilment (the bytes of "gift"), so
/// they never meet another lock of the application.
pub const GIFT_LOCK_CLASS: i32 = 0x6769_6674;

/// What a fulfilment request gets.
#[derive(Debug, Clone)]
pub enum Fulfil {
    /// The reply to send (201 granted, 409 refusal, or a replay of the first reply).
    Reply(Reply),
    /// The key was used for another subscriber (422 `idempotency_key_reused`).
    KeyReused,
    /// No such campaign (404).
    UnknownCampaign,
}

/// The recorded first reply of a key, if any: `Reply` when it was for `msisdn`, `KeyReused`.
async fn recorded<'e>(
    ex: impl sqlx::PgExecutor<'e>,
    campaign: &str,
    key: &str,
    msisdn: &str,
) -> sqlx::Result<Option<Fulfil>> {
    let row = sqlx::query!(
        "SELECT msisdn, status, body FROM gift_requests
          WHERE campaign_id = $1 AND idempotency_key = $2",
        campaign,
        key,
    )
    .fetch_optional(ex)
    .await?;
    Ok(row.map(|r| {
        if r.msisdn == msisdn {
            Fulfil::Reply(Reply {
                status: crate::reply::status_code(r.status as u16),
                body: r.body.into_bytes().into(),
                outcome: Outcome::Replay,
            })
        } else {
            Fulfil::KeyReused
        }
    }))
}

/// Runs the four layers for `msisdn` (already validated) under `key` in `campaign`.
/// Errors: PostgreSQL's.
pub async fn fulfil(
    g: &GiftService,
    campaign: &str,
    key: &str,
    msisdn: &str,
) -> sqlx::Result<Fulfil> {
    // Layer 1: the fast path.
    if let Some(done) = recorded(&g.db, campaign, key, msisdn).await? {
        g.metrics.replay_fast();
        return Ok(done);
    }
    // A refusal below drops the transaction unfinished: sqlx rolls it back.
    let mut tx = g.db.begin().await?;
    // Layer 2: the lock.
    let waited = std::time::Instant::now();
    sqlx::query!(
        "SELECT pg_advisory_xact_lock($1, hashtext($2 || ':' || $3))",
        GIFT_LOCK_CLASS,
        campaign,
        msisdn,
    )
    .execute(&mut *tx)
    .await?;
    g.metrics.lock_waited(waited.elapsed());
    // Layer 3: the key and the caps again, now that the lock is held.
    if let Some(done) = recorded(&mut *tx, campaign, key, msisdn).await? {
        g.metrics.replay_locked();
        return Ok(done);
    }
    let decision = verdict::decide(&mut *tx, campaign, msisdn, g.test_clock).await?;
    let refusal = match decision.verdict {
        Verdict::UnknownCampaign => return Ok(Fulfil::UnknownCampaign),
        Verdict::NotActive => FulfilmentReply::CampaignNotActive,
        Verdict::NotInSegment => FulfilmentReply::NotInSegment,
        Verdict::CapReached { next_eligible_at } => {
            FulfilmentReply::CapReached { next_eligible_at }
        }
        Verdict::Eligible { segment, gift } => {
            return grant(g, tx, campaign, key, msisdn, segment, gift, decision.now).await
        }
    };
    refuse(g, tx, campaign, key, msisdn, refusal).await
}

/// Records `refusal` under `key` in `tx` (the lock held) and commits; the reply to send.
async fn refuse(
    g: &GiftService,
    mut tx: crate::db::Tx<'static>,
    campaign: &str,
    key: &str,
    msisdn: &str,
    refusal: FulfilmentReply,
) -> sqlx::Result<Fulfil> {
    let reply = Reply::with_status(refusal.http_status(), Outcome::GiftRefused, &refusal);
    let body = std::str::from_utf8(&reply.body).expect("JSON is UTF-8");
    let written = sqlx::query!(
        "INSERT INTO gift_requests (campaign_id, idempotency_key, msisdn, status, body)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (campaign_id, idempotency_key) DO NOTHING",
        campaign,
        key,
        msisdn,
        reply.status.as_u16() as i16,
        body,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if written == 0 {
        // The key was taken meanwhile by a request for another subscriber (whose lock is not
        // ours): answer as it was recorded.
        tx.rollback().await?;
        return Ok(recorded(&g.db, campaign, key, msisdn)
            .await?
            .unwrap_or(Fulfil::KeyReused));
    }
    tx.commit().await?;
    g.metrics.refused();
    Ok(Fulfil::Reply(reply))
}

/// Layer 4 and the grant: writes the ledger row, its outbox row, the key's record and the
/// `gift.granted` event in `tx` and commits; the reply to send.
#[allow(clippy::too_many_arguments)]
async fn grant(
    g: &GiftService,
    mut tx: crate::db::Tx<'static>,
    campaign: &str,
    key: &str,
    msisdn: &str,
    segment: String,
    gift: flashgate_shared::api::gifts::Gift,
    now: chrono::DateTime<chrono::Utc>,
) -> sqlx::Result<Fulfil> {
    let id = uuid::Uuid::now_v7();
    let reply = FulfilmentReply::Granted {
        fulfilment: Fulfilment {
            id: id.to_string(),
            campaign: campaign.to_string(),
            msisdn: msisdn.to_string(),
            segment: segment.clone(),
            gift: gift.clone(),
            status: DeliveryStatus::Pending,
            created_at: now,
        },
    };
    let reply = Reply::with_status(reply.http_status(), Outcome::GiftGranted, &reply);
    let body = std::str::from_utf8(&reply.body).expect("JSON is UTF-8");
    // Layer 4: the ledger's uniqueness (ON CONFLICT: nothing is written, then replay).
    let written = sqlx::query_scalar!(
        r#"WITH grant_row AS (
                 INSERT INTO gift_ledger (id, campaign_id, segment_id, msisdn, idempotency_key,
                                          amount, currency, kind, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT ON CONSTRAINT gift_ledger_one_grant_per_request DO NOTHING
                 RETURNING id
             ), outbox AS (
                 INSERT INTO gift_outbox (fulfilment_id) SELECT id FROM grant_row
             ), record AS (
                 INSERT INTO gift_requests (campaign_id, idempotency_key, msisdn, fulfilment_id,
                                            status, body)
                 SELECT $2, $5, $4, id, $10, $11 FROM grant_row
             )
             SELECT count(*) AS "n!" FROM grant_row"#,
        id,
        campaign,
        segment,
        msisdn,
        key,
        gift.amount,
        gift.currency,
        gift.kind as _,
        now,
        reply.status.as_u16() as i16,
        body,
    )
    .fetch_one(&mut *tx)
    .await?;
    if written == 0 {
        tx.rollback().await?;
        g.metrics.ledger_refused();
        return Ok(recorded(&g.db, campaign, key, msisdn)
            .await?
            .unwrap_or(Fulfil::KeyReused));
    }
    let data = GiftData {
        fulfilment_id: id.to_string(),
        msisdn: msisdn.to_string(),
        segment,
        amount: gift.amount,
        currency: gift.currency,
        status: DeliveryStatus::Pending,
        provider_ref: None,
        error: None,
    };
    let event = NewEvent::gift(EventType::GiftGranted, campaign, data);
    webhooks::events::emit(&mut tx, &[event]).await?;
    tx.commit().await?;
    g.metrics.granted();
    Ok(Fulfil::Reply(reply))
}
