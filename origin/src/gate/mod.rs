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
//! - `fg:{c}:idem:<len>:<customer>:<key>` — the idempotency record of a claim with that key
//!   ([`crate::idempotency`]), on the customer's own shard, so the record and the take are one
//!   script ([`begin_take`]) and the commit's confirmation and the record one more
//!   ([`confirm`]).
//!
//! - `fg:{c}:v:<variant>:remaining` — on a campaign with variants, the units of that variant
//!   on this shard (the campaign's `remaining` of the shard is the sum of its variants'), and
//!   `fg:{c}:holder_variants`, hash customer → the variant of her holder ([`variants`]).
//!
//! PostgreSQL is the truth: every unit the gate hands out is only won once the claim commits
//! under a conditional decrement of `campaigns.remaining`. When the two disagree, the gate is
//! corrected toward PostgreSQL.

pub mod correct;
pub mod flags;
mod give_back;
mod handle;
pub mod load;
pub mod loader;
pub mod lua;
pub mod readiness;
mod shards;
pub mod takes;
pub mod variants;

use lua::{BEGIN_TAKE, CONFIRM, FLAG, TAKE, TAKE_UNIT};
use rand::Rng;

pub use correct::{adjust, correct_down, lock_changes, pg_remaining, ChangeLock};
pub(crate) use give_back::replace_holder;
pub use give_back::{give_back, give_back_bounded};
pub use handle::Gate;
pub use shards::{
    bucket, holder, holders, holders_of, shard_count, shard_states, split, winners, Holders,
    ShardState, MAX_GATE_SHARDS,
};

/// The Redis keys of one shard of a campaign's gate.
pub struct Keys {
    pub loaded: String,
    pub loading: String,
    pub remaining: String,
    pub holders: String,
    pub pending: String,
    pub sold_out: String,
    pub sold_out_gen: String,
    /// Shard 0 only: the campaign's number of shards.
    pub shards: String,
    /// Shard 0 only: the change lock, held by a correction or a stock change
    /// ([`correct::lock_changes`]).
    pub changing: String,
    /// Shard 0 only: units returned so far on a campaign of several shards (a take that found
    /// every shard empty sets the flag only if no unit came back meanwhile).
    pub returned: String,
    /// Shard 0 only: the shortfall of the gate against PostgreSQL the last audit saw
    /// ([`audit`]), kept for a few seconds.
    pub audit_deficit: String,
    /// Shard 0 only: the gate audit's record of what it repaired on this campaign, a hash of
    /// counts (`lowered`, `raised`, `holders_dropped`, `holders_restored`) and
    /// `last_repair_at` (RFC 3339 UTC), read by reconciliation (`crate::repair::audit::repairs`).
    pub audit_repairs: String,
    /// On a campaign with variants: hash customer → the variant of her holder.
    pub holder_variants: String,
    /// `fg:{tag}:`, the prefix of every key of this shard.
    prefix: String,
}

impl Keys {
    /// Keys of campaign `c` (its shard 0: the keys of a campaign of one shard).
    pub fn of(c: &str) -> Self {
        Self::shard(c, 0)
    }

    /// Keys of shard `s` of campaign `c`: hash tag `{c}` for shard 0, `{c:s}` for the others,
    /// so each shard is its own Redis Cluster slot.
    pub fn shard(c: &str, s: u16) -> Self {
        let tag = if s == 0 {
            c.to_string()
        } else {
            format!("{c}:{s}")
        };
        let prefix = format!("fg:{{{tag}}}:");
        // Built by hand, not with `format!`: a claim builds its shard's keys once, the audit
        // every shard's each pass, and the formatting machinery (a growing buffer per key) was
        // most of the cost.
        let k = |name: &str| {
            let mut key = String::with_capacity(prefix.len() + name.len());
            key.push_str(&prefix);
            key.push_str(name);
            key
        };
        Keys {
            loaded: k("loaded"),
            loading: k("loading"),
            remaining: k("remaining"),
            holders: k("holders"),
            pending: k("pending"),
            sold_out: k("sold_out"),
            sold_out_gen: k("sold_out_gen"),
            shards: k("shards"),
            changing: k("changing"),
            returned: k("returned"),
            audit_deficit: k("audit_deficit"),
            audit_repairs: k("audit_repairs"),
            holder_variants: k("holder_variants"),
            prefix,
        }
    }

