//! The gate of a campaign with variants (sizes, colours).
//!
//! Each variant has its own count on every shard (`fg:{c}:v:<variant>:remaining`, its stock
//! split over the shards as a campaign's is), and the shard's campaign count
//! (`fg:{c}:remaining`) is the sum of its variants' counts. A take of a variant takes one unit
//! of both in one script, so the campaign's count, its sold-out flag, the corrections and the
//! audit work as on a campaign without variants. There is **one holder set per campaign**: a
//! customer holding a unit of any variant holds the campaign, so a second claim on another
//! variant finds her holder and is `already_claimed`. Beside her holder, her variant is kept
//! (`holder_variants`), so a give-back ([`super::give_back`]) returns the unit to its variant.
//! The takes themselves are [`super::take_with`] and [`super::begin_take_with`].

use super::lua::MOVE;
use super::{set_flag, Elsewhere, Gate, Keys};

/// Adds the keys of a variant take on her own shard `k` (of `n`) to `inv` (after the record,
/// when there is one): loaded, remaining, holders, pending, the variant's count, her variant
/// entry, and on a campaign of one shard the flag's two keys ([`super::lua::TAKE_V`]).
pub(crate) fn take_keys(inv: &mut redis::ScriptInvocation<'_>, k: &Keys, n: u16, variant: &str) {
    inv.key(&k.loaded)
        .key(&k.remaining)
        .key(&k.holders)
        .key(&k.pending)
        .key(k.variant(variant))
        .key(&k.holder_variants);
    if n == 1 {
        inv.key(&k.sold_out).key(&k.sold_out_gen);
    }
}

/// Her own shard had no unit of `variant`: tries the others (a random shard, then a sweep from
/// a second random start). When every shard is empty of the variant, the campaign is sold out
/// only if every shard is empty of it too (then the flag is set as on a campaign without
/// variants); otherwise only the variant is.
pub(crate) async fn take_elsewhere(
    redis: &mut Gate,
    c: &str,
    n: u16,
    variant: &str,
) -> redis::RedisResult<Elsewhere> {
    if let Some(found) = super::sweep(redis, c, n, Some(variant)).await? {
        return Ok(found);
    }
    let mut left = 0i64;
    for s in 0..n {
        let r: Option<i64> = redis::cmd("GET")
            .arg(Keys::shard(c, s).remaining)
            .query_async(redis)
            .await?;
        left += r.unwrap_or(0).max(0);
    }
    if left > 0 {
        return Ok(Elsewhere::VariantSoldOut);
    }
    Ok(match set_flag(redis, c, None).await? {
        Some(generation) => Elsewhere::SoldOut(generation),
        None => Elsewhere::VariantSoldOut,
    })
}

/// PostgreSQL refused a take of `variant` the gate allowed: when PostgreSQL has no unit of it
/// left (`pg_remaining` read after the refusal), every shard's count of the variant goes to
/// zero (through the gate's bounded move), so the next claims on it are answered by the gate.
/// Returns the units removed.
pub async fn correct_variant(
    redis: &mut Gate,
    c: &str,
    variant: &str,
    pg_remaining: i64,
) -> redis::RedisResult<i64> {
    if pg_remaining > 0 {
        return Ok(0);
    }
    let Some(n) = super::shard_count(redis, c).await? else {
        return Ok(0);
    };
    let mut removed = 0;
    for s in 0..n {
        let k = Keys::shard(c, s);
        let (_, moved): (i64, i64) = MOVE
            .key(&k.loaded)
            .key(k.variant(variant))
            .arg(i64::MIN / 4)
            .arg(0)
            .invoke_async(redis)
            .await?;
        removed -= moved;
    }
    Ok(removed)
}

/// A committed change of variant `v`'s stock by `delta` units, applied to the gate (under the
/// campaign's change lock, [`super::lock_changes`]): units added go to shard 0's count of the
/// variant and of the campaign, bounded by PostgreSQL's `remaining` of each (`pg_variant`,
/// `pg_campaign`, read after the commit); units removed come off the shards that have them,
/// the campaign's count with the variant's. Returns false when the gate is not loaded (its
/// next load reads the change from PostgreSQL).
pub async fn adjust(
    redis: &mut Gate,
    c: &str,
    v: &str,
    delta: i64,
    pg_variant: i64,
    pg_campaign: i64,
) -> redis::RedisResult<bool> {
    let Some(n) = super::shard_count(redis, c).await? else {
        return Ok(false);
    };
    let mut left = delta;
    for s in 0..n {
        if left == 0 {
            break;
        }
        let k = Keys::shard(c, s);
        let (r, moved): (i64, i64) = MOVE
            .key(&k.loaded)
            .key(k.variant(v))
            .arg(left)
            .arg(pg_variant)
            .invoke_async(redis)
            .await?;
        if r < 0 {
            return Ok(false);
        }
        if moved != 0 {
            let mut inv = MOVE.key(&k.loaded);
            inv.key(&k.remaining);
            if n == 1 {
                inv.key(&k.sold_out).key(&k.sold_out_gen);
            }
            let _: (i64, i64) = inv.arg(moved).arg(pg_campaign).invoke_async(redis).await?;
        }
        left -= moved;
        if delta > 0 {
            break;
        }
    }
    if n > 1 {
        if delta > 0 {
            super::clear_flag(redis, c).await?;
        } else if pg_campaign <= 0 {
            set_flag(redis, c, None).await?;
        }
    }
    Ok(true)
}

