//! PostgreSQL queries on the `claims` table.

use chrono::{DateTime, Utc};
use flashgate_shared::api::{Claim, ClaimDetail, ClaimStatus};

use crate::db::Db;
use sqlx::PgExecutor;

/// One row of `claims`, as the API shows it plus the idempotency facts.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClaimRow {
    pub id: String,
    pub campaign_id: String,
    pub customer_id: String,
    pub status: ClaimStatus,
    pub held_until: Option<DateTime<Utc>>,
    pub code: Option<String>,
    pub idempotency_key: String,
    pub request_fp: String,
    pub created_at: DateTime<Utc>,
}

impl ClaimRow {
    /// The claim as the API shows it.
    pub fn to_claim(&self) -> Claim {
        Claim {
            id: self.id.clone(),
            campaign: self.campaign_id.clone(),
            customer: self.customer_id.clone(),
            status: self.status,
            held_until: self.held_until,
            code: self.code.clone(),
            created_at: self.created_at,
            variant: None,
        }
    }

    /// True while the claim holds its unit.
    pub fn is_active(&self) -> bool {
        self.status.is_active()
    }
}

/// A claim by id.
pub async fn find<'e>(db: impl PgExecutor<'e>, id: &str) -> sqlx::Result<Option<ClaimRow>> {
    sqlx::query_as!(
        ClaimRow,
        r#"SELECT id, campaign_id, customer_id, status AS "status: ClaimStatus", held_until,
                  code, idempotency_key, request_fp, created_at
             FROM claims WHERE id = $1"#,
        id
    )
    .fetch_optional(db)
    .await
}

/// A claim by id with its `payment_ref` (`None` until it is paid).
pub async fn find_with_payment(
    db: &Db,
    claim_id: &str,
) -> sqlx::Result<Option<(ClaimRow, Option<String>)>> {
    let r = sqlx::query!(
        r#"SELECT id, campaign_id, customer_id, status AS "status: ClaimStatus", held_until,
                  code, idempotency_key, request_fp, created_at, payment_ref
             FROM claims WHERE id = $1"#,
        claim_id
    )
    .fetch_optional(db)
    .await?;
    Ok(r.map(|r| {
        let row = ClaimRow {
            id: r.id,
            campaign_id: r.campaign_id,
            customer_id: r.customer_id,
            status: r.status,
            held_until: r.held_until,
            code: r.code,
            idempotency_key: r.idempotency_key,
            request_fp: r.request_fp,
            created_at: r.created_at,
        };
        (row, r.payment_ref)
    }))
}

/// A claim by id as `GET /api/v1/claims/{id}` shows it: with its variant, and for a paid one
/// its `payment_ref` and `paid_at` (the time of its `paid` ledger row, as in the claims feed).
pub async fn find_detail(db: &Db, id: &str) -> sqlx::Result<Option<ClaimDetail>> {
    let Some((row, payment_ref)) = find_with_payment(db, id).await? else {
        return Ok(None);
    };
    let more = sqlx::query!(
        r#"SELECT c.variant,
                  (SELECT min(l.at) FROM ledger l
                    WHERE l.claim_id = c.id AND l.event = 'paid') AS paid_at
             FROM claims c WHERE c.id = $1"#,
        id
    )
    .fetch_one(db)
    .await?;
    let paid = row.status == ClaimStatus::Paid;
    let mut claim = row.to_claim();
    claim.variant = more.variant;
    Ok(Some(ClaimDetail {
        claim,
        payment_ref: payment_ref.filter(|_| paid),
        paid_at: more.paid_at.filter(|_| paid),
    }))
}

/// The active claim of `customer` on campaign `c`, if any.
pub async fn find_active<'e>(
    db: impl PgExecutor<'e>,
    c: &str,
    customer: &str,
) -> sqlx::Result<Option<ClaimRow>> {
    sqlx::query_as!(
        ClaimRow,
        r#"SELECT id, campaign_id, customer_id, status AS "status: ClaimStatus", held_until,
                  code, idempotency_key, request_fp, created_at
             FROM claims
            WHERE campaign_id = $1 AND customer_id = $2 AND status = ANY($3)"#,
        c,
        customer,
        &ClaimStatus::active_names()[..] as &[&str],
    )
    .fetch_optional(db)
    .await
}

/// The claim of `customer` on campaign `c` that answers "what became of my claim": her active
/// one if she has one, else her latest (released or expired); `None` when she never claimed.
pub async fn find_latest<'e>(
    db: impl PgExecutor<'e>,
    c: &str,
    customer: &str,
) -> sqlx::Result<Option<ClaimRow>> {
    sqlx::query_as!(
        ClaimRow,
        r#"SELECT id, campaign_id, customer_id, status AS "status: ClaimStatus", held_until,
                  code, idempotency_key, request_fp, created_at
             FROM claims
            WHERE campaign_id = $1 AND customer_id = $2
            ORDER BY status = ANY($3) DESC, created_at DESC
            LIMIT 1"#,
        c,
        customer,
        &ClaimStatus::active_names()[..] as &[&str],
    )
    .fetch_optional(db)
    .await
}

/// A new claim id: `c_` + a UUID v7 (time-ordered) in simple form.
pub fn new_claim_id() -> String {
    format!("c_{}", uuid::Uuid::now_v7().simple())
}

/// The number of `held` claims (units held and not yet paid) of each campaign in `campaigns`;
/// a campaign without any is absent.
pub async fn held_counts<'e>(
    db: impl PgExecutor<'e>,
    campaigns: &[String],
) -> sqlx::Result<Vec<(String, i64)>> {
    let rows = sqlx::query!(
        r#"SELECT campaign_id, count(*) AS "held!" FROM claims
            WHERE status = 'held' AND campaign_id = ANY($1) GROUP BY campaign_id"#,
        campaigns
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.campaign_id, r.held)).collect())
}

/// Customer → id of every active claim of campaign `c` (the gate's holders as PostgreSQL
/// sees them: read by reconciliation and the gate audit).
pub async fn active_holders<'e>(
    db: impl PgExecutor<'e>,
    c: &str,
) -> sqlx::Result<std::collections::HashMap<String, String>> {
    let rows = sqlx::query!(
        "SELECT customer_id, id FROM claims
              WHERE campaign_id = $1 AND status = ANY($2)",
        c,
        &ClaimStatus::active_names()[..] as &[&str],
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.customer_id, r.id)).collect())
}
