//! Background tasks of the origin. Each runs until the stop signal.
//!
//! - hold expiry (the sweeper): about every `FLASHGATE_SWEEP_INTERVAL_MS`, expires holds past
//!   `held_until` and gives their units back ([`crate::claims::lifecycle::sweep`]); safe with
//!   several origins sweeping at once.
//! - coupon-code use release: about every `FLASHGATE_SWEEP_INTERVAL_MS`, releases uses not
//!   confirmed within `FLASHGATE_CODE_USE_HOLD_SECONDS` ([`crate::coupons::service::sweep`]).
//! - stale takes: a take whose origin died between the gate and the commit leaves a pending
//!   holder. After [`STALE_TAKE_MS`], PostgreSQL decides: her claim exists → the holder becomes
//!   its id; it does not → the unit goes back to the gate.

use std::time::Duration;

use tokio::sync::watch;

use crate::claims::store as claims;
use crate::gate::{self, Keys};
use crate::state::AppState;

/// Age after which an uncommitted take is settled by the reconciler, in milliseconds.
pub const STALE_TAKE_MS: i64 = 30_000;
/// How often the reconciler looks for stale takes.
const RECONCILE_EVERY: Duration = Duration::from_secs(5);

/// Starts the background tasks.
pub fn start(state: &AppState, stop: watch::Receiver<bool>) {
    spawn_every(
        state,
        &stop,
        RECONCILE_EVERY,
        "settling stale takes",
        |s| async move { settle_stale_takes(&s).await },
    );
    // The hold sweeper and the coupon-use sweeper run on loops of their own, so that neither
    // waits for the other.
    let every = Duration::from_millis(state.config.sweep_interval_ms.max(1));
    spawn_every(state, &stop, every, "hold expiry sweep", |s| async move {
        crate::claims::lifecycle::sweep(&s).await
    });
    spawn_every(state, &stop, every, "coupon use sweep", |s| async move {
        crate::coupons::service::sweep(&s).await
    });
}

/// Runs `task` every `every` until the stop signal, logging its failures as `what failed`.
/// A run that overruns delays the next one (no burst of catch-up runs).
pub fn spawn_every<F, Fut>(
    state: &AppState,
    stop: &watch::Receiver<bool>,
    every: Duration,
    what: &'static str,
    task: F,
) where
    F: Fn(AppState) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<usize>> + Send,
{
    let s = state.clone();
    let mut rx = stop.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if let Err(e) = task(s.clone()).await {
                        tracing::warn!(error = %e, "{what} failed");
                    }
                }
                _ = stopped(&mut rx) => return,
            }
        }
    });
}

/// Resolves when the stop signal is set.
pub async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Settles takes pending longer than [`STALE_TAKE_MS`]; returns how many.
async fn settle_stale_takes(state: &AppState) -> anyhow::Result<usize> {
    let mut settled = 0;
    let mut redis = state.redis.clone();
    let cutoff = chrono::Utc::now().timestamp_millis() - STALE_TAKE_MS;
    for c in crate::campaigns::store::live(&state.db).await? {
        let stale: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(Keys::of(&c.id).pending)
            .arg("-inf")
            .arg(cutoff)
            .query_async(&mut redis)
            .await?;
        for customer in stale {
            let Some(token) = gate::holder(&mut redis, &c.id, &customer).await? else {
                continue;
            };
            if !token.starts_with(gate::PENDING_PREFIX) {
                continue;
            }
            match claims::find_active(&state.db, &c.id, &customer).await? {
                Some(row) => gate::confirm(&mut redis, &c.id, &customer, &token, &row.id).await?,
                None => {
                    gate::give_back(&mut redis, &c.id, &customer, &token, None).await?;
                }
            }
            tracing::info!(campaign = %c.id, %customer, "settled a stale take");
            settled += 1;
        }
    }
    Ok(settled)
}
