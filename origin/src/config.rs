//! Origin configuration, read from the command line or environment variables (every flag has
//! an env var; `flashgate serve --help` lists them). Secrets are wrapped in
//! [`Secret`] so they never reach a log line.

use std::net::SocketAddr;

use crate::admin::roles::{AdminToken, AdminTokens, Role, LEGACY_TOKEN_NAME};
use crate::secret::Secret;
use flashgate_shared::ip_limit::Ipv6LimitPrefix;

/// Everything `flashgate serve` needs.
#[derive(Debug, Clone, clap::Args)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "FLASHGATE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// PostgreSQL URL (the truth).
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: String,

    /// Redis URL (the gate; rebuilt from PostgreSQL when it loses state).
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    pub redis_url: String,

    /// Redis Cluster seed nodes, `host:port,host:port`; when set, the origin speaks the cluster
    /// protocol to them (scheme and credentials from REDIS_URL) instead of using REDIS_URL's
    /// address.
    #[arg(long, env = "FLASHGATE_REDIS_CLUSTER_NODES")]
    pub redis_cluster_nodes: Option<String>,

    /// One admin token of role `manager`, named `admin` in the audit trail (kept for scripts;
    /// FLASHGATE_ADMIN_TOKENS names several).
    #[arg(long, env = "FLASHGATE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<Secret>,

    /// Named admin tokens with roles: `name:role:token[,name:role:token...]`, role `manager`
    /// (reads and writes) or `viewer` (reads only). See docs/ADMIN.md.
    #[arg(long, env = "FLASHGATE_ADMIN_TOKENS", hide_env_values = true)]
    pub admin_tokens: Option<Secret>,

    /// The parsed admin tokens (filled on first use from the two settings above).
    #[arg(skip)]
    pub parsed_admin_tokens: std::sync::OnceLock<AdminTokens>,

    /// HS256 secret of customer tokens (shared with the edge); unset when customer tokens come
    /// only from an identity provider (`FLASHGATE_JWKS_URL` / `FLASHGATE_JWKS`).
    #[arg(long, env = "FLASHGATE_CUSTOMER_TOKEN_SECRET", hide_env_values = true)]
    pub customer_token_secret: Option<Secret>,

    /// Issuer, audience, leeway, key ids and JWKS of customer tokens (docs/AUTH.md).
    #[command(flatten)]
    pub tokens: crate::customer_tokens::TokenSettings,

    /// Gift fulfilment: provider, relay, test clock (`FLASHGATE_GIFT_*`).
    #[command(flatten)]
    pub gifts: crate::gifts::settings::GiftSettings,

    /// Webhooks: private receivers, relay, rotation overlap (`FLASHGATE_WEBHOOK_*`).
    #[command(flatten)]
    pub webhooks: crate::webhooks::settings::WebhookSettings,

    /// Bearer token for server-to-server calls (pay, release, redeem).
    #[arg(long, env = "FLASHGATE_SERVICE_TOKEN", hide_env_values = true)]
    pub service_token: Secret,

    /// HMAC secret of the edge signature. When set, claims without a valid, fresh edge
    /// signature are refused with 403.
    #[arg(long, env = "FLASHGATE_EDGE_SECRET", hide_env_values = true)]
    pub edge_secret: Option<Secret>,

    /// What sits between the origin and PostgreSQL: `none` (a direct connection, the default)
    /// or `transaction`, a pooler in transaction pooling mode (PgBouncer `pool_mode =
    /// transaction`, RDS Proxy and the like). With `transaction` the origin keeps no prepared
    /// statement on a connection (every statement unnamed, a lone one in a transaction of its
    /// own: [`crate::db::Db`]), sends no start-up parameter a pooler refuses (`extra_float_digits`, `options`, so
    /// `statement_timeout` comes from the server: `ALTER ROLE … SET statement_timeout`), and
    /// takes transaction-scoped locks only. See docs/DEPLOY.md, "Behind a connection pooler".
    #[arg(long, env = "FLASHGATE_DB_POOLER", value_enum, default_value_t = DbPooler::None)]
    pub db_pooler: DbPooler,

    /// Applies the pending migrations at start-up (`true`, the default). With `false` the
    /// origin migrates nothing and refuses to start on a schema older than it needs (run
    /// `flashgate migrate` first); a newer schema is accepted (rolling upgrades).
    #[arg(long, env = "FLASHGATE_MIGRATE", default_value_t = true, action = clap::ArgAction::Set)]
    pub migrate: bool,

    /// PostgreSQL URL migrations run against, direct to the server (not through a pooler);
    /// DATABASE_URL when unset.
    #[arg(long, env = "FLASHGATE_MIGRATION_DATABASE_URL")]
    pub migration_database_url: Option<String>,

    /// Largest PostgreSQL pool size.
    #[arg(long, env = "FLASHGATE_DB_MAX_CONNECTIONS", default_value_t = 16)]
    pub db_max_connections: u32,

    /// Most claims committed in one PostgreSQL transaction (group commit).
    #[arg(long, env = "FLASHGATE_COMMIT_BATCH_MAX", default_value_t = 512)]
    pub commit_batch_max: usize,

    /// How long this origin trusts its cached campaign row and sold-out flag, in
    /// milliseconds. A change made through another origin shows here within this time.
    #[arg(long, env = "FLASHGATE_CAMPAIGN_CACHE_MS", default_value_t = 100)]
    pub campaign_cache_ms: u64,

    /// How long an idempotency key's reply is kept, in seconds (default one day).
    #[arg(
        long,
        env = "FLASHGATE_IDEMPOTENCY_TTL_SECONDS",
        default_value_t = 86_400
    )]
    pub idempotency_ttl_seconds: u64,

    /// How long the Redis keys of a campaign that has ended (closed, or past `ends_at`) are
    /// kept once no hold is outstanding, in seconds, counted from the latest end of a hold
    /// (`ends_at + hold_seconds + hold_extension_seconds`) or the campaign's last change,
    /// whichever is later. The gate can be checked with reconcile until then; PostgreSQL keeps
    /// everything. `flashgate admin purge` deletes them at once.
    #[arg(
        long,
        env = "FLASHGATE_ENDED_KEYS_GRACE_SECONDS",
        default_value_t = 86_400
    )]
    pub ended_keys_grace_seconds: u64,

    /// Largest number of winners of one campaign this origin keeps in memory once it has seen
    /// the sold-out flag, so that a winner's retry still gets her first reply while losers are
    /// answered without Redis. Above it, every claim on a sold-out campaign asks Redis.
    #[arg(
        long,
        env = "FLASHGATE_WINNERS_SNAPSHOT_MAX",
        default_value_t = 1_000_000
    )]
    pub winners_snapshot_max: usize,

    /// Largest number of winners of one campaign listed in the winners filter the edge
    /// fetches once the campaign is sold out (about 1.2 bytes per winner in each edge isolate;
    /// a larger value counts as 1,000,000, the format's bound). Above it the filter says "too many" and the
    /// edge answers every claim after the sell-out `sold_out` (`claims/mine` remains a
    /// winner's way back).
    #[arg(long, env = "FLASHGATE_WINNERS_FILTER_MAX", default_value_t = 250_000)]
    pub winners_filter_max: usize,

    /// How often the hold-expiry sweeper runs, in milliseconds.
    #[arg(long, env = "FLASHGATE_SWEEP_INTERVAL_MS", default_value_t = 1_000)]
    pub sweep_interval_ms: u64,

    /// How long a promo code use stays held without a confirm before the sweeper releases
    /// it, in seconds (10 minutes by default).
    #[arg(long, env = "FLASHGATE_CODE_USE_HOLD_SECONDS", default_value_t = 600)]
    pub code_use_hold_seconds: u64,

    /// Failed promo code tries (`invalid_code`) allowed per customer an hour (token bucket
    /// refilled continuously); 0 turns the limit off.
    #[arg(long, env = "FLASHGATE_CODE_GUESSES_PER_CUSTOMER", default_value_t = 5)]
    pub code_guesses_per_customer: i64,

    /// Failed promo code tries allowed per client IP address an hour; 0 turns it off. The
    /// client IP is the one the edge forwards on a signed request (`Flashgate-Client-Ip`),
    /// else the TCP peer; client-supplied `CF-Connecting-IP` / `X-Forwarded-For` are ignored.
    #[arg(long, env = "FLASHGATE_CODE_GUESSES_PER_IP", default_value_t = 100)]
    pub code_guesses_per_ip: i64,

    /// Every per-client-IP limit (today the promo-code guess limit) counts an IPv6 client per
    /// network prefix of this many bits (32..=128; 64 by default, the smallest prefix a site
    /// is given), since one client may use any address of its prefix; an IPv4-mapped address
    /// (`::ffff:a.b.c.d`) counts as its IPv4 address. The edge's setting of the same name
    /// should say the same ([`flashgate_shared::ip_limit`]).
    #[arg(
        long,
        env = "FLASHGATE_LIMIT_IPV6_PREFIX",
        default_value = "64",
        value_parser = Ipv6LimitPrefix::parse
    )]
    pub limit_ipv6_prefix: Ipv6LimitPrefix,

    /// Most holds the sweeper expires in one statement (one campaign at a time).
    #[arg(long, env = "FLASHGATE_SWEEP_BATCH_MAX", default_value_t = 1_000)]
    pub sweep_batch_max: i64,

    /// Longest time a client may take to send a request's line and headers, in milliseconds
    /// (counted from its first byte, or from the connection's start); past it the connection
    /// is closed without an answer.
    #[arg(
        long,
        env = "FLASHGATE_HEADER_READ_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub header_read_timeout_ms: u64,

    /// Longest time a request body may take to arrive, in milliseconds; past it the request
    /// is answered 408 `request_timeout` and changes nothing.
    #[arg(long, env = "FLASHGATE_BODY_READ_TIMEOUT_MS", default_value_t = 15_000)]
    pub body_read_timeout_ms: u64,

    /// Longest time a request is handled, body included, in milliseconds; past it the request
    /// is answered 408 `request_timeout`.
    #[arg(long, env = "FLASHGATE_REQUEST_TIMEOUT_MS", default_value_t = 60_000)]
    pub request_timeout_ms: u64,

    /// PostgreSQL `statement_timeout` of every pooled connection, in milliseconds (0: none).
    /// A statement cancelled by it (SQLSTATE 57014) is answered 503 `unavailable` +
    /// `Retry-After`.
    #[arg(
        long,
        env = "FLASHGATE_DB_STATEMENT_TIMEOUT_MS",
        default_value_t = 30_000
    )]
    pub db_statement_timeout_ms: u64,

    /// After a stop signal, how long in-flight requests may still run, in milliseconds; the
    /// connections still open after it are closed.
    #[arg(long, env = "FLASHGATE_SHUTDOWN_TIMEOUT_MS", default_value_t = 30_000)]
    pub shutdown_timeout_ms: u64,

    /// Serves `GET /debug/panic`, a route whose handler panics, to test that a panic is
    /// answered 503 `unavailable` + `Retry-After` (never internal text). Off by default; never
    /// turn it on in production.
    #[arg(long, env = "FLASHGATE_DEBUG_PANIC_ROUTE", default_value_t = false)]
    pub debug_panic_route: bool,
    /// Records every request in `flashgate_http_request_duration_seconds` and writes its access
    /// log line (docs/OPERATIONS.md). `false` leaves both out (the other metrics stay): for
    /// measuring their cost (`bench_origin`).
    #[arg(long, env = "FLASHGATE_REQUEST_METRICS", default_value_t = true, action = clap::ArgAction::Set)]
    pub request_metrics: bool,

    /// Shop origins allowed to call the API from a browser (CORS), separated by commas:
    /// `https://shop.example,https://www.shop.example`. Empty (the default): same-origin only,
    /// no CORS headers. See docs/API.md, "CORS".
    #[arg(long, env = "FLASHGATE_CORS_ORIGINS", default_value = "")]
    pub cors_origins: String,
}

