//! The outbox relay: a background task on every origin that has a provider
//! (`FLASHGATE_GIFT_PROVIDER_URL`) calls the provider for each pending grant.
//!
//! One pass: take up to `FLASHGATE_GIFT_RELAY_BATCH` due rows of `gift_outbox` with
//! `FOR UPDATE SKIP LOCKED` and, in the same statement, count the attempt and push the row's
//! `next_attempt_at` past a lease (twice the provider timeout plus a second), so several origins
//! relay side by side without taking the same rows; then call the provider for each (at once),
//! with the fulfilment id as its idempotency key; then:
//! - a receipt → `delivered` (with the provider's reference);
//! - a timeout, a 5xx or a transport error → due again after `FLASHGATE_GIFT_RETRY_BASE_MS ×
//!   2^(attempts − 1)` (at most 5 minutes, minus up to half at random), or `failed` once
//!   `FLASHGATE_GIFT_DELIVERY_MAX_ATTEMPTS` calls were made;
//! - a 4xx → `failed` at once.
//!
//! Every call, and a delivery that gave up, is appended to the row's delivery history
//! ([`history`]) in the transaction of its update; so is the webhook event of a delivery
//! settled (`gift.delivered`, `gift.failed`).
//!
//! Each update applies only while the row is still `pending`. An origin that dies mid-call
//! leaves its rows to be taken again when the lease ends; the provider's idempotency key makes
//! that second call credit nothing more. A pass that found a full batch runs again at once.

use std::sync::Arc;
use std::time::Duration;

use crate::db::Db;
use flashgate_shared::api::gifts::provider::CreditRequest;
use uuid::Uuid;

use flashgate_shared::api::gifts::{DeliveryOutcome, DeliveryStatus};
use flashgate_shared::api::webhooks::{EventType, GiftData};

use crate::webhooks::{self, events::NewEvent};

use super::history::{self, Entry, Outbox};
use super::metrics::GiftMetrics;
use super::provider::{Provider, ProviderError};
use super::settings::GiftSettings;

/// Longest delay between two attempts.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

/// The relay's handles and settings.
#[derive(Clone)]
pub struct Relay {
    pub db: Db,
    pub metrics: Arc<GiftMetrics>,
    pub provider: Arc<dyn Provider>,
    pub batch: i64,
    pub max_attempts: i32,
    pub retry_base: Duration,
    pub lease: Duration,
}

impl Relay {
    /// A relay with `provider` and the settings' batch, attempts, backoff and lease.
    pub fn new(
        db: Db,
        metrics: Arc<GiftMetrics>,
        provider: Arc<dyn Provider>,
        s: &GiftSettings,
    ) -> Self {
        Relay {
            db,
            metrics,
            provider,
            batch: s.gift_relay_batch.max(1),
            max_attempts: s.gift_delivery_max_attempts.max(1),
            retry_base: Duration::from_millis(s.gift_retry_base_ms),
            lease: Duration::from_millis(s.gift_provider_timeout_ms * 2 + 1_000),
        }
    }
}

/// The delay before attempt `attempts + 1`, after `attempts` failed calls (see the module
/// documentation), before jitter.
pub fn backoff(base: Duration, attempts: i32) -> Duration {
    let doublings = u32::try_from(attempts.saturating_sub(1).clamp(0, 30)).unwrap_or(30);
    base.saturating_mul(1u32 << doublings).min(MAX_RETRY_DELAY)
}

struct Due {
    id: Uuid,
    attempts: i32,
    req: CreditRequest,
    campaign: String,
    segment: String,
}

impl Due {
    /// The `gift.*` event of this fulfilment settled as `status`.
    fn event(&self, kind: EventType, status: DeliveryStatus, answer: &str) -> NewEvent {
        let data = GiftData {
            fulfilment_id: self.id.to_string(),
            msisdn: self.req.msisdn.clone(),
            segment: self.segment.clone(),
            amount: self.req.amount,
            currency: self.req.currency.clone(),
            status,
            provider_ref: (status == DeliveryStatus::Delivered).then(|| answer.to_string()),
            error: (status == DeliveryStatus::Failed).then(|| answer.to_string()),
        };
        NewEvent::gift(kind, &self.campaign, data)
    }
}

/// One pass (see the module documentation). Returns how many calls it made.
pub async fn pass(r: &Relay) -> anyhow::Result<usize> {
    let calls = crate::outbox::drain(r.batch, || batch(r)).await?;
    let seen = sqlx::query!(
        r#"SELECT count(*) AS "pending!",
                  coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS "lag!"
             FROM gift_outbox WHERE status = 'pending'"#
    )
    .fetch_one(&r.db)
    .await?;
    r.metrics.outbox_seen(
        seen.pending as u64,
        Duration::from_secs_f64(seen.lag.max(0.0)),
    );
    Ok(calls)
}

