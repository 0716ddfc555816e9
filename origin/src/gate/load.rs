//! Loading a campaign's gate from PostgreSQL: at start-up, when a campaign is created or
//! changed, and whenever a script finds the gate missing (Redis restarted empty or was flushed).
//!
//! One origin loads at a time (a `SET NX PX` lock per campaign); the others keep answering 503
//! until the `loaded` key appears. The snapshot of `remaining` and of the active claims is read
//! in one statement, so the two agree with each other.

use crate::db::Db;
use crate::error::StoreError;
use flashgate_shared::api::ClaimStatus;

use super::lua::{LOAD_SHARD, SET_SOLD_OUT, UNLOCK};
use super::{Gate, Keys};

/// How long the load lock is held at most, in milliseconds.
const LOAD_LOCK_MS: u64 = 30_000;
/// Holders written per HSET command.
const CHUNK: usize = 5_000;

/// When a load replaces a gate that is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    /// Always: the gate is replaced by PostgreSQL's view (a new campaign, or a gate that
    /// disagrees with PostgreSQL).
    Always,
    /// Only when some shard is not loaded, checked under the load lock. A caller that saw the
    /// gate unloaded just before another load finished (a `/readyz` probe, a claim that got
    /// `not_loaded`) then leaves the loaded gate alone instead of reloading it, which would
    /// unload every shard for the time of the load.
    IfMissing,
}

/// Loads (or reloads, replacing what is there) the gate of campaign `c` from PostgreSQL.
/// Returns `Ok(false)` when another origin holds the load lock, or the campaign is unknown.
pub async fn load(db: &Db, redis: &mut Gate, c: &str) -> Result<bool, StoreError> {
    load_when(db, redis, c, Reload::Always).await
}

/// Loads the gate of campaign `c` unless it is already loaded (see [`Reload::IfMissing`]).
/// Returns `Ok(false)` when it was loaded, another origin holds the load lock, or the campaign
/// is unknown.
pub async fn load_missing(db: &Db, redis: &mut Gate, c: &str) -> Result<bool, StoreError> {
    load_when(db, redis, c, Reload::IfMissing).await
}

/// Loads the gate of campaign `c` under its load lock, as `when` says.
pub async fn load_when(
    db: &Db,
    redis: &mut Gate,
    c: &str,
    when: Reload,
) -> Result<bool, StoreError> {
    let k = Keys::of(c);
    let token = format!("{:016x}", rand::random::<u64>());
    let locked: Option<String> = redis::cmd("SET")
        .arg(&k.loading)
        .arg(&token)
        .arg("NX")
        .arg("PX")
        .arg(LOAD_LOCK_MS)
        .query_async(redis)
        .await?;
    if locked.is_none() {
        return Ok(false);
    }
    // Under the lock: a load that finished before it was taken is seen here.
    let result = match when {
        Reload::IfMissing if is_loaded(redis, c).await? => Ok(false),
        _ => load_locked(db, redis, c, &k).await,
    };
    // Free the lock only if it is still ours.
    let _: redis::RedisResult<i64> = UNLOCK.key(&k.loading).arg(&token).invoke_async(redis).await;
    result
}

