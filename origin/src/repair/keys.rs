//! Finding a campaign's Redis keys without knowing their names: every key the origin keeps for
//! campaign `c` carries its hash tag, `{c}` (shard 0 of the gate, the waiting room, the
//! idempotency records of claims, the audit's record) or `{c:s}` (shard `s` of the gate), so
//! one `SCAN … MATCH fg:{*` over the keyspace finds them all ([`scan`]) and [`campaign_of`]
//! names the campaign of each. Keys without a campaign's tag (`fg:idem:…`, `fg:code:{CODE}`,
//! `fg:origin:…`, `fg:gate_audit:…`) are not matched.
//!
//! `SCAN` is cursor-based: it never blocks Redis for more than one batch
//! ([`SCAN_COUNT`]). On a Redis Cluster every primary is scanned in turn (its address from
//! `CLUSTER NODES`), and a batch of keys sent back in one script ([`expire_at`]) keeps to one
//! hash tag, so to one slot.

use std::sync::LazyLock;

use flashgate_shared::api::is_valid_slug;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{RedisResult, Script, Value};

use crate::redis_conn::RedisConn;

/// The `MATCH` pattern of every key under a campaign's hash tag.
pub const CAMPAIGN_KEYS: &str = "fg:{*";

/// Keys asked for in one `SCAN` call (a hint to Redis, not a bound).
pub const SCAN_COUNT: u32 = 1_000;

/// Most keys sent in one [`expire_at`] script.
pub const BATCH_MAX: usize = 500;

/// The hash tag of `key` (`c` or `c:s`) when it is a campaign key, `fg:{tag}:…`.
pub fn tag_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("fg:{")?;
    let (tag, tail) = rest.split_once('}')?;
    tail.starts_with(':').then_some(tag)
}

/// The campaign of a campaign key (`fg:{c}:…` or `fg:{c:s}:…`), `None` for any other key.
pub fn campaign_of(key: &str) -> Option<&str> {
    let tag = tag_of(key)?;
    let c = match tag.split_once(':') {
        Some((c, shard)) if !shard.is_empty() && shard.bytes().all(|b| b.is_ascii_digit()) => c,
        Some(_) => return None,
        None => tag,
    };
    is_valid_slug(c).then_some(c)
}

/// Calls `visit` with each batch of keys matching `pattern`, over the whole keyspace (every
/// primary of a cluster). A key may be seen twice (a rehash during the scan), never missed if
/// it existed from the start to the end. Errors: Redis did not answer.
pub async fn scan(
    redis: &RedisConn,
    pattern: &str,
    mut visit: impl FnMut(Vec<String>),
) -> RedisResult<()> {
    match redis {
        RedisConn::Single(c) => {
            let mut c = c.clone();
            let mut cursor = 0u64;
            loop {
                let (next, keys): (u64, Vec<String>) =
                    scan_cmd(cursor, pattern).query_async(&mut c).await?;
                visit(keys);
                if next == 0 {
                    return Ok(());
                }
                cursor = next;
            }
        }
        RedisConn::Cluster(c) => {
            let mut c = c.clone();
            let nodes = c
                .route_command(
                    redis::cmd("CLUSTER").arg("NODES"),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                )
                .await?;
            for (host, port) in primaries(&redis::from_owned_redis_value::<String>(nodes)?) {
                let route = || {
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                        host: host.clone(),
                        port,
                    })
                };
                let mut cursor = 0u64;
                loop {
                    let v = c.route_command(&scan_cmd(cursor, pattern), route()).await?;
                    let (next, keys): (u64, Vec<String>) = redis::from_owned_redis_value(v)?;
                    visit(keys);
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
            }
            Ok(())
        }
    }
}

fn scan_cmd(cursor: u64, pattern: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("SCAN");
    cmd.arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(SCAN_COUNT);
    cmd
}

/// (host, port) of every primary that is not failing in a `CLUSTER NODES` answer
/// (`<id> <host:port@cport[,hostname]> <flags> …`, one node a line).
fn primaries(nodes: &str) -> Vec<(String, u16)> {
    nodes
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (addr, flags) = (f.nth(1)?, f.next()?);
            let flags: Vec<&str> = flags.split(',').collect();
            if !flags.contains(&"master") || flags.iter().any(|f| f.starts_with("fail")) {
                return None;
            }
            let addr = addr.split(['@', ',']).next()?;
            let (host, port) = addr.rsplit_once(':')?;
            Some((host.to_string(), port.parse().ok()?))
        })
        .collect()
}

// KEYS: keys of one hash tag. ARGV: a Unix time in ms. Each key that lives past that time (no
// expiry, or a later one) gets it as its expiry; a time already past deletes them. Returns how
// many keys were changed.
static EXPIRE_AT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at = tonumber(ARGV[1])
local n = 0
for _, k in ipairs(KEYS) do
  local ttl = redis.call('PTTL', k)
  if ttl == -1 or (ttl >= 0 and now + ttl > at) then
    redis.call('PEXPIREAT', k, ARGV[1])
    n = n + 1
  end
end
return n
",
    )
});

/// Makes `keys` (all of one hash tag, at most [`BATCH_MAX`]) expire at `at_ms` (Unix time in
/// milliseconds) unless they expire earlier already; a time in the past deletes them. Returns
/// how many keys were changed. Errors: Redis did not answer.
pub async fn expire_at(redis: &mut RedisConn, keys: &[String], at_ms: i64) -> RedisResult<i64> {
    if keys.is_empty() {
        return Ok(0);
    }
    let mut inv = EXPIRE_AT.prepare_invoke();
    for k in keys {
        inv.key(k);
    }
    let n: Value = inv.arg(at_ms).invoke_async(redis).await?;
    redis::from_owned_redis_value(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn campaign_keys_name_their_campaign() {
        assert_eq!(campaign_of("fg:{tshirt}:remaining"), Some("tshirt"));
        assert_eq!(campaign_of("fg:{tshirt:3}:holders"), Some("tshirt"));
        assert_eq!(campaign_of("fg:{tshirt}:q:seq"), Some("tshirt"));
        assert_eq!(campaign_of("fg:{a-1}:idem:3:ana:k{}"), Some("a-1"));
        assert_eq!(tag_of("fg:{tshirt:3}:holders"), Some("tshirt:3"));
        for other in [
            "fg:idem:3:ana:k",
            "fg:code:{SPRING}",
            "fg:origin:o1:lease",
            "fg:gate_audit:turn",
            "fg:{tshirt}",
            "fg:{tshirt:x}:holders",
            "fg:{Bad Id}:remaining",
        ] {
            assert_eq!(campaign_of(other), None, "{other}");
        }
    }

    #[test]
    fn cluster_nodes_give_the_primaries_that_answer() {
        let nodes = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7001@17001,node-b master - 0 0 2 connected 5461-10922
c3 127.0.0.1:7002@17002 master,fail - 0 0 3 connected 10923-16383
d4 127.0.0.1:7003@17003 slave a1 0 0 1 connected
";
        assert_eq!(
            primaries(nodes),
            vec![
                ("127.0.0.1".to_string(), 7000),
                ("127.0.0.1".to_string(), 7001)
            ]
        );
    }
}