pub use crate::db::DbPooler;

/// The manager token of [`Config::for_tests`] (named `admin`).
pub const TEST_MANAGER_TOKEN: &str = "test-admin-token-0123456789abcdef";
/// The viewer token of [`Config::for_tests`] (named `viewer`).
pub const TEST_VIEWER_TOKEN: &str = "test-viewer-token-0123456789abcdef";

impl Config {
    /// The connection options of the pool: [`crate::db::pg_options`] of `database_url`,
    /// `db_pooler` and `db_statement_timeout_ms`.
    ///
    /// # Errors
    /// A `DATABASE_URL` that does not parse.
    pub fn pg_options(&self) -> Result<sqlx::postgres::PgConnectOptions, sqlx::Error> {
        crate::db::pg_options(
            &self.database_url,
            self.db_pooler,
            self.db_statement_timeout_ms,
        )
    }

    /// The connection options migrations run with: `FLASHGATE_MIGRATION_DATABASE_URL`, else
    /// `DATABASE_URL` (behind a transaction pooler with the pooler's settings of
    /// [`Config::pg_options`]). No `statement_timeout`: a migration may take longer than a
    /// request.
    ///
    /// # Errors
    /// A URL that does not parse.
    pub fn migration_options(&self) -> Result<sqlx::postgres::PgConnectOptions, sqlx::Error> {
        if let Some(url) = &self.migration_database_url {
            return url.parse();
        }
        Ok(crate::db::behind(
            self.database_url.parse()?,
            self.db_pooler,
        ))
    }

