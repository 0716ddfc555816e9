//! The shards of a campaign's gate: how many, which one is a customer's own, and what each
//! holds.
//!
//! A campaign of `n` shards keeps its units in `n` counters, each in its own Redis Cluster slot
//! (hash tags `{c}` for shard 0, `{c:s}` for shard `s`), so takes spread over the cluster's
//! nodes. A customer's dedup entry (her holder) lives on her own shard, [`bucket`]. The count is
//! fixed at creation (`campaigns.gate_shards`) and written to shard 0's `shards` key by the
//! gate load.

use std::collections::HashSet;

use sha2::{Digest, Sha256};

use super::{Gate, Keys};

/// The most shards a campaign's gate may have ([`flashgate_shared::api::MAX_GATE_SHARDS`]).
pub const MAX_GATE_SHARDS: u16 = flashgate_shared::api::MAX_GATE_SHARDS as u16;

/// The customer's own shard out of `n`: the first 8 bytes of SHA-256 of her id, modulo `n`
/// (stable across origins and versions).
pub fn bucket(customer: &str, n: u16) -> u16 {
    if n <= 1 {
        return 0;
    }
    let d = Sha256::digest(customer.as_bytes());
    let x = u64::from_be_bytes(d[..8].try_into().expect("8 bytes"));
    (x % u64::from(n)) as u16
}

/// The shard count of campaign `c` as its gate load wrote it; `None` when the gate is not
/// loaded. Read from Redis once per handle ([`Gate`] remembers it).
pub async fn shard_count(redis: &mut Gate, c: &str) -> redis::RedisResult<Option<u16>> {
    if let Some(n) = redis.known_count(c) {
        return Ok(Some(n));
    }
    let n: Option<u16> = redis::cmd("GET")
        .arg(Keys::of(c).shards)
        .query_async(redis)
        .await?;
    if let Some(n) = n.filter(|n| (1..=MAX_GATE_SHARDS).contains(n)) {
        redis.learn_count(c, n);
        return Ok(Some(n));
    }
    Ok(None)
}

/// One shard as Redis holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardState {
    pub loaded: bool,
    pub remaining: i64,
    /// Uncommitted takes of the customers of this shard.
    pub pending: i64,
    /// Customers of this shard holding a unit (committed or pending).
    pub holders: i64,
}

/// Every shard of `c`, in order; empty when the gate is not loaded.
pub async fn shard_states(redis: &mut Gate, c: &str) -> redis::RedisResult<Vec<ShardState>> {
    let Some(n) = shard_count(redis, c).await? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(usize::from(n));
    for s in 0..n {
        let k = Keys::shard(c, s);
        let (loaded, remaining, pending, holders): (bool, Option<i64>, i64, i64) = redis::pipe()
            .exists(&k.loaded)
            .get(&k.remaining)
            .zcard(&k.pending)
            .hlen(&k.holders)
            .query_async(redis)
            .await?;
        out.push(ShardState {
            loaded,
            remaining: remaining.unwrap_or(0),
            pending,
            holders,
        });
    }
    Ok(out)
}

/// Every customer holding a unit of `c` (all shards), or `None` when there are more than
/// `max` (or the gate is not loaded).
pub async fn winners(
    redis: &mut Gate,
    c: &str,
    max: usize,
) -> redis::RedisResult<Option<HashSet<String>>> {
    Ok(match holders(redis, c, max).await? {
        Holders::Listed(all) => Some(all),
        Holders::NotLoaded | Holders::TooMany { .. } => None,
    })
}

/// The customers holding a unit of a campaign, as [`holders`] read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holders {
    /// The gate is not loaded.
    NotLoaded,
    /// More than the bound: only their number.
    TooMany {
        /// Customers holding a unit.
        count: usize,
    },
    /// Every one of them.
    Listed(HashSet<String>),
}

/// Every customer holding a unit of `c` (all shards; a pending take counts), unless there are
/// more than `max`.
pub async fn holders(redis: &mut Gate, c: &str, max: usize) -> redis::RedisResult<Holders> {
    let Some(n) = shard_count(redis, c).await? else {
        return Ok(Holders::NotLoaded);
    };
    let mut total = 0usize;
    for s in 0..n {
        let k = Keys::shard(c, s);
        // The shard count may come from this origin's memory: a shard Redis lost is seen by its
        // `loaded` key, not by an empty holders hash (which would list nobody).
        let (loaded, len): (bool, usize) = redis::pipe()
            .exists(&k.loaded)
            .hlen(&k.holders)
            .query_async(redis)
            .await?;
        if !loaded {
            return Ok(Holders::NotLoaded);
        }
        total += len;
    }
    if total > max {
        return Ok(Holders::TooMany { count: total });
    }
    let mut all = HashSet::with_capacity(total);
    for s in 0..n {
        all.extend(
            holders_of(redis, c, s)
                .await?
                .into_iter()
                .map(|(customer, _)| customer),
        );
    }
    Ok(Holders::Listed(all))
}

/// Holders read per `HSCAN` step.
const SCAN_COUNT: usize = 10_000;

/// Every holder of shard `s` of `c`: (customer, claim id or pending token), read with `HSCAN`
/// (a hash changing meanwhile may be seen partly before, partly after a change).
pub async fn holders_of(
    redis: &mut Gate,
    c: &str,
    s: u16,
) -> redis::RedisResult<Vec<(String, String)>> {
    let key = Keys::shard(c, s).holders;
    let (mut out, mut cursor) = (Vec::new(), 0u64);
    loop {
        let (next, page): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
            .arg(&key)
            .arg(cursor)
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .query_async(redis)
            .await?;
        out.extend(page);
        if next == 0 {
            return Ok(out);
        }
        cursor = next;
    }
}

/// Splits `total` units over `n` shards as evenly as possible: shard `s` gets
/// `total / n`, plus one for the first `total % n` shards. The parts sum exactly to `total`.
pub fn split(total: i64, n: u16) -> Vec<i64> {
    let n64 = i64::from(n.max(1));
    let (base, extra) = (total.max(0) / n64, total.max(0) % n64);
    (0..n64).map(|s| base + i64::from(s < extra)).collect()
}

/// The holder value of `customer` (claim id or pending token), if any.
pub async fn holder(
    redis: &mut Gate,
    c: &str,
    customer: &str,
) -> redis::RedisResult<Option<String>> {
    let Some(super::OwnShard { keys: k, .. }) = super::own_shard(redis, c, customer).await? else {
        return Ok(None);
    };
    redis::cmd("HGET")
        .arg(k.holders)
        .arg(customer)
        .query_async(redis)
        .await
}
