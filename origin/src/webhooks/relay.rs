//! The webhook relay: a background task on every origin that drains `webhook_deliveries`, one
//! row per (event, endpoint). Same design as the gift relay ([`crate::gifts::relay`]), with
//! calls settled one by one so that a slow receiver delays only its own deliveries:
//!
//! A pass takes due rows of enabled endpoints with `FOR UPDATE SKIP LOCKED`: at most
//! [`PER_ENDPOINT`] of each endpoint, none of an endpoint this pass still has calls in flight
//! to, and at most the batch size in flight in all. The same statement counts the attempt and
//! pushes `next_attempt_at` past a lease (the call timeout, 15 s, twice, plus a second), so
//! several origins relay side by side without sending one row twice at once; an origin that
//! dies mid-call leaves its rows to be taken again when the lease ends (delivery is at least
//! once: receivers deduplicate on `webhook-id`). It posts the events signed ([`super::sign`]),
//! settles a row whose call failed as soon as the call ends, and takes more when an endpoint's
//! calls have all ended, and every relay interval while calls are in flight. The rows whose
//! calls answered 2xx are marked `delivered` by that next take, in the same statement
//! ([`take`]): one statement and one commit per round of calls instead of a take and
//! settlements apart. A relay that stops between a 2xx and its next take leaves those rows to
//! be sent again after their lease (at least once, as above). A receiver that never
//! answers thus holds up to [`PER_ENDPOINT`] of its own rows for the timeout, and no other
//! endpoint's. The pass ends when no call is in flight and nothing is due. Each row ends:
//! - a 2xx → `delivered`;
//! - a 410 → the endpoint is disabled and audited, its pending rows `failed`
//!   ([`super::endpoints::disable_by_receiver`]);
//! - anything else (a timeout, a transport error, another status) → due again after the next
//!   delay of [`SCHEDULE`] (minus up to a fifth at random), or after the receiver's
//!   `Retry-After` when it is longer on a 429, 502, 503 or 504; `failed` after the last.
//!
//! Each update applies only while the row is still `pending`. While claims of this origin are
//! in flight, a take starts no call for a while ([`super::claims_first`]): it only marks.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use flashgate_shared::api::webhooks::{Event, EventData, EventType};
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use uuid::Uuid;

use crate::db::Db;
use crate::gate::takes::Takes;

use super::claims_first::ClaimsFirst;
use super::endpoints;
use super::metrics::{CallResult, WebhookMetrics};
use super::settings::WebhookSettings;
use super::sign;
use super::urls;

