//! Surviving a Redis loss: the queue's counters are kept in PostgreSQL (`queue_checkpoints`,
//! at most [`CHECKPOINT_EVERY`] old) and a queue that Redis lost (`fg:{c}:q:open` gone) is
//! reopened from them by the first origin that notices: the admitting task within one tick for
//! a live waiting room and within [`CHECKPOINT_EVERY`] for one in its prequeue, or a join.
//!
//! What a reopened queue keeps (docs/WAITING-ROOM.md, "When Redis loses the queue"):
//! - `now_serving` and `admitted` as checkpointed, so nobody admitted before is queued again and
//!   the tickets already issued keep their order;
//! - the drawn numbers: those admitted become placeholders at or below `now_serving` (the
//!   `k`-th smallest of distinct numbers is at least `k`, so `1..=k` fits), those still waiting
//!   become evenly spaced placeholders over `(now_serving, 2^40)`, the last at `2^40 - 1` (the
//!   real ones were drawn uniformly there), so admission keeps walking the drawn customers before
//!   any arrival, at about one real ticket per placeholder, and reaches the last of them;
//! - the arrival counter, skipped ahead by twice the arrivals of the last checkpoint interval,
//!   so that the numbers issued after the checkpoint are not issued again.
//!
//! Whose ticket is whose (`who`, `holders`, [`super::store::who`]) starts over: placeholders
//! belong to nobody, and the next presence reports name the customers of the tickets polled.
//!
//! Every placeholder is written before `open` is set back, under a lock, so no join or
//! admission step ever sees a half-restored queue.

use std::time::Duration;

use flashgate_shared::queue::RANDOM_BLOCK;
use redis::AsyncCommands;

use super::store::Keys;
use crate::db::Db;
use crate::gate::lua::UNLOCK;
use crate::redis_conn::RedisConn;
use crate::state::AppState;

/// How often a queue's counters are written to PostgreSQL (by each origin's admitting task;
/// PostgreSQL keeps one write per interval).
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);
/// Longest a restore holds its lock, ms.
const RESTORE_LOCK_MS: u64 = 30_000;
/// Placeholders written per `ZADD`.
const CHUNK: usize = 10_000;

/// A queue's counters, as Redis holds them and PostgreSQL keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// The highest sequence number admitted.
    pub now_serving: u64,
    /// Customers admitted.
    pub admitted: u64,
    /// Numbers drawn at random.
    pub drawn: u64,
    /// Arrival numbers issued.
    pub arrivals: u64,
}

/// Campaign `c`'s counters in Redis (one transaction); `None` when its queue is not open
/// there (lost).
pub async fn read(redis: &mut RedisConn, c: &str) -> redis::RedisResult<Option<Counters>> {
    let k = Keys::of(c);
    let (open, serving, admitted, drawn, arrivals): (
        bool,
        Option<u64>,
        Option<u64>,
        u64,
        Option<u64>,
    ) = redis::pipe()
        .atomic()
        .exists(&k.open)
        .get(&k.serving)
        .get(&k.admitted)
        .zcard(&k.drawn)
        .get(&k.arrivals)
        .query_async(redis)
        .await?;
    Ok(open.then(|| Counters {
        now_serving: serving.unwrap_or(0),
        admitted: admitted.unwrap_or(0),
        drawn,
        arrivals: arrivals.unwrap_or(0),
    }))
}

