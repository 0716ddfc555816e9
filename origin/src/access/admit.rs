//! The buying window of a draw: which campaigns are draws (cached), the admission token a
//! winner claims with, and the passing of a lapsed winner's unit to the waitlist.
//!
//! A winner is admitted when drawn (or when a unit passes to her from the waitlist): her
//! `admitted_at` is set and her window ends `buying_window_seconds` later. Her admission token
//! is the waiting room's ([`flashgate_shared::admission`], signed with the edge secret) with
//! her place in the draw as its sequence number and the window's end as its expiry, so the
//! claim checks it as it checks a waiting room's ([`crate::queue::check_claim`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use flashgate_shared::admission::{self, Place, Ticket};
use moka::future::Cache;

use crate::db::Db;
use crate::error::{ApiError, ApiResult};

/// Most campaign ids kept in [`DrawKinds`].
const MAX_KINDS: u64 = 100_000;

/// Which campaigns are draws, per origin: a campaign's draw row is written with it, so the
/// answer holds as long as the campaign; kept for the campaign cache's TTL all the same.
pub struct DrawKinds(Cache<String, bool>);

impl DrawKinds {
    /// An empty cache whose answers live `ttl`.
    pub fn new(ttl: Duration) -> Self {
        DrawKinds(
            Cache::builder()
                .max_capacity(MAX_KINDS)
                .time_to_live(ttl)
                .build(),
        )
    }
}

/// True when campaign `id` is a draw: one query per campaign per TTL, single-flight (the
/// claims of a stampede that miss the cache together wait for one query); 503 when
/// PostgreSQL fails.
pub async fn is_draw(kinds: &DrawKinds, db: &Db, id: &str) -> ApiResult<bool> {
    let db = db.clone();
    kinds
        .0
        .try_get_with_by_ref(id, async move {
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM draws WHERE campaign_id = $1)")
                .bind(id)
                .fetch_one(&db)
                .await
        })
        .await
        .map_err(|e: std::sync::Arc<sqlx::Error>| ApiError::Unavailable(e.to_string()))
}

/// The end of a buying window that opened at `admitted_at` and lasts `window_s` seconds.
pub fn window_end(admitted_at: DateTime<Utc>, window_s: i32) -> DateTime<Utc> {
    admitted_at + chrono::Duration::seconds(i64::from(window_s))
}

/// The admission token of the winner at `place` of campaign `c`'s draw, valid until `until`.
pub fn token(secret: &[u8], c: &str, customer: &str, place: i32, until: DateTime<Utc>) -> String {
    let ticket = Ticket {
        place: Place {
            campaign: c.to_string(),
            customer: customer.to_string(),
            sequence: u64::try_from(place).unwrap_or(0),
        },
        issued_at_s: 0,
        drawn_waiting_at_issue: 0,
    };
    admission::mint_admission_until(secret, &ticket, until.timestamp())
}

/// One pass of the waitlist, over campaigns that have not ended: every admitted winner whose
/// buying window has ended and who holds no claim (never claimed, or her hold expired or was released) lapses, and as many of the
/// waitlist, in order, are admitted with a fresh window; per campaign, in one transaction.
/// Safe with several origins at once (a row lapses once; the next are taken under lock).
/// Returns how many were admitted.
pub async fn pass(db: &Db) -> anyhow::Result<usize> {
    let due: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT e.campaign_id
           FROM draw_entries e JOIN draws d USING (campaign_id)
                JOIN campaigns c ON c.id = e.campaign_id AND c.ends_at > now()
          WHERE e.admitted_at IS NOT NULL AND e.lapsed_at IS NULL
            AND e.admitted_at + make_interval(secs => d.buying_window_seconds) <= now()
            AND NOT EXISTS (
                SELECT 1 FROM claims k
                 WHERE k.campaign_id = e.campaign_id AND k.customer_id = e.customer_id
                   AND k.status IN ('held', 'paid', 'issued', 'redeemed'))",
    )
    .fetch_all(db)
    .await?;
    let mut admitted = 0;
    for c in due {
        admitted += pass_one(db, &c).await?;
    }
    Ok(admitted)
}

async fn pass_one(db: &Db, c: &str) -> sqlx::Result<usize> {
    let mut tx = db.begin().await?;
    let lapsed: i64 = sqlx::query_scalar(
        "WITH lapsed AS (
             UPDATE draw_entries e SET lapsed_at = now()
               FROM draws d
              WHERE e.campaign_id = $1 AND d.campaign_id = e.campaign_id
                AND e.admitted_at IS NOT NULL AND e.lapsed_at IS NULL
                AND e.admitted_at + make_interval(secs => d.buying_window_seconds) <= now()
                AND NOT EXISTS (
                    SELECT 1 FROM claims k
                     WHERE k.campaign_id = e.campaign_id AND k.customer_id = e.customer_id
                       AND k.status IN ('held', 'paid', 'issued', 'redeemed'))
             RETURNING 1
         )
         SELECT count(*) FROM lapsed",
    )
    .bind(c)
    .fetch_one(&mut *tx)
    .await?;
    let next = sqlx::query(
        "UPDATE draw_entries SET admitted_at = now()
          WHERE campaign_id = $1 AND customer_id IN (
                SELECT customer_id FROM draw_entries
                 WHERE campaign_id = $1 AND place IS NOT NULL AND admitted_at IS NULL
                 ORDER BY place LIMIT $2 FOR UPDATE)",
    )
    .bind(c)
    .bind(lapsed)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    if lapsed > 0 {
        tracing::info!(
            campaign = c,
            lapsed,
            admitted = next,
            "units passed to the waitlist"
        );
    }
    Ok(next as usize)
}
