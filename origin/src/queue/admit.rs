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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flashgate_shared::queue::WaitingRoom;

use super::store::{self, Advanced};
use crate::state::AppState;

/// How often the task runs.
pub const TICK: Duration = Duration::from_millis(100);
/// Lease length; renewed on every tick.
pub const LEASE: Duration = Duration::from_millis(2_000);

/// The budget carried between ticks, per campaign: when it was last topped up, and how many
/// admissions it still allows (fractional).
#[derive(Default)]
pub struct Budgets {
    holder: String,
    by_campaign: Mutex<HashMap<String, (Instant, f64)>>,
}

impl Budgets {
    /// Budgets of this origin, holding leases under a fresh random name.
    pub fn new() -> Arc<Self> {
        Arc::new(Budgets {
            holder: uuid::Uuid::new_v4().to_string(),
            by_campaign: Mutex::new(HashMap::new()),
        })
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
pub async fn tick(state: &AppState, budgets: &Budgets) -> anyhow::Result<usize> {
    let live = sqlx::query!(
        r#"SELECT id, waiting_room AS "waiting_room!: sqlx::types::Json<WaitingRoom>"
             FROM campaigns
            WHERE waiting_room IS NOT NULL AND NOT paused AND NOT queue_paused
              AND starts_at <= now() AND ends_at > now()"#
    )
    .fetch_all(&state.db)
    .await?;
    let mut gate = state.gate.clone();
    let mut total = 0;
    for row in live {
        let (c, w) = (row.id, row.waiting_room);
        let rate = f64::from(w.admit_per_second);
        let budget = budgets.top_up(&c, rate);
        let now_ms = chrono::Utc::now().timestamp_millis();
        let ttl_ms = u64::from(w.admission_ttl_seconds) * 1000;
        let lease_ms = LEASE.as_millis() as u64;
        match store::advance(
            &mut gate,
            &c,
            &budgets.holder,
            lease_ms,
            budget,
            now_ms,
            ttl_ms,
        )
        .await?
        {
            Advanced::Admitted(n) => {
                budgets.spend(&c, n, false);
                total += n as usize;
            }
            Advanced::NotLeader => budgets.spend(&c, 0, true),
            Advanced::NotOpen => {
                budgets.spend(&c, 0, true);
                tracing::warn!(campaign = %c, "waiting room not open in Redis; nobody is admitted");
            }
            Advanced::GateNotLoaded => {
                budgets.spend(&c, 0, true);
                state.gate_loader.spawn(&c);
            }
        }
    }
    Ok(total)
}
