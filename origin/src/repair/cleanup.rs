//! Clean-up after the sale: the Redis keys of a campaign that has ended and whose last hold is
//! settled expire after a grace period; [`purge`] deletes them at once. PostgreSQL keeps
//! everything, so reconciliation still answers from it (without the gate part).
//!
//! A campaign's keys are every key under its hash tag ([`super::keys`]): the gate's shards,
//! the sold-out flag, the waiting room and its presence records, the claims' idempotency
//! records and the audit's record.
//!
//! **The pass** ([`pass`], every [`interval`] on one origin at a time: a `SET NX PX` turn per
//! PostgreSQL database, [`turn_key`])
//! reads each campaign's state from PostgreSQL, then scans the keyspace once. Keys of a
//! campaign that has ended (`ends_at` past, a close included) with no hold outstanding get the
//! expiry `settled + grace`, `settled` being the later of the latest moment a hold of the
//! campaign could end (`ends_at + hold_seconds + hold_extension_seconds`) and the campaign row's
//! last change (`updated_at`: its creation, a manager's change, a release or an expiry), so a
//! campaign created already ended, or whose last hold was settled late, gets its full grace;
//! `FLASHGATE_ENDED_KEYS_GRACE_SECONDS` (default 24 h) leaves that long to look at the gate
//! with reconcile. The expiry is the same
//! absolute time at every pass, so passes repeat it harmlessly; a key that would expire
//! earlier (an idempotency record) keeps its own. A campaign whose end a manager moves into
//! the future again before the keys went finds its gate missing and reloads it from
//! PostgreSQL at the next claim, as after a Redis restart.
//!
//! The pass also counts the keys per campaign state ([`KeyCounts`], the
//! `flashgate_redis_campaign_keys{state}` gauge). It costs one `SCAN` of the keyspace per
//! pass.

use std::collections::HashMap;
use std::time::Duration;

use chrono::Utc;

use super::keys::{self, BATCH_MAX, CAMPAIGN_KEYS};
use crate::db::Db;
use crate::error::StoreError;
use crate::redis_conn::RedisConn;

/// The pass's turn key for the origins of PostgreSQL database `database_url`:
/// `fg:cleanup:turn:<database name>`. The origin that sets it runs the pass. Origins of other
/// databases sharing the Redis (tests, staging next to production) keep turns of their own.
pub fn turn_key(database_url: &str) -> String {
    let name = database_url
        .parse::<sqlx::postgres::PgConnectOptions>()
        .ok()
        .and_then(|o| o.get_database().map(str::to_string))
        .unwrap_or_default();
    format!("fg:cleanup:turn:{name}")
}

/// How often the pass runs for a grace of `grace_seconds`: a quarter of the grace, between 1 s
/// and 60 s.
pub fn interval(grace_seconds: u64) -> Duration {
    Duration::from_millis((grace_seconds.saturating_mul(250)).clamp(1_000, 60_000))
}

/// Where a campaign with keys in Redis stands (the `state` label of
/// `flashgate_redis_campaign_keys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// Not ended yet (`ends_at` in the future): its keys are in use.
    Live,
    /// Ended, with holds still outstanding: its keys stay until they are settled.
    Ended,
    /// Ended and settled: its keys expire at the end of the grace period.
    Expiring,
}

impl KeyState {
    /// Every state, in the order of the gauge's series.
    pub const ALL: [KeyState; 3] = [KeyState::Live, KeyState::Ended, KeyState::Expiring];

    /// The label value: `live`, `ended` or `expiring`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyState::Live => "live",
            KeyState::Ended => "ended",
            KeyState::Expiring => "expiring",
        }
    }
}

/// Keys found by one pass, per [`KeyState`]; keys of a campaign PostgreSQL does not know are
/// counted in `unknown` and left alone.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KeyCounts {
    pub live: u64,
    pub ended: u64,
    pub expiring: u64,
    pub unknown: u64,
}

impl KeyCounts {
    /// The count of `state`.
    pub fn of(&self, state: KeyState) -> u64 {
        match state {
            KeyState::Live => self.live,
            KeyState::Ended => self.ended,
            KeyState::Expiring => self.expiring,
        }
    }
}

/// One campaign as the clean-up sees it.
struct Standing {
    state: KeyState,
    /// When its keys expire (Unix ms), for [`KeyState::Expiring`].
    expire_at_ms: i64,
}

/// Every campaign's [`Standing`] for a grace of `grace_seconds`, from one statement (the
/// outstanding holds are looked for on ended campaigns only).
async fn standings(db: &Db, grace_seconds: u64) -> sqlx::Result<HashMap<String, Standing>> {
    let rows = sqlx::query!(
        r#"SELECT id, ends_at <= now() AS "ended!",
                  CASE WHEN ends_at <= now()
                       THEN EXISTS (SELECT 1 FROM claims h
                                     WHERE h.campaign_id = c.id AND h.status = 'held')
                       ELSE false END AS "holds!",
                  (extract(epoch FROM greatest(
                      ends_at + make_interval(secs => coalesce(hold_seconds, 0)
                                                       + hold_extension_seconds),
                      updated_at)) * 1000)::bigint AS "settled_ms!"
             FROM campaigns c"#
    )
    .fetch_all(db)
    .await?;
    let grace_ms = i64::try_from(grace_seconds.saturating_mul(1_000)).unwrap_or(i64::MAX);
    Ok(rows
        .into_iter()
        .map(|r| {
            let state = match (r.ended, r.holds) {
                (false, _) => KeyState::Live,
                (true, true) => KeyState::Ended,
                (true, false) => KeyState::Expiring,
            };
            let expire_at_ms = r.settled_ms.saturating_add(grace_ms);
            (
                r.id,
                Standing {
                    state,
                    expire_at_ms,
                },
            )
        })
        .collect())
}