    /// Parses the admin tokens: `FLASHGATE_ADMIN_TOKEN` as manager `admin`, then every entry of
    /// `FLASHGATE_ADMIN_TOKENS`. The error names the broken entry, never a token.
    pub fn parse_admin_tokens(&self) -> Result<AdminTokens, String> {
        let mut tokens = match &self.admin_tokens {
            Some(list) => list.expose().parse::<AdminTokens>()?,
            None => AdminTokens::new(),
        };
        if let Some(t) = &self.admin_token {
            let mut all = AdminTokens::new();
            all.push(AdminToken::new(LEGACY_TOKEN_NAME, Role::Manager, t.clone()))
                .map_err(|e| format!("FLASHGATE_ADMIN_TOKEN: {e}"))?;
            for entry in tokens.entries() {
                all.push(entry.clone())?;
            }
            tokens = all;
        }
        Ok(tokens)
    }

    /// The admin tokens, parsed once. A broken setting yields no tokens (every admin call is
    /// refused); `flashgate serve` refuses to start with one ([`Config::validate`]).
    pub fn admin_tokens(&self) -> &AdminTokens {
        self.parsed_admin_tokens.get_or_init(|| {
            self.parse_admin_tokens().unwrap_or_else(|e| {
                tracing::error!(error = %e, "admin tokens are misconfigured; admin API refused");
                AdminTokens::new()
            })
        })
    }

