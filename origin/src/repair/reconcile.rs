//! Reconciliation of one campaign: are all units accounted for, and does the Redis gate agree
//! with PostgreSQL? Served by `GET /admin/v1/campaigns/{id}/reconcile` and by
//! `flashgate reconcile <campaign>`; the stampede report calls [`reconcile`] too.
//!
//! Checks (every disagreement is one line of [`ReconcileReport::faults`]):
//! - units: `stock = remaining + held + paid` (sale) or `stock = remaining + issued + redeemed`
//!   (giveaway). More is **oversold** (`remaining + active − stock`), less is **stranded**
//!   (`stock − remaining − active`: units neither available nor held by anyone, e.g. a claim
//!   row deleted behind the ledger's back);
//! - ledger: claimed/issued events minus released/expired events equals the active claims, and
//!   every ledger claim id has a claim row;
//! - gate: its `remaining` plus the takes still committing equals PostgreSQL's `remaining`
//!   (fewer means units the gate will not sell: stranded), every holder names an active claim
//!   and every active claim has its holder (checked up to [`HOLDER_CHECK_MAX`] claims), and no
//!   sold-out flag is set while units remain.
//!
//! On a campaign with variants each variant is checked too ([`per_variant`]), and the report
//! lists them (`variants`).
//!
//! The report also carries the drift the gate audit found and repaired ([`DriftView`], from
//! [`super::audit::drift`]): repaired drift is history, not a fault.
//!
//! The PostgreSQL figures come from one snapshot (a read-only repeatable-read transaction); the
//! gate is read right after. While claims, payments or releases are in flight the two may
//! differ by those in flight: run it on a quiet campaign for an exact verdict.

use crate::error::StoreError;
use std::collections::HashMap;

use flashgate_shared::api::{
    CampaignKind, ClaimStatus, DriftView, GateShardView, GateView, ReconcileReport, StatusCounts,
};

use crate::db::Db;

use crate::gate::{self, Gate, Keys, PENDING_PREFIX};

use super::variant_audit::VariantSnapshot;
use super::variant_reconcile::{self as per_variant, CampaignUnits, VariantFacts};

/// Largest number of active claims whose gate holders are compared one by one.
pub const HOLDER_CHECK_MAX: i64 = 1_000_000;

struct PgFacts {
    kind: CampaignKind,
    stock: i64,
    remaining: i64,
    claims: StatusCounts,
    ledger_active: i64,
    ledger_orphans: i64,
    /// customer → active claim id, when there are at most [`HOLDER_CHECK_MAX`].
    active_holders: Option<HashMap<String, String>>,
    /// The variants, by id (empty: a campaign without variants).
    variants: Vec<VariantFacts>,
}

/// Reconciles campaign `c`. `Ok(None)`: no such campaign.
pub async fn reconcile(
    db: &Db,
    redis: &mut Gate,
    c: &str,
) -> Result<Option<ReconcileReport>, StoreError> {
    let Some(pg) = pg_facts(db, c).await? else {
        return Ok(None);
    };
    let gate = gate_view(redis, c, pg.active_holders.as_ref()).await?;
    let by_variant = match &gate {
        Some(g) => {
            let n = u16::try_from(g.shards.len()).unwrap_or(u16::MAX);
            per_variant::gate_read(redis, c, n, &pg.variants).await?
        }
        None => None,
    };
    let drift = super::audit::drift(redis, c).await?;
    Ok(Some(report(c, pg, gate, by_variant, drift)))
}