/// Each shard's part of every variant's `remaining` (`variants`: id and PostgreSQL's
/// remaining), spread over the `n` shards as [`super::split`] spreads a campaign's, each
/// variant starting at another shard so the extra units are spread too. Returns the parts by
/// shard (variant id, units) and each shard's sum (its campaign count).
pub fn spread(variants: &[(String, i64)], n: u16) -> (Vec<Vec<(String, i64)>>, Vec<i64>) {
    let n = n.max(1);
    let mut parts = vec![Vec::with_capacity(variants.len()); usize::from(n)];
    let mut sums = vec![0i64; usize::from(n)];
    for (i, (id, remaining)) in variants.iter().enumerate() {
        let split = super::split(*remaining, n);
        let offset = i % usize::from(n);
        for (s, part) in parts.iter_mut().enumerate() {
            let units = split[(s + usize::from(n) - offset) % usize::from(n)];
            part.push((id.clone(), units));
            sums[s] += units;
        }
    }
    (parts, sums)
}

/// Reads one shard's counts at once: KEYS remaining, pending, holder_variants, then each
/// variant's remaining. Replies `{campaign count, {variant counts in KEYS order}, {customer,
/// variant, …}}`, the pairs being the takes not yet committed that hold a unit (an integer
/// score; a fraction is a take still looking for a unit on another shard, see
/// [`super::lua::TAKE`]), with her variant (`''` when none is kept).
static READ_SHARD: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        r"
local r = tonumber(redis.call('GET', KEYS[1]) or '0')
local counts = {}
for i = 4, #KEYS do counts[#counts + 1] = tonumber(redis.call('GET', KEYS[i]) or '0') end
local p = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
local pend = {}
for i = 1, #p, 2 do
  local t = tonumber(p[i + 1])
  if math.floor(t) == t then
    pend[#pend + 1] = p[i]
    pend[#pend + 1] = redis.call('HGET', KEYS[3], p[i]) or ''
  end
end
return {r, counts, pend}
",
    )
});

/// One shard of a campaign with variants as read at once ([`read_shard`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardRead {
    /// The shard's campaign count.
    pub campaign: i64,
    /// The shard's count of each variant, in the order asked.
    pub variants: Vec<i64>,
    /// Takes not yet committed holding a unit of this shard: (customer, variant).
    pub pending: Vec<(String, String)>,
}

impl ShardRead {
    /// The shard's campaign count less the sum of its variants' counts: 0 on a sound gate
    /// (every take, give-back and change moves both together).
    pub fn apart(&self) -> i64 {
        self.campaign - self.variants.iter().sum::<i64>()
    }
}

/// Reads shard `s` of campaign `c` for variants `ids` in one script, so a take or give-back on
/// it is seen whole, never half.
pub async fn read_shard(
    redis: &mut Gate,
    c: &str,
    s: u16,
    ids: &[String],
) -> redis::RedisResult<ShardRead> {
    let k = Keys::shard(c, s);
    let mut inv = READ_SHARD.key(&k.remaining);
    inv.key(&k.pending).key(&k.holder_variants);
    for v in ids {
        inv.key(k.variant(v));
    }
    let (campaign, variants, flat): (i64, Vec<i64>, Vec<String>) = inv.invoke_async(redis).await?;
    let pending = flat
        .chunks_exact(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    Ok(ShardRead {
        campaign,
        variants,
        pending,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_keeps_every_unit_and_sums_per_shard() {
        let vs: Vec<(String, i64)> = (0..10).map(|i| (format!("v{i}"), 1)).collect();
        let (parts, sums) = spread(&vs, 4);
        assert_eq!(sums.iter().sum::<i64>(), 10);
        assert!(sums.iter().all(|s| (2..=3).contains(s)), "{sums:?}");
        for (s, part) in parts.iter().enumerate() {
            assert_eq!(part.iter().map(|(_, u)| u).sum::<i64>(), sums[s]);
        }
        let (_, one) = spread(&[("a".into(), 20), ("b".into(), 0)], 1);
        assert_eq!(one, vec![20]);
    }
}
