//! The gate audit: one origin at a time, every [`AUDIT_EVERY`], compares each live campaign's
//! gate with PostgreSQL and repairs what it finds apart — the count, the sold-out flag and the
//! holders ([`super::holders`]) — then the coupon codes' cached flags and uses
//! ([`crate::promo::audit`]) (docs/ARCHITECTURE.md, "Gate audit"). What it repaired is counted
//! in metrics and kept in Redis for reconciliation ([`drift`]).
//!
//! Under the campaign's change lock (so a stock change is never seen half done), the gate is
//! read, then PostgreSQL, then the gate again, as the correction does
//! ([`crate::gate::correct`]): what the gate promises is its `remaining` plus the takes not yet
//! committed.
//! - Promising more than PostgreSQL's `remaining` in both reads (a take a promoted replica
//!   lost while its claim committed): the gate is lowered at once. Safe: PostgreSQL would refuse
//!   those takes anyway.
//! - Promising less in both reads (a give-back or a returned unit a promoted replica lost; such
//!   units would never be sold): the gate is raised, and the sold-out flag cleared, only when
//!   the previous audit, at least [`DEFICIT_APART_MS`](super::repaired::DEFICIT_APART_MS)
//!   earlier, saw a shortfall too, and by the smaller of the two. A hold that ends is written
//!   to PostgreSQL first and given back to the gate right after, so a single sighting may be
//!   that unit on its way. The raise goes through the gate's one bounded step
//!   ([`crate::gate::adjust`]), never above PostgreSQL's `remaining`.

use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::repaired::{forget_deficit, to_raise, Repaired};
use crate::db::Db;
use crate::error::StoreError;
use crate::gate::correct::{committed, lower, pg_view, promised, snapshot, try_lock};
use crate::gate::{adjust, shard_count, Gate, Keys};
use crate::promo::audit::{self as code_audit, CodeRepairs};
use flashgate_shared::api::DriftView;

/// How often the audit runs (on one origin at a time).
pub const AUDIT_EVERY: Duration = Duration::from_secs(1);

/// Campaigns audited at once in a pass.
const CAMPAIGNS_AT_ONCE: usize = 8;

/// The audit's turn, followed by `:` and the name of the database the origin serves: the
/// origin that sets it runs the pass, for a little less than [`AUDIT_EVERY`]. Per database,
/// because the pass audits that database's campaigns: origins of another database on the same
/// Redis (a second stack on one Redis Cluster, the suite's tests) must not take its turns.
const TURN_KEY: &str = "fg:gate_audit:turn";

/// The code audit's record of repairs (all codes): counts `flags`, `holders_dropped` and
/// `last_repair_at` (RFC 3339 UTC).
const CODES_KEY: &str = "fg:gate_audit:codes";

/// One audit pass: what it repaired and how long it took.
#[derive(Debug, Default)]
pub struct Pass {
    /// Repairs of the campaigns' gates.
    pub campaigns: Repaired,
    /// Repairs of the coupon codes' cached state.
    pub codes: CodeRepairs,
    /// The pass's length, in seconds.
    pub seconds: f64,
}

/// Audits every live campaign, then the coupon codes' cached state ([`code_audit`]), when
/// this origin gets the turn; `None` when it does not. A campaign whose audit fails is logged
/// and skipped, as is a failed code audit. Once `stop` is cancelled no further campaign is
/// started (those under way finish) and the code audit is skipped. Errors: PostgreSQL or
/// Redis failing before any campaign was looked at.
pub async fn audit_live(
    db: &Db,
    gate: &Gate,
    stop: &CancellationToken,
) -> Result<Option<Pass>, StoreError> {
    let started = std::time::Instant::now();
    let mut gate = gate.clone();
    let database = db
        .pool()
        .connect_options()
        .get_database()
        .unwrap_or("")
        .to_owned();
    let turn: Option<String> = redis::cmd("SET")
        .arg(format!("{TURN_KEY}:{database}"))
        .arg(1)
        .arg("NX")
        .arg("PX")
        .arg(AUDIT_EVERY.as_millis() as u64 - 100)
        .query_async(&mut gate)
        .await?;
    if turn.is_none() {
        return Ok(None);
    }
    let mut total = Repaired::default();
    // Several campaigns at once: a pass is round trips, and its length bounds the repair time.
    let live = crate::campaigns::store::live(db).await?;
    let shared = gate.clone();
    let mut audits = futures::stream::iter(live)
        .take_until(Box::pin(stop.cancelled()))
        .map(|c| {
            let mut gate = shared.clone();
            async move { (audit_campaign(&mut gate, db, &c.id).await, c.id) }
        })
        .buffer_unordered(CAMPAIGNS_AT_ONCE);
    while let Some((result, c)) = audits.next().await {
        match result {
            Ok(r) => total += r,
            Err(e) => tracing::warn!(campaign = %c, error = %e, "gate audit failed"),
        }
    }
    drop(audits);
    let pass = |campaigns, codes| {
        let seconds = started.elapsed().as_secs_f64();
        Ok(Some(Pass {
            campaigns,
            codes,
            seconds,
        }))
    };
    if stop.is_cancelled() {
        return pass(total, CodeRepairs::default());
    }
    let codes = match code_audit::audit_codes(db, &mut gate.redis()).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "code audit failed");
            CodeRepairs::default()
        }
    };
    if codes != CodeRepairs::default() {
        let fields = [("flags", codes.flags), ("holders_dropped", codes.holders)];
        record_at(&mut gate, CODES_KEY, &fields).await?;
    }
    pass(total, codes)
}

