//! The waiting room's Redis keys and its atomic steps (Lua scripts, one Redis Cluster slot
//! each).
//!
//! Per campaign `c`, next to the gate's keys and under the same hash tag `{c}`
//! ([`crate::gate::Keys`]):
//! - `fg:{c}:q:open`     — present once the campaign's waiting room was opened (created, or set
//!   by a manager). Every step refuses without it (fail closed): when Redis loses the queue,
//!   the first origin that notices reopens it from its PostgreSQL checkpoint
//!   ([`super::restore`]) and sets it last.
//! - `fg:{c}:q:seq`      — hash customer → `seq:issued_at:drawn_waiting_at_issue` (one place
//!   per customer).
//! - `fg:{c}:q:drawn`    — sorted set of the sequence numbers drawn at random below
//!   [`RANDOM_BLOCK`] (score = member = the number), walked in order by admission.
//! - `fg:{c}:q:arrivals` — counter of the arrival-ordered joins (`RANDOM_BLOCK + n`).
//! - `fg:{c}:q:serving`  — `now_serving`: the highest sequence number admitted.
//! - `fg:{c}:q:admitted` — how many customers were admitted.
//! - `fg:{c}:q:unclaimed`— sorted set sequence → admission time (Unix ms) of admitted customers
//!   who have not claimed yet; entries older than `admission_ttl_seconds` are dropped.
//! - `fg:{c}:q:grants`   — sorted set `now_serving` → when it was reached (Unix ms): the grant
//!   timeline that fixes each admission's expiry (`QueueStatus::grants`). Steps within
//!   `admission_ttl_seconds / 64` of the newest point merge into it (larger `n`, its earlier
//!   time); points older than the TTL are dropped but the newest of them (the floor).
//! - `fg:{c}:q:present`, `reported`, `skipped`, `back` — presence and the tickets passed while
//!   away ([`super::presence`]); `fg:{c}:q:returned` — sorted set sequence → admission time
//!   (Unix ms) of the skipped tickets admitted after they came back, within the TTL;
//!   `fg:{c}:q:wave` — set once the gate was seen sold out: admissions from then on live
//!   `second_wave_admission_ttl_seconds` (when shorter).
//! - `fg:{c}:q:keys`     — sorted set of the arrival keys the edge issued (score = member = the
//!   key, above `EDGE_BLOCK`), walked in order after the arrivals ([`issued`]);
//!   `fg:{c}:q:issued` — how many tickets the edge reported issuing.
//! - `fg:{c}:q:who`, `holders` — whose ticket is whose, and the admission each customer holds
//!   ([`who`]): a ticket whose customer holds one, or won a claim with one, is passed as if
//!   away.
//! - `fg:{c}:q:used`     — set of the sequence numbers whose admission won a claim
//!   ([`mark_used`]): such a token admits no further claim.
//! - `fg:{c}:q:lease`    — the admitting origin's lease (`SET NX PX`).
//! - `fg:{c}:q:pace`     — the claims' pace: a token bucket (`milli` tokens in thousandths,
//!   `at` Redis time in ms) of `admit_per_second` tokens per second and one second's burst,
//!   shared by every origin ([`pace`]).

use std::sync::LazyLock;

use flashgate_shared::queue::keys::{ADMIT_LAG_MS, EDGE_BLOCK};
use flashgate_shared::queue::{
    coarsen_grants, sorted_returned, Grant, QueueStatus, WaitingRoom, MAX_GRANTS,
    MAX_SKIPPED_LISTED, RANDOM_BLOCK,
};
use redis::{AsyncCommands, Script};

use crate::gate::Keys as GateKeys;
use crate::redis_conn::RedisConn;

/// Redis keys of one campaign's waiting room.
pub struct Keys {
    pub open: String,
    pub seq: String,
    pub drawn: String,
    pub arrivals: String,
    pub serving: String,
    pub admitted: String,
    pub unclaimed: String,
    pub grants: String,
    pub lease: String,
    pub pace: String,
    pub present: String,
    pub reported: String,
    pub skipped: String,
    pub back: String,
    pub returned: String,
    pub wave: String,
    pub keys: String,
    pub issued: String,
    pub used: String,
    pub who: String,
    pub holders: String,
}