    /// The allowed CORS origins of `FLASHGATE_CORS_ORIGINS`
    /// ([`flashgate_shared::cors::parse_origins`]). The error names the variable and the entry.
    pub fn cors_origins(&self) -> Result<Vec<String>, String> {
        flashgate_shared::cors::parse_origins("FLASHGATE_CORS_ORIGINS", Some(&self.cors_origins))
    }

    /// Checks settings that clap cannot: the admin tokens parse and at least one exists, and
    /// `FLASHGATE_CORS_ORIGINS` lists origins, and
    /// every secret — `FLASHGATE_CUSTOMER_TOKEN_SECRET`, `FLASHGATE_SERVICE_TOKEN`,
    /// `FLASHGATE_EDGE_SECRET` (when set, also when set empty), `FLASHGATE_ADMIN_TOKEN` and each
    /// token of `FLASHGATE_ADMIN_TOKENS` — has at least
    /// [`flashgate_shared::MIN_SECRET_BYTES`] bytes. The error names the variable (and the
    /// admin token's name), never a secret.
    pub fn validate(&self) -> Result<(), String> {
        use flashgate_shared::check_secret;
        let secret = |name: &str, s: &Secret| check_secret(name, s.expose().as_bytes());
        if let Some(s) = &self.customer_token_secret {
            secret("FLASHGATE_CUSTOMER_TOKEN_SECRET", s)?;
        }
        self.tokens
            .base_verifier(self.customer_token_secret.as_ref())?;
        secret("FLASHGATE_SERVICE_TOKEN", &self.service_token)?;
        if let Some(s) = &self.edge_secret {
            secret("FLASHGATE_EDGE_SECRET", s)?;
        }
        if let Some(s) = &self.admin_token {
            secret("FLASHGATE_ADMIN_TOKEN", s)?;
        }
        if let Some(list) = &self.admin_tokens {
            for entry in list.expose().parse::<AdminTokens>()?.entries() {
                secret(
                    &format!("FLASHGATE_ADMIN_TOKENS (token {})", entry.name),
                    &entry.token,
                )?;
            }
        }
        self.cors_origins()?;
        let tokens = self.parse_admin_tokens()?;
        if tokens.is_empty() {
            return Err(
                "no admin token: set FLASHGATE_ADMIN_TOKEN or FLASHGATE_ADMIN_TOKENS".into(),
            );
        }
        Ok(())
    }