    /// The key of this shard's count of variant `v` (a campaign with variants).
    pub fn variant(&self, v: &str) -> String {
        format!("{}v:{v}:remaining", self.prefix)
    }

    /// The key of `customer`'s idempotency record for claims with `key`, in this shard's slot
    /// (use her own shard, [`bucket`]). Length-prefixed so that no (customer, key) pair can
    /// collide with another.
    pub fn idempotency(&self, customer: &str, key: &str) -> String {
        format!("{}idem:{}:{customer}:{key}", self.prefix, customer.len())
    }
}

/// Prefix of a holder value that marks a take not yet committed.
pub const PENDING_PREFIX: &str = "p:";

/// What the take step decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// A unit was taken for the customer; commit the claim, then [`confirm`] or [`give_back`].
    Taken,
    /// No unit left on any shard; the flag is set with this generation.
    SoldOut { generation: i64 },
    /// The customer already holds a unit: a claim id, or `p:<token>` while it commits.
    AlreadyHolds(String),
    /// The gate is not loaded (Redis lost its state); answer 503 and reload.
    NotLoaded,
    /// The variant asked for has no unit left while others do (a campaign with variants); no
    /// flag is set.
    VariantSoldOut,
}

/// A fresh pending token for a take (`p:` + random hex).
pub fn pending_token() -> String {
    format!("{PENDING_PREFIX}{:016x}", rand::random::<u64>())
}

/// A customer's own shard of a campaign ([`bucket`]): its keys and the campaign's shard count.
/// A claim finds it once ([`own_shard`]) and passes it to each of its steps.
pub struct OwnShard {
    /// The campaign's number of shards.
    pub count: u16,
    /// The keys of her shard.
    pub keys: Keys,
}

/// The keys of `customer`'s own shard and the shard count; `None` when not loaded. Needs Redis
/// only the first time this handle meets campaign `c` ([`shard_count`]).
pub async fn own_shard(
    redis: &mut Gate,
    c: &str,
    customer: &str,
) -> redis::RedisResult<Option<OwnShard>> {
    Ok(shard_count(redis, c).await?.map(|count| OwnShard {
        count,
        keys: Keys::shard(c, bucket(customer, count)),
    }))
}

fn parse_generation(out: &[String], at: usize) -> i64 {
    out.get(at).and_then(|g| g.parse().ok()).unwrap_or(0)
}

/// The atomic take step for `customer` on campaign `c`; `token` marks her pending holder.
///
/// On a campaign of one shard this is one script. With several, her dedup entry (the pending
/// holder) is written on her own shard ([`bucket`]) together with a take there; when that
/// shard is empty the take goes on at a random shard, then a second random start followed by a
/// sweep of every shard, so `sold_out` comes only when every shard was found empty (then her
/// dedup entry is undone before the answer).
pub async fn take(
    redis: &mut Gate,
    c: &str,
    customer: &str,
    token: &str,
) -> redis::RedisResult<Take> {
    take_with(redis, c, customer, token, None).await
}

/// [`take`], of a unit of `variant` when given (a campaign with variants, [`variants`]):
/// [`Take::VariantSoldOut`] then when the variant has no unit left while the campaign has.
pub async fn take_with(
    redis: &mut Gate,
    c: &str,
    customer: &str,
    token: &str,
    variant: Option<&str>,
) -> redis::RedisResult<Take> {
    let Some(OwnShard { count: n, keys: k }) = own_shard(redis, c, customer).await? else {
        return Ok(Take::NotLoaded);
    };
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut inv = match variant {
        Some(v) => {
            let mut inv = lua::TAKE_V.prepare_invoke();
            variants::take_keys(&mut inv, &k, n, v);
            inv
        }
        None => {
            let mut inv = TAKE.prepare_invoke();
            take_keys(&mut inv, &k, n);
            inv
        }
    };
    inv.arg(customer).arg(token).arg(now_ms);
    if let Some(v) = variant {
        inv.arg(v);
    }
    let out: Vec<Vec<u8>> = inv.invoke_async(redis).await?;
    took(redis, c, n, &k, customer, token, now_ms, &out, variant).await
}

