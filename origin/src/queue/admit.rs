//! The task that advances `now_serving`: about every [`TICK`], for each live campaign with a
//! waiting room (started, not ended, neither the campaign nor its admission paused, read from
//! PostgreSQL), it admits up to `admit_per_second × elapsed` customers in line order with one
//! atomic step ([`store::advance`]).
//!
//! - One origin at a time: the step takes or renews the lease `fg:{c}:q:lease` for [`LEASE`];
//!   when its holder stops, another origin takes over within [`LEASE`].
//! - Bounded: the budget carried over between ticks never exceeds one second's admissions
//!   (`admit_per_second`), so admission is at most the rate plus one second's burst.
//! - Stock-aware: the step never admits more than the gate's remaining units minus the
//!   customers admitted within `admission_ttl_seconds` who have not claimed; it stops at the
//!   sell-out and moves on again when units return (a release, an expiry, a restock).
//! - Restarts lose nothing: the queue is in Redis and the option in PostgreSQL.
//! - A Redis loss stops it for one tick: the queue is reopened from its PostgreSQL checkpoint
//!   ([`restore`]), kept by this task about every second for every waiting room not ended.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flashgate_shared::queue::WaitingRoom;
use tokio_util::sync::CancellationToken;

use super::restore;
use super::store::{self, Advanced};
use crate::state::AppState;
use crate::telemetry::metrics::CampaignLabels;

/// How often the task runs.
pub const TICK: Duration = Duration::from_millis(100);
/// Lease length; renewed on every tick.
pub const LEASE: Duration = Duration::from_millis(2_000);

/// The budget carried between ticks, per campaign: when it was last topped up, and how many
/// admissions it still allows (fractional); and when each campaign's counters were last kept.
#[derive(Default)]
pub struct Budgets {
    holder: String,
    by_campaign: Mutex<HashMap<String, (Instant, f64)>>,
    kept: Mutex<HashMap<String, Instant>>,
}

impl Budgets {
    /// Budgets of this origin, holding leases under a fresh random name.
    pub fn new() -> Arc<Self> {
        Arc::new(Budgets {
            holder: uuid::Uuid::new_v4().to_string(),
            by_campaign: Mutex::new(HashMap::new()),
            kept: Mutex::new(HashMap::new()),
        })
    }

    /// True (and noted) when campaign `c`'s counters were last kept [`restore::CHECKPOINT_EVERY`]
    /// ago or never by this origin.
    fn checkpoint_due(&self, c: &str) -> bool {
        let mut map = self.kept.lock().expect("kept lock");
        let now = Instant::now();
        match map.get(c) {
            Some(at) if now.duration_since(*at) < restore::CHECKPOINT_EVERY => false,
            _ => {
                map.insert(c.to_string(), now);
                true
            }
        }
    }

    /// Tops up campaign `c`'s budget at `rate` per second (at most one second's worth) and
    /// returns the whole admissions it allows now.
    fn top_up(&self, c: &str, rate: f64) -> u64 {
        let mut map = self.by_campaign.lock().expect("budgets lock");
        let now = Instant::now();
        let (at, credit) = map.entry(c.to_string()).or_insert((now, 0.0));
        *credit = (*credit + at.elapsed().as_secs_f64() * rate).min(rate);
        *at = now;
        credit.floor() as u64
    }

    /// Spends `n` admissions of campaign `c`'s budget; `reset` empties it (another origin holds
    /// the lease, or nothing can be admitted).
    fn spend(&self, c: &str, n: u64, reset: bool) {
        let mut map = self.by_campaign.lock().expect("budgets lock");
        if let Some((_, credit)) = map.get_mut(c) {
            *credit = if reset {
                0.0
            } else {
                (*credit - n as f64).max(0.0)
            };
        }
    }
}