/// The delays before each attempt: the first at once, then 5 s, 5 min, 30 min, 2 h, 5 h,
/// 10 h, 14 h, 20 h and 24 h (Standard Webhooks' schedule). After the last, the row fails.
pub const SCHEDULE: [Duration; 10] = [
    Duration::ZERO,
    Duration::from_secs(5),
    Duration::from_secs(5 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(5 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(14 * 3600),
    Duration::from_secs(20 * 3600),
    Duration::from_secs(24 * 3600),
];
/// Longest a call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// Most rows of one endpoint a pass has in flight at once.
pub const PER_ENDPOINT: i64 = 16;
/// How often a pass that runs long sets the queue depth gauge.
const DEPTH_EVERY: Duration = Duration::from_secs(1);
/// Longest `Retry-After` honoured.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The relay's handles and settings.
#[derive(Clone)]
pub struct Relay {
    pub db: Db,
    pub metrics: Arc<WebhookMetrics>,
    pub client: reqwest::Client,
    /// Most rows in flight at once (`FLASHGATE_WEBHOOK_RELAY_BATCH`).
    pub batch: i64,
    /// How often a pass with calls in flight looks for more due rows
    /// (`FLASHGATE_WEBHOOK_RELAY_INTERVAL_MS`).
    pub interval: Duration,
    /// Call endpoints on plain http or private addresses (`FLASHGATE_WEBHOOK_ALLOW_PRIVATE`).
    pub allow_private: bool,
    /// [`SCHEDULE`]'s delays are divided by this (`FLASHGATE_WEBHOOK_RETRY_DIVISOR`; 1 in
    /// production, larger in tests).
    pub retry_divisor: u32,
    /// When it gives way to claims (`FLASHGATE_WEBHOOK_RELAY_YIELD_MS`).
    pub claims_first: ClaimsFirst,
}

impl Relay {
    /// A relay with its own HTTP client (timeout [`CALL_TIMEOUT`], no redirects), giving way
    /// to the claims in flight of `takes` (this origin's).
    pub fn new(db: Db, metrics: Arc<WebhookMetrics>, s: &WebhookSettings, takes: Takes) -> Self {
        let client = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Relay {
            db,
            metrics,
            client,
            batch: s.webhook_relay_batch.max(1),
            interval: Duration::from_millis(s.webhook_relay_interval_ms.max(1)),
            allow_private: s.webhook_allow_private,
            retry_divisor: s.webhook_retry_divisor.max(1),
            claims_first: ClaimsFirst::new(takes, Duration::from_millis(s.webhook_relay_yield_ms)),
        }
    }

    fn lease_ms(&self) -> i64 {
        (CALL_TIMEOUT * 2 + Duration::from_secs(1)).as_millis() as i64
    }
}

/// The delay before the attempt after `attempts` failed ones, before jitter; `None` when
/// `attempts` was the last.
pub fn next_delay(attempts: i32, divisor: u32) -> Option<Duration> {
    let i = usize::try_from(attempts).ok()?;
    SCHEDULE.get(i).map(|d| *d / divisor.max(1))
}

/// The `Retry-After` of a 429, 502, 503 or 504 (seconds or an HTTP date), capped.
pub fn retry_after(status: u16, headers: &HeaderMap) -> Option<Duration> {
    if !matches!(status, 429 | 502 | 503 | 504) {
        return None;
    }
    let v = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let d = match v.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => {
            let at = DateTime::parse_from_rfc2822(v).ok()?.with_timezone(&Utc);
            (at - Utc::now()).to_std().unwrap_or_default()
        }
    };
    Some(d.min(MAX_RETRY_AFTER))
}

struct Due {
    event_id: Uuid,
    endpoint_id: Uuid,
    attempts: i32,
    body: Vec<u8>,
    occurred_at: DateTime<Utc>,
    url: String,
    keys: Vec<Vec<u8>>,
}

/// A call answered 2xx whose row is not yet marked `delivered` (the next [`take`] does it).
struct Delivered {
    event_id: Uuid,
    endpoint_id: Uuid,
    status: u16,
    occurred_at: DateTime<Utc>,
}

impl Delivered {
    fn of(d: &Due, status: u16) -> Self {
        Delivered {
            event_id: d.event_id,
            endpoint_id: d.endpoint_id,
            status,
            occurred_at: d.occurred_at,
        }
    }
}

/// What a call came to.
enum Answer {
    Status(u16, HeaderMap),
    Error(String),
}

/// One pass (see the module documentation). Returns how many calls it made.
pub async fn pass(r: &Relay) -> anyhow::Result<usize> {
    let calls = pump(r).await?;
    report_depth(r).await?;
    Ok(calls)
}

/// Sets the queue depth gauge: the pending rows.
async fn report_depth(r: &Relay) -> sqlx::Result<()> {
    let depth = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM webhook_deliveries WHERE status = 'pending'"#
    )
    .fetch_one(&r.db)
    .await?;
    r.metrics.depth(depth);
    Ok(())
}