impl Keys {
    /// Keys of campaign `c`.
    pub fn of(c: &str) -> Self {
        let k = |s: &str| format!("fg:{{{c}}}:q:{s}");
        Keys {
            open: k("open"),
            seq: k("seq"),
            drawn: k("drawn"),
            arrivals: k("arrivals"),
            serving: k("serving"),
            admitted: k("admitted"),
            unclaimed: k("unclaimed"),
            grants: k("grants"),
            lease: k("lease"),
            pace: k("pace"),
            present: k("present"),
            reported: k("reported"),
            skipped: k("skipped"),
            back: k("back"),
            returned: k("returned"),
            wave: k("wave"),
            keys: k("keys"),
            issued: k("issued"),
            used: k("used"),
            who: k("who"),
            holders: k("holders"),
        }
    }
}

/// How a join draws its sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draw {
    /// Next arrival number, `RANDOM_BLOCK + n`.
    Arrival,
    /// At random in `(now_serving, RANDOM_BLOCK)`.
    Random,
}

pub mod issued;
mod places;
pub mod who;
pub use places::{join, Joined, Place};

/// Opens campaign `c`'s queue (idempotent: an open queue keeps its order).
pub async fn open(redis: &mut RedisConn, c: &str) -> redis::RedisResult<()> {
    let _: bool = redis.set_nx(Keys::of(c).open, 1).await?;
    Ok(())
}

// KEYS: open, lease, serving, admitted, drawn, arrivals, unclaimed, gate loaded, grants,
// present, reported, skipped, back, returned, wave, keys, who, holders, used. ARGV: lease holder,
// lease ms, budget, now ms, ttl ms, RANDOM_BLOCK, units left in the gate (all shards), presence
// window ms, second-wave ttl ms, most tickets the cursor may pass, EDGE_BLOCK, the newest
// arrival time (ms) the cursor may pass, who kept s. Returns the number admitted (>= 0), -1
// queue not open, -2 another origin holds the lease, -3 gate not loaded.
//
// A present ticket whose customer holds an admission (hers in `unclaimed`: neither used nor
// lapsed) or won a claim with one (hers in `used`: one claim per customer, so a second would
// only keep a unit from the next in line) is passed as an away one is: it joins the skipped
// ones (one seen again stays there).
//
// `admitted` counts the tickets the cursor passed (admitted, or skipped while away), so it
// still maps to sequence numbers (the k-th drawn number, then the arrivals, then the k-th
// arrival key: the join and the report of issued tickets never add below `serving`).
static ADVANCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local l = redis.call('GET', KEYS[2])
if l and l ~= ARGV[1] then return -2 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
if redis.call('EXISTS', KEYS[8]) == 0 then return -3 end
local now = tonumber(ARGV[4])
local gate_left = tonumber(ARGV[7])
if gate_left <= 0 then redis.call('SET', KEYS[15], 1) end
local ttl = tonumber(ARGV[5])
if redis.call('EXISTS', KEYS[15]) == 1 then ttl = math.min(ttl, tonumber(ARGV[9])) end
redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', now - ttl)
redis.call('ZREMRANGEBYSCORE', KEYS[14], '-inf', now - ttl)
local n = math.min(tonumber(ARGV[3]), gate_left - redis.call('ZCARD', KEYS[7]))
if n <= 0 then return 0 end
local done = 0
local since = now - tonumber(ARGV[8])
local all_present = tonumber(redis.call('GET', KEYS[11]) or now) > since
local function present(s)
  if all_present then return true end
  local seen = redis.call('ZSCORE', KEYS[10], s)
  return seen and tonumber(seen) >= since
end
local function holder(s)
  local f = redis.call('HGET', KEYS[17], s)
  if not f then return nil, false end
  local h = redis.call('HGET', KEYS[18], f)
  if not h or h == s then return f, false end
  return f, (redis.call('ZSCORE', KEYS[7], h) or redis.call('SISMEMBER', KEYS[19], h) == 1) and true or false
end
local function admit(s, f)
  redis.call('ZADD', KEYS[7], now, s)
  if f then
    redis.call('HSET', KEYS[18], f, s)
    redis.call('EXPIRE', KEYS[18], ARGV[13])
  end
  done = done + 1
end
for _, s in ipairs(redis.call('ZRANGE', KEYS[13], 0, n - 1)) do
  redis.call('ZREM', KEYS[13], s)
  if present(s) then
    local f, held = holder(s)
    if not held then
      redis.call('ZREM', KEYS[12], s)
      redis.call('ZADD', KEYS[14], now, s)
      admit(s, f)
    end
  end
