//! The Redis gate: the one atomic step that takes a unit, and the keys it keeps.
//!
//! Per campaign `c` (all keys share the hash tag `{c}`, so one campaign lives on one Redis
//! Cluster slot and every script touches one slot):
//! - `fg:{c}:loaded`    — present once the gate was loaded from PostgreSQL. A script that finds
//!   it missing (Redis restarted empty, or was flushed) refuses with `not_loaded`, and the
//!   origin answers 503 while it reloads ([`load`]). The gate fails closed, never open.
//! - `fg:{c}:remaining` — units the gate may still hand out.
//! - `fg:{c}:holders`   — hash customer → claim id, or `p:<token>` while her claim is being
//!   committed. Dedups customers before PostgreSQL's unique index has to.
//! - `fg:{c}:pending`   — sorted set customer → take time (ms) of uncommitted takes, so the
//!   reconciler can find takes whose origin died before committing.
//! - `fg:{c}:sold_out`  — the sold-out flag; its value is a generation number that grows each
//!   time the flag is set, so a cached view of the winners can tell whether it is still valid.
//!
//! PostgreSQL is the truth: every unit the gate hands out is only won once the claim commits
//! under a conditional decrement of `campaigns.remaining`. When the two disagree, the gate is
//! corrected toward PostgreSQL.

pub mod flags;
pub mod load;
pub mod settle;

use crate::redis_conn::RedisConn;
use redis::Script;
use std::sync::LazyLock;

/// The Redis keys of one campaign's gate.
pub struct Keys {
    pub loaded: String,
    pub loading: String,
    pub remaining: String,
    pub holders: String,
    pub pending: String,
    pub sold_out: String,
    pub sold_out_gen: String,
}

impl Keys {
    /// Keys of campaign `c`.
    pub fn of(c: &str) -> Self {
        let k = |s: &str| format!("fg:{{{c}}}:{s}");
        Keys {
            loaded: k("loaded"),
            loading: k("loading"),
            remaining: k("remaining"),
            holders: k("holders"),
            pending: k("pending"),
            sold_out: k("sold_out"),
            sold_out_gen: k("sold_out_gen"),
        }
    }
}

/// Prefix of a holder value that marks a take not yet committed.
pub const PENDING_PREFIX: &str = "p:";

/// What the take step decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// A unit was taken for the customer; commit the claim, then [`confirm`] or [`give_back`].
    Taken,
    /// No unit left; the flag is set with this generation.
    SoldOut { generation: i64 },
    /// The customer already holds a unit: a claim id, or `p:<token>` while it commits.
    AlreadyHolds(String),
    /// The gate is not loaded (Redis lost its state); answer 503 and reload.
    NotLoaded,
}

// Takes one unit for ARGV[1] if she holds none and one is left; sets the sold-out flag on the
// take of the last unit (and on a refused take at zero, so a lost flag is restored).
static TAKE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_loaded'} end
local h = redis.call('HGET', KEYS[3], ARGV[1])
if h then return {'holds', h} end
local r = tonumber(redis.call('GET', KEYS[2]) or '0')
local function flag()
  local g = redis.call('GET', KEYS[4])
  if not g then
    g = redis.call('INCR', KEYS[6])
    redis.call('SET', KEYS[4], g)
  end
  return tostring(g)
end
if r <= 0 then return {'sold_out', flag()} end
r = redis.call('DECR', KEYS[2])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[1])
if r == 0 then flag() end
return {'taken'}
",
    )
});

// Marks her take committed: holder value becomes the claim id.
static CONFIRM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 1
end
return 0
",
    )
});

// Gives her unit back when her holder value is ARGV[2]: the unit returns to `remaining` and the
// sold-out flag clears. ARGV[3] = '' drops the holder; anything else replaces it (used when
// PostgreSQL says she already holds that other claim). Returns 1 when a unit went back.
static GIVE_BACK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[5]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('INCR', KEYS[3])
redis.call('DEL', KEYS[4])
return 1
",
    )
});