async fn load_locked(db: &Db, redis: &mut Gate, c: &str, k: &Keys) -> Result<bool, StoreError> {
    // One statement: remaining and the active claims come from the same snapshot. In a
    // transaction, so that behind a transaction pooler its parse and execution stay on one
    // server connection.
    let mut tx = db.begin().await?;
    // One snapshot for every statement below (the variants' counts and holders too).
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *tx)
        .await?;
    let rows = sqlx::query!(
        r#"SELECT c.remaining, c.gate_shards, a.customer_id AS "customer_id?", a.id AS "id?"
             FROM campaigns c
             LEFT JOIN claims a ON a.campaign_id = c.id AND a.status = ANY($2)
            WHERE c.id = $1"#,
        c,
        &ClaimStatus::active_names()[..] as &[&str],
    )
    .fetch_all(&mut *tx)
    .await?;
    let variants = load_variants(&mut tx, c).await?;
    tx.commit().await?;
    let Some((remaining, n)) = rows.first().map(|r| (r.remaining, r.gate_shards)) else {
        return Ok(false);
    };
    let n = u16::try_from(n)
        .unwrap_or(1)
        .clamp(1, super::MAX_GATE_SHARDS);
    // Unload every shard first: no take runs on a half-written gate.
    for s in 0..n {
        redis::cmd("DEL")
            .arg(Keys::shard(c, s).loaded)
            .query_async::<()>(redis)
            .await?;
    }
    let mut holders: Vec<Vec<(&str, &str)>> = vec![Vec::new(); usize::from(n)];
    for r in &rows {
        if let (Some(cust), Some(id)) = (r.customer_id.as_deref(), r.id.as_deref()) {
            holders[usize::from(super::bucket(cust, n))].push((cust, id));
        }
    }
    // A campaign with variants: each shard's count is the sum of its parts of the variants'.
    let (variant_parts, parts) = match &variants {
        Some(v) => super::variants::spread(&v.remaining, n),
        None => (Vec::new(), super::split(remaining, n)),
    };
    let remaining = parts.iter().sum::<i64>();
    for ((s, part), mine) in (0..n).zip(parts).zip(&holders) {
        let ks = Keys::shard(c, s);
        let mut pipe = redis::pipe();
        // Its part of PostgreSQL's remaining, through the gate's one bounded step (the part is
        // the bound: nothing is in flight on an unloaded shard).
        pipe.atomic()
            .del(&ks.holders)
            .del(&ks.pending)
            .cmd("EVAL")
            .arg(LOAD_SHARD)
            .arg(1)
            .arg(&ks.remaining)
            .arg(part)
            .ignore();
        for chunk in mine.chunks(CHUNK) {
            pipe.hset_multiple(&ks.holders, chunk);
        }
        if let Some(v) = &variants {
            pipe.del(&ks.holder_variants);
            for (id, units) in &variant_parts[usize::from(s)] {
                pipe.set(ks.variant(id), *units).ignore();
            }
            let theirs: Vec<(&str, &str)> = v
                .holders
                .iter()
                .filter(|(cust, _)| super::bucket(cust, n) == s)
                .map(|(cust, id)| (cust.as_str(), id.as_str()))
                .collect();
            for chunk in theirs.chunks(CHUNK) {
                pipe.hset_multiple(&ks.holder_variants, chunk);
            }
        }
        pipe.query_async::<()>(redis).await?;
    }
    let mut pipe = redis::pipe();
    pipe.atomic().set(&k.shards, n);
    if remaining > 0 {
        pipe.del(&k.sold_out);
    } else {
        pipe.cmd("EVAL")
            .arg(SET_SOLD_OUT)
            .arg(2)
            .arg(&k.sold_out)
            .arg(&k.sold_out_gen);
    }
    pipe.query_async::<()>(redis).await?;
    let at = chrono::Utc::now().to_rfc3339();
    for s in 0..n {
        redis::cmd("SET")
            .arg(Keys::shard(c, s).loaded)
            .arg(&at)
            .query_async::<()>(redis)
            .await?;
    }
    tracing::info!(
        campaign = c,
        remaining,
        shards = n,
        holders = holders.iter().map(Vec::len).sum::<usize>(),
        "gate loaded from PostgreSQL"
    );
    Ok(true)
}

/// A campaign's variants as a load reads them: each one's id and PostgreSQL's `remaining`,
/// and the variant of each active claim (customer, variant).
struct LoadedVariants {
    remaining: Vec<(String, i64)>,
    holders: Vec<(String, String)>,
}

/// The variants of `c` in the load's snapshot; `None` for a campaign without variants.
async fn load_variants(
    tx: &mut crate::db::Conn<'_>,
    c: &str,
) -> Result<Option<LoadedVariants>, StoreError> {
    let remaining: Vec<(String, i64)> = sqlx::query_as(
        "SELECT id, remaining FROM campaign_variants WHERE campaign_id = $1 ORDER BY id",
    )
    .bind(c)
    .fetch_all(&mut *tx)
    .await?;
    if remaining.is_empty() {
        return Ok(None);
    }
    let holders: Vec<(String, String)> = sqlx::query_as(
        "SELECT customer_id, variant FROM claims
          WHERE campaign_id = $1 AND variant IS NOT NULL AND status = ANY($2)",
    )
    .bind(c)
    .bind(&ClaimStatus::active_names()[..])
    .fetch_all(&mut *tx)
    .await?;
    Ok(Some(LoadedVariants { remaining, holders }))
}

/// True when every shard of the gate of `c` is loaded.
pub async fn is_loaded(redis: &mut Gate, c: &str) -> redis::RedisResult<bool> {
    let states = super::shard_states(redis, c).await?;
    Ok(!states.is_empty() && states.iter().all(|s| s.loaded))
}