end
local k = tonumber(redis.call('GET', KEYS[4]) or '0')
local p = redis.call('ZCARD', KEYS[5])
local a = tonumber(redis.call('GET', KEYS[6]) or '0')
local B = tonumber(ARGV[6])
local scan = tonumber(ARGV[10])
local e = redis.call('ZCARD', KEYS[16])
local E = tonumber(ARGV[11])
local newest = tonumber(ARGV[12])
local last
while done < n and k < p + a + e and scan > 0 do
  local s
  if k < p then s = redis.call('ZRANGE', KEYS[5], k, k)[1]
  elseif k < p + a then s = string.format('%.0f', B + (k - p) + 1)
  else
    s = redis.call('ZRANGE', KEYS[16], k - p - a, k - p - a)[1]
    if math.floor((tonumber(s) - E) / 1024) > newest then break end
  end
  k = k + 1
  scan = scan - 1
  last = s
  local here, f, held = present(s), nil, false
  if here then f, held = holder(s) end
  if here and not held then
    admit(s, f)
  else
    redis.call('ZADD', KEYS[12], s, s)
  end
end
if not last then return done end
redis.call('SET', KEYS[3], last)
redis.call('SET', KEYS[4], k)
local top = redis.call('ZRANGE', KEYS[9], -1, -1, 'WITHSCORES')
if top[2] and now - tonumber(top[2]) < ttl / 64 then
  redis.call('ZREM', KEYS[9], top[1])
  redis.call('ZADD', KEYS[9], top[2], last)
else
  redis.call('ZADD', KEYS[9], now, last)
end
local old = redis.call('ZCOUNT', KEYS[9], '-inf', '(' .. string.format('%.0f', now - ttl))
if old > 1 then redis.call('ZREMRANGEBYRANK', KEYS[9], 0, old - 2) end
return done
",
    )
});

/// Most tickets one admission step passes (admitted or skipped): bounds the step's work when
/// most of the line has left.
pub const MAX_PASSED_PER_STEP: u64 = 5_000;

/// How one step treats presence and the second wave (from the campaign's waiting room).
#[derive(Debug, Clone, Copy)]
pub struct StepRules {
    /// The admission TTL, ms.
    pub ttl_ms: u64,
    /// The admission TTL once the campaign has sold out once, ms (the shorter one applies).
    pub second_wave_ttl_ms: u64,
    /// A ticket not seen for this long is skipped, ms.
    pub window_ms: u64,
}

impl StepRules {
    /// The rules of waiting room `w`.
    pub fn of(w: &WaitingRoom) -> Self {
        StepRules {
            ttl_ms: u64::from(w.admission_ttl_seconds) * 1000,
            second_wave_ttl_ms: u64::from(w.second_wave_admission_ttl_seconds) * 1000,
            window_ms: u64::from(w.presence_window_seconds) * 1000,
        }
    }
}

/// What one admission step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advanced {
    /// This many customers were admitted (0: nobody waiting, no unit to spare, or no budget).
    Admitted(u64),
    /// The queue is not open in Redis: nobody is admitted (fail closed).
    NotOpen,
    /// Another origin holds the lease.
    NotLeader,
    /// The gate is not loaded: nobody is admitted until it is.
    GateNotLoaded,
}

/// Admits up to `budget` customers of campaign `c` in line order among those present (seen
/// within `rules.window_ms`; the skipped ones who came back first), never more than the gate's
/// remaining units minus the admitted-but-unclaimed customers (admitted within the TTL of
/// `rules`), when `holder` has (or takes) the lease for `lease_ms`. Tickets away, and those of
/// a customer who holds an admission already ([`who`]), are passed and kept in
/// `fg:{c}:q:skipped`.
pub async fn advance(
    redis: &mut crate::gate::Gate,
    c: &str,
    holder: &str,
    lease_ms: u64,
    budget: u64,
    now_ms: i64,
    rules: StepRules,
) -> redis::RedisResult<Advanced> {
    let k = Keys::of(c);
    let g = GateKeys::of(c);
    // The gate's units are spread over its shards (other slots than the queue's): their sum is
    // read first. It is only a bound for this step; the gate still decides every take.
    let left: i64 = crate::gate::shard_states(redis, c)
        .await?
        .iter()
        .map(|s| s.remaining)
        .sum();
    let n: i64 = ADVANCE
        .key(&k.open)
        .key(&k.lease)
        .key(&k.serving)
        .key(&k.admitted)
        .key(&k.drawn)
        .key(&k.arrivals)
        .key(&k.unclaimed)
        .key(&g.loaded)
        .key(&k.grants)
        .key(&k.present)
        .key(&k.reported)
        .key(&k.skipped)
        .key(&k.back)
        .key(&k.returned)
        .key(&k.wave)
        .key(&k.keys)
        .key(&k.who)
        .key(&k.holders)
        .key(&k.used)
        .arg(holder)
        .arg(lease_ms)
        .arg(budget)
        .arg(now_ms)
        .arg(rules.ttl_ms)
        .arg(RANDOM_BLOCK)
        .arg(left)
        .arg(rules.window_ms)
        .arg(rules.second_wave_ttl_ms)
        .arg(MAX_PASSED_PER_STEP)
        .arg(EDGE_BLOCK)
        .arg(now_ms.saturating_sub(ADMIT_LAG_MS))
        .arg(who::KEPT_S)
        .invoke_async(redis)
        .await?;
    Ok(match n {
        -1 => Advanced::NotOpen,
        -2 => Advanced::NotLeader,
        -3 => Advanced::GateNotLoaded,
        n => Advanced::Admitted(n.max(0) as u64),
    })
}

