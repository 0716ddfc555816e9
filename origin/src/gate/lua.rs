//! Every Lua script of the gate, in one place. Each script touches the keys of one slot (one
//! shard, see [`super::Keys::shard`]), so it runs atomically on one Redis or one Cluster node.
//!
//! "Set the sold-out flag with a new generation" is written once, in [`SOLD_OUT_FN`], and
//! every script that sets the flag starts with it. Scripts are only called through the
//! functions of [`super`]; `tests/tests/it/gate/scripts.rs` runs each of them against a real
//! Redis.

use redis::Script;
use std::sync::LazyLock;

/// The Lua function `sold_out(flag_key, generation_key)`: sets the sold-out flag unless it is
/// set, with a new generation (`INCR` of the generation key), and returns the flag's
/// generation as a string.
macro_rules! sold_out_fn {
    () => {
        r"
local function sold_out(flag, gen)
  local g = redis.call('GET', flag)
  if not g then
    g = redis.call('INCR', gen)
    redis.call('SET', flag, g)
  end
  return tostring(g)
end
"
    };
}

/// The shared sold-out-flag snippet, as Lua source (see the module documentation).
pub const SOLD_OUT_FN: &str = sold_out_fn!();

/// The Lua function `take(loaded, remaining, holders, pending, flag, gen, customer, token,
/// now, vremaining, vholders, variant)`: the take on the customer's own shard, shared by every
/// take script ([`TAKE`], [`BEGIN_TAKE`], [`TAKE_V`], [`BEGIN_TAKE_V`]). `flag` and `gen`
/// (sold_out, sold_out_gen) are given on a campaign of one shard only (nil otherwise). On a
/// campaign with variants, `vremaining` is the variant's counter of this shard, taken together
/// with the campaign's `remaining` (a unit is taken only when both have one), and her `variant`
/// is written to `vholders` (customer → variant) beside her holder, so a give-back returns the
/// unit to its variant; without variants the three are nil.
///
/// Returns `{'not_loaded'}`, `{'holds', holder}`, `{'taken'}`, or, when this shard is empty:
/// with the flag keys, `{'sold_out', generation}` (the flag is set; it is also set on the take
/// of the last unit), or `{'variant_sold_out'}` when only her variant is empty (no flag is set
/// then); without them, `{'empty'}` with her pending holder written all the same (her dedup
/// entry while the origin tries the other shards, see [`TAKE_UNIT`]), its pending score the
/// take time + 0.5: "no unit yet", so a correction does not count it as a unit
/// ([`super::correct`]); the origin sets it to the take time once another shard gave her one.
///
/// And the Lua function `begin(record, fingerprint, lifetime, ...)`, a claim's first step
/// ([`BEGIN_TAKE`], [`BEGIN_TAKE_V`]): `{'existing', record}` when her idempotency record for
/// this key exists (nothing else done); otherwise `take(...)`, and unless the gate is not
/// loaded the pending record `fingerprint \n pending` for `lifetime` seconds.
macro_rules! take_fn {
    () => {
        r"
local function take(loaded, remaining, holders, pending, flag, gen, customer, token, now, vremaining, vholders, variant)
  if redis.call('EXISTS', loaded) == 0 then return {'not_loaded'} end
  local h = redis.call('HGET', holders, customer)
  if h then return {'holds', h} end
  local r = tonumber(redis.call('GET', remaining) or '0')
  local v = 1
  if vremaining then v = tonumber(redis.call('GET', vremaining) or '0') end
  if r <= 0 and flag then return {'sold_out', sold_out(flag, gen)} end
  if v <= 0 and flag then return {'variant_sold_out'} end
  redis.call('HSET', holders, customer, token)
  if vholders then redis.call('HSET', vholders, customer, variant) end
  if r <= 0 or v <= 0 then
    redis.call('ZADD', pending, now .. '.5', customer)
    return {'empty'}
  end
  redis.call('ZADD', pending, now, customer)
  if vremaining then redis.call('DECR', vremaining) end
  r = redis.call('DECR', remaining)
  if r == 0 and flag then sold_out(flag, gen) end
  return {'taken'}
end

local function begin(record, fingerprint, lifetime, ...)
  local v = redis.call('GET', record)
  if v then return {'existing', v} end
  local out = take(...)
  if out[1] ~= 'not_loaded' then
    redis.call('SET', record, fingerprint .. '\npending', 'EX', lifetime)
  end
  return out
end
"
    };
}

/// A script of the gate's take: the Lua functions `sold_out`, `take` and `begin` (above), then
/// `call`, the script's own line that calls one of them with its KEYS and ARGV.
macro_rules! take_script {
    ($call:literal) => {
        LazyLock::new(|| Script::new(concat!(sold_out_fn!(), take_fn!(), $call)))
    };
}