/// Runs the clean-up pass if this origin takes the turn `turn` ([`turn_key`]; `None`
/// otherwise): gives the keys of every ended, settled campaign their expiry and counts the keys
/// per state. Errors: PostgreSQL or Redis failed (the next pass does it again).
pub async fn pass(
    db: &Db,
    redis: &RedisConn,
    turn: &str,
    grace_seconds: u64,
) -> Result<Option<KeyCounts>, StoreError> {
    let mut r = redis.clone();
    let turn_ms = interval(grace_seconds).as_millis() as u64 - 100;
    let turn: Option<String> = redis::cmd("SET")
        .arg(turn)
        .arg(1)
        .arg("NX")
        .arg("PX")
        .arg(turn_ms)
        .query_async(&mut r)
        .await?;
    if turn.is_none() {
        return Ok(None);
    }
    let standings = standings(db, grace_seconds).await?;
    let mut counts = KeyCounts::default();
    // Keys to expire, by hash tag (one script per tag: one slot).
    let mut due: HashMap<String, (i64, Vec<String>)> = HashMap::new();
    let mut full: Vec<(i64, Vec<String>)> = Vec::new();
    keys::scan(redis, CAMPAIGN_KEYS, |batch| {
        for key in batch {
            let Some(c) = keys::campaign_of(&key) else {
                continue;
            };
            let Some(s) = standings.get(c) else {
                counts.unknown += 1;
                continue;
            };
            match s.state {
                KeyState::Live => counts.live += 1,
                KeyState::Ended => counts.ended += 1,
                KeyState::Expiring => {
                    counts.expiring += 1;
                    let tag = keys::tag_of(&key).unwrap_or(c).to_string();
                    let (_, list) = due.entry(tag).or_insert((s.expire_at_ms, Vec::new()));
                    list.push(key);
                    if list.len() >= BATCH_MAX {
                        full.push((s.expire_at_ms, std::mem::take(list)));
                    }
                }
            }
        }
    })
    .await?;
    for (at, list) in full.into_iter().chain(due.into_values()) {
        keys::expire_at(&mut r, &list, at).await?;
    }
    Ok(Some(counts))
}

/// Why a purge was refused.
#[derive(Debug, thiserror::Error)]
pub enum PurgeError {
    /// No campaign has this id.
    #[error("no such campaign")]
    NotFound,
    /// The campaign has not ended.
    #[error("campaign {0} is live: close it first (its Redis keys are in use until it ends)")]
    Live(String),
    /// The campaign has ended but holds are outstanding.
    #[error(
        "campaign {0} has {1} hold(s) outstanding: purge once they are paid, released or expired"
    )]
    HoldsOutstanding(String, i64),
    /// PostgreSQL or Redis failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for PurgeError {
    fn from(e: sqlx::Error) -> Self {
        PurgeError::Store(e.into())
    }
}

impl From<redis::RedisError> for PurgeError {
    fn from(e: redis::RedisError) -> Self {
        PurgeError::Store(e.into())
    }
}

/// Deletes every Redis key of campaign `c` now; returns how many there were. Refused (nothing
/// deleted) while the campaign is live or holds are outstanding. Errors: [`PurgeError`].
pub async fn purge(db: &Db, redis: &RedisConn, c: &str) -> Result<u64, PurgeError> {
    let row = sqlx::query!(
        r#"SELECT ends_at <= now() AS "ended!",
                  (SELECT count(*) FROM claims h
                    WHERE h.campaign_id = c.id AND h.status = 'held') AS "holds!"
             FROM campaigns c WHERE id = $1"#,
        c
    )
    .fetch_optional(db)
    .await?
    .ok_or(PurgeError::NotFound)?;
    if !row.ended {
        return Err(PurgeError::Live(c.to_string()));
    }
    if row.holds > 0 {
        return Err(PurgeError::HoldsOutstanding(c.to_string(), row.holds));
    }
    let mut by_tag: HashMap<String, Vec<String>> = HashMap::new();
    let pattern = format!("fg:{{{c}*");
    keys::scan(redis, &pattern, |batch| {
        for key in batch {
            if keys::campaign_of(&key) == Some(c) {
                let tag = keys::tag_of(&key).unwrap_or(c).to_string();
                by_tag.entry(tag).or_default().push(key);
            }
        }
    })
    .await?;
    let mut r = redis.clone();
    let mut deleted = 0u64;
    // A time in the past: every key goes now.
    let past = Utc::now().timestamp_millis() - 60_000;
    for list in by_tag.values() {
        for chunk in list.chunks(BATCH_MAX) {
            keys::expire_at(&mut r, chunk, past).await?;
            deleted += chunk.len() as u64;
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pass_runs_a_quarter_of_the_grace_apart_within_bounds() {
        assert_eq!(interval(0), Duration::from_secs(1));
        assert_eq!(interval(2), Duration::from_secs(1));
        assert_eq!(interval(20), Duration::from_secs(5));
        assert_eq!(interval(86_400), Duration::from_secs(60));
    }

    #[test]
    fn origins_of_one_database_share_a_turn() {
        assert_eq!(
            turn_key("postgres://u:pw@db-1:5432/shop?sslmode=require"),
            turn_key("postgres://other@db-2/shop")
        );
        assert_eq!(
            turn_key("postgres://u@h/shop"),
            "fg:cleanup:turn:shop".to_string()
        );
        assert_ne!(turn_key("postgres://h/a"), turn_key("postgres://h/b"));
    }
}