/// How long a used admission is remembered, in seconds: past any admission token's life
/// (`admission_ttl_seconds` is at most an hour), after which the token is refused as expired.
const USED_KEPT_SECONDS: i64 = 2 * 3600;

/// Marks the admission of sequence `seq` used (her claim went through): she no longer counts
/// as admitted-but-unclaimed, and the token admits no further claim ([`is_used`]).
pub async fn mark_used(redis: &mut RedisConn, c: &str, seq: u64) -> redis::RedisResult<()> {
    let k = Keys::of(c);
    let seq = seq.to_string();
    redis::pipe()
        .atomic()
        .zrem(&k.unclaimed, &seq)
        .ignore()
        .sadd(&k.used, &seq)
        .ignore()
        .expire(&k.used, USED_KEPT_SECONDS)
        .ignore()
        .query_async::<()>(redis)
        .await
}

/// True when the admission of sequence `seq` won a claim already ([`mark_used`]).
pub async fn is_used(redis: &mut RedisConn, c: &str, seq: u64) -> redis::RedisResult<bool> {
    redis.sismember(Keys::of(c).used, seq.to_string()).await
}

// KEYS: pace. ARGV: tokens per second (>= 1). Redis's own clock, so that every origin fills
// the same bucket at the same pace. Returns 0 when a token was taken, else the ms until the next.
static PACE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local rate = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local full = rate * 1000
local milli = tonumber(redis.call('HGET', KEYS[1], 'milli') or full)
local at = tonumber(redis.call('HGET', KEYS[1], 'at') or now)
if now > at then
  milli = math.min(full, milli + (now - at) * rate)
  at = now
end
local wait = 0
if milli >= 1000 then milli = milli - 1000 else wait = math.ceil((1000 - milli) / rate) end
redis.call('HSET', KEYS[1], 'milli', string.format('%.0f', milli), 'at', string.format('%.0f', at))
redis.call('PEXPIRE', KEYS[1], 60000)
return wait
",
    )
});

/// Takes one token of campaign `c`'s claim pace (`per_second` tokens per second, one second's
/// burst, one bucket for all origins): `Ok(0)` when taken, else `Ok(ms)` until the next one.
pub async fn pace(redis: &mut RedisConn, c: &str, per_second: u32) -> redis::RedisResult<u64> {
    PACE.key(Keys::of(c).pace)
        .arg(per_second.max(1))
        .invoke_async(redis)
        .await
}

/// The queue's live figures.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Figures {
    pub now_serving: u64,
    pub admitted: u64,
    pub drawn: u64,
    /// Customers who joined (at the origin, and as the edge reported).
    pub joined: u64,
    /// Admitted within the admission TTL and not yet claimed (entries older than the TTL are
    /// dropped by the next admission step, so this may count a few stale ones).
    pub unclaimed: u64,
    /// Admission times (Unix ms) of the oldest and the newest of the `unclaimed`; 0 when none.
    pub unclaimed_since_ms: (i64, i64),
    /// The grant timeline (`fg:{c}:q:grants`) in increasing `n`.
    pub grants: Vec<Grant>,
    /// The lowest skipped sequence numbers (at most [`MAX_SKIPPED_LISTED`]), increasing.
    pub skipped: Vec<u64>,
    /// Skipped tickets admitted after they came back (`fg:{c}:q:returned`), increasing `n`.
    pub returned: Vec<Grant>,
    /// True once the campaign was seen sold out (the second wave's TTL applies).
    pub second_wave: bool,
    /// The line: tickets waiting, and the marks of the edge's arrival keys.
    pub line: issued::Line,
}

