//! PostgreSQL queries on `campaign_variants` (migration 0017): a campaign's variants, their
//! creation with the campaign, and the manager's change of one (`set_variant`, audited).
//!
//! The campaign's `stock` and `remaining` are the sums of its variants'. Every statement that
//! moves a variant's counts moves the campaign's by the same amount in the same transaction:
//! the claim commit ([`crate::claims::commit`]), a claim that stops holding its unit (a trigger
//! of migration 0017) and [`set`] here.

use flashgate_shared::api::{
    variant_state, AuditEntry, CampaignState, NewVariant, SetVariant, VariantStatus, MAX_STOCK,
    MAX_VARIANTS,
};
use serde_json::{json, Value};

use crate::db::{Conn, Db};

/// One row of `campaign_variants`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct VariantRow {
    pub id: String,
    pub name: String,
    pub stock: i64,
    pub remaining: i64,
}

impl VariantRow {
    /// The variant as the status shows it, in a campaign of state `campaign`.
    pub fn status(&self, campaign: CampaignState) -> VariantStatus {
        VariantStatus {
            id: self.id.clone(),
            name: self.name.clone(),
            stock: self.stock,
            remaining: self.remaining,
            state: variant_state(campaign, self.remaining),
        }
    }
}

/// The variants of campaign `c`, by id; empty for a campaign without variants.
pub async fn list(db: &Db, c: &str) -> sqlx::Result<Vec<VariantRow>> {
    sqlx::query_as(
        "SELECT id, name, stock, remaining FROM campaign_variants
          WHERE campaign_id = $1 ORDER BY id",
    )
    .bind(c)
    .fetch_all(db)
    .await
}

