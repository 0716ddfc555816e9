//! What the admin API shows of a campaign: the stored facts, its state by the origin's clock,
//! and live counts read from PostgreSQL (the truth) at request time.

use chrono::{DateTime, Utc};
pub use flashgate_shared::api::admin::{CampaignView, Counts};
use flashgate_shared::api::AdminCampaign;
use sqlx::PgPool;

use crate::campaigns::CampaignRow;

/// Most campaigns one `GET /admin/v1/campaigns` lists (the newest).
pub const MAX_LISTED: i64 = 500;

#[derive(sqlx::FromRow)]
struct ViewRow {
    #[sqlx(flatten)]
    row: CampaignRow,
    #[sqlx(flatten)]
    counts: Counts,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    as_of: DateTime<Utc>,
}

impl From<ViewRow> for CampaignView {
    fn from(v: ViewRow) -> Self {
        CampaignView {
            campaign: AdminCampaign {
                status: v.row.status_at(v.as_of),
                hold_seconds: v.row.hold_seconds.map(i64::from),
                paused: v.row.paused,
                gate_shards: i64::from(v.row.gate_shards),
                waiting_room: v.row.waiting_room(),
                queue: crate::queue::stored_view(&v.row),
            },
            counts: v.counts,
            created_at: v.created_at,
            updated_at: v.updated_at,
            as_of: v.as_of,
        }
    }
}

/// Campaign `only` (or the newest [`MAX_LISTED`] when `None`) with live counts, in one
/// statement (one snapshot).
async fn query(db: &PgPool, only: Option<&str>) -> sqlx::Result<Vec<CampaignView>> {
    let rows: Vec<ViewRow> = sqlx::query_as(
        "SELECT c.id, c.name, c.kind, c.stock, c.remaining, c.starts_at, c.ends_at,
                c.hold_seconds, c.paused, c.gate_shards, c.waiting_room, c.queue_paused, c.created_at, c.updated_at, clock_timestamp() AS as_of,
                k.held, k.paid, k.issued, k.redeemed, k.returned, k.claims_total,
                k.claims_last_minute
           FROM campaigns c
           CROSS JOIN LATERAL (
               SELECT count(*) FILTER (WHERE status = 'held') AS held,
                      count(*) FILTER (WHERE status = 'paid') AS paid,
                      count(*) FILTER (WHERE status = 'issued') AS issued,
                      count(*) FILTER (WHERE status = 'redeemed') AS redeemed,
                      count(*) FILTER (WHERE status IN ('released', 'expired')) AS returned,
                      count(*) AS claims_total,
                      count(*) FILTER (WHERE created_at > now() - interval '1 minute')
                          AS claims_last_minute
                 FROM claims WHERE campaign_id = c.id
           ) k
          WHERE $1::text IS NULL OR c.id = $1
          ORDER BY c.created_at DESC, c.id
          LIMIT $2",
    ).persistent(crate::db::keep_statements())
    .bind(only)
    .bind(MAX_LISTED)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(CampaignView::from).collect())
}

/// The newest campaigns with live counts.
pub async fn list(db: &PgPool) -> sqlx::Result<Vec<CampaignView>> {
    query(db, None).await
}

/// Campaign `id` with live counts; `None` when unknown.
pub async fn show(db: &PgPool, id: &str) -> sqlx::Result<Option<CampaignView>> {
    Ok(query(db, Some(id)).await?.pop())
}