/// Reads campaign `c`'s figures (one transaction on one slot: `now_serving` and `admitted`
/// always come from the same admission step, which the edge relies on to spread admissions
/// at the rate, see `edge-worker/src/reveal.rs`).
pub async fn figures(redis: &mut RedisConn, c: &str) -> redis::RedisResult<Figures> {
    let k = Keys::of(c);
    type Scored = Vec<(String, f64)>;
    // serving, admitted, drawn, joined, unclaimed, oldest, newest unclaimed, grant timeline,
    // skipped, returned, second wave.
    type Read = (
        Option<u64>,
        Option<u64>,
        u64,
        u64,
        u64,
        Scored,
        Scored,
        Vec<(u64, f64)>,
        Vec<u64>,
        Vec<(u64, f64)>,
        bool,
    );
    let (
        serving,
        admitted,
        drawn,
        joined,
        unclaimed,
        oldest,
        newest,
        grants,
        skipped,
        returned,
        second_wave,
    ): Read = redis::pipe()
        .atomic()
        .get(&k.serving)
        .get(&k.admitted)
        .zcard(&k.drawn)
        .hlen(&k.seq)
        .zcard(&k.unclaimed)
        .zrange_withscores(&k.unclaimed, 0, 0)
        .zrange_withscores(&k.unclaimed, -1, -1)
        .zrange_withscores(&k.grants, 0, -1)
        .zrange(&k.skipped, 0, MAX_SKIPPED_LISTED as isize - 1)
        .zrange_withscores(&k.returned, 0, -1)
        .exists(&k.wave)
        .query_async(redis)
        .await?;
    let at = |s: &Scored| s.first().map_or(0, |(_, ms)| *ms as i64);
    let mut grants: Vec<Grant> = grants
        .into_iter()
        .map(|(n, ms)| Grant {
            n,
            at_ms: ms as i64,
        })
        .collect();
    // Steps of one millisecond tie on the score; `n` orders them.
    grants.sort_by_key(|g| (g.n, g.at_ms));
    let line = issued::line(redis, c).await?;
    Ok(Figures {
        now_serving: serving.unwrap_or(0),
        admitted: admitted.unwrap_or(0),
        drawn,
        joined: joined + line.issued,
        unclaimed,
        unclaimed_since_ms: (at(&oldest), at(&newest)),
        grants,
        skipped,
        returned: sorted_returned(
            returned
                .into_iter()
                .map(|(n, ms)| Grant {
                    n,
                    at_ms: ms as i64,
                })
                .collect(),
        ),
        second_wave,
        line,
    })
}

impl Figures {
    /// The `queue` object of the public campaign status.
    pub fn status(&self, w: &WaitingRoom, paused: bool) -> QueueStatus {
        QueueStatus {
            now_serving: self.now_serving,
            admit_per_second: w.admit_per_second,
            admission_ttl_seconds: self.ttl_seconds(w),
            paused,
            admitted: self.admitted,
            drawn: self.drawn,
            unclaimed: self.unclaimed,
            first_lapse_ms: self.lapse_ms(self.unclaimed_since_ms.0, w),
            last_lapse_ms: self.lapse_ms(self.unclaimed_since_ms.1, w),
            grants: Some(coarsen_grants(&self.grants, MAX_GRANTS)),
            skipped: self.skipped.clone(),
            returned: self.returned.clone(),
            held_until: None,
            line: self.line.waiting,
            line_before_keys: self.line.before_keys,
            line_marks: self.line.marks.clone(),
            queueing: w.queueing,
            prequeue_seconds: w.prequeue_seconds,
            access: w.access(),
        }
    }

    /// The admission TTL in force, seconds: `second_wave_admission_ttl_seconds` once the
    /// campaign has sold out once, when shorter.
    pub fn ttl_seconds(&self, w: &WaitingRoom) -> u32 {
        if self.second_wave {
            w.admission_ttl_seconds
                .min(w.second_wave_admission_ttl_seconds)
        } else {
            w.admission_ttl_seconds
        }
    }

    /// When an admission at `admitted_ms` lapses under `w` (0 for none).
    fn lapse_ms(&self, admitted_ms: i64, w: &WaitingRoom) -> i64 {
        match admitted_ms {
            0 => 0,
            ms => ms.saturating_add(i64::from(self.ttl_seconds(w)) * 1000),
        }
    }
}
