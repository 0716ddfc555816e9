//! Shared state of the origin's handlers and background tasks.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use tokio_util::task::TaskTracker;

use crate::campaigns::CampaignCache;
use crate::claims::commit::Committer;
use crate::claims::service::ClaimService;
use crate::config::{Config, DbPooler};
use crate::db::Db;
use crate::gate::flags::SoldOutFlags;
use crate::gate::loader::GateLoader;
use crate::gate::Gate;
use crate::holds::returns::GateReturns;
use crate::metrics::Metrics;
use crate::promo::service::PromoService;
use crate::promo::RulesCache;
use crate::queue::turns::JoinTurns;
use crate::redis_conn::RedisConn;

/// The bag of handles the HTTP layer and the background tasks hold ([`Handles`] behind one
/// `Arc`): axum clones it into every handler and layer of every request, so a clone is one
/// reference count, not one per handle. Its fields are read through `Deref`. Domain code takes
/// only the handles it uses (built here: [`AppState::claims`], [`AppState::promo`],
/// [`AppState::gate_returns`]).
#[derive(Clone)]
pub struct AppState(Arc<Handles>);

impl std::ops::Deref for AppState {
    type Target = Handles;

    fn deref(&self) -> &Handles {
        &self.0
    }
}

/// The handles of [`AppState`]; all are cheap to clone.
pub struct Handles {
    pub config: Arc<Config>,
    /// PostgreSQL: statements unnamed behind a transaction pooler ([`Db`]).
    pub db: Db,
    pub redis: RedisConn,
    /// The gate's handle: the same Redis, plus each campaign's shard count once read.
    pub gate: Gate,
    pub campaigns: Arc<CampaignCache>,
    pub flags: Arc<SoldOutFlags>,
    pub committer: Committer,
    pub metrics: Arc<Metrics>,
    /// Promo code rules by code.
    pub code_rules: RulesCache,
    /// Every task spawned by the origin past a request (background loops, gate loads, claim
    /// and code-use tasks), joined at shutdown.
    pub tasks: TaskTracker,
    /// Verifies customer tokens (keys, issuer, audience; the JWKS kept fresh).
    pub customer_tokens: Arc<crate::customer_tokens::CustomerTokens>,
    /// Loads campaign gates in the background, single-flight per campaign.
    pub gate_loader: GateLoader,
    /// The waiting room's join turns (a bounded number of joins in their Redis step at once).
    pub join_turns: JoinTurns,
    /// This origin's id and its takes in flight (pending tokens name their origin; its lease
    /// in Redis tells the others it is alive).
    pub takes: crate::gate::takes::Takes,
    /// Gift fulfilment metrics (lock wait, replays, provider calls, outbox lag).
    pub gift_metrics: Arc<crate::gifts::metrics::GiftMetrics>,
    /// Webhook metrics (deliveries by result and endpoint, lag, queue depth).
    pub webhook_metrics: Arc<crate::webhooks::metrics::WebhookMetrics>,
    /// Which campaigns are draws ([`crate::access::admit::is_draw`]).
    pub draw_kinds: Arc<crate::access::admit::DrawKinds>,
}

/// Applies the migrations, or checks the schema when `FLASHGATE_MIGRATE=false`; behind a
/// transaction pooler, logs the server's `statement_timeout` (not set by the origin there).
async fn prepare_schema(config: &Config, db: &Db) -> anyhow::Result<()> {
    if config.migrate {
        let done = crate::migrate::run(&config.migration_options()?)
            .await
            .map_err(|e| anyhow::anyhow!("migrations failed: {e}"))?;
        tracing::info!(applied = ?done.applied, schema = done.current, "migrations checked");
    } else {
        let current = crate::migrate::check_schema(db).await?;
        tracing::info!(
            schema = current,
            "schema is current (FLASHGATE_MIGRATE=false)"
        );
    }
    if config.db_pooler == DbPooler::Transaction {
        let timeout: String = sqlx::query_scalar("SELECT current_setting('statement_timeout')")
            .persistent(false)
            .fetch_one(db)
            .await?;
        tracing::info!(
            statement_timeout = %timeout,
            "behind a transaction pooler: statement_timeout is the server's (ALTER ROLE … SET statement_timeout)"
        );
    }
    Ok(())
}

/// A pooled connection idle for at least this long is pinged before it is handed out.
const PING_IDLE_AFTER: Duration = Duration::from_secs(1);

/// Commit workers (concurrent transactions of grouped claims).
const COMMIT_WORKERS: usize = 4;

