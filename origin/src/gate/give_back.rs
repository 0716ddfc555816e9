//! Units going back to the gate: a customer's unit returned to her own shard (and to its
//! variant, on a campaign with variants), and her holder replaced or dropped, exactly once.

use super::lua::{self, GIVE_BACK};
use super::{clear_flag, own_shard, pg_remaining, Gate, Keys, OwnShard};

/// Replaces her holder on her own shard `k` by `replace_with` (`None` drops it) if it is still
/// `expected`, returning no unit ([`lua::GIVE_BACK`] with no units). Returns whether it was.
pub(crate) async fn replace_holder(
    redis: &mut Gate,
    k: &Keys,
    customer: &str,
    expected: &str,
    replace_with: Option<&str>,
) -> redis::RedisResult<bool> {
    let (matched, _): (i64, i64) = GIVE_BACK
        .key(&k.holders)
        .key(&k.pending)
        .key(&k.remaining)
        .key(&k.loaded)
        .arg(customer)
        .arg(expected)
        .arg(replace_with.unwrap_or(""))
        .arg(0)
        .arg(0)
        .invoke_async(redis)
        .await?;
    Ok(matched == 1)
}

/// Returns her unit to the gate (to her own shard) if her holder value is still `expected` (a
/// pending token or a claim id); `replace_with` = `Some(id)` keeps her as holder of claim `id`
/// instead. Exactly once: a second call finds the holder changed and does nothing. The unit
/// goes through the gate's one bounded step ([`lua::GIVE_BACK`]): her shard's `remaining` never
/// rises above `ceiling`, PostgreSQL's `remaining` of the campaign read after the change that
/// freed the unit ([`give_back_bounded`] reads it). The sold-out flag follows. Returns whether
/// her holder matched (the unit went back unless the ceiling cut it: then the gate audit finds
/// the unit missing and puts it back within its bound).
pub async fn give_back(
    redis: &mut Gate,
    c: &str,
    customer: &str,
    expected: &str,
    replace_with: Option<&str>,
    ceiling: i64,
) -> redis::RedisResult<bool> {
    let Some(OwnShard { count: n, keys: k }) = own_shard(redis, c, customer).await? else {
        return Ok(false);
    };
    // A unit of a variant goes back to its variant ([`variants`]).
    let variant: Option<String> = redis::cmd("HGET")
        .arg(&k.holder_variants)
        .arg(customer)
        .query_async(redis)
        .await?;
    let mut inv = match &variant {
        Some(v) => {
            let mut inv = lua::GIVE_BACK_V.key(&k.holders);
            inv.key(&k.pending)
                .key(&k.remaining)
                .key(&k.loaded)
                .key(k.variant(v))
                .key(&k.holder_variants);
            inv
        }
        None => {
            let mut inv = GIVE_BACK.key(&k.holders);
            inv.key(&k.pending).key(&k.remaining).key(&k.loaded);
            inv
        }
    };
    if n == 1 {
        inv.key(&k.sold_out).key(&k.sold_out_gen);
    }
    let (matched, moved): (i64, i64) = inv
        .arg(customer)
        .arg(expected)
        .arg(replace_with.unwrap_or(""))
        .arg(1)
        .arg(ceiling)
        .invoke_async(redis)
        .await?;
    if matched == 1 && moved == 0 {
        tracing::warn!(
            campaign = c,
            customer,
            ceiling,
            "give-back cut: the gate already holds what PostgreSQL has"
        );
    }
    if moved > 0 && n > 1 {
        clear_flag(redis, c).await?;
    }
    Ok(matched == 1)
}

/// [`give_back`] bounded by PostgreSQL's `remaining` of `c` as read now (after the change that
/// freed the unit). Errors: PostgreSQL or Redis failing; nothing moved then (a pending holder
/// is left to the settlement of orphaned takes, a released claim's unit to the drain of
/// `gate_returns` or the gate audit).
pub async fn give_back_bounded(
    redis: &mut Gate,
    db: &crate::db::Db,
    c: &str,
    customer: &str,
    expected: &str,
    replace_with: Option<&str>,
) -> Result<bool, crate::error::StoreError> {
    let Some(ceiling) = pg_remaining(db, c).await? else {
        return Ok(false);
    };
    Ok(give_back(redis, c, customer, expected, replace_with, ceiling).await?)
}
