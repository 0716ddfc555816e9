//! Loading a campaign's gate from PostgreSQL: at start-up, when a campaign is created or
//! changed, and whenever a script finds the gate missing (Redis restarted empty or was flushed).
//!
//! One origin loads at a time (a `SET NX PX` lock per campaign); the others keep answering 503
//! until the `loaded` key appears. The snapshot of `remaining` and of the active claims is read
//! in one statement, so the two agree with each other.

use crate::redis_conn::RedisConn;
use sqlx::PgPool;

use super::Keys;

/// How long the load lock is held at most, in milliseconds.
const LOAD_LOCK_MS: u64 = 30_000;
/// Holders written per HSET command.
const CHUNK: usize = 5_000;

/// Why a load did not happen.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("postgres: {0}")]
    Db(#[from] sqlx::Error),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
}

/// Loads (or reloads, replacing what is there) the gate of campaign `c` from PostgreSQL.
/// Returns `Ok(false)` when another origin holds the load lock, or the campaign is unknown.
pub async fn load(db: &PgPool, redis: &mut RedisConn, c: &str) -> Result<bool, LoadError> {
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
    let result = load_locked(db, redis, c, &k).await;
    // Free the lock only if it is still ours.
    let _: redis::RedisResult<i64> = redis::Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    )
    .key(&k.loading)
    .arg(&token)
    .invoke_async(redis)
    .await;
    result
}

async fn load_locked(
    db: &PgPool,
    redis: &mut RedisConn,
    c: &str,
    k: &Keys,
) -> Result<bool, LoadError> {
    // One statement: remaining and the active claims come from the same snapshot.
    let rows: Vec<(i64, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT c.remaining, a.customer_id, a.id
           FROM campaigns c
           LEFT JOIN claims a ON a.campaign_id = c.id
                             AND a.status IN ('held', 'paid', 'issued', 'redeemed')
          WHERE c.id = $1",
    )
    .bind(c)
    .fetch_all(db)
    .await?;
    let Some(remaining) = rows.first().map(|r| r.0) else {
        return Ok(false);
    };
    let mut pipe = redis::pipe();
    pipe.atomic()
        .del(&k.loaded)
        .del(&k.holders)
        .del(&k.pending)
        .set(&k.remaining, remaining);
    let holders: Vec<(&str, &str)> = rows
        .iter()
        .filter_map(|(_, cust, id)| Some((cust.as_deref()?, id.as_deref()?)))
        .collect();
    for chunk in holders.chunks(CHUNK) {
        pipe.hset_multiple(&k.holders, chunk);
    }
    if remaining > 0 {
        pipe.del(&k.sold_out);
    } else {
        pipe.cmd("EVAL")
            .arg("if not redis.call('GET', KEYS[1]) then redis.call('SET', KEYS[1], redis.call('INCR', KEYS[2])) end return 1")
            .arg(2)
            .arg(&k.sold_out)
            .arg(&k.sold_out_gen);
    }
    pipe.set(&k.loaded, chrono::Utc::now().to_rfc3339());
    pipe.query_async::<()>(redis).await?;
    tracing::info!(
        campaign = c,
        remaining,
        holders = holders.len(),
        "gate loaded from PostgreSQL"
    );
    Ok(true)
}

/// True when the gate of `c` is loaded.
pub async fn is_loaded(redis: &mut RedisConn, c: &str) -> redis::RedisResult<bool> {
    redis::cmd("EXISTS")
        .arg(Keys::of(c).loaded)
        .query_async(redis)
        .await
}