/// The take on the customer's own shard (the Lua function `take` above).
///
/// KEYS: loaded, remaining, holders, pending, and — on a campaign of one shard only —
/// sold_out, sold_out_gen. ARGV: customer, pending token, take time (ms). Replies as `take`.
pub static TAKE: LazyLock<Script> = take_script!(
    "return take(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[1], ARGV[2], ARGV[3])"
);

/// A claim's first step, in one round trip: her idempotency record for this key, and when
/// there is none, the take (the Lua function `take` above) with a `pending` record written.
///
/// KEYS: the record (in her own shard's slot, [`super::Keys::idempotency`]), loaded,
/// remaining, holders, pending, and on a campaign of one shard sold_out, sold_out_gen. ARGV:
/// request fingerprint, pending record lifetime (s), customer, pending token, take time (ms).
///
/// Replies `{'existing', record}` (nothing else done), or the take's reply; the pending record
/// (`fingerprint \n pending`) is written unless the gate is not loaded.
pub static BEGIN_TAKE: LazyLock<Script> = take_script!(
    "return begin(KEYS[1], ARGV[1], ARGV[2], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[3], ARGV[4], ARGV[5])"
);

/// Takes one unit from another shard for a customer whose dedup entry is already written on
/// her own shard. KEYS: loaded, remaining, and on a campaign with variants her variant's
/// remaining (a unit is taken only when both have one). Replies 1 (taken), 0 (empty), -1 (not
/// loaded).
pub static TAKE_UNIT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local r = tonumber(redis.call('GET', KEYS[2]) or '0')
local v = 1
if KEYS[3] then v = tonumber(redis.call('GET', KEYS[3]) or '0') end
if r <= 0 or v <= 0 then return 0 end
redis.call('DECR', KEYS[2])
if KEYS[3] then redis.call('DECR', KEYS[3]) end
return 1
",
    )
});

/// Marks her take committed: the holder value becomes the claim id; with a third key, writes
/// her idempotency record in the same step. KEYS: holders, pending, and optionally the record
/// (same slot). ARGV: customer, pending token, claim id, and with the record its value and
/// lifetime (s). Replies 1 when her holder was the token (the record is written either way).
pub static CONFIRM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local ok = 0
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  redis.call('ZREM', KEYS[2], ARGV[1])
  ok = 1
end
if #KEYS >= 3 then redis.call('SET', KEYS[3], ARGV[4], 'EX', ARGV[5]) end
return ok
",
    )
});

/// The Lua function `move(loaded, remaining, flag, gen, delta, ceiling)`: **the one step that
/// changes a shard's count** outside a take. Every give-back, stock change, correction, audit
/// repair and load moves units through it ([`MOVE`], [`GIVE_BACK`], [`LOAD_SHARD`]).
///
/// Moves this shard's `remaining` by `delta`, keeping the takes in flight: a move down takes at
/// most what is there (never below zero); a move up never takes `remaining` above `ceiling`, the
/// bound the caller derived from PostgreSQL (its `remaining` for the campaign, less what the
/// other shards hold when it read them), and never lowers it (a gate already at or above the
/// bound is left as it is: lowering is the correction's job). `loaded` nil skips the loaded
/// check (the load, on a shard it unloaded itself). With `flag` and `gen` (a campaign of one
/// shard) the sold-out flag follows: cleared when units are left, set with a new generation when
/// none are. Returns `{remaining, moved}`, or `{-1, 0}` when the shard is not loaded.
macro_rules! move_fn {
    () => {
        r"
local function move(loaded, remaining, flag, gen, delta, ceiling)
  if loaded and redis.call('EXISTS', loaded) == 0 then return {-1, 0} end
  local was = tonumber(redis.call('GET', remaining) or '0')
  local r = was + delta
  if delta > 0 and r > ceiling then r = math.max(was, ceiling) end
  if r < 0 then r = 0 end
  redis.call('SET', remaining, r)
  if flag then
    if r > 0 then redis.call('DEL', flag) else sold_out(flag, gen) end
  end
  return {r, r - was}
end
"
    };
}

/// Gives her unit back when her holder value is ARGV[2], through `move` (above) bounded by
/// ARGV[5]. KEYS: holders, pending, remaining, loaded, and on a campaign of one shard sold_out,
/// sold_out_gen (the flag follows). ARGV: customer, expected holder, replacement ('' drops the
/// holder), units to return (1, or 0 to only undo a dedup entry), ceiling (PostgreSQL's bound
/// for this shard's `remaining`). Replies `{1, moved}` when the holder matched (moved 0 when
/// the ceiling cut the return), else `{0, 0}`. Exactly once: a second call finds the holder
/// changed.
pub static GIVE_BACK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        sold_out_fn!(),
        move_fn!(),
        r"