async fn batch(r: &Relay) -> anyhow::Result<usize> {
    let lease_ms = i64::try_from(r.lease.as_millis()).unwrap_or(i64::MAX);
    let due: Vec<Due> = sqlx::query!(
        r#"WITH due AS (
                 SELECT fulfilment_id FROM gift_outbox
                  WHERE status = 'pending' AND next_attempt_at <= now()
                  ORDER BY next_attempt_at LIMIT $1
                  FOR UPDATE SKIP LOCKED
             )
             UPDATE gift_outbox o
                SET attempts = o.attempts + 1,
                    next_attempt_at = now() + $2::bigint * interval '1 millisecond'
               FROM due, gift_ledger l
              WHERE o.fulfilment_id = due.fulfilment_id AND l.id = due.fulfilment_id
             RETURNING o.fulfilment_id, o.attempts, l.msisdn, l.amount, l.currency,
                       l.campaign_id, l.segment_id"#,
        r.batch,
        lease_ms,
    )
    .fetch_all(&r.db)
    .await?
    .into_iter()
    .map(|row| Due {
        id: row.fulfilment_id,
        attempts: row.attempts,
        req: CreditRequest {
            msisdn: row.msisdn,
            amount: row.amount,
            currency: row.currency,
        },
        campaign: row.campaign_id,
        segment: row.segment_id,
    })
    .collect();
    let n = due.len();
    let results = futures::future::join_all(due.iter().map(|d| async move {
        let key = d.id.to_string();
        (d, r.provider.credit(&key, &d.req).await)
    }))
    .await;
    for (d, result) in results {
        settle(r, d, result).await?;
    }
    Ok(n)
}

/// Settles one call: the outbox row's new state and the call's entry in its delivery history
/// ([`history`]) in one transaction. The call is recorded even when the row was settled by
/// someone else meanwhile (it happened); a `failed` entry only when this update gave up.
async fn settle(
    r: &Relay,
    d: &Due,
    result: Result<flashgate_shared::api::gifts::provider::CreditReceipt, ProviderError>,
) -> sqlx::Result<()> {
    let mut tx = r.db.begin().await?;
    match result {
        Ok(receipt) => {
            let settled = sqlx::query!(
                "UPDATE gift_outbox SET status = 'delivered', delivered_at = now(),
                        provider_ref = $2, last_error = NULL
                  WHERE fulfilment_id = $1 AND status = 'pending'",
                d.id,
                receipt.credit_id,
            )
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if settled == 1 {
                let status = DeliveryStatus::Delivered;
                let event = d.event(EventType::GiftDelivered, status, &receipt.credit_id);
                webhooks::events::emit(&mut tx, &[event]).await?;
            }
            let entry = Entry::call(d.attempts, DeliveryOutcome::Delivered, &receipt.credit_id);
            history::append(&mut tx, Outbox::Gift, d.id, &entry).await?;
            tx.commit().await?;
            r.metrics.delivered();
        }
        Err(e) => {
            r.metrics.provider_error();
            let last = !e.retryable() || d.attempts >= r.max_attempts;
            let delay = backoff(r.retry_base, d.attempts);
            let delay_ms = crate::outbox::jittered(delay, 0.5).as_millis() as i64;
            tracing::info!(fulfilment = %d.id, attempts = d.attempts, error = %e, last, "provider call failed");
            let answer = e.to_string();
            let gave_up = sqlx::query_scalar!(
                r#"UPDATE gift_outbox
                    SET status = CASE WHEN $3 THEN 'failed' ELSE 'pending' END,
                        next_attempt_at = now() + $4::bigint * interval '1 millisecond',
                        last_error = $2
                  WHERE fulfilment_id = $1 AND status = 'pending'
                 RETURNING status = 'failed' AS "gave_up!""#,
                d.id,
                answer,
                last,
                delay_ms,
            )
            .fetch_optional(&mut *tx)
            .await?
            .unwrap_or(false);
            let outcome = if e.retryable() {
                DeliveryOutcome::Error
            } else {
                DeliveryOutcome::Refused
            };
            let call = Entry::call(d.attempts, outcome, &answer);
            history::append(&mut tx, Outbox::Gift, d.id, &call).await?;
            if gave_up {
                history::append(&mut tx, Outbox::Gift, d.id, &Entry::failed(&answer)).await?;
                let event = d.event(EventType::GiftFailed, DeliveryStatus::Failed, &answer);
                webhooks::events::emit(&mut tx, &[event]).await?;
            }
            tx.commit().await?;
            if last {
                r.metrics.failed();
            } else {
                r.metrics.provider_retry();
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let base = Duration::from_millis(500);
        assert_eq!(backoff(base, 1), Duration::from_millis(500));
        assert_eq!(backoff(base, 2), Duration::from_millis(1_000));
        assert_eq!(backoff(base, 4), Duration::from_millis(4_000));
        assert_eq!(backoff(base, 40), MAX_RETRY_DELAY);
    }
}