async fn pg_facts(db: &Db, c: &str) -> sqlx::Result<Option<PgFacts>> {
    let mut tx = db.begin().await?;
    sqlx::query!("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .execute(&mut *tx)
        .await?;
    let row = sqlx::query!(
        r#"SELECT kind AS "kind: CampaignKind", stock, remaining FROM campaigns WHERE id = $1"#,
        c
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let (kind, stock, remaining) = (row.kind, row.stock, row.remaining);
    let by_status = sqlx::query!(
        r#"SELECT status AS "status: ClaimStatus", count(*) AS "n!"
             FROM claims WHERE campaign_id = $1 GROUP BY status"#,
        c
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut claims = StatusCounts::default();
    for row in by_status {
        let n = row.n;
        match row.status {
            ClaimStatus::Held => claims.held = n,
            ClaimStatus::Paid => claims.paid = n,
            ClaimStatus::Released => claims.released = n,
            ClaimStatus::Expired => claims.expired = n,
            ClaimStatus::Issued => claims.issued = n,
            ClaimStatus::Redeemed => claims.redeemed = n,
        }
    }
    let ledger = sqlx::query!(
        r#"SELECT (count(*) FILTER (WHERE event IN ('claimed', 'issued'))
               - count(*) FILTER (WHERE event IN ('released', 'expired')))::bigint AS "active!",
                (SELECT count(DISTINCT l.claim_id) FROM ledger l
                  WHERE l.campaign_id = $1
                    AND NOT EXISTS (SELECT 1 FROM claims x WHERE x.id = l.claim_id)) AS "orphans!"
           FROM ledger WHERE campaign_id = $1"#,
        c
    )
    .fetch_one(&mut *tx)
    .await?;
    let (ledger_active, ledger_orphans) = (ledger.active, ledger.orphans);
    let active = claims.held + claims.paid + claims.issued + claims.redeemed;
    let active_holders = if active <= HOLDER_CHECK_MAX {
        Some(crate::claims::store::active_holders(&mut *tx, c).await?)
    } else {
        None
    };
    let variants = per_variant::pg_facts(&mut *tx, c).await?;
    tx.commit().await?;
    Ok(Some(PgFacts {
        kind,
        stock,
        remaining,
        claims,
        ledger_active,
        ledger_orphans,
        active_holders,
        variants,
    }))
}

/// Reads the gate; `None` when it is not loaded. Compares holders with `active` when given.
async fn gate_view(
    redis: &mut Gate,
    c: &str,
    active: Option<&HashMap<String, String>>,
) -> redis::RedisResult<Option<GateView>> {
    let states = gate::shard_states(redis, c).await?;
    if states.is_empty() || states.iter().any(|s| !s.loaded) {
        return Ok(None);
    }
    let flag: bool = redis::cmd("EXISTS")
        .arg(Keys::of(c).sold_out)
        .query_async(redis)
        .await?;
    let shards: Vec<GateShardView> = (0u16..)
        .zip(&states)
        .map(|(shard, s)| GateShardView {
            shard,
            remaining: s.remaining,
            pending: s.pending,
            holders: s.holders,
        })
        .collect();
    let pending = states.iter().map(|s| s.pending).sum();
    let mut view = GateView {
        remaining: states.iter().map(|s| s.remaining).sum(),
        pending,
        holders: states.iter().map(|s| s.holders).sum(),
        shards,
        sold_out_flag: flag,
        stale_holders: 0,
        missing_holders: 0,
    };
    let Some(active) = active else {
        return Ok(Some(view));
    };
    let mut seen = 0i64;
    for s in (0u16..).take(states.len()) {
        for (customer, holder) in gate::holders_of(redis, c, s).await? {
            if holder.starts_with(PENDING_PREFIX) {
                continue;
            }
            if active.get(&customer) == Some(&holder) {
                seen += 1;
            } else {
                view.stale_holders += 1;
            }
        }
    }
    view.missing_holders = (active.len() as i64 - seen - pending).max(0);
    Ok(Some(view))
}

fn report(
    c: &str,
    pg: PgFacts,
    gate: Option<GateView>,
    by_variant: Option<VariantSnapshot>,
    drift: DriftView,
) -> ReconcileReport {
    let active = match pg.kind {
        CampaignKind::Sale => pg.claims.held + pg.claims.paid,
        CampaignKind::Giveaway => pg.claims.issued + pg.claims.redeemed,
    };
    let mut faults = Vec::new();
    let oversold = (pg.remaining + active - pg.stock).max(0);
    let mut stranded = (pg.stock - pg.remaining - active).max(0);
    if oversold > 0 {
        faults.push(format!(
            "oversold: remaining {} + active {active} exceeds stock {} by {oversold}",
            pg.remaining, pg.stock
        ));
    }
    if stranded > 0 {
        faults.push(format!(
            "stranded: stock {} exceeds remaining {} + active {active} by {stranded}",
            pg.stock, pg.remaining
        ));
    }
    let other_kind = match pg.kind {
        CampaignKind::Sale => pg.claims.issued + pg.claims.redeemed,
        CampaignKind::Giveaway => {
            pg.claims.held + pg.claims.paid + pg.claims.released + pg.claims.expired
        }
    };
    if other_kind > 0 {
        faults.push(format!(
            "{other_kind} claims have a status that a {} campaign never gives",
            pg.kind.as_str()
        ));
    }
    if pg.ledger_active != active {
        faults.push(format!(
            "ledger: {} units out by the ledger, {active} active claims",
            pg.ledger_active
        ));
    }
    if pg.ledger_orphans > 0 {
        faults.push(format!(
            "ledger: {} claim ids in the ledger have no claim row",
            pg.ledger_orphans
        ));
    }
    if let Some(g) = &gate {
        let gate_units = g.remaining + g.pending;
        if gate_units < pg.remaining {
            let lost = pg.remaining - gate_units;
            stranded += lost;
            faults.push(format!(
                "gate: {lost} units remaining in PostgreSQL that the gate will not hand out \
                 (gate remaining {}, pending {})",
                g.remaining, g.pending
            ));
        } else if gate_units > pg.remaining {
            faults.push(format!(
                "gate: would let {} more takes through than PostgreSQL has units (PostgreSQL \
                 refuses them)",
                gate_units - pg.remaining
            ));
        }
        if g.sold_out_flag && pg.remaining > 0 && g.remaining > 0 {
            faults.push("gate: sold-out flag set while units remain".into());
        }
        if g.stale_holders > 0 {
            faults.push(format!(
                "gate: {} holders name no active claim",
                g.stale_holders
            ));
        }
        if g.missing_holders > 0 {
            faults.push(format!(
                "gate: {} active claims have no holder",
                g.missing_holders
            ));
        }
    }
    let units = CampaignUnits {
        stock: pg.stock,
        remaining: pg.remaining,
    };
    let (variants, v_oversold, v_stranded) =
        per_variant::report(units, &pg.variants, by_variant.as_ref(), &mut faults);
    let (oversold, stranded) = (oversold.max(v_oversold), stranded.max(v_stranded));
    ReconcileReport {
        campaign: c.to_string(),
        kind: pg.kind,
        stock: pg.stock,
        remaining: pg.remaining,
        claims: pg.claims,
        active,
        ledger_active: pg.ledger_active,
        ledger_orphans: pg.ledger_orphans,
        oversold,
        stranded,
        gate,
        drift,
        variants,
        ok: faults.is_empty(),
        faults,
    }
}