if redis.call('EXISTS', KEYS[4]) == 0 then return {0, 0} end
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return {0, 0} end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
redis.call('ZREM', KEYS[2], ARGV[1])
local n = tonumber(ARGV[4])
if n <= 0 then return {1, 0} end
local out = move(KEYS[4], KEYS[3], KEYS[5], KEYS[6], n, tonumber(ARGV[5]))
return {1, out[2]}
"
    ))
});

/// Moves this shard's remaining by ARGV[1] through `move` (above), bounded by ARGV[2] (a stock
/// change, a correction, an audit repair). KEYS: loaded, remaining, and on a campaign of one
/// shard sold_out, sold_out_gen. Replies `{remaining, moved}`, or `{-1, 0}` when not loaded.
pub static MOVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        sold_out_fn!(),
        move_fn!(),
        "return move(KEYS[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[1]), tonumber(ARGV[2]))"
    ))
});

/// A shard's count at a load, through `move` (above) from zero up to its part of PostgreSQL's
/// `remaining` (ARGV[1], which is also the bound), on a shard the load has unloaded (for `EVAL`
/// in the load's transaction). KEYS: remaining.
pub const LOAD_SHARD: &str = concat!(
    sold_out_fn!(),
    move_fn!(),
    r"
redis.call('SET', KEYS[1], 0)
return move(nil, KEYS[1], nil, nil, tonumber(ARGV[1]), tonumber(ARGV[1]))
"
);

/// The campaign-wide sold-out flag of a campaign of several shards (keys of shard 0). KEYS:
/// sold_out, sold_out_gen, returned. ARGV[1] = 'set' sets the flag when the return count is
/// still ARGV[2] ('' = whatever it is), and replies `{'set', generation}` or `{'moved'}` (a
/// unit came back meanwhile); 'clear' counts a return and clears the flag, replies `{'clear'}`.
pub static FLAG: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        sold_out_fn!(),
        r"
local n = redis.call('GET', KEYS[3]) or '0'
if ARGV[1] == 'clear' then
  redis.call('INCR', KEYS[3])
  redis.call('DEL', KEYS[1])
  return {'clear'}
end
if ARGV[2] ~= '' and ARGV[2] ~= n then return {'moved'} end
return {'set', sold_out(KEYS[1], KEYS[2])}
"
    ))
});

/// Frees a lock only if it is still ours. KEYS: lock. ARGV: token. Replies 1 when freed.
pub static UNLOCK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    )
});

/// Sets the sold-out flag unless set (for `EVAL` in a pipeline). KEYS: sold_out,
/// sold_out_gen. Replies the generation.
pub const SET_SOLD_OUT: &str = concat!(sold_out_fn!(), "return sold_out(KEYS[1], KEYS[2])");

/// A claim's first step on a campaign with variants: [`BEGIN_TAKE`] with the variant's keys.
///
/// KEYS: the record, loaded, remaining, holders, pending, the variant's remaining, vholders,
/// and on a campaign of one shard sold_out, sold_out_gen. ARGV: request fingerprint, pending
/// record lifetime (s), customer, pending token, take time (ms), variant id.
pub static BEGIN_TAKE_V: LazyLock<Script> = take_script!(
    "return begin(KEYS[1], ARGV[1], ARGV[2], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[8], KEYS[9], ARGV[3], ARGV[4], ARGV[5], KEYS[6], KEYS[7], ARGV[6])"
);

/// The take of a variant's unit without a record ([`TAKE`] with the variant's keys). KEYS: loaded,
/// remaining, holders, pending, the variant's remaining, vholders, and on a campaign of one
/// shard sold_out, sold_out_gen. ARGV: customer, pending token, take time (ms), variant id.
pub static TAKE_V: LazyLock<Script> = take_script!(
    "return take(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[7], KEYS[8], ARGV[1], ARGV[2], ARGV[3], KEYS[5], KEYS[6], ARGV[4])"
);

/// [`GIVE_BACK`] for a unit of a variant: the campaign's count and the variant's both move
/// (each through `move`, bounded by ARGV[5]), and her variant entry goes with her holder.
/// KEYS: holders, pending, remaining, loaded, the variant's remaining, vholders, and on a
/// campaign of one shard sold_out, sold_out_gen. ARGV as [`GIVE_BACK`]. Replies as it.
pub static GIVE_BACK_V: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        sold_out_fn!(),
        move_fn!(),
        r"
if redis.call('EXISTS', KEYS[4]) == 0 then return {0, 0} end
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return {0, 0} end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[6], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
redis.call('ZREM', KEYS[2], ARGV[1])
local n = tonumber(ARGV[4])
if n <= 0 then return {1, 0} end
move(KEYS[4], KEYS[5], nil, nil, n, tonumber(ARGV[5]))
local out = move(KEYS[4], KEYS[3], KEYS[7], KEYS[8], n, tonumber(ARGV[5]))
return {1, out[2]}
"
    ))
});