/// Takes, posts and settles rows until none is in flight and none was due at the last look.
/// A long pass (calls in flight all along) sets the queue depth every [`DEPTH_EVERY`].
async fn pump(r: &Relay) -> anyhow::Result<usize> {
    let mut in_flight = FuturesUnordered::new();
    // Calls in flight per endpoint; an endpoint listed here is not taken from.
    let mut busy: HashMap<Uuid, usize> = HashMap::new();
    let mut tick = tokio::time::interval(r.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.reset();
    let (mut taken, mut look) = (0, true);
    let mut depth_at = tokio::time::Instant::now();
    // 2xx calls not yet marked: the next take marks them. Every call's end that empties its
    // endpoint sets `look`, so the last call's end is followed by a take before the return.
    let mut delivered: Vec<Delivered> = Vec::new();
    loop {
        let mut room = r.batch - in_flight.len() as i64;
        if look && room > 0 && !r.claims_first.may_call() {
            // Claims first: this take only marks the 2xx rows.
            room = 0;
        }
        if look && (room > 0 || !delivered.is_empty()) {
            let skip: Vec<Uuid> = busy.keys().copied().collect();
            let due = take(r, room.max(0), &skip, &delivered).await?;
            count_delivered(r, &delivered);
            delivered.clear();
            for d in due {
                taken += 1;
                *busy.entry(d.endpoint_id).or_default() += 1;
                in_flight.push(async move {
                    let answer = call(r, &d).await;
                    (d, answer)
                });
            }
        }
        look = false;
        if in_flight.is_empty() {
            return Ok(taken);
        }
        tokio::select! {
            Some(first) = in_flight.next() => {
                // Every call that has ended by now: the 2xx ones wait for the next take, the
                // others are settled at once.
                let mut ended = vec![first];
                while let Some(Some(next)) = in_flight.next().now_or_never() {
                    ended.push(next);
                }
                for (d, answer) in ended {
                    let left = busy.get_mut(&d.endpoint_id).map(|n| { *n -= 1; *n });
                    if left == Some(0) {
                        busy.remove(&d.endpoint_id);
                        look = true;
                    }
                    match answer {
                        Answer::Status(s, _) if (200..300).contains(&s) => {
                            delivered.push(Delivered::of(&d, s));
                        }
                        answer => settle(r, &d, answer).await?,
                    }
                }
            }
            _ = tick.tick() => {
                look = true;
                if depth_at.elapsed() >= DEPTH_EVERY {
                    report_depth(r).await?;
                    depth_at = tokio::time::Instant::now();
                }
            }
        }
    }
}

/// Takes up to `room` due rows (at most [`PER_ENDPOINT`] per endpoint, none of the endpoints
/// in `skip`), counting the attempt and leasing them; in the same statement, marks the rows of
/// `delivered` (calls that answered 2xx) `delivered`. Those are leased, so never due: the two
/// parts touch different rows.
async fn take(
    r: &Relay,
    room: i64,
    skip: &[Uuid],
    delivered: &[Delivered],
) -> anyhow::Result<Vec<Due>> {
    let events: Vec<Uuid> = delivered.iter().map(|d| d.event_id).collect();
    let endpoints: Vec<Uuid> = delivered.iter().map(|d| d.endpoint_id).collect();
    let statuses: Vec<i32> = delivered.iter().map(|d| i32::from(d.status)).collect();
    let rows = sqlx::query!(
        r#"WITH settled AS (
               UPDATE webhook_deliveries d SET status = 'delivered', delivered_at = now(),
                      last_status = x.status, last_error = NULL
                 FROM UNNEST($5::uuid[], $6::uuid[], $7::int[])
                      AS x(event_id, endpoint_id, status)
                WHERE d.event_id = x.event_id AND d.endpoint_id = x.endpoint_id
                  AND d.status = 'pending'
           ), due AS (
               SELECT x.event_id, x.endpoint_id FROM webhook_endpoints p
                CROSS JOIN LATERAL (
                    SELECT d.event_id, d.endpoint_id, d.next_attempt_at FROM webhook_deliveries d
                     WHERE d.endpoint_id = p.id AND d.status = 'pending'
                       AND d.next_attempt_at <= now()
                     ORDER BY d.next_attempt_at LIMIT $3
                       FOR UPDATE SKIP LOCKED
                ) x
                WHERE p.enabled AND NOT (p.id = ANY($4::uuid[]))
                ORDER BY x.next_attempt_at LIMIT $1
           )
           UPDATE webhook_deliveries d
              SET attempts = d.attempts + 1, last_attempt_at = now(),
                  next_attempt_at = now() + $2::bigint * interval '1 millisecond'
             FROM due, webhook_events e, webhook_endpoints p
            WHERE d.event_id = due.event_id AND d.endpoint_id = due.endpoint_id
              AND e.id = d.event_id AND p.id = d.endpoint_id
           RETURNING d.event_id, d.endpoint_id, d.attempts, e.type, e.campaign_id,
                     e.object_id, e.sequence, e.occurred_at, e.payload, p.url, p.secret,
                     CASE WHEN p.previous_secret_until > now() THEN p.previous_secret END
                         AS previous_secret"#,
        room,
        r.lease_ms(),
        PER_ENDPOINT,
        skip,
        &events[..],
        &endpoints[..],
        &statuses[..],
    )
    .fetch_all(&r.db)
    .await?;
    let mut due = Vec::with_capacity(rows.len());
    for row in rows {
        let data: EventData = serde_json::from_value(row.payload)?;
        let kind = EventType::parse(&row.r#type)
            .ok_or_else(|| anyhow::anyhow!("unknown event type {}", row.r#type))?;
        let event = Event {
            id: row.event_id.to_string(),
            kind,
            timestamp: row.occurred_at,
            campaign: row.campaign_id,
            object_id: row.object_id,
            sequence: row.sequence,
            data,
        };
        let keys = std::iter::once(row.secret)
            .chain(row.previous_secret)
            .filter_map(|s| sign::key_of(&s).ok())
            .collect();
        due.push(Due {
            event_id: row.event_id,
            endpoint_id: row.endpoint_id,
            attempts: row.attempts,
            body: serde_json::to_vec(&event)?,
            occurred_at: row.occurred_at,
            url: row.url,
            keys,
        });
    }
    Ok(due)
}

async fn call(r: &Relay, d: &Due) -> Answer {
    if let Err(e) = urls::check(&d.url, r.allow_private).await {
        return Answer::Error(e.to_string());
    }
    let id = d.event_id.to_string();
    let ts = Utc::now().timestamp();
    let res = r
        .client
        .post(&d.url)
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", ts.to_string())
        .header("webhook-signature", sign::header(&d.keys, &id, ts, &d.body))
        .body(d.body.clone())
        .send()
        .await;
    match res {
        Ok(res) => Answer::Status(res.status().as_u16(), res.headers().clone()),
        Err(e) if e.is_timeout() => Answer::Error("timed out".into()),
        Err(e) => Answer::Error(format!("transport error: {e}")),
    }
}

/// Counts the calls of `delivered`, whose rows were just marked, in the metrics (with their
/// lag from the event's time).
fn count_delivered(r: &Relay, delivered: &[Delivered]) {
    let now = Utc::now();
    for d in delivered {
        let lag = (now - d.occurred_at).to_std().unwrap_or_default();
        r.metrics
            .call(&d.endpoint_id.to_string(), CallResult::Delivered, Some(lag));
    }
}

/// Settles a call that did not answer 2xx (those are marked by the next [`take`]).
async fn settle(r: &Relay, d: &Due, answer: Answer) -> anyhow::Result<()> {
    let endpoint = d.endpoint_id.to_string();
    let (status, error, wait) = match &answer {
        Answer::Status(s, _) if (200..300).contains(s) => {
            let done = [Delivered::of(d, *s)];
            take(r, 0, &[], &done).await?;
            count_delivered(r, &done);
            return Ok(());
        }
        Answer::Status(410, _) => {
            let reason = "the receiver answered 410 Gone";
            sqlx::query!(
                "UPDATE webhook_deliveries SET last_status = 410 WHERE event_id = $1 AND endpoint_id = $2",
                d.event_id,
                d.endpoint_id,
            )
            .execute(&r.db)
            .await?;
            if endpoints::disable_by_receiver(&r.db, d.endpoint_id, reason).await? {
                tracing::warn!(endpoint = %endpoint, "webhook endpoint disabled: it answered 410");
            }
            r.metrics.call(&endpoint, CallResult::Failed, None);
            return Ok(());
        }
        Answer::Status(s, headers) => (
            Some(i32::from(*s)),
            format!("HTTP {s}"),
            retry_after(*s, headers),
        ),
        Answer::Error(e) => (None, e.clone(), None),
    };
    let next = next_delay(d.attempts, r.retry_divisor);
    let last = next.is_none();
    let delay =
        crate::outbox::jittered(next.unwrap_or_default(), 0.2).max(wait.unwrap_or_default());
    let delay_ms = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
    sqlx::query!(
        "UPDATE webhook_deliveries
            SET status = CASE WHEN $3 THEN 'failed' ELSE 'pending' END,
                next_attempt_at = now() + $4::bigint * interval '1 millisecond',
                last_status = $5, last_error = $6
          WHERE event_id = $1 AND endpoint_id = $2 AND status = 'pending'",
        d.event_id,
        d.endpoint_id,
        last,
        delay_ms,
        status,
        error,
    )
    .execute(&r.db)
    .await?;
    tracing::info!(event = %d.event_id, endpoint = %endpoint, attempts = d.attempts, error = %error, last, "webhook call failed");
    let result = if last {
        CallResult::Failed
    } else {
        CallResult::Retry
    };
    r.metrics.call(&endpoint, result, None);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_runs_from_at_once_to_a_day_then_gives_up() {
        assert_eq!(next_delay(0, 1), Some(Duration::ZERO));
        assert_eq!(next_delay(1, 1), Some(Duration::from_secs(5)));
        assert_eq!(next_delay(2, 1), Some(Duration::from_secs(300)));
        assert_eq!(next_delay(9, 1), Some(Duration::from_secs(86_400)));
        assert_eq!(next_delay(10, 1), None);
        assert_eq!(next_delay(1, 1000), Some(Duration::from_millis(5)));
    }

    #[test]
    fn retry_after_is_honoured_on_429_and_gateway_errors_only() {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, "7".parse().unwrap());
        for s in [429, 502, 503, 504] {
            assert_eq!(retry_after(s, &h), Some(Duration::from_secs(7)));
        }
        assert_eq!(retry_after(500, &h), None);
        h.insert(RETRY_AFTER, "999999999".parse().unwrap());
        assert_eq!(retry_after(429, &h), Some(MAX_RETRY_AFTER));
    }
}