impl AppState {
    /// Connects to PostgreSQL and Redis, applies migrations (or, with `FLASHGATE_MIGRATE=false`,
    /// checks that the schema is current) and starts the commit workers. Errors: a service
    /// that cannot be reached (its TLS certificate refused included), a failed migration,
    /// [`crate::migrate::SchemaTooOld`].
    pub async fn connect(config: Config) -> anyhow::Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(config.db_max_connections)
            .acquire_timeout(Duration::from_secs(3))
            // sqlx pings every idle connection it hands out (a round trip and a statement in
            // PostgreSQL per acquire: per winner, several). Under load a connection went back
            // to the pool microseconds ago, so only one idle for longer than
            // `PING_IDLE_AFTER` is pinged; a dead one is closed and another taken, as before.
            // sqlx still pings each connection as it goes back to the pool, so one broken
            // under a query is closed there, not handed out again.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for < PING_IDLE_AFTER {
                        return Ok(true);
                    }
                    Ok(sqlx::Connection::ping(conn).await.is_ok())
                })
            })
            .connect_with(config.pg_options()?)
            .await
            .map_err(|e| anyhow::anyhow!("cannot connect to PostgreSQL (DATABASE_URL): {e}"))?;
        let db = Db::new(pool, config.db_pooler);
        prepare_schema(&config, &db).await?;
        let redis = RedisConn::open(&config.redis_url, config.redis_cluster_nodes.as_deref())
            .await
            .map_err(|e| anyhow::anyhow!("cannot connect to Redis (REDIS_URL): {e}"))?;
        let cache_ttl = Duration::from_millis(config.campaign_cache_ms);
        let tasks = TaskTracker::new();
        let gate = Gate::new(redis.clone());
        let gift_metrics = Arc::new(crate::gifts::metrics::GiftMetrics::default());
        let mut metrics = Metrics::new();
        gift_metrics.register(metrics.registry_mut());
        let webhook_metrics = Arc::new(crate::webhooks::metrics::WebhookMetrics::default());
        webhook_metrics.register(metrics.registry_mut());
        metrics.announce_guess_buckets(crate::promo::guess::Bucket::ALL.map(|b| b.as_str()));
        let metrics = Arc::new(metrics);
        Ok(AppState(Arc::new(Handles {
            gate_loader: GateLoader::new(db.clone(), gate.clone(), tasks.clone(), metrics.clone()),
            committer: Committer::start(
                db.clone(),
                COMMIT_WORKERS,
                config.commit_batch_max,
                metrics.clone(),
            ),
            campaigns: Arc::new(CampaignCache::new(cache_ttl)),
            draw_kinds: Arc::new(crate::access::admit::DrawKinds::new(cache_ttl)),
            flags: Arc::new(SoldOutFlags::new(cache_ttl, config.winners_snapshot_max)),
            metrics,
            code_rules: RulesCache::default(),
            tasks,
            customer_tokens: Arc::new(
                crate::customer_tokens::CustomerTokens::new(
                    &config.tokens,
                    config.customer_token_secret.as_ref(),
                )
                .map_err(anyhow::Error::msg)?,
            ),
            config: Arc::new(config),
            db,
            redis,
            join_turns: JoinTurns::default(),
            gate,
            takes: crate::gate::takes::Takes::new(),
            gift_metrics,
            webhook_metrics,
        })))
    }

    /// The handles of the claim path.
    pub fn claims(&self) -> ClaimService {
        ClaimService {
            db: self.db.clone(),
            redis: self.redis.clone(),
            gate: self.gate.clone(),
            campaigns: self.campaigns.clone(),
            flags: self.flags.clone(),
            committer: self.committer.clone(),
            metrics: self.metrics.clone(),
            gate_loader: self.gate_loader.clone(),
            tasks: self.tasks.clone(),
            takes: self.takes.clone(),
            idempotency_ttl_seconds: self.config.idempotency_ttl_seconds,
        }
    }

    /// The handles of the promo code service.
    pub fn promo(&self) -> PromoService {
        PromoService {
            db: self.db.clone(),
            redis: self.redis.clone(),
            rules: self.code_rules.clone(),
            tasks: self.tasks.clone(),
            guesses_per_customer: self.config.code_guesses_per_customer,
            guesses_per_ip: self.config.code_guesses_per_ip,
            use_hold_seconds: self.config.code_use_hold_seconds,
            idempotency_ttl_seconds: self.config.idempotency_ttl_seconds,
            metrics: self.metrics.clone(),
        }
    }

    /// The handles of gift fulfilment.
    pub fn gifts(&self) -> crate::gifts::GiftService {
        crate::gifts::GiftService {
            db: self.db.clone(),
            metrics: self.gift_metrics.clone(),
            test_clock: self.config.gifts.gift_test_clock,
        }
    }

    /// The handles that give units back to the gate.
    pub fn gate_returns(&self) -> GateReturns {
        GateReturns {
            db: self.db.clone(),
            gate: self.gate.clone(),
            flags: self.flags.clone(),
            campaigns: self.campaigns.clone(),
        }
    }
}

impl AppState {
    /// This origin's gift relay over HTTP to `FLASHGATE_GIFT_PROVIDER_URL`; `None` when unset.
    pub fn gift_relay(&self) -> Option<crate::gifts::relay::Relay> {
        let s = &self.config.gifts;
        let url = s.gift_provider_url.as_deref()?;
        let provider = crate::gifts::provider::HttpProvider::new(
            url,
            Duration::from_millis(s.gift_provider_timeout_ms),
        );
        Some(crate::gifts::relay::Relay::new(
            self.db.clone(),
            self.gift_metrics.clone(),
            Arc::new(provider),
            s,
        ))
    }

    /// This origin's webhook relay.
    pub fn webhook_relay(&self) -> crate::webhooks::relay::Relay {
        let s = &self.config.webhooks;
        crate::webhooks::relay::Relay::new(
            self.db.clone(),
            self.webhook_metrics.clone(),
            s,
            self.takes.clone(),
        )
    }
}
