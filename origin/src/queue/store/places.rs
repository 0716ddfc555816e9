//! The join's atomic step: each customer of a group gets her place (sequence number) in one
//! script ([`join`]); keys in [`super`].

use std::sync::LazyLock;

use flashgate_shared::queue::RANDOM_BLOCK;
use redis::Script;

use super::{Draw, Keys};
use crate::redis_conn::RedisConn;

/// Candidate draws a join passes to the script (a collision among 2^40 numbers is rare; all of
/// them colliding means retrying).
const CANDIDATES: usize = 8;

// KEYS: open, seq, drawn, arrivals, serving, admitted, unclaimed, present (a new place counts
// as seen at its join: the grace of a fresh ticket), keys (once the edge has issued arrival
// keys, an arrival here gets one too, by the second, so the cursor's ranks never shift), who.
// ARGV: 'arrival' | 'random', RANDOM_BLOCK, now (Unix s), who kept s, then per customer her
// id, her fingerprint ([`super::who`]) and CANDIDATES fractions in [0, 1). The hash keeps
// '<seq>:<issued at>:<drawn waiting at issue>' (the last 0 for arrival numbers; absent in
// places written before it existed), so a re-join gets the same ticket. Returns -1 when the
// queue is not open, else per customer in order {seq, created 0/1, issued at, drawn, admitted,
// serving, drawn waiting at issue, unclaimed, admission times (ms, as strings) of the oldest and
// newest unclaimed}, or -2 when every candidate of hers collided.
static JOIN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local function figures(seq, created, iat, w)
  local first = redis.call('ZRANGE', KEYS[7], 0, 0, 'WITHSCORES')[2] or '0'
  local last = redis.call('ZRANGE', KEYS[7], -1, -1, 'WITHSCORES')[2] or '0'
  return {seq, created, iat, redis.call('ZCARD', KEYS[3]),
          tonumber(redis.call('GET', KEYS[6]) or '0'),
          tonumber(redis.call('GET', KEYS[5]) or '0'), w,
          redis.call('ZCARD', KEYS[7]), first, last}
end
local arrival = ARGV[1] == 'arrival'
local B = tonumber(ARGV[2])
local now = ARGV[3]
local function join(customer, fp, c0)
  local had = redis.call('HGET', KEYS[2], customer)
  if had then
    local s, t, w = string.match(had, '^(%d+):(%d+):?(%d*)$')
    return figures(tonumber(s), 0, tonumber(t), tonumber(w) or 0)
  end
  local seq
  if arrival and redis.call('EXISTS', KEYS[9]) == 1 then
    local E = 2 * B
    local sv = tonumber(redis.call('GET', KEYS[5]) or '0')
    local n = math.max(E + tonumber(now) * 1024000, sv + 1) + math.floor(tonumber(ARGV[c0]) * 1024)
    seq = string.format('%.0f', n)
    redis.call('ZADD', KEYS[9], seq, seq)
  elseif arrival then
    seq = string.format('%.0f', B + redis.call('INCR', KEYS[4]))
  else
    local lo = math.min(tonumber(redis.call('GET', KEYS[5]) or '0'), B - 2)
    for i = c0, c0 + 7 do
      local s = string.format('%.0f', lo + 1 + math.floor(tonumber(ARGV[i]) * (B - 1 - lo)))
      if redis.call('ZADD', KEYS[3], 'NX', s, s) == 1 then seq = s break end
    end
    if not seq then return -2 end
  end
  local w = 0
  if not arrival then
    w = redis.call('ZCARD', KEYS[3]) - tonumber(redis.call('GET', KEYS[6]) or '0')
    if w < 1 then w = 1 end
  end
  redis.call('HSET', KEYS[2], customer, seq .. ':' .. now .. ':' .. w)
  redis.call('ZADD', KEYS[8], string.format('%.0f', tonumber(now) * 1000), seq)
  redis.call('HSET', KEYS[10], seq, fp)
  redis.call('EXPIRE', KEYS[10], ARGV[4])
  return figures(tonumber(seq), 1, tonumber(now), w)
end
local out = {}
for i = 5, #ARGV, 10 do out[#out + 1] = join(ARGV[i], ARGV[i + 1], i + 2) end
return out
",
    )
});

/// A customer's place, given by [`join`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub seq: u64,
    /// True when this join gave the place (false: she had it already).
    pub created: bool,
    /// When her ticket was first issued, Unix seconds.
    pub issued_at_s: i64,
    /// Drawn customers not yet admitted when her drawn number was issued, herself included (0
    /// for an arrival number); carried by the ticket.
    pub drawn_waiting_at_issue: u64,
    pub drawn: u64,
    pub admitted: u64,
    pub now_serving: u64,
    /// Admitted and not claimed yet, with the admission times (Unix ms) of the oldest and the
    /// newest of them ([`super::Figures::unclaimed_since_ms`]).
    pub unclaimed: u64,
    pub unclaimed_since_ms: (i64, i64),
}

/// A join's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Joined {
    /// Each customer's place (in the order given) and the queue's figures at her moment.
    Places(Vec<Place>),
    /// The queue is not open in Redis (lost, or never opened): fail closed.
    NotOpen,
}

/// Gives each of `customers` her place in campaign `c`'s queue, in order, in one atomic step
/// per try (an existing place is returned unchanged; a customer named twice gets one place) at
/// `now_s` (Unix seconds). Redis errors are returned.
pub async fn join(
    redis: &mut RedisConn,
    c: &str,
    customers: &[&str],
    draw: Draw,
    now_s: i64,
) -> redis::RedisResult<Joined> {
    let k = Keys::of(c);
    let mut places: Vec<Option<Place>> = vec![None; customers.len()];
    loop {
        // Those whose candidates all collided try again (rare: 8 misses among 2^40 numbers).
        let due: Vec<usize> = (0..customers.len())
            .filter(|&i| places[i].is_none())
            .collect();
        if due.is_empty() {
            return Ok(Joined::Places(places.into_iter().flatten().collect()));
        }
        let mut inv = JOIN.prepare_invoke();
        inv.key(&k.open)
            .key(&k.seq)
            .key(&k.drawn)
            .key(&k.arrivals)
            .key(&k.serving)
            .key(&k.admitted)
            .key(&k.unclaimed)
            .key(&k.present)
            .key(&k.keys)
            .key(&k.who)
            .arg(match draw {
                Draw::Arrival => "arrival",
                Draw::Random => "random",
            })
            .arg(RANDOM_BLOCK)
            .arg(now_s)
            .arg(super::who::KEPT_S);
        for &i in &due {
            inv.arg(customers[i])
                .arg(super::who::fingerprint(customers[i]));
            for _ in 0..CANDIDATES {
                inv.arg(rand::random::<f64>());
            }
        }
        let v: redis::Value = inv.invoke_async(redis).await?;
        let redis::Value::Array(each) = v else {
            return Ok(Joined::NotOpen);
        };
        for (i, one) in due.into_iter().zip(each) {
            if let redis::Value::Int(_) = one {
                continue;
            }
            #[allow(clippy::type_complexity)]
            let (seq, created, issued_at_s, drawn, admitted, now_serving, w, u, first, last): (
                u64,
                u8,
                i64,
                u64,
                u64,
                u64,
                u64,
                u64,
                f64,
                f64,
            ) = redis::from_redis_value(&one)?;
            places[i] = Some(Place {
                seq,
                created: created == 1,
                issued_at_s,
                drawn_waiting_at_issue: w,
                drawn,
                admitted,
                now_serving,
                unclaimed: u,
                unclaimed_since_ms: (first as i64, last as i64),
            });
        }
    }
}
