//! What the admin API shows of a campaign: the stored facts, its state by the origin's clock,
//! and live counts read from PostgreSQL (the truth) at request time.

use crate::db::Db;
use chrono::{DateTime, Utc};
pub use flashgate_shared::api::admin::{CampaignView, Counts, VariantView};
use flashgate_shared::api::{AdminCampaign, CampaignKind};
use flashgate_shared::queue::WaitingRoom;
use sqlx::types::Json;

use crate::campaigns::CampaignRow;

/// Most campaigns one `GET /admin/v1/campaigns` lists (the newest).
pub const MAX_LISTED: i64 = 500;

/// A campaign row with its live counts and times, as one statement read them.
struct ViewRow {
    row: CampaignRow,
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
                hold_extension_seconds: i64::from(v.row.hold_extension_seconds),
                paused: v.row.paused,
                gate_shards: i64::from(v.row.gate_shards),
                waiting_room: v.row.waiting_room(),
                queue: crate::queue::stored_view(&v.row),
            },
            counts: v.counts,
            created_at: v.created_at,
            updated_at: v.updated_at,
            as_of: v.as_of,
            variants: None,
        }
    }
}

/// Campaign `only` (or the newest [`MAX_LISTED`] when `None`) with live counts, in one
/// statement (one snapshot).
async fn query(db: &Db, only: Option<&str>) -> sqlx::Result<Vec<CampaignView>> {
    let rows = sqlx::query!(
        r#"SELECT c.id, c.name, c.kind AS "kind: CampaignKind", c.stock, c.remaining,
                c.starts_at, c.ends_at, c.hold_seconds, c.hold_extension_seconds, c.paused, c.gate_shards,
                c.waiting_room AS "waiting_room: Json<WaitingRoom>", c.queue_paused,
                c.created_at, c.updated_at, clock_timestamp() AS "as_of!",
                k.held AS "held!", k.paid AS "paid!", k.issued AS "issued!",
                k.redeemed AS "redeemed!", k.returned AS "returned!",
                k.claims_total AS "claims_total!", k.claims_last_minute AS "claims_last_minute!"
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
          LIMIT $2"#,
        only,
        MAX_LISTED,
    )
    .fetch_all(db)
    .await?;
    let rows = rows.into_iter().map(|r| ViewRow {
        row: CampaignRow {
            id: r.id,
            name: r.name,
            kind: r.kind,
            stock: r.stock,
            remaining: r.remaining,
            starts_at: r.starts_at,
            ends_at: r.ends_at,
            hold_seconds: r.hold_seconds,
            hold_extension_seconds: r.hold_extension_seconds,
            paused: r.paused,
            gate_shards: r.gate_shards,
            waiting_room: r.waiting_room,
            queue_paused: r.queue_paused,
        },
        counts: Counts {
            held: r.held,
            paid: r.paid,
            issued: r.issued,
            redeemed: r.redeemed,
            returned: r.returned,
            claims_total: r.claims_total,
            claims_last_minute: r.claims_last_minute,
        },
        created_at: r.created_at,
        updated_at: r.updated_at,
        as_of: r.as_of,
    });
    Ok(rows.map(CampaignView::from).collect())
}

/// The newest campaigns with live counts.
pub async fn list(db: &Db) -> sqlx::Result<Vec<CampaignView>> {
    query(db, None).await
}

/// A variant with its live claim counts, as one statement read them.
#[derive(sqlx::FromRow)]
struct VariantCounts {
    #[sqlx(flatten)]
    row: crate::campaigns::variants::VariantRow,
    held: i64,
    paid: i64,
    issued: i64,
    redeemed: i64,
}

/// Campaign `id` with live counts, and its variants' when it has some; `None` when unknown.
pub async fn show(db: &Db, id: &str) -> sqlx::Result<Option<CampaignView>> {
    let Some(mut view) = query(db, Some(id)).await?.pop() else {
        return Ok(None);
    };
    let state = view.campaign.status.state;
    let rows: Vec<VariantCounts> = sqlx::query_as(
        "SELECT v.id, v.name, v.stock, v.remaining,
                count(a.id) FILTER (WHERE a.status = 'held') AS held,
                count(a.id) FILTER (WHERE a.status = 'paid') AS paid,
                count(a.id) FILTER (WHERE a.status = 'issued') AS issued,
                count(a.id) FILTER (WHERE a.status = 'redeemed') AS redeemed
           FROM campaign_variants v
           LEFT JOIN claims a ON a.campaign_id = v.campaign_id AND a.variant = v.id
          WHERE v.campaign_id = $1
          GROUP BY v.id, v.name, v.stock, v.remaining
          ORDER BY v.id",
    )
    .bind(id)
    .fetch_all(db)
    .await?;
    if !rows.is_empty() {
        let variants = rows.into_iter().map(|r| VariantView {
            status: r.row.status(state),
            held: r.held,
            paid: r.paid,
            issued: r.issued,
            redeemed: r.redeemed,
        });
        view.variants = Some(variants.collect());
    }
    Ok(Some(view))
}
