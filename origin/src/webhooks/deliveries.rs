//! Deliveries of an endpoint as the admin API shows them, and replays.

use chrono::{DateTime, Utc};
use flashgate_shared::api::webhooks::{Delivery, DeliveryState, EventType};
use uuid::Uuid;

use crate::db::Db;

/// Most deliveries one list returns (the newest).
pub const MAX_LISTED: i64 = 1_000;

/// The newest [`MAX_LISTED`] deliveries of endpoint `endpoint`, of `status` when given.
pub async fn list(
    db: &Db,
    endpoint: Uuid,
    status: Option<DeliveryState>,
) -> sqlx::Result<Vec<Delivery>> {
    let rows = sqlx::query!(
        r#"SELECT d.event_id, e.type, d.status AS "status: DeliveryState", d.attempts,
                  d.last_status, d.last_attempt_at, d.next_attempt_at, d.created_at
             FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
            WHERE d.endpoint_id = $1 AND ($2::text IS NULL OR d.status = $2)
            ORDER BY d.created_at DESC, d.event_id DESC LIMIT $3"#,
        endpoint,
        status as _,
        MAX_LISTED,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            Some(Delivery {
                event_id: r.event_id.to_string(),
                kind: EventType::parse(&r.r#type)?,
                status: r.status,
                attempts: r.attempts,
                last_response_code: r.last_status,
                last_attempt_at: r.last_attempt_at,
                next_attempt_at: r.next_attempt_at,
                created_at: r.created_at,
            })
        })
        .collect())
}

/// What to replay: one event, or every event since a time.
#[derive(Debug, Clone, Copy)]
pub enum Replay {
    Event(Uuid),
    Since(DateTime<Utc>),
}

/// Queues `what` again for endpoint `endpoint` (of its event types only): each delivery row is
/// put back to `pending`, due now, attempts reset (or written when the event was never queued
/// for it), with a `replay` audit row. `None` when the endpoint is unknown; else the number of
/// deliveries queued. The endpoint's row is locked `FOR KEY SHARE`, so a concurrent delete
/// waits and then deletes these rows too ([`super::endpoints::delete`]).
pub async fn replay(
    db: &Db,
    actor: &str,
    endpoint: Uuid,
    what: Replay,
) -> sqlx::Result<Option<i64>> {
    let (event, since) = match what {
        Replay::Event(id) => (Some(id), None),
        Replay::Since(t) => (None, Some(t)),
    };
    let n = sqlx::query_scalar!(
        r#"WITH p AS (
               SELECT id, event_types FROM webhook_endpoints WHERE id = $1 FOR KEY SHARE
           ), ev AS (
               SELECT e.id FROM webhook_events e, p
                WHERE e.type = ANY (p.event_types)
                  AND (e.id = $2 OR e.occurred_at >= $3)
           ), q AS (
               INSERT INTO webhook_deliveries (event_id, endpoint_id)
               SELECT ev.id, $1 FROM ev
               ON CONFLICT (event_id, endpoint_id) DO UPDATE
                  SET status = 'pending', attempts = 0, next_attempt_at = now(),
                      last_error = NULL
               RETURNING 1
           ), a AS (
               INSERT INTO webhook_audit (endpoint_id, actor, action, params)
               SELECT id, $4, 'replay', jsonb_strip_nulls(jsonb_build_object(
                      'event_id', $2::uuid, 'since', $3::timestamptz))
                 FROM p
           )
           SELECT CASE WHEN EXISTS (SELECT 1 FROM p) THEN (SELECT count(*) FROM q) END AS n"#,
        endpoint,
        event,
        since,
        actor,
    )
    .fetch_one(db)
    .await?;
    Ok(n)
}