/// One run of the task. Returns the customers admitted.
///
/// For every waiting room that has not ended (live or not), about every
/// [`restore::CHECKPOINT_EVERY`]: its counters are kept in PostgreSQL, or, when Redis lost the
/// queue, it is reopened from them ([`restore`]). For each live one, the admission step; a step
/// that cannot run (queue lost, gate not loaded, a Redis error) marks the campaign stalled
/// (`flashgate_queue_stalled`) until a step runs again. Once `stop` is cancelled it ends after
/// the campaign it is on.
pub async fn tick(
    state: &AppState,
    budgets: &Budgets,
    stop: &CancellationToken,
) -> anyhow::Result<usize> {
    let rooms = sqlx::query!(
        r#"SELECT id, waiting_room AS "waiting_room!: sqlx::types::Json<WaitingRoom>",
                  (NOT paused AND NOT queue_paused AND starts_at <= now()) AS "live!"
             FROM campaigns
            WHERE waiting_room IS NOT NULL AND ends_at > now()"#
    )
    .fetch_all(&state.db)
    .await?;
    let mut total = 0;
    for row in rooms {
        if stop.is_cancelled() {
            break;
        }
        let (c, w) = (row.id, row.waiting_room);
        if budgets.checkpoint_due(&c) {
            if let Err(e) = keep(state, &c).await {
                tracing::warn!(campaign = %c, error = %e, "waiting room checkpoint failed");
            }
        }
        let labels = CampaignLabels {
            campaign: c.clone(),
        };
        if !row.live {
            state.metrics.queue_stalled.remove(&labels);
            continue;
        }
        let stalled = match step(state, budgets, &c, &w).await {
            Ok(n) => {
                total += n;
                false
            }
            Err(e) => {
                tracing::warn!(campaign = %c, error = %e, "waiting room not admitting");
                true
            }
        };
        state
            .metrics
            .queue_stalled
            .get_or_create(&labels)
            .set(i64::from(stalled));
    }
    Ok(total)
}

/// Why a live waiting room's admission step did not run.
#[derive(Debug, thiserror::Error)]
enum Stall {
    #[error("queue not open in Redis (lost); reopened from its checkpoint: {0}")]
    NotOpen(bool),
    #[error("gate not loaded; load asked for")]
    GateNotLoaded,
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("restore: {0}")]
    Restore(#[from] anyhow::Error),
}

/// The admission step of live campaign `c` (waiting room `w`): the customers admitted.
async fn step(
    state: &AppState,
    budgets: &Budgets,
    c: &str,
    w: &WaitingRoom,
) -> Result<usize, Stall> {
    let mut gate = state.gate.clone();
    let rate = f64::from(w.admit_per_second);
    let budget = budgets.top_up(c, rate);
    let now_ms = chrono::Utc::now().timestamp_millis();
    let lease_ms = LEASE.as_millis() as u64;
    let advanced = store::advance(
        &mut gate,
        c,
        &budgets.holder,
        lease_ms,
        budget,
        now_ms,
        store::StepRules::of(w),
    )
    .await
    .inspect_err(|_| budgets.spend(c, 0, true))?;
    match advanced {
        Advanced::Admitted(n) => {
            budgets.spend(c, n, false);
            Ok(n as usize)
        }
        Advanced::NotLeader => {
            budgets.spend(c, 0, true);
            Ok(0)
        }
        Advanced::NotOpen => {
            budgets.spend(c, 0, true);
            Err(Stall::NotOpen(restore::restore(state, c).await?))
        }
        Advanced::GateNotLoaded => {
            budgets.spend(c, 0, true);
            state.gate_loader.spawn(c);
            Err(Stall::GateNotLoaded)
        }
    }
}

/// Keeps campaign `c`'s counters in PostgreSQL, or reopens its queue when Redis lost it.
async fn keep(state: &AppState, c: &str) -> anyhow::Result<()> {
    let mut redis = state.redis.clone();
    match restore::read(&mut redis, c).await? {
        Some(n) => restore::save(&state.db, c, &n).await?,
        None => {
            restore::restore(state, c).await?;
        }
    }
    Ok(())
}