/// Adds the keys of a take on her own shard `k` (of `n`) to `inv`: loaded, remaining, holders,
/// pending, and on a campaign of one shard the flag's two keys ([`lua::TAKE`]).
fn take_keys(inv: &mut redis::ScriptInvocation<'_>, k: &Keys, n: u16) {
    inv.key(&k.loaded)
        .key(&k.remaining)
        .key(&k.holders)
        .key(&k.pending);
    if n == 1 {
        inv.key(&k.sold_out).key(&k.sold_out_gen);
    }
}

/// What [`begin_take`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begun {
    /// Her idempotency record for this key was there (its raw value); nothing was taken.
    Existing(Vec<u8>),
    /// There was none: a `pending` record was written (unless [`Take::NotLoaded`]) and the
    /// take ran, as [`take`].
    Took(Take),
}

/// A claim's idempotency begin and the take, in one script ([`lua::BEGIN_TAKE`]; on a
/// campaign of several shards, further steps only when her own shard is empty). The record is
/// `fingerprint \n pending` under [`Keys::idempotency`] of her own shard `own` ([`own_shard`]),
/// living `pending_ttl_seconds`.
#[allow(clippy::too_many_arguments)]
pub async fn begin_take(
    redis: &mut Gate,
    c: &str,
    own: &OwnShard,
    customer: &str,
    token: &str,
    key: &str,
    fingerprint: &str,
    pending_ttl_seconds: u64,
) -> redis::RedisResult<Begun> {
    let begin = (key, fingerprint, pending_ttl_seconds);
    begin_take_with(redis, c, own, customer, token, begin, None).await
}

/// [`begin_take`] (`begin`: the key, the fingerprint and the pending record's lifetime), of a
/// unit of `variant` when given, as [`take_with`].
pub async fn begin_take_with(
    redis: &mut Gate,
    c: &str,
    own: &OwnShard,
    customer: &str,
    token: &str,
    (key, fingerprint, pending_ttl_seconds): (&str, &str, u64),
    variant: Option<&str>,
) -> redis::RedisResult<Begun> {
    let (n, k) = (own.count, &own.keys);
    let now_ms = chrono::Utc::now().timestamp_millis();
    let record = k.idempotency(customer, key);
    let mut inv = match variant {
        Some(v) => {
            let mut inv = lua::BEGIN_TAKE_V.key(record);
            variants::take_keys(&mut inv, k, n, v);
            inv
        }
        None => {
            let mut inv = BEGIN_TAKE.key(record);
            take_keys(&mut inv, k, n);
            inv
        }
    };
    inv.arg(fingerprint)
        .arg(pending_ttl_seconds)
        .arg(customer)
        .arg(token)
        .arg(now_ms);
    if let Some(v) = variant {
        inv.arg(v);
    }
    let out: Vec<Vec<u8>> = inv.invoke_async(redis).await?;
    if out.first().map(Vec::as_slice) == Some(b"existing".as_slice()) {
        return Ok(Begun::Existing(out.get(1).cloned().unwrap_or_default()));
    }
    Ok(Begun::Took(
        took(redis, c, n, k, customer, token, now_ms, &out, variant).await?,
    ))
}