/// Writes the variants of a campaign just inserted in the same transaction, each with
/// `remaining = stock`.
pub async fn insert_all(conn: &mut Conn<'_>, c: &str, variants: &[NewVariant]) -> sqlx::Result<()> {
    let ids: Vec<&str> = variants.iter().map(|v| v.id.as_str()).collect();
    let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
    let stock: Vec<i64> = variants.iter().map(|v| v.stock).collect();
    sqlx::query(
        "INSERT INTO campaign_variants (campaign_id, id, name, stock, remaining)
         SELECT $1, t.id, t.name, t.stock, t.stock
           FROM UNNEST($2::text[], $3::text[], $4::bigint[]) AS t(id, name, stock)",
    )
    .bind(c)
    .bind(&ids)
    .bind(&names)
    .bind(&stock)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The variant of claim `id` (`None` on a campaign without variants, or no such claim).
pub async fn of_claim(db: &Db, id: &str) -> sqlx::Result<Option<String>> {
    let v: Option<(Option<String>,)> = sqlx::query_as("SELECT variant FROM claims WHERE id = $1")
        .bind(id)
        .fetch_optional(db)
        .await?;
    Ok(v.and_then(|(v,)| v))
}

/// What [`set`] did.
#[derive(Debug)]
pub enum SetOutcome {
    /// No such campaign.
    NotFound,
    /// Refused for the campaign's facts (409): ended, no variants, stock below the claimed.
    Conflict(String),
    /// Refused by a rule of the bounds (422): too many variants, total stock too large.
    Invalid(String),
    /// Already so; nothing written.
    Unchanged(VariantRow),
    /// Written with its audit row: the variant before (`None`: added) and after.
    Changed {
        before: Option<VariantRow>,
        after: VariantRow,
        audit: Box<AuditEntry>,
    },
}

/// Adds variant `v` to campaign `c` or changes its name and stock (its `remaining` moves by the
/// stock's difference, as the campaign's `stock` and `remaining` do), with its `set_variant`
/// audit row (actor `actor`), in one transaction under the campaign row's lock. Refused
/// (nothing written): a campaign without variants, an ended one, a stock below the variant's
/// claimed units ([`SetOutcome::Conflict`]); a new variant past [`MAX_VARIANTS`], a campaign
/// stock past [`MAX_STOCK`] or down to 0 ([`SetOutcome::Invalid`]).
pub async fn set(
    db: &Db,
    c: &str,
    v: &str,
    new: &SetVariant,
    actor: &str,
) -> sqlx::Result<SetOutcome> {
    let mut tx = db.begin().await?;
    let camp: Option<(i64, bool)> =
        sqlx::query_as("SELECT stock, ends_at <= now() FROM campaigns WHERE id = $1 FOR UPDATE")
            .bind(c)
            .fetch_optional(&mut *tx)
            .await?;
    let Some((stock, ended)) = camp else {
        return Ok(SetOutcome::NotFound);
    };
    if ended {
        return Ok(SetOutcome::Conflict(format!("campaign {c} has ended")));
    }
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM campaign_variants WHERE campaign_id = $1")
            .bind(c)
            .fetch_one(&mut *tx)
            .await?;
    if count == 0 {
        return Ok(SetOutcome::Conflict(format!(
            "campaign {c} has no variants; variants are given when a campaign is created"
        )));
    }
    let before: Option<VariantRow> = sqlx::query_as(
        "SELECT id, name, stock, remaining FROM campaign_variants
          WHERE campaign_id = $1 AND id = $2",
    )
    .bind(c)
    .bind(v)
    .fetch_optional(&mut *tx)
    .await?;
    let (old_stock, old_remaining) = before.as_ref().map_or((0, 0), |b| (b.stock, b.remaining));
    let claimed = old_stock - old_remaining;
    if new.stock < claimed {
        return Ok(SetOutcome::Conflict(format!(
            "stock {} is below the {claimed} units of variant {v} already claimed",
            new.stock
        )));
    }
    if before.is_none() && count >= MAX_VARIANTS as i64 {
        return Ok(SetOutcome::Invalid(format!(
            "variants: a campaign has at most {MAX_VARIANTS} variants"
        )));
    }
    let delta = new.stock - old_stock;
    if stock + delta < 1 {
        return Ok(SetOutcome::Invalid(format!(
            "stock: variant {v} holds the campaign's last units, and a campaign keeps at least \
             one (close the campaign to stop the sale)"
        )));
    }
    if stock + delta > MAX_STOCK {
        return Ok(SetOutcome::Invalid(format!(
            "stock: the campaign's stock would pass {MAX_STOCK}"
        )));
    }
    if let Some(b) = &before {
        if b.name == new.name && b.stock == new.stock {
            return Ok(SetOutcome::Unchanged(b.clone()));
        }
    }
    let after: VariantRow = sqlx::query_as(
        "INSERT INTO campaign_variants (campaign_id, id, name, stock, remaining)
         VALUES ($1, $2, $3, $4, $4)
         ON CONFLICT (campaign_id, id) DO UPDATE
            SET name = EXCLUDED.name, stock = EXCLUDED.stock,
                remaining = campaign_variants.remaining + (EXCLUDED.stock - campaign_variants.stock),
                updated_at = now()
         RETURNING id, name, stock, remaining",
    )
    .bind(c)
    .bind(v)
    .bind(&new.name)
    .bind(new.stock)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE campaigns SET stock = stock + $2, remaining = remaining + $2, updated_at = now()
          WHERE id = $1",
    )
    .bind(c)
    .bind(delta)
    .execute(&mut *tx)
    .await?;
    let facts = |r: &VariantRow| json!({"variant": r.id, "name": r.name, "stock": r.stock, "remaining": r.remaining});
    let audit: Value = sqlx::query_scalar(
        "INSERT INTO admin_audit (campaign_id, actor, action, params, before, after)
         VALUES ($1, $2, 'set_variant', $3, $4, $5)
         RETURNING to_jsonb(admin_audit.*)",
    )
    .bind(c)
    .bind(actor)
    .bind(json!({"variant": v, "name": new.name, "stock": new.stock}))
    .bind(before.as_ref().map_or(Value::Null, facts))
    .bind(facts(&after))
    .fetch_one(&mut *tx)
    .await?;
    let audit: AuditEntry =
        serde_json::from_value(audit).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    tx.commit().await?;
    Ok(SetOutcome::Changed {
        before,
        after,
        audit: Box::new(audit),
    })
}
