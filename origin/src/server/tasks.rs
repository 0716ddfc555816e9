//! Background tasks of the origin. Each runs until the stop signal (a `tokio-util`
//! [`CancellationToken`]) and is spawned on the state's [`tokio_util::task::TaskTracker`], so
//! that shutdown ([`crate::server::RunningOrigin::shutdown`]) cancels and joins every one of
//! them within `FLASHGATE_SHUTDOWN_TIMEOUT_MS`. A pass that is running when the stop comes
//! finishes the unit of work it is on (a campaign, a batch) and ends; the relays drop the calls
//! they are waiting for (their rows are leased, so they are sent again when the lease ends:
//! delivery is at least once). So a shutdown does not wait for a pass over every live campaign,
//! nor for a receiver that takes its full call timeout to answer.
//!
//! - hold expiry (the sweeper): about every `FLASHGATE_SWEEP_INTERVAL_MS`, expires holds past
//!   `held_until` and gives their units back ([`crate::holds::expiry::sweep`]); safe with
//!   several origins sweeping at once.
//! - promo code use release: about every `FLASHGATE_SWEEP_INTERVAL_MS`, releases uses not
//!   confirmed within `FLASHGATE_CODE_USE_HOLD_SECONDS` ([`crate::promo::service::sweep`]).
//! - waiting room admission: every 100 ms, advances `now_serving` of live campaigns with a
//!   waiting room ([`crate::queue::admit`]); one origin at a time (a Redis lease).
//! - gift outbox relay (only with `FLASHGATE_GIFT_PROVIDER_URL`): about every
//!   `FLASHGATE_GIFT_RELAY_INTERVAL_MS`, calls the provider for pending grants
//!   ([`crate::gifts::relay::pass`]); safe with several origins relaying at once.
//! - webhook relay: about every `FLASHGATE_WEBHOOK_RELAY_INTERVAL_MS`, posts due webhook
//!   deliveries ([`crate::webhooks::relay::pass`]); safe with several origins relaying at once.
//! - orphaned takes: every second, settles takes left pending by a request of this origin
//!   that has ended, by an origin whose lease lapsed, or for 30 s by anyone
//!   ([`crate::repair::settle::settle_orphaned_takes`]).
//! - the gate audit: every second ([`crate::repair::audit::AUDIT_EVERY`]), on one origin at a
//!   time, compares each live campaign's gate with PostgreSQL and repairs what it finds apart
//!   ([`crate::repair::audit`]).
//! - clean-up after the sale: a quarter of `FLASHGATE_ENDED_KEYS_GRACE_SECONDS` apart
//!   (1–60 s), on one origin at a time, gives the Redis keys of ended, settled campaigns their
//!   expiry and counts the keys per campaign state ([`crate::repair::cleanup`]).
//! - draws: every second, draws the draw campaigns whose entry window has closed
//!   ([`crate::access::run::pass`]), and passes the units of winners whose buying window ended
//!   unclaimed to the waitlist ([`crate::access::admit::pass`]); safe with several origins.
//! - the origin's lease: every second, renews this origin's lease in Redis
//!   ([`crate::gate::takes`]), which tells the others that its pending takes are in flight.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::gate::takes;
use crate::repair::settle::settle_orphaned_takes;
use crate::state::AppState;

/// How often draws whose entry window has closed are looked for.
const DRAW_EVERY: Duration = Duration::from_secs(1);

/// How often the orphaned takes are looked for.
const SETTLE_EVERY: Duration = Duration::from_secs(1);