/// The take's reply `out` on her own shard `k` (of `n`), finished on the other shards when
/// hers was empty (of `variant`'s units, when given).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn took(
    redis: &mut Gate,
    c: &str,
    n: u16,
    k: &Keys,
    customer: &str,
    token: &str,
    now_ms: i64,
    out: &[Vec<u8>],
    variant: Option<&str>,
) -> redis::RedisResult<Take> {
    let text = |at: usize| {
        out.get(at)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default()
    };
    Ok(match out.first().map(Vec::as_slice) {
        Some(b"taken") => Take::Taken,
        Some(b"sold_out") => Take::SoldOut {
            generation: text(1).parse().unwrap_or(0),
        },
        Some(b"holds") => Take::AlreadyHolds(text(1)),
        Some(b"variant_sold_out") => Take::VariantSoldOut,
        Some(b"empty") => match match variant {
            Some(v) => variants::take_elsewhere(redis, c, n, v).await?,
            None => take_elsewhere(redis, c, n).await?,
        } {
            Elsewhere::Taken => {
                // Her pending entry now stands for a unit (see [`lua::TAKE`]).
                let _: i64 = redis::cmd("ZADD")
                    .arg(&k.pending)
                    .arg("XX")
                    .arg(now_ms)
                    .arg(customer)
                    .query_async(redis)
                    .await?;
                Take::Taken
            }
            Elsewhere::NotLoaded => {
                undo_dedup(redis, k, customer, token).await?;
                Take::NotLoaded
            }
            Elsewhere::SoldOut(generation) => {
                undo_dedup(redis, k, customer, token).await?;
                Take::SoldOut { generation }
            }
            Elsewhere::VariantSoldOut => {
                undo_dedup(redis, k, customer, token).await?;
                Take::VariantSoldOut
            }
        },
        _ => Take::NotLoaded,
    })
}

pub(crate) enum Elsewhere {
    Taken,
    SoldOut(i64),
    NotLoaded,
    /// Every shard was empty of the variant, not of the campaign.
    VariantSoldOut,
}

/// The flag of a campaign of several shards: `(returns so far, generation when set)`.
async fn read_flag(redis: &mut Gate, c: &str) -> redis::RedisResult<(String, Option<i64>)> {
    let k = Keys::of(c);
    let (count, generation): (String, Option<i64>) = redis::pipe()
        .get(&k.returned)
        .get(&k.sold_out)
        .query_async::<(Option<String>, Option<i64>)>(redis)
        .await
        .map(|(n, g)| (n.unwrap_or_else(|| "0".into()), g))?;
    Ok((count, generation))
}

/// Sets the flag of a campaign of several shards, if no unit came back since `returns` was
/// read (`None`: whatever came back). Returns its generation, `None` when a unit came back.
pub(crate) async fn set_flag(
    redis: &mut Gate,
    c: &str,
    returns: Option<&str>,
) -> redis::RedisResult<Option<i64>> {
    let out = flag_op(redis, c, "set", returns.unwrap_or("")).await?;
    Ok((out.first().map(String::as_str) == Some("set")).then(|| parse_generation(&out, 1)))
}

/// Clears the flag of a campaign of several shards (a unit came back).
pub(crate) async fn clear_flag(redis: &mut Gate, c: &str) -> redis::RedisResult<()> {
    flag_op(redis, c, "clear", "").await.map(|_| ())
}

/// Runs [`FLAG`] with operation `op` on the keys of shard 0 of `c`.
async fn flag_op(
    redis: &mut Gate,
    c: &str,
    op: &str,
    arg: &str,
) -> redis::RedisResult<Vec<String>> {
    let k = Keys::of(c);
    FLAG.key(&k.sold_out)
        .key(&k.sold_out_gen)
        .key(&k.returned)
        .arg(op)
        .arg(arg)
        .invoke_async(redis)
        .await
}

