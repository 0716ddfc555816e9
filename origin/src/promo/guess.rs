//! Guess limiting: failed tries (`invalid_code`) are limited per
//! customer and per client IP address by token buckets that only failures spend, shared by
//! every origin through Redis.
//!
//! A bucket holds up to `limit` tokens and refills `limit` tokens an hour, continuously (so a
//! spent bucket of 5 an hour gives one more try every 12 minutes). Redis's own clock (`TIME`)
//! is used, so origins with skewed clocks agree.
//!
//! Order of a try: [`peek`] before anything (a spent bucket answers 429 for every try, valid or
//! not, so a limited script learns nothing); a try whose code is unknown then [`spend`]s one
//! token of each bucket, one bucket after the other. Valid checks and uses spend nothing.
//!
//! Keys: `fg:guess:c:<customer>` and `fg:guess:ip:<ip key>` ([`ip_bucket_key`]; hash
//! `tokens`, `ts` in ms), expiring once they would be full again. On Redis Cluster the two
//! keys live in different slots, so each bucket is read and spent by its own script call (one
//! slot each). A spend stops at the first bucket found empty; only when another try emptied it
//! between this try's peek and its spend can a bucket before it have lost a token: limits are
//! never exceeded, at worst one token is charged early.

use crate::redis_conn::RedisConn;
use redis::Script;
use std::sync::LazyLock;

/// Length of the refill window, in milliseconds (an hour).
pub const WINDOW_MS: i64 = 3_600_000;

/// The buckets of one try.
#[derive(Debug, Clone)]
pub struct Buckets {
    keys: Vec<String>,
    limits: Vec<i64>,
    kinds: Vec<Bucket>,
}

/// Which bucket a key is: the customer's or the client IP's (the `bucket` label of
/// `flashgate_guess_refusals_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bucket {
    Customer,
    Ip,
}

impl Bucket {
    /// Both buckets, in the order a try spends them.
    pub const ALL: [Bucket; 2] = [Bucket::Customer, Bucket::Ip];

    /// The label value: `customer` or `ip`.
    pub fn as_str(self) -> &'static str {
        match self {
            Bucket::Customer => "customer",
            Bucket::Ip => "ip",
        }
    }
}

/// A try refused 429: the seconds until every bucket has a token again (for `Retry-After`),
/// and the bucket that waits longest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub wait_seconds: u64,
    pub bucket: Bucket,
}

/// The Redis key of `customer`'s bucket, `fg:guess:c:<customer length>:<customer>`
/// (length-prefixed like every key naming a customer).
pub fn customer_bucket_key(customer: &str) -> String {
    format!("fg:guess:c:{}:{customer}", customer.len())
}

/// The Redis key of a client IP's bucket, `fg:guess:ip:<key>`, where `key` is the address's
/// [`flashgate_shared::ip_limit::limit_key`] (an IPv4 address itself, an IPv6 address its
/// prefix such as `2001:db8:1:2::/64`).
pub fn ip_bucket_key(key: &str) -> String {
    format!("fg:guess:ip:{key}")
}

impl Buckets {
    /// The customer's bucket of `per_customer` failures an hour and, when the client IP is
    /// known, the IP's bucket of `per_ip`. A limit of 0 turns that bucket off.
    pub fn of(customer: &str, ip: Option<&str>, per_customer: i64, per_ip: i64) -> Self {
        let mut b = Buckets {
            keys: Vec::new(),
            limits: Vec::new(),
            kinds: Vec::new(),
        };
        if per_customer > 0 {
            b.keys.push(customer_bucket_key(customer));
            b.limits.push(per_customer);
            b.kinds.push(Bucket::Customer);
        }
        if let (Some(ip), true) = (ip, per_ip > 0) {
            b.keys.push(ip_bucket_key(ip));
            b.limits.push(per_ip);
            b.kinds.push(Bucket::Ip);
        }
        b
    }
}

// ARGV[1] = 'peek' | 'spend', ARGV[2] = window ms, ARGV[3..] = limit of each key.
// Returns 0 when every bucket has a token (and, for 'spend', took one of each), else the
// seconds until every bucket has one again.
static BUCKETS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
local wait = 0
local tokens = {}
for i, k in ipairs(KEYS) do
  local cap = tonumber(ARGV[i + 2])
  local rate = cap / window
  local b = redis.call('HMGET', k, 'tokens', 'ts')
  local have = tonumber(b[1]) or cap
  local ts = tonumber(b[2]) or now
  if now > ts then have = math.min(cap, have + (now - ts) * rate) end
  tokens[i] = have
  if have < 1 then
    local w = math.ceil((1 - have) / rate / 1000)
    if w > wait then wait = w end
  end
end
if ARGV[1] == 'spend' and wait == 0 then
  for i, k in ipairs(KEYS) do
    redis.call('HSET', k, 'tokens', tostring(tokens[i] - 1), 'ts', now)
    redis.call('PEXPIRE', k, window)
  end
end
return wait
",
    )
});

async fn run(
    redis: &mut RedisConn,
    b: &Buckets,
    mode: &str,
) -> redis::RedisResult<Option<Refusal>> {
    // One bucket per call: the buckets live in different hash slots on a Redis Cluster.
    let mut refusal: Option<Refusal> = None;
    for ((k, l), bucket) in b.keys.iter().zip(&b.limits).zip(&b.kinds) {
        let w: i64 = BUCKETS
            .key(k)
            .arg(mode)
            .arg(WINDOW_MS)
            .arg(*l)
            .invoke_async(redis)
            .await?;
        let wait_seconds = w.max(0) as u64;
        if wait_seconds > refusal.map_or(0, |r| r.wait_seconds) {
            refusal = Some(Refusal {
                wait_seconds,
                bucket: *bucket,
            });
        }
        if mode == "spend" && refusal.is_some() {
            break;
        }
    }
    Ok(refusal)
}

/// `None` when a failure would still be allowed, else the refusal (seconds to wait, for
/// `Retry-After`, and the bucket that is spent). Changes nothing.
pub async fn peek(redis: &mut RedisConn, b: &Buckets) -> redis::RedisResult<Option<Refusal>> {
    run(redis, b, "peek").await
}

/// Spends one token of each bucket for a failed try. `None` when spent; else nothing more was
/// spent and the refusal is returned (the failure is answered 429).
pub async fn spend(redis: &mut RedisConn, b: &Buckets) -> redis::RedisResult<Option<Refusal>> {
    run(redis, b, "spend").await
}
