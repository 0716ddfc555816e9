//! The cached state of a code in Redis, read by every origin (once the count hits 0,
//! a used-up flag that every origin caches answers the rest of the tries without the row).
//!
//! One hash per code, `fg:code:{CODE}`:
//! - `v`   — the counter's `version` this state was written from;
//! - `out` — `1` while the code is used up (no use left), `0` otherwise;
//! - `off` — `1` while a manager has the code disabled, `0` otherwise;
//! - `u:<customer>` — her held or used use id (for `already_used` answers).
//!
//! Writers are the take, the release call and the sweeper; each writes the `(uses_left,
//! version)` PostgreSQL returned, and a write older than the stored version is ignored, so the
//! flag ends up as PostgreSQL left it whatever order the writes arrive in. Redis keeps nothing
//! on disk here: a lost flag only sends tries to the row again, which refuses and sets it anew.

use crate::redis_conn::RedisConn;
use redis::Script;
use std::sync::LazyLock;

/// The Redis key of code `code`'s cached state, `fg:code:{CODE}` (its own hash tag: one
/// Redis Cluster slot per code).
pub fn key(code: &str) -> String {
    format!("fg:code:{{{code}}}")
}

fn holder_field(customer: &str) -> String {
    format!("u:{customer}")
}

/// The cached state of a code for one customer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cached {
    /// The used-up flag.
    pub used_up: bool,
    /// The disabled flag.
    pub disabled: bool,
    /// Her held or used use, if the cache knows one.
    pub holder: Option<String>,
}

static PUBLISH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '-1')
if tonumber(ARGV[1]) > v then
  redis.call('HSET', KEYS[1], 'v', ARGV[1], 'out', ARGV[2], 'off', ARGV[3])
  return 1
end
return 0
",
    )
});

static DROP_HOLDER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
",
    )
});

/// Reads the flags and her use in one round trip.
pub async fn read(redis: &mut RedisConn, code: &str, customer: &str) -> redis::RedisResult<Cached> {
    let (out, off, holder): (Option<String>, Option<String>, Option<String>) = redis::cmd("HMGET")
        .arg(key(code))
        .arg("out")
        .arg("off")
        .arg(holder_field(customer))
        .query_async(redis)
        .await?;
    Ok(Cached {
        used_up: out.as_deref() == Some("1"),
        disabled: off.as_deref() == Some("1"),
        holder,
    })
}

/// Writes the flags from PostgreSQL's `(uses_left, version, disabled)` unless the same or a
/// newer version is stored. Returns whether it wrote them.
pub async fn publish(
    redis: &mut RedisConn,
    code: &str,
    uses_left: i64,
    version: i64,
    disabled: bool,
) -> redis::RedisResult<bool> {
    let written: i64 = PUBLISH
        .key(key(code))
        .arg(version)
        .arg(if uses_left <= 0 { "1" } else { "0" })
        .arg(if disabled { "1" } else { "0" })
        .invoke_async(redis)
        .await?;
    Ok(written == 1)
}

/// The counter `version` the code's cached state was written from; `None` when none is cached.
pub async fn cached_version(redis: &mut RedisConn, code: &str) -> redis::RedisResult<Option<i64>> {
    redis::cmd("HGET")
        .arg(key(code))
        .arg("v")
        .query_async(redis)
        .await
}

/// Remembers her use of the code.
pub async fn add_holder(
    redis: &mut RedisConn,
    code: &str,
    customer: &str,
    use_id: &str,
) -> redis::RedisResult<()> {
    redis::cmd("HSET")
        .arg(key(code))
        .arg(holder_field(customer))
        .arg(use_id)
        .query_async(redis)
        .await
}

/// Forgets her use `use_id` of the code (released), unless it is another use by now. Returns
/// whether it was forgotten now.
pub async fn drop_holder(
    redis: &mut RedisConn,
    code: &str,
    customer: &str,
    use_id: &str,
) -> redis::RedisResult<bool> {
    let dropped: i64 = DROP_HOLDER
        .key(key(code))
        .arg(holder_field(customer))
        .arg(use_id)
        .invoke_async(redis)
        .await?;
    Ok(dropped == 1)
}