// PostgreSQL refused a take the gate allowed (its remaining was 0): drop her holder and set the
// gate's remaining to PostgreSQL's minus the takes still committing; flag when zero.
static CORRECT_DOWN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[5]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
end
local r = tonumber(ARGV[3]) - redis.call('ZCARD', KEYS[2])
if r < 0 then r = 0 end
redis.call('SET', KEYS[3], r)
if r == 0 and not redis.call('GET', KEYS[4]) then
  redis.call('SET', KEYS[4], redis.call('INCR', KEYS[6]))
end
return 1
",
    )
});

/// A fresh pending token for a take (`p:` + random hex).
pub fn pending_token() -> String {
    format!("{PENDING_PREFIX}{:016x}", rand::random::<u64>())
}

/// The atomic take step for `customer` on campaign `c`; `token` marks her pending holder.
pub async fn take(
    redis: &mut RedisConn,
    c: &str,
    customer: &str,
    token: &str,
) -> redis::RedisResult<Take> {
    let k = Keys::of(c);
    let now_ms = chrono::Utc::now().timestamp_millis();
    let out: Vec<String> = TAKE
        .key(&k.loaded)
        .key(&k.remaining)
        .key(&k.holders)
        .key(&k.sold_out)
        .key(&k.pending)
        .key(&k.sold_out_gen)
        .arg(customer)
        .arg(token)
        .arg(now_ms)
        .invoke_async(redis)
        .await?;
    Ok(match out.first().map(String::as_str) {
        Some("taken") => Take::Taken,
        Some("sold_out") => Take::SoldOut {
            generation: out.get(1).and_then(|g| g.parse().ok()).unwrap_or(0),
        },
        Some("holds") => Take::AlreadyHolds(out.get(1).cloned().unwrap_or_default()),
        _ => Take::NotLoaded,
    })
}

/// Marks her pending take `token` as committed claim `claim_id`.
pub async fn confirm(
    redis: &mut RedisConn,
    c: &str,
    customer: &str,
    token: &str,
    claim_id: &str,
) -> redis::RedisResult<()> {
    let k = Keys::of(c);
    let _: i64 = CONFIRM
        .key(&k.holders)
        .key(&k.pending)
        .arg(customer)
        .arg(token)
        .arg(claim_id)
        .invoke_async(redis)
        .await?;
    Ok(())
}

/// Returns her unit to the gate if her holder value is still `expected` (a pending token or a
/// claim id); `replace_with` = `Some(id)` keeps her as holder of claim `id` instead. Exactly
/// once: a second call finds the holder changed and does nothing. Returns whether a unit went
/// back.
pub async fn give_back(
    redis: &mut RedisConn,
    c: &str,
    customer: &str,
    expected: &str,
    replace_with: Option<&str>,
) -> redis::RedisResult<bool> {
    let k = Keys::of(c);
    let n: i64 = GIVE_BACK
        .key(&k.holders)
        .key(&k.pending)
        .key(&k.remaining)
        .key(&k.sold_out)
        .key(&k.loaded)
        .arg(customer)
        .arg(expected)
        .arg(replace_with.unwrap_or(""))
        .invoke_async(redis)
        .await?;
    Ok(n == 1)
}

/// PostgreSQL refused her take for lack of units: drops her pending holder and lowers the
/// gate's remaining to `pg_remaining` minus the takes still committing.
pub async fn correct_down(
    redis: &mut RedisConn,
    c: &str,
    customer: &str,
    token: &str,
    pg_remaining: i64,
) -> redis::RedisResult<()> {
    let k = Keys::of(c);
    let _: i64 = CORRECT_DOWN
        .key(&k.holders)
        .key(&k.pending)
        .key(&k.remaining)
        .key(&k.sold_out)
        .key(&k.loaded)
        .key(&k.sold_out_gen)
        .arg(customer)
        .arg(token)
        .arg(pg_remaining)
        .invoke_async(redis)
        .await?;
    Ok(())
}

/// The holder value of `customer` (claim id or pending token), if any.
pub async fn holder(
    redis: &mut RedisConn,
    c: &str,
    customer: &str,
) -> redis::RedisResult<Option<String>> {
    redis::cmd("HGET")
        .arg(Keys::of(c).holders)
        .arg(customer)
        .query_async(redis)
        .await
}