/// Audits campaign `c` (see the module doc). Does nothing when the gate is not loaded or
/// another change holds the campaign's change lock.
pub async fn audit_campaign(gate: &mut Gate, db: &Db, c: &str) -> Result<Repaired, StoreError> {
    let Some(n) = shard_count(gate, c).await? else {
        return Ok(Repaired::default());
    };
    let Some(lock) = try_lock(gate, c).await? else {
        return Ok(Repaired::default());
    };
    let result = async {
        let mut r = match super::variant_audit::check(gate, db, c, n).await? {
            Some(r) => r,
            None => check(gate, db, c, n).await?,
        };
        let h = super::holders::check_holders(gate, db, c, n).await?;
        r.holders_dropped = h.dropped;
        r.holders_restored = h.restored;
        Ok::<_, StoreError>(r)
    }
    .await;
    lock.release(gate).await;
    let r = result?;
    if !r.is_empty() {
        record(gate, c, &r).await?;
    }
    Ok(r)
}

/// Adds `r` to the campaign's record of repairs ([`Keys::audit_repairs`]), read by
/// reconciliation, with the time of this repair (RFC 3339 UTC).
async fn record(gate: &mut Gate, c: &str, r: &Repaired) -> redis::RedisResult<()> {
    record_at(gate, &Keys::of(c).audit_repairs, &r.fields()).await
}

/// Adds the counts of `fields` to the record under `key`, with the time of this repair.
async fn record_at(gate: &mut Gate, key: &str, fields: &[(&str, i64)]) -> redis::RedisResult<()> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for &(field, n) in fields {
        if n > 0 {
            pipe.hincr(key, field, n).ignore();
        }
    }
    pipe.hset(key, "last_repair_at", chrono::Utc::now().to_rfc3339())
        .ignore()
        .query_async(gate)
        .await
}

/// The audit's record of repairs on campaign `c` since its gate was created (or Redis lost
/// its memory), with the code audit's record of all codes, for reconciliation.
pub async fn drift(gate: &mut Gate, c: &str) -> redis::RedisResult<DriftView> {
    type Record = std::collections::HashMap<String, String>;
    // Two reads, not one pipeline: the keys hash to different Redis Cluster slots.
    let gate_rec: Record = redis::cmd("HGETALL")
        .arg(Keys::of(c).audit_repairs)
        .query_async(gate)
        .await?;
    let codes_rec: Record = redis::cmd("HGETALL")
        .arg(CODES_KEY)
        .query_async(gate)
        .await?;
    let n = |r: &Record, f: &str| r.get(f).and_then(|v| v.parse().ok()).unwrap_or(0);
    let at = |r: &Record| {
        r.get("last_repair_at")
            .and_then(|v| chrono::DateTime::parse_from_rfc3339(v).ok())
            .map(|t| t.with_timezone(&chrono::Utc))
    };
    Ok(DriftView {
        lowered: n(&gate_rec, "lowered"),
        raised: n(&gate_rec, "raised"),
        holders_dropped: n(&gate_rec, "holders_dropped"),
        holders_restored: n(&gate_rec, "holders_restored"),
        last_repair_at: at(&gate_rec),
        code_flags: n(&codes_rec, "flags"),
        code_holders_dropped: n(&codes_rec, "holders_dropped"),
        codes_last_repair_at: at(&codes_rec),
    })
}

async fn check(gate: &mut Gate, db: &Db, c: &str, n: u16) -> Result<Repaired, StoreError> {
    let none = Repaired::default();
    let deficit_key = Keys::of(c).audit_deficit;
    let before = snapshot(gate, c, n).await?;
    let Some((pg_remaining, done_before)) = pg_view(db, c, &before.pending).await? else {
        return Ok(none);
    };
    let after = snapshot(gate, c, n).await?;
    let done_after = committed(db, c, &after.pending).await?;
    let (a, b) = (promised(&before, done_before), promised(&after, done_after));
    if a.min(b) > pg_remaining {
        forget_deficit(gate, &deficit_key).await?;
        let lowered = lower(gate, db, c, n).await?;
        return Ok(Repaired { lowered, ..none });
    }
    let deficit = pg_remaining - a.max(b);
    if deficit <= 0 {
        forget_deficit(gate, &deficit_key).await?;
        return Ok(none);
    }
    let Some(raised) = to_raise(gate, &deficit_key, deficit).await? else {
        return Ok(none);
    };
    adjust(gate, c, raised, pg_remaining).await?;
    forget_deficit(gate, &deficit_key).await?;
    tracing::warn!(
        campaign = c,
        raised,
        pg_remaining,
        "gate audit: units PostgreSQL has and the gate had lost put back"
    );
    Ok(Repaired { raised, ..none })
}