/// Keeps campaign `c`'s counters in PostgreSQL unless they were kept less than
/// [`CHECKPOINT_EVERY`] ago; a counter never moves back (an origin's older read loses).
pub async fn save(db: &Db, c: &str, n: &Counters) -> sqlx::Result<()> {
    let every_ms = CHECKPOINT_EVERY.as_millis() as i64;
    sqlx::query!(
        "INSERT INTO queue_checkpoints AS q (campaign_id, now_serving, admitted, drawn, arrivals)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (campaign_id) DO UPDATE
            SET now_serving = GREATEST(q.now_serving, EXCLUDED.now_serving),
                admitted = GREATEST(q.admitted, EXCLUDED.admitted),
                drawn = GREATEST(q.drawn, EXCLUDED.drawn),
                arrivals = GREATEST(q.arrivals, EXCLUDED.arrivals),
                arrivals_step = GREATEST(EXCLUDED.arrivals - q.arrivals, 0),
                saved_at = now()
          WHERE q.saved_at <= now() - $6::bigint * interval '1 millisecond'",
        c,
        n.now_serving as i64,
        n.admitted as i64,
        n.drawn as i64,
        n.arrivals as i64,
        every_ms,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The checkpoint of campaign `c` and the arrival numbers to skip; zeros without one (the
/// queue was lost before its first checkpoint).
async fn checkpoint(db: &Db, c: &str) -> sqlx::Result<(Counters, u64)> {
    let row = sqlx::query!(
        "SELECT now_serving, admitted, drawn, arrivals, arrivals_step
           FROM queue_checkpoints WHERE campaign_id = $1",
        c
    )
    .fetch_optional(db)
    .await?;
    let u = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(row.map_or((Counters::default(), 0), |r| {
        let n = Counters {
            now_serving: u(r.now_serving),
            admitted: u(r.admitted),
            drawn: u(r.drawn),
            arrivals: u(r.arrivals),
        };
        (n, u(r.arrivals_step).saturating_mul(2))
    }))
}

/// The placeholders of drawn numbers of a queue reopened from `n` (see the module
/// documentation): `1..=admitted_drawn`, then the waiting ones evenly over `(now_serving, 2^40)`,
/// the last at `2^40 - 1`, the highest number a draw gives: once every placeholder is admitted,
/// so is every drawn ticket, with no arrival needed to carry `now_serving` past them.
pub fn placeholders(n: &Counters) -> impl Iterator<Item = u64> {
    let admitted_drawn = if n.now_serving >= RANDOM_BLOCK {
        n.drawn
    } else {
        n.admitted.min(n.drawn)
    };
    let waiting = n.drawn - admitted_drawn;
    let lo = n.now_serving.min(RANDOM_BLOCK - 1);
    let span = u128::from(RANDOM_BLOCK - 1 - lo);
    let spread =
        (1..=waiting).map(move |i| lo + (u128::from(i) * span / u128::from(waiting)) as u64);
    (1..=admitted_drawn).chain(spread)
}

/// Reopens campaign `c`'s queue from `n`, new arrival numbers starting after `n.arrivals +
/// skip`. `Ok(false)` when it is open (nothing done) or another origin is reopening it.
pub async fn reopen(
    redis: &mut RedisConn,
    c: &str,
    n: &Counters,
    skip: u64,
) -> redis::RedisResult<bool> {
    let k = Keys::of(c);
    let lock = format!("fg:{{{c}}}:q:restoring");
    let token = format!("{:016x}", rand::random::<u64>());
    let locked: Option<String> = redis::cmd("SET")
        .arg(&lock)
        .arg(&token)
        .arg("NX")
        .arg("PX")
        .arg(RESTORE_LOCK_MS)
        .query_async(redis)
        .await?;
    if locked.is_none() {
        return Ok(false);
    }
    let done = reopen_locked(redis, &k, n, skip).await;
    // Free the lock only if it is still ours (the gate load's compare-and-delete).
    let _: redis::RedisResult<i64> = UNLOCK.key(&lock).arg(&token).invoke_async(redis).await;
    done
}

async fn reopen_locked(
    redis: &mut RedisConn,
    k: &Keys,
    n: &Counters,
    skip: u64,
) -> redis::RedisResult<bool> {
    if redis.exists(&k.open).await? {
        return Ok(false);
    }
    let _: i64 = redis
        .del(&[
            &k.seq,
            &k.drawn,
            &k.arrivals,
            &k.serving,
            &k.admitted,
            &k.unclaimed,
            &k.grants,
            &k.lease,
            &k.pace,
            &k.who,
            &k.holders,
        ])
        .await?;
    let all: Vec<u64> = placeholders(n).collect();
    for chunk in all.chunks(CHUNK) {
        let members: Vec<(u64, u64)> = chunk.iter().map(|&s| (s, s)).collect();
        let _: i64 = redis.zadd_multiple(&k.drawn, &members).await?;
    }
    redis::pipe()
        .atomic()
        .set(&k.serving, n.now_serving)
        .set(&k.admitted, n.admitted)
        .set(&k.arrivals, n.arrivals.saturating_add(skip))
        .set(&k.open, 1)
        .query_async::<()>(redis)
        .await?;
    Ok(true)
}

/// Reopens campaign `c`'s queue from its checkpoint when Redis lost it (counted in
/// `flashgate_queue_restores_total`, logged). `Ok(false)` when it was open or another origin is
/// reopening it.
pub async fn restore(state: &AppState, c: &str) -> anyhow::Result<bool> {
    let (n, skip) = checkpoint(&state.db, c).await?;
    let mut redis = state.redis.clone();
    let done = reopen(&mut redis, c, &n, skip).await?;
    if done {
        state.metrics.queue_restores.inc();
        tracing::warn!(
            campaign = c,
            now_serving = n.now_serving,
            admitted = n.admitted,
            drawn = n.drawn,
            arrivals = n.arrivals,
            skipped = skip,
            "waiting room lost by Redis; reopened from its checkpoint"
        );
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_keep_the_drawn_line_in_order() {
        const B: u64 = RANDOM_BLOCK;
        // Mid-prequeue walk: 3 of 7 drawn admitted up to 1000.
        let n = Counters {
            now_serving: 1_000,
            admitted: 3,
            drawn: 7,
            arrivals: 0,
        };
        let p: Vec<u64> = placeholders(&n).collect();
        assert_eq!(&p[..3], &[1, 2, 3]);
        assert_eq!(p.len(), 7);
        assert!(p[3..].windows(2).all(|w| w[0] < w[1]));
        assert!(p[3] > 1_000 && p[6] < B);
        // The last is the highest drawn number there can be: no waiting ticket is above it.
        assert_eq!(p[6], B - 1);
        // Every drawn number admitted, arrivals under way: all placeholders below 2^40.
        let n = Counters {
            now_serving: B + 5,
            admitted: 9,
            drawn: 4,
            arrivals: 8,
        };
        assert_eq!(placeholders(&n).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
        // Nothing drawn: nothing to place.
        assert_eq!(placeholders(&Counters::default()).count(), 0);
    }
}