    /// A configuration for tests and tools: the given URLs, the test secrets and tokens
    /// ([`TEST_MANAGER_TOKEN`], [`TEST_VIEWER_TOKEN`]), listening on an ephemeral port of
    /// 127.0.0.1, the sweeper every 200 ms (tests wait for expiries), and every other setting
    /// at its declared default (environment variables are not read).
    pub fn for_tests(database_url: &str, redis_url: &str) -> Self {
        let viewer = format!("viewer:viewer:{TEST_VIEWER_TOKEN}");
        flashgate_shared::settings::from_declarations(&[
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            database_url,
            "--redis-url",
            redis_url,
            "--admin-token",
            TEST_MANAGER_TOKEN,
            "--admin-tokens",
            &viewer,
            "--customer-token-secret",
            "test-customer-secret-0123456789abcdef",
            "--service-token",
            "test-service-token-0123456789abcdef",
            "--sweep-interval-ms",
            "200",
            // Test receivers listen on 127.0.0.1 over plain http; every origin of a test run
            // may relay any test's deliveries, so all of them allow it, and retry within
            // milliseconds instead of the schedule's minutes.
            "--webhook-allow-private",
            "--webhook-retry-divisor",
            "1000",
            "--webhook-relay-interval-ms",
            "100",
        ])
        .expect("the test configuration parses")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_configuration_is_valid() {
        assert_eq!(
            Config::for_tests("postgres://x", "redis://x").validate(),
            Ok(())
        );
    }

    #[test]
    fn the_test_configuration_keeps_the_declared_defaults() {
        let c = Config::for_tests("postgres://x", "redis://x");
        assert_eq!(c.listen.to_string(), "127.0.0.1:0");
        assert_eq!((c.sweep_interval_ms, c.commit_batch_max), (200, 512));
        assert_eq!(
            (c.db_pooler, c.migrate, c.request_metrics),
            (DbPooler::None, true, true)
        );
        assert_eq!(c.tokens.jwks_ttl_seconds, 600);
        assert_eq!(c.gifts.gift_relay_interval_ms, 200);
        assert!(c.gifts.gift_provider_url.is_none() && c.edge_secret.is_none());
        assert_eq!(c.admin_tokens().entries().len(), 2);
    }

    #[test]
    fn every_secret_shorter_than_32_bytes_is_refused_by_its_variable() {
        let short = || Secret::new("x".repeat(31));
        /// A variable's name and a change of the configuration that breaks it.
        type Case = (&'static str, Box<dyn Fn(&mut Config)>);
        let cases: Vec<Case> = vec![
            (
                "FLASHGATE_CUSTOMER_TOKEN_SECRET",
                Box::new(|c| c.customer_token_secret = Some(Secret::new(""))),
            ),
            (
                "FLASHGATE_CUSTOMER_TOKEN_SECRET",
                Box::new(move |c| c.customer_token_secret = Some(short())),
            ),
            (
                "FLASHGATE_SERVICE_TOKEN",
                Box::new(move |c| c.service_token = short()),
            ),
            (
                "FLASHGATE_EDGE_SECRET",
                Box::new(|c| c.edge_secret = Some(Secret::new(""))),
            ),
            (
                "FLASHGATE_EDGE_SECRET",
                Box::new(move |c| c.edge_secret = Some(short())),
            ),
            (
                "FLASHGATE_ADMIN_TOKEN",
                Box::new(move |c| c.admin_token = Some(short())),
            ),
            (
                "FLASHGATE_ADMIN_TOKENS (token ops)",
                Box::new(|c| c.admin_tokens = Some(Secret::new("ops:viewer:short"))),
            ),
        ];
        for (variable, break_it) in cases {
            let mut c = Config::for_tests("postgres://x", "redis://x");
            break_it(&mut c);
            let e = c.validate().unwrap_err();
            assert!(
                e.starts_with(&format!("{variable} must be at least 32 bytes long")),
                "{variable}: {e}"
            );
            assert!(
                !e.contains("xxxxxxxx") && !e.contains("short"),
                "no secret in {e}"
            );
        }
    }

    #[test]
    fn an_identity_provider_alone_needs_no_customer_token_secret_and_no_key_at_all_is_refused() {
        let mut c = Config::for_tests("postgres://x", "redis://x");
        c.customer_token_secret = None;
        assert_eq!(
            c.validate(),
            Err(flashgate_shared::token::keys::NO_KEYS.to_string())
        );
        c.tokens.jwks_url = Some("https://idp.example/.well-known/jwks.json".into());
        assert_eq!(c.validate(), Ok(()));
        c.tokens.jwks_url = None;
        c.tokens.customer_token_secrets = Some(Secret::new(format!("k1:{}", "s".repeat(32))));
        assert_eq!(c.validate(), Ok(()));
    }
}
