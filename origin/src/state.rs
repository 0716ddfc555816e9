//! Shared state of the origin's handlers and background tasks.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use tokio_util::task::TaskTracker;

use crate::campaigns::CampaignCache;
use crate::claims::commit::Committer;
use crate::config::Config;
use crate::gate::flags::SoldOutFlags;
use crate::metrics::Metrics;
use crate::promo::RulesCache;
use crate::redis_conn::RedisConn;

/// Cloned into every handler; all fields are cheap handles.
#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub db: PgPool,
    pub redis: RedisConn,
    pub campaigns: Arc<CampaignCache>,
    pub flags: Arc<SoldOutFlags>,
    pub committer: Committer,
    pub metrics: Arc<Metrics>,
    /// Promo code rules by code.
    pub code_rules: RulesCache,
    /// Every task spawned by the origin past a request (background loops, gate loads, claim
    /// and code-use tasks), joined at shutdown.
    pub tasks: TaskTracker,
    /// Campaigns whose gate this origin is loading right now (single-flight).
    pub loading: Arc<Mutex<HashSet<String>>>,
}

/// The connection options of `config.database_url` with the `statement_timeout` of
/// `config.db_statement_timeout_ms` set on every connection (a run-time parameter sent at
/// connection start-up).
pub fn pg_options(config: &Config) -> Result<PgConnectOptions, sqlx::Error> {
    let options: PgConnectOptions = config.database_url.parse()?;
    Ok(options.options([(
        "statement_timeout",
        config.db_statement_timeout_ms.to_string(),
    )]))
}

/// Commit workers (concurrent transactions of grouped claims).
const COMMIT_WORKERS: usize = 4;

impl AppState {
    /// Connects to PostgreSQL and Redis, applies migrations and starts the commit workers.
    pub async fn connect(config: Config) -> anyhow::Result<Self> {
        let db = PgPoolOptions::new()
            .max_connections(config.db_max_connections)
            .acquire_timeout(Duration::from_secs(3))
            .connect_with(pg_options(&config)?)
            .await?;
        crate::MIGRATOR.run(&db).await?;
        let redis =
            RedisConn::open(&config.redis_url, config.redis_cluster_nodes.as_deref()).await?;
        let cache_ttl = Duration::from_millis(config.campaign_cache_ms);
        Ok(AppState {
            committer: Committer::start(db.clone(), COMMIT_WORKERS, config.commit_batch_max),
            campaigns: Arc::new(CampaignCache::new(cache_ttl)),
            flags: Arc::new(SoldOutFlags::new(cache_ttl, config.winners_snapshot_max)),
            metrics: Arc::new(Metrics::default()),
            code_rules: RulesCache::default(),
            tasks: TaskTracker::new(),
            loading: Arc::new(Mutex::new(HashSet::new())),
            config: Arc::new(config),
            db,
            redis,
        })
    }

    /// Loads the gate of campaign `c` in the background unless this origin is already doing so.
    pub fn spawn_gate_load(&self, c: &str) {
        if !self
            .loading
            .lock()
            .expect("loading lock")
            .insert(c.to_string())
        {
            return;
        }
        let state = self.clone();
        let c = c.to_string();
        self.tasks.spawn(async move {
            let mut redis = state.redis.clone();
            if let Err(e) = crate::gate::load::load(&state.db, &mut redis, &c).await {
                tracing::warn!(campaign = %c, error = %e, "gate load failed; will retry on next claim");
            }
            state.loading.lock().expect("loading lock").remove(&c);
        });
    }
}
