//! Loads campaign gates in the background ([`super::load::load`] on a task of its own),
//! single-flight per campaign within this origin.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::db::Db;
use tokio_util::task::TaskTracker;

use super::load::Reload;
use super::Gate;

/// Loads the gate of a campaign in the background unless this origin is already doing so.
#[derive(Clone)]
pub struct GateLoader {
    db: Db,
    gate: Gate,
    tasks: TaskTracker,
    /// Campaigns whose gate this origin is loading right now.
    loading: Arc<Mutex<HashSet<String>>>,
    metrics: Arc<crate::metrics::Metrics>,
}

impl GateLoader {
    /// A loader of campaign gates through `gate`, reading `db`, its tasks on `tasks`; each
    /// load started is counted in `metrics` (`flashgate_gate_loads_total`).
    pub fn new(
        db: Db,
        gate: Gate,
        tasks: TaskTracker,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Self {
        GateLoader {
            db,
            gate,
            tasks,
            loading: Arc::default(),
            metrics,
        }
    }

    /// Loads the gate of campaign `c` on a task of `tasks` unless one is already loading it or
    /// it is loaded by then ([`Reload::IfMissing`]: a gate that was missing when the caller
    /// looked and was loaded since is left alone). A failed load is logged; the next claim
    /// that finds the gate unloaded tries again.
    pub fn spawn(&self, c: &str) {
        self.run(c, Reload::IfMissing);
    }

    /// Reloads the gate of campaign `c` from PostgreSQL on a task of `tasks`, replacing what
    /// is there ([`Reload::Always`]: the gate disagreed with PostgreSQL), unless a load of it
    /// is already running here.
    pub fn spawn_reload(&self, c: &str) {
        self.run(c, Reload::Always);
    }

    fn run(&self, c: &str, when: Reload) {
        if !self
            .loading
            .lock()
            .expect("loading lock")
            .insert(c.to_string())
        {
            return;
        }
        self.metrics.gate_loads.inc();
        let this = self.clone();
        let c = c.to_string();
        self.tasks.spawn(async move {
            let mut gate = this.gate.clone();
            let load = super::load::load_when(&this.db, &mut gate, &c, when);
            if let Some(Err(e)) = crate::panics::catch("gate load", load).await {
                tracing::warn!(campaign = %c, error = %e, "gate load failed; will retry on next claim");
            }
            // Also after a panic, so that the next claim can try again.
            this.loading.lock().expect("loading lock").remove(&c);
        });
    }
}
