//! Support for tests against real services: an origin running in-process on an ephemeral
//! port over the test PostgreSQL and Redis, campaign fixtures, customer tokens and requests.
//!
//! Services: `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/flashgate_test`, created
//! when missing) and `REDIS_URL` (default `redis://127.0.0.1:6379/0`, or a Redis Cluster:
//! `redis+cluster://host:port,...`, see [`redis_conn`]). Tests share them and stay
//! out of each other's way by using unique campaign ids and customer ids ([`unique`]).

use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Duration, Utc};
use flashgate_origin::config::Config;
use flashgate_origin::metrics::Counter;
use flashgate_origin::server::{self, RunningOrigin};
use flashgate_shared::api::{CampaignKind, NewCampaign};
use serde::Serialize;
use serde_json::Value;
use sqlx::PgPool;

mod bins;
mod databases;
pub mod draws;
mod edge;
mod edge_calls;
pub mod fake_room;
mod gate;
pub mod holds;
pub mod logs;
mod origin_calls;
mod own_redis;
mod poll;
mod promo;
mod raw;
mod redis_handle;
pub mod room;
pub mod scrape;
pub mod variants;
pub use bins::{flashgate_bin, run_admin_cli};
pub use databases::{drop_db, fresh_db, own_services, OwnServices};
pub use edge::{ensure_edge_built, repo_root, EdgeRuntime, TestEdge};
pub use edge_calls::{
    claims_at_once, edge_claim, edge_with, get, post_edge_report, reply, sale_behind_edge,
    sell_out_at_origin, send_claim, status_url, winners_filter_of, ClaimReq, EdgeSettings, Reply,
};
pub use gate::{
    assert_reconciled, customers, gate_keys_present, gate_remaining, idempotency_record_key,
    sold_out_flag_set, stop_reconciled,
};
pub use own_redis::{own_redis_db, OwnRedisDb};
pub use poll::{eventually, eventually_blocking, eventually_timed, until_state, POLL_STEP_MS};
pub use promo::{
    check_at, enc, fresh_code_name, fresh_ip, new_batch, new_code, one_time_rules, post_raw,
    use_at, use_body, Shopper,
};
pub use raw::{
    claim_at, claim_via, customer_secret, edge_headers, send_raw, token_for, RawReply,
    TEST_EDGE_SECRET,
};
pub use redis_handle::{cluster_nodes, lose_redis_state, redis_conn, redis_is_cluster, redis_of};

/// Default PostgreSQL URL of the tests.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/flashgate_test";
/// How many of `replies` have `status` and `"result": result`.
pub fn count_replies(replies: &[(u16, Value)], status: u16, result: &str) -> usize {
    replies
        .iter()
        .filter(|(s, b)| *s == status && b["result"] == result)
        .count()
}

/// Default Redis URL of the tests.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379/0";

/// The test PostgreSQL URL.
pub fn database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.into())
}

/// The test Redis URL.
pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| DEFAULT_REDIS_URL.into())
}

/// The test Redis URL with its database number replaced by `db` (for a test that flushes its
/// own database). A Redis Cluster has database 0 only: its URL is returned unchanged (such a
/// test then loses its state with [`lose_redis_state`], which deletes only what it owns).
pub fn redis_url_with_db(db: u8) -> String {
    let url = redis_url();
    if redis_is_cluster() {
        return url;
    }
    let base = match url.rsplit_once('/') {
        Some((head, n))
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && !head.ends_with('/') =>
        {
            head.to_string()
        }
        _ => url.trim_end_matches('/').to_string(),
    };
    format!("{base}/{db}")
}

/// Creates the test database when it does not exist (connecting to `postgres` on the same
/// server).
pub async fn ensure_database(url: &str) {
    use sqlx::ConnectOptions;
    let opts: sqlx::postgres::PgConnectOptions = url.parse().expect("DATABASE_URL parses");
    let name = opts.get_database().unwrap_or("postgres").to_string();
    let mut admin = opts
        .clone()
        .database("postgres")
        .connect()
        .await
        .expect("connect to the postgres database");
    let exists: Option<(i32,)> = sqlx::query_as("SELECT 1 FROM pg_database WHERE datname = $1")
        .bind(&name)
        .fetch_optional(&mut admin)
        .await
        .expect("query pg_database");
    if exists.is_none() {
        // Two test binaries may race to create it; the loser's error is harmless.
        let _ = sqlx::query(&format!("CREATE DATABASE \"{name}\""))
            .execute(&mut admin)
            .await;
    }
}

