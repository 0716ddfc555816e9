//! The claims feed of a campaign ([`flashgate_shared::api::feed`]): pages of claims in
//! `(created_at, id)` order after a cursor, for `GET /admin/v1/campaigns/{id}/claims` and its
//! CSV export.
//!
//! `paid_at` is the time of the claim's `paid` ledger row (the ledger is append-only and has
//! one per paid claim), read only for paid claims.
//!
//! A claim's `created_at` is the start of the transaction that wrote it (`now()`), and that
//! transaction may commit later than a claim written after it. So that a claim never appears
//! behind a cursor already handed out, a page lists only claims written before the oldest
//! transaction still open on the database began (`pg_stat_activity.xact_start`): every
//! transaction that could still add a claim started at or after that instant, so it adds it
//! after the page's last row. The newest claims (the last milliseconds) thus show up one page
//! read later. A transaction left open on the database (a `pg_dump`, a console) holds the
//! feed's tail back by at most 10 seconds: a claim's own transaction is far shorter (one
//! grouped commit), so an older open transaction is not one that writes claims.

use chrono::{DateTime, Utc};
use flashgate_shared::api::{ClaimStatus, FeedClaim, FeedCursor};

use crate::db::Db;

/// What to list: the campaign, the filters, where to start and how many.
#[derive(Debug, Clone)]
pub struct FeedQuery {
    /// The campaign id.
    pub campaign: String,
    /// Only claims in this status.
    pub status: Option<ClaimStatus>,
    /// Only claims written at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// Only claims after this position.
    pub after: Option<FeedCursor>,
    /// Most claims to return.
    pub limit: i64,
}

/// At most `q.limit` claims of the feed after `q.after`, oldest first, and whether more
/// followed them (one more row is read to know).
pub async fn page(db: &Db, q: &FeedQuery) -> sqlx::Result<(Vec<FeedClaim>, bool)> {
    let (after_at, after_id) = match &q.after {
        Some(c) => (Some(c.created_at), Some(c.id.as_str())),
        None => (None, None),
    };
    let mut rows = sqlx::query!(
        r#"SELECT c.id, c.customer_id, c.status AS "status: ClaimStatus", c.held_until,
                  c.payment_ref, c.created_at, c.variant,
                  CASE WHEN c.status = 'paid' THEN
                      (SELECT min(l.at) FROM ledger l
                        WHERE l.claim_id = c.id AND l.event = 'paid') END AS paid_at
             FROM claims c
            WHERE c.campaign_id = $1
              AND ($2::text IS NULL OR c.status = $2)
              AND ($3::timestamptz IS NULL OR c.created_at >= $3)
              AND ($4::timestamptz IS NULL OR (c.created_at, c.id) > ($4, $5::text))
              AND c.created_at < GREATEST(now() - interval '10 seconds',
                                 (SELECT COALESCE(min(a.xact_start), now())
                                    FROM pg_stat_activity a
                                   WHERE a.datname = current_database()
                                     AND a.backend_type = 'client backend'
                                     AND a.xact_start IS NOT NULL
                                     AND a.pid <> pg_backend_pid()))
            ORDER BY c.created_at, c.id
            LIMIT $6"#,
        q.campaign,
        q.status.map(ClaimStatus::as_str),
        q.since,
        after_at,
        after_id,
        q.limit + 1,
    )
    .fetch_all(db)
    .await?;
    let more = rows.len() as i64 > q.limit;
    rows.truncate(q.limit.max(0) as usize);
    let claims = rows
        .into_iter()
        .map(|r| FeedClaim {
            paid_at: r.paid_at,
            payment_ref: if r.status == ClaimStatus::Paid {
                r.payment_ref
            } else {
                None
            },
            id: r.id,
            customer: r.customer_id,
            status: r.status,
            held_until: r.held_until,
            created_at: r.created_at,
            variant: r.variant,
        })
        .collect();
    Ok((claims, more))
}

/// Writes the `export` audit row of campaign `c`'s claims feed by `actor`, with the export's
/// filters as `params` (`{"status", "since"}`). `None` when no such campaign.
pub async fn audit_export(
    db: &Db,
    c: &str,
    actor: &str,
    params: serde_json::Value,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        r#"INSERT INTO admin_audit (campaign_id, actor, action, params, before, after)
           SELECT id, $2, 'export', $3, 'null'::jsonb, 'null'::jsonb
             FROM campaigns WHERE id = $1
           RETURNING seq"#,
        c,
        actor,
        params,
    )
    .fetch_optional(db)
    .await
}
