//! Reconciliation per variant of a campaign with variants, part of [`super::reconcile`]'s
//! report ([`VariantReconcile`]):
//! - units: each variant's `stock = remaining + active` (more is oversold, less stranded), and
//!   the campaign's `stock` and `remaining` are the sums of its variants';
//! - gate: each variant's counts plus its takes still committing equal PostgreSQL's
//!   `remaining` of it (fewer: units the gate will not sell, stranded), and each shard's
//!   campaign count is the sum of its variants' counts.

use flashgate_shared::api::{ClaimStatus, VariantReconcile};
use sqlx::PgExecutor;

use super::variant_audit::{snapshot, VariantSnapshot};
use crate::gate::Gate;

/// One variant as PostgreSQL has it in the report's snapshot.
pub(crate) struct VariantFacts {
    id: String,
    stock: i64,
    remaining: i64,
    active: i64,
}

/// The variants of `c` with their active claims, by id (empty: a campaign without variants).
pub(crate) async fn pg_facts<'e>(
    tx: impl PgExecutor<'e>,
    c: &str,
) -> sqlx::Result<Vec<VariantFacts>> {
    let rows: Vec<(String, i64, i64, i64)> = sqlx::query_as(
        "SELECT v.id, v.stock, v.remaining,
                (count(a.id) FILTER (WHERE a.status = ANY($2)))::bigint
           FROM campaign_variants v
           LEFT JOIN claims a ON a.campaign_id = v.campaign_id AND a.variant = v.id
          WHERE v.campaign_id = $1
          GROUP BY v.id, v.stock, v.remaining ORDER BY v.id",
    )
    .bind(c)
    .bind(&ClaimStatus::active_names()[..])
    .fetch_all(tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, stock, remaining, active)| VariantFacts {
            id,
            stock,
            remaining,
            active,
        })
        .collect())
}

/// The gate of `c` (of `n` shards) for `variants`, each shard read at once; `None` when there
/// are no variants.
pub(crate) async fn gate_read(
    redis: &mut Gate,
    c: &str,
    n: u16,
    variants: &[VariantFacts],
) -> redis::RedisResult<Option<VariantSnapshot>> {
    if variants.is_empty() {
        return Ok(None);
    }
    let ids: Vec<String> = variants.iter().map(|v| v.id.clone()).collect();
    Ok(Some(snapshot(redis, c, n, &ids).await?))
}

/// The campaign's figures the variants are checked against.
pub(crate) struct CampaignUnits {
    pub stock: i64,
    pub remaining: i64,
}

/// Checks each variant (and the gate's, when read), adding a line to `faults` per
/// disagreement. Returns the variants' reports and the sums of their `oversold` and
/// `stranded`.
pub(crate) fn report(
    campaign: CampaignUnits,
    variants: &[VariantFacts],
    gate: Option<&VariantSnapshot>,
    faults: &mut Vec<String>,
) -> (Vec<VariantReconcile>, i64, i64) {
    if variants.is_empty() {
        return (Vec::new(), 0, 0);
    }
    let stock: i64 = variants.iter().map(|v| v.stock).sum();
    let remaining: i64 = variants.iter().map(|v| v.remaining).sum();
    if stock != campaign.stock {
        faults.push(format!(
            "variants: their stock sums to {stock}, the campaign's is {}",
            campaign.stock
        ));
    }
    if remaining != campaign.remaining {
        faults.push(format!(
            "variants: their remaining sums to {remaining}, the campaign's is {}",
            campaign.remaining
        ));
    }
    if let Some(g) = gate {
        for (s, shard) in g.shards.iter().enumerate() {
            if shard.apart() != 0 {
                faults.push(format!(
                    "gate: shard {s} counts {} units, its variants' counts sum to {}",
                    shard.campaign,
                    shard.campaign - shard.apart()
                ));
            }
        }
    }
    let (mut oversold_sum, mut stranded_sum) = (0, 0);
    let mut out = Vec::with_capacity(variants.len());
    for (i, v) in variants.iter().enumerate() {
        let oversold = (v.remaining + v.active - v.stock).max(0);
        let mut stranded = (v.stock - v.remaining - v.active).max(0);
        if oversold > 0 {
            faults.push(format!(
                "variant {}: oversold: remaining {} + active {} exceeds stock {} by {oversold}",
                v.id, v.remaining, v.active, v.stock
            ));
        }
        if stranded > 0 {
            faults.push(format!(
                "variant {}: stranded: stock {} exceeds remaining {} + active {} by {stranded}",
                v.id, v.stock, v.remaining, v.active
            ));
        }
        let seen = gate.map(|g| g.variant(i, &v.id));
        if let Some((count, pending)) = seen {
            let units = count + pending;
            if units < v.remaining {
                let lost = v.remaining - units;
                stranded += lost;
                faults.push(format!(
                    "variant {}: gate: {lost} units remaining in PostgreSQL that the gate will \
                     not hand out (gate remaining {count}, pending {pending})",
                    v.id
                ));
            } else if units > v.remaining {
                faults.push(format!(
                    "variant {}: gate: would let {} more takes through than PostgreSQL has \
                     units (PostgreSQL refuses them)",
                    v.id,
                    units - v.remaining
                ));
            }
        }
        oversold_sum += oversold;
        stranded_sum += stranded;
        out.push(VariantReconcile {
            id: v.id.clone(),
            stock: v.stock,
            remaining: v.remaining,
            active: v.active,
            oversold,
            stranded,
            gate_remaining: seen.map(|s| s.0),
            gate_pending: seen.map(|s| s.1),
        });
    }
    (out, oversold_sum, stranded_sum)
}
