//! The Redis side of the tickets the edge issues ([`crate::queue::issued`]): adding a report's
//! tickets to the line ([`add`]) and reading the line's length and marks ([`line`]); keys in
//! [`super`].
//!
//! Memory: an arrival key in `fg:{c}:q:keys` costs about as much as a presence entry (a
//! 16-digit member with its score in a skiplist and a dict), see docs/BENCHMARKS.md,
//! "Presence memory in Redis".

use std::sync::LazyLock;

use flashgate_shared::queue::keys::{LineMark, EDGE_BLOCK, MAX_LINE_MARKS};
use flashgate_shared::queue::RANDOM_BLOCK;
use redis::Script;

use super::Keys;
use crate::redis_conn::RedisConn;

// KEYS: report id key, open, serving, drawn, keys, present, skipped, back, issued, who. ARGV:
// report id kept s, EDGE_BLOCK, who kept s, then per ticket its sequence number, issue time
// (Unix ms) and customer fingerprint ([`super::who`]). Returns
// -2 when the queue is not open, -1 for a report id counted before (nothing changed), else the
// tickets new to the line.
//
// A ticket at or below `serving` (reported after admission passed its place) is not added to
// its ordered set (that would shift the cursor's ranks): it joins the skipped ones seen again,
// admitted first at the next step, unless its place was passed already (a drawn number given
// again to the same customer).
static ADD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[2]) == 0 then return -2 end
if not redis.call('SET', KEYS[1], 1, 'NX', 'EX', ARGV[1]) then return -1 end
local serving = tonumber(redis.call('GET', KEYS[3]) or '0')
local E = tonumber(ARGV[2])
local added = 0
for i = 4, #ARGV, 3 do
  local s = ARGV[i]
  local z = KEYS[4]
  if tonumber(s) >= E then z = KEYS[5] end
  if not redis.call('ZSCORE', z, s) and not redis.call('ZSCORE', KEYS[7], s) then
    if tonumber(s) <= serving then
      redis.call('ZADD', KEYS[7], s, s)
      redis.call('ZADD', KEYS[8], s, s)
    else
      redis.call('ZADD', z, s, s)
    end
    added = added + 1
  end
  redis.call('ZADD', KEYS[6], 'GT', ARGV[i + 1], s)
  redis.call('HSET', KEYS[10], s, ARGV[i + 2])
end
if #ARGV > 3 then redis.call('EXPIRE', KEYS[10], ARGV[3]) end
redis.call('INCRBY', KEYS[9], added)
return added
",
    )
});

/// What [`add`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// This many tickets were new to the line.
    Counted(u64),
    /// The report id was counted before: nothing changed.
    Duplicate,
    /// The queue is not open in Redis: nothing changed.
    NotOpen,
}

/// A ticket of a report of issued tickets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedTicket {
    /// Its sequence number.
    pub seq: u64,
    /// When it was issued, Unix ms.
    pub at_ms: i64,
    /// Its customer's [`super::who::fingerprint`].
    pub who: String,
}

/// Adds `tickets` of report `report_id` to campaign `c`'s line, once per report id (kept
/// `kept_s` seconds); each counts as seen at its issue, and its customer is noted
/// ([`super::who`]).
pub async fn add(
    redis: &mut RedisConn,
    c: &str,
    report_id: &str,
    kept_s: u64,
    tickets: &[IssuedTicket],
) -> redis::RedisResult<Added> {
    let k = Keys::of(c);
    let mut inv = ADD.prepare_invoke();
    inv.key(format!("fg:{{{c}}}:q:report:{report_id}"))
        .key(&k.open)
        .key(&k.serving)
        .key(&k.drawn)
        .key(&k.keys)
        .key(&k.present)
        .key(&k.skipped)
        .key(&k.back)
        .key(&k.issued)
        .key(&k.who)
        .arg(kept_s)
        .arg(EDGE_BLOCK)
        .arg(super::who::KEPT_S);
    for t in tickets {
        inv.arg(t.seq).arg(t.at_ms).arg(&t.who);
    }
    let n: i64 = inv.invoke_async(redis).await?;
    Ok(match n {
        -2 => Added::NotOpen,
        -1 => Added::Duplicate,
        n => Added::Counted(n.max(0) as u64),
    })
}

/// The line of campaign `c` as the status shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Line {
    /// Tickets not passed by admission yet.
    pub waiting: u64,
    /// Of them, those before the arrival keys (drawn numbers, origin arrivals).
    pub before_keys: u64,
    /// Points of the arrival keys waiting, at most [`MAX_LINE_MARKS`], evenly spread by rank.
    pub marks: Vec<LineMark>,
    /// Tickets the edge reported issuing.
    pub issued: u64,
}

/// Reads campaign `c`'s [`Line`]: one transaction for the counts, then one read of the marks.
pub async fn line(redis: &mut RedisConn, c: &str) -> redis::RedisResult<Line> {
    let k = Keys::of(c);
    let (admitted, drawn, arrivals, keys, issued): (
        Option<u64>,
        u64,
        Option<u64>,
        u64,
        Option<u64>,
    ) = redis::pipe()
        .atomic()
        .get(&k.admitted)
        .zcard(&k.drawn)
        .get(&k.arrivals)
        .zcard(&k.keys)
        .get(&k.issued)
        .query_async(redis)
        .await?;
    let (admitted, arrivals) = (admitted.unwrap_or(0), arrivals.unwrap_or(0));
    let before = drawn + arrivals;
    let before_keys = before.saturating_sub(admitted);
    let first = admitted.saturating_sub(before);
    let waiting_keys = keys.saturating_sub(first);
    let marks = if waiting_keys == 0 {
        Vec::new()
    } else {
        let m = waiting_keys.min(MAX_LINE_MARKS as u64);
        let ranks: Vec<u64> = (1..=m)
            .map(|i| first + (i * waiting_keys).div_ceil(m) - 1)
            .collect();
        let mut pipe = redis::pipe();
        for r in &ranks {
            pipe.zrange(&k.keys, *r as isize, *r as isize);
        }
        let found: Vec<Vec<u64>> = pipe.query_async(redis).await?;
        ranks
            .iter()
            .zip(found)
            .filter_map(|(r, n)| {
                n.first().map(|&n| LineMark {
                    n,
                    ahead: before_keys + (r - first + 1),
                })
            })
            .collect()
    };
    Ok(Line {
        waiting: before_keys + waiting_keys,
        before_keys,
        marks,
        issued: issued.unwrap_or(0),
    })
}

/// True for a sequence number the edge issues: drawn (`1..RANDOM_BLOCK`) or an arrival key
/// (`EDGE_BLOCK..2^53`, exact in a JSON double).
pub fn is_edge_issued(seq: u64) -> bool {
    (1..RANDOM_BLOCK).contains(&seq) || (EDGE_BLOCK..1 << 53).contains(&seq)
}