/// Her own shard was empty: tries the others (bounded: a random shard, a second random start,
/// then a sweep from it), and sets the flag when every shard is empty.
async fn take_elsewhere(redis: &mut Gate, c: &str, n: u16) -> redis::RedisResult<Elsewhere> {
    let (returns, flagged) = read_flag(redis, c).await?;
    if let Some(generation) = flagged {
        return Ok(Elsewhere::SoldOut(generation));
    }
    for round in 0..2 {
        if let Some(found) = sweep(redis, c, n, None).await? {
            return Ok(found);
        }
        // Every shard was empty: the flag, unless a unit came back during the sweep (then
        // sweep once more; after that, set it whatever came back).
        let expect = (round == 0).then_some(returns.as_str());
        if let Some(generation) = set_flag(redis, c, expect).await? {
            return Ok(Elsewhere::SoldOut(generation));
        }
    }
    Ok(Elsewhere::SoldOut(
        set_flag(redis, c, None).await?.unwrap_or(0),
    ))
}

/// One try at a unit on the other shards of `c` (of `n`): a random shard, then a sweep of
/// every shard from a second random start, of `variant`'s units when given ([`TAKE_UNIT`]).
/// `None` when every shard was empty.
pub(crate) async fn sweep(
    redis: &mut Gate,
    c: &str,
    n: u16,
    variant: Option<&str>,
) -> redis::RedisResult<Option<Elsewhere>> {
    let (first, second) = {
        let mut rng = rand::rng();
        (rng.random_range(0..n), rng.random_range(0..n))
    };
    let order = std::iter::once(first).chain((0..n).map(|i| (second + i) % n));
    for s in order {
        let k = Keys::shard(c, s);
        let mut take = TAKE_UNIT.key(&k.loaded);
        take.key(&k.remaining);
        if let Some(v) = variant {
            take.key(k.variant(v));
        }
        let got: i64 = take.invoke_async(redis).await?;
        match got {
            1 => return Ok(Some(Elsewhere::Taken)),
            -1 => return Ok(Some(Elsewhere::NotLoaded)),
            _ => {}
        }
    }
    Ok(None)
}

/// Undoes her dedup entry (pending holder `token`) on her own shard, returning no unit.
async fn undo_dedup(
    redis: &mut Gate,
    k: &Keys,
    customer: &str,
    token: &str,
) -> redis::RedisResult<()> {
    replace_holder(redis, k, customer, token, None)
        .await
        .map(|_| ())
}

/// A value to write under a key of the same slot in the same script: the key, the value and
/// its lifetime in seconds.
pub type Record<'a> = (&'a str, &'a [u8], u64);

/// Marks her pending take `token` as committed claim `claim_id`; `record`, when given, is
/// written in the same script (her idempotency record under [`Keys::idempotency`] of her own
/// shard: [`record_key`]). Returns whether her holder was still `token`.
pub async fn confirm(
    redis: &mut Gate,
    c: &str,
    customer: &str,
    token: &str,
    claim_id: &str,
    record: Option<Record<'_>>,
) -> redis::RedisResult<bool> {
    let Some(own) = own_shard(redis, c, customer).await? else {
        return Ok(false);
    };
    confirm_on(redis, &own.keys, customer, token, claim_id, record).await
}

/// [`confirm`] on her own shard's keys `k`, already known ([`own_shard`]).
pub async fn confirm_on(
    redis: &mut Gate,
    k: &Keys,
    customer: &str,
    token: &str,
    claim_id: &str,
    record: Option<Record<'_>>,
) -> redis::RedisResult<bool> {
    let mut inv = CONFIRM.key(&k.holders);
    inv.key(&k.pending).arg(customer).arg(token).arg(claim_id);
    if let Some((key, value, ttl)) = record {
        inv.key(key).arg(value).arg(ttl);
    }
    let ok: i64 = inv.invoke_async(redis).await?;
    Ok(ok == 1)
}

/// The key of `customer`'s idempotency record for claims on `c` with `key`
/// ([`Keys::idempotency`] of her own shard); `None` when the gate is not loaded.
pub async fn record_key(
    redis: &mut Gate,
    c: &str,
    customer: &str,
    key: &str,
) -> redis::RedisResult<Option<String>> {
    Ok(own_shard(redis, c, customer)
        .await?
        .map(|own| own.keys.idempotency(customer, key)))
}