/// Starts the background tasks.
pub fn start(state: &AppState, stop: &CancellationToken) {
    spawn_every(
        state,
        stop,
        takes::LEASE_REFRESH,
        "renewing the origin's lease",
        |s, _| async move {
            let mut gate = s.gate.clone();
            takes::renew_lease(&mut gate, s.takes.origin()).await?;
            Ok(0)
        },
    );
    spawn_every(
        state,
        stop,
        crate::repair::audit::AUDIT_EVERY,
        "gate audit",
        |s, stop| async move {
            let Some(pass) = crate::repair::audit::audit_live(&s.db, &s.gate, &stop).await? else {
                return Ok(0);
            };
            let (r, codes) = (pass.campaigns, pass.codes);
            let m = &s.metrics;
            m.gate_audit_pass.observe(pass.seconds);
            m.gate_audit_lowered.inc_by(r.lowered as u64);
            m.gate_audit_raised.inc_by(r.raised as u64);
            m.gate_audit_holders_dropped
                .inc_by(r.holders_dropped as u64);
            m.gate_audit_holders_restored
                .inc_by(r.holders_restored as u64);
            m.gate_audit_code_flags.inc_by(codes.flags as u64);
            m.gate_audit_code_holders_dropped
                .inc_by(codes.holders as u64);
            let repaired = r.lowered + r.raised + r.holders_dropped + r.holders_restored;
            Ok((repaired + codes.flags + codes.holders) as usize)
        },
    );
    spawn_every(
        state,
        stop,
        SETTLE_EVERY,
        "settling orphaned takes",
        |s, _| async move {
            let settled = settle_orphaned_takes(&s.db, &s.gate, &s.takes).await?;
            s.metrics.orphaned_takes_settled.inc_by(settled as u64);
            Ok(settled)
        },
    );
    spawn_every(
        state,
        stop,
        DRAW_EVERY,
        "drawing closed draws",
        |s, _| async move { crate::access::run::pass(&s.db).await },
    );
    spawn_every(
        state,
        stop,
        DRAW_EVERY,
        "passing lapsed draw winners' units to the waitlist",
        |s, _| async move { crate::access::admit::pass(&s.db).await },
    );
    // The hold sweeper and the promo code use sweeper run on loops of their own, so that neither
    // waits for the other.
    let every = Duration::from_millis(state.config.sweep_interval_ms.max(1));
    spawn_every(state, stop, every, "hold expiry sweep", |s, _| async move {
        let expired =
            crate::holds::expiry::sweep(&s.gate_returns(), s.config.sweep_batch_max).await?;
        s.metrics.sweeper_expired.inc_by(expired as u64);
        Ok(expired)
    });
    spawn_every(
        state,
        stop,
        every,
        "promo code use sweep",
        |s, _| async move { crate::promo::service::sweep(&s.promo()).await },
    );
    if let Some(relay) = state.gift_relay() {
        let every = Duration::from_millis(state.config.gifts.gift_relay_interval_ms.max(1));
        spawn_every(state, stop, every, "gift outbox relay", move |_, stop| {
            let relay = relay.clone();
            async move { until_stopped(&stop, crate::gifts::relay::pass(&relay)).await }
        });
    }
    let relay = state.webhook_relay();
    let every = Duration::from_millis(state.config.webhooks.webhook_relay_interval_ms.max(1));
    spawn_every(state, stop, every, "webhook relay", move |_, stop| {
        let relay = relay.clone();
        async move { until_stopped(&stop, crate::webhooks::relay::pass(&relay)).await }
    });
    let grace = state.config.ended_keys_grace_seconds;
    let turn = crate::repair::cleanup::turn_key(&state.config.database_url);
    // The series exist from the start (at 0 until a pass of this origin counts them), so a
    // dashboard's query finds them before the first pass.
    for key_state in crate::repair::cleanup::KeyState::ALL {
        let labels = crate::metrics::KeyStateLabels {
            state: key_state.as_str(),
        };
        drop(state.metrics.redis_campaign_keys.get_or_create(&labels));
    }
    spawn_every(
        state,
        stop,
        crate::repair::cleanup::interval(grace),
        "clean-up after the sale",
        move |s, _| {
            let turn = turn.clone();
            async move {
                let redis = s.gate.redis();
                let pass = crate::repair::cleanup::pass(&s.db, &redis, &turn, grace);
                let Some(counts) = pass.await? else {
                    return Ok(0);
                };
                for state in crate::repair::cleanup::KeyState::ALL {
                    let labels = crate::metrics::KeyStateLabels {
                        state: state.as_str(),
                    };
                    let n = i64::try_from(counts.of(state)).unwrap_or(i64::MAX);
                    s.metrics.redis_campaign_keys.get_or_create(&labels).set(n);
                }
                Ok(counts.expiring as usize)
            }
        },
    );
    let budgets = crate::queue::admit::Budgets::new();
    spawn_every(
        state,
        stop,
        crate::queue::admit::TICK,
        "waiting room admission",
        move |s, stop| {
            let budgets = budgets.clone();
            async move { crate::queue::admit::tick(&s, &budgets, &stop).await }
        },
    );
}

/// Runs `pass` until it ends or `stop` is cancelled, whichever comes first (`Ok(0)` then): for
/// the outbox relays, whose rows are leased while their calls are under way, so a dropped call
/// is made again when its lease ends.
async fn until_stopped(
    stop: &CancellationToken,
    pass: impl std::future::Future<Output = anyhow::Result<usize>>,
) -> anyhow::Result<usize> {
    tokio::select! {
        r = pass => r,
        () = stop.cancelled() => Ok(0),
    }
}

/// Runs `task` every `every` until `stop` is cancelled (the task gets a clone of `stop`, to end
/// a long pass between its units of work), logging its failures as `what failed`
/// and its panics as `what panicked` (the next run comes all the same).
/// A run that overruns delays the next one (no burst of catch-up runs); a run under way when
/// `stop` is cancelled finishes. The task is spawned on `state.tasks`.
pub fn spawn_every<F, Fut>(
    state: &AppState,
    stop: &CancellationToken,
    every: Duration,
    what: &'static str,
    task: F,
) where
    F: Fn(AppState, CancellationToken) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<usize>> + Send,
{
    let s = state.clone();
    let stop = stop.clone();
    state.tasks.spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let run = crate::panics::catch(what, task(s.clone(), stop.clone()));
                    tokio::pin!(run);
                    // A pass under way at the stop is named in the log, so that a shutdown
                    // that passes its deadline says what it waited for.
                    let outcome = tokio::select! {
                        o = &mut run => o,
                        () = stop.cancelled() => {
                            tracing::info!("stopping: {what} finishes its pass");
                            run.await
                        }
                    };
                    // A driver error is logged; a panic too, and the loop goes on.
                    if let Some(Err(e)) = outcome {
                        tracing::error!(error = %e, "{what} failed");
                    }
                }
                _ = stop.cancelled() => return,
            }
        }
    });
}