/// A unique suffix for ids, so tests sharing one database never collide.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}-{}",
        std::process::id(),
        Utc::now().timestamp_micros() % 1_000_000_000,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The test configuration with [`TEST_EDGE_SECRET`] as the edge secret (what a waiting room
/// needs).
pub fn queue_config() -> Config {
    let mut config = test_config();
    config.edge_secret = Some(flashgate_origin::secret::Secret::new(TEST_EDGE_SECRET));
    // The tests' client and origin share one process: 5,000 connections opened at once on a
    // loaded 2-core machine left some requests unread past the 10 s slow-client bound, and
    // those connections were closed unanswered; 60 s keeps that bound out of these tests.
    config.header_read_timeout_ms = 60_000;
    config
}

/// The configuration the tests run origins with. Behind a connection pooler (the PgBouncer
/// leg of scripts/test) `FLASHGATE_DB_POOLER=transaction` and `FLASHGATE_MIGRATION_DATABASE_URL`
/// (the direct URL) are taken from the environment.
pub fn test_config() -> Config {
    let mut config = Config::for_tests(&database_url(), &redis_url());
    config.redis_cluster_nodes = cluster_nodes();
    if std::env::var("FLASHGATE_DB_POOLER").as_deref() == Ok("transaction") {
        config.db_pooler = flashgate_origin::config::DbPooler::Transaction;
    }
    config.migration_database_url = std::env::var("FLASHGATE_MIGRATION_DATABASE_URL").ok();
    config
}

/// The URL the tests check PostgreSQL with: the direct one (`FLASHGATE_MIGRATION_DATABASE_URL`)
/// when the origin runs behind a pooler, else [`database_url`].
pub fn direct_database_url() -> String {
    std::env::var("FLASHGATE_MIGRATION_DATABASE_URL").unwrap_or_else(|_| database_url())
}

/// [`test_config`] with the edge secret [`TEST_EDGE_SECRET`]: the origin then takes only
/// requests signed as the edge forwards them (an edge started with the same secret, or
/// [`edge_headers`]).
pub fn signed_test_config() -> Config {
    let mut config = test_config();
    config.edge_secret = Some(flashgate_origin::secret::Secret::new(TEST_EDGE_SECRET));
    config
}

/// An origin running in this process, plus a client and a pool for checking the database.
pub struct TestOrigin {
    pub origin: RunningOrigin,
    pub url: String,
    pub http: reqwest::Client,
    pub db: PgPool,
    pub config: Config,
}

impl TestOrigin {
    /// Starts an origin with the test configuration.
    pub async fn start() -> Self {
        Self::start_with(test_config()).await
    }

    /// Starts an origin with [`signed_test_config`] (the edge secret [`TEST_EDGE_SECRET`]).
    pub async fn start_signed() -> Self {
        Self::start_with(signed_test_config()).await
    }

    /// Starts an origin with `config`.
    pub async fn start_with(config: Config) -> Self {
        // The test's own statements go straight to the server (sqlx's named statements would
        // not survive a transaction pooler).
        let direct = match &config.migration_database_url {
            Some(url) => url.clone(),
            None => config.database_url.clone(),
        };
        ensure_database(&direct).await;
        let origin = server::spawn(config.clone()).await.expect("origin starts");
        let db = PgPool::connect(&direct).await.expect("test pool");
        TestOrigin {
            url: origin.url(),
            origin,
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(256)
                .build()
                .expect("client"),
            db,
            config,
        }
    }

    /// Stops the origin gracefully.
    pub async fn stop(self) {
        self.origin.shutdown().await.expect("clean shutdown");
    }

    /// Claims that reached this origin's claim handler so far (the
    /// `flashgate_claim_requests_total` counter).
    pub fn claim_requests(&self) -> u64 {
        self.origin.state.metrics.claim_requests.get()
    }

    /// Status reads that reached this origin so far (the `flashgate_status_requests_total`
    /// counter).
    pub fn status_requests(&self) -> u64 {
        self.origin.state.metrics.status_requests.get()
    }

    /// The admin token of role `manager` (named `admin`) this origin accepts.
    pub fn manager_token(&self) -> &str {
        self.config
            .admin_token
            .as_ref()
            .map(|t| t.expose())
            .unwrap_or(flashgate_origin::config::TEST_MANAGER_TOKEN)
    }

    /// The admin token of role `viewer` (named `viewer`) of the test configuration.
    pub fn viewer_token(&self) -> &str {
        flashgate_origin::config::TEST_VIEWER_TOKEN
    }

    /// Sends an admin API request (`path` from the root, e.g. `/admin/v1/campaigns`) with an
    /// optional bearer token and JSON body; returns status and JSON body (`Value::Null` when
    /// not JSON).
    pub async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("admin request");
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// Sends an admin API request like [`TestOrigin::admin`], with an `Idempotency-Key` when
    /// `key` is given; returns status, JSON body and whether the reply was a replay (the
    /// `Idempotent-Replayed: true` header).
    pub async fn admin_keyed(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        key: Option<&str>,
        body: impl Serialize,
    ) -> (u16, Value, bool) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(token)
            .json(&body);
        if let Some(k) = key {
            req = req.header("idempotency-key", k);
        }
        let res = req.send().await.expect("admin request");
        let status = res.status().as_u16();
        let replayed = res
            .headers()
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true");
        (status, res.json().await.unwrap_or(Value::Null), replayed)
    }

    /// `PATCH /admin/v1/campaigns/{campaign}` with the manager token; returns status and body.
    /// `body` is a [`ChangeRequest`](flashgate_shared::api::ChangeRequest), or a JSON value for a deliberately malformed body.
    pub async fn change(&self, campaign: &str, body: impl Serialize) -> (u16, Value) {
        let path = format!("/admin/v1/campaigns/{campaign}");
        let token = self.manager_token().to_string();
        let body = serde_json::to_value(body).expect("change body");
        self.admin(reqwest::Method::PATCH, &path, Some(&token), Some(body))
            .await
    }

    /// A customer token for `customer`, valid for an hour.
    pub fn token(&self, customer: &str) -> String {
        token_for(&self.config, customer)
    }

    /// The HS256 secret of this origin's customer tokens, as bytes (to mint tokens by hand).
    pub fn customer_secret(&self) -> Vec<u8> {
        customer_secret(&self.config).as_bytes().to_vec()
    }
}
