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
mod poll;
mod promo;
mod raw;
mod redis_handle;
pub mod room;
pub mod scrape;
pub mod variants;
pub use bins::flashgate_bin;
pub use databases::{drop_db, fresh_db};
pub use edge::{ensure_edge_built, repo_root, EdgeRuntime, TestEdge};
pub use edge_calls::{
    claims_at_once, edge_claim, edge_with, get, reply, sale_behind_edge, sell_out_at_origin,
    send_claim, status_url, winners_filter_of, ClaimReq, EdgeSettings, Reply,
};
pub use gate::{
    assert_reconciled, customers, gate_keys_present, gate_remaining, idempotency_record_key,
    sold_out_flag_set, stop_reconciled,
};
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

    /// Creates an active campaign (started a minute ago, ends in an hour) and returns its id.
    pub async fn campaign(&self, kind: &str, stock: i64) -> String {
        let id = unique(kind);
        let now = Utc::now();
        self.create_campaign(
            &id,
            kind,
            stock,
            now - Duration::minutes(1),
            now + Duration::hours(1),
            None,
        )
        .await;
        id
    }

    /// Creates a campaign through the admin API; panics unless 201.
    pub async fn create_campaign(
        &self,
        id: &str,
        kind: &str,
        stock: i64,
        starts_at: DateTime<Utc>,
        ends_at: DateTime<Utc>,
        hold_seconds: Option<i64>,
    ) -> Value {
        self.create(&NewCampaign {
            id: id.into(),
            name: format!("Campaign {id}"),
            kind: CampaignKind::parse(kind).expect("kind is sale or giveaway"),
            stock,
            starts_at,
            ends_at,
            hold_seconds,
            hold_extension_seconds: None,
            gate_shards: None,
            waiting_room: None,
            access: None,
            draw: None,
            variants: None,
        })
        .await
    }

    /// Creates an active sale (started a minute ago, ends in an hour) of `stock` units whose
    /// claims are holds of `hold_seconds`, and returns its id.
    pub async fn held_sale(&self, stock: i64, hold_seconds: i64) -> String {
        let id = unique("held");
        let now = Utc::now();
        self.create_campaign(
            &id,
            "sale",
            stock,
            now - Duration::minutes(1),
            now + Duration::hours(1),
            Some(hold_seconds),
        )
        .await;
        id
    }

    /// Creates an active campaign (started a minute ago, ends in an hour) whose gate has
    /// `shards` shards, and returns its id.
    pub async fn sharded_campaign(&self, kind: &str, stock: i64, shards: i64) -> String {
        let id = unique(kind);
        let now = Utc::now();
        self.create(&NewCampaign {
            id: id.clone(),
            name: format!("Campaign {id}"),
            kind: CampaignKind::parse(kind).expect("kind is sale or giveaway"),
            stock,
            starts_at: now - Duration::minutes(1),
            ends_at: now + Duration::hours(1),
            hold_seconds: None,
            hold_extension_seconds: None,
            gate_shards: Some(shards),
            waiting_room: None,
            access: None,
            draw: None,
            variants: None,
        })
        .await;
        id
    }

    /// Sends `body` to `POST /admin/v1/campaigns`; panics unless 201. Returns the reply.
    pub async fn create(&self, body: &NewCampaign) -> Value {
        let res = self
            .http
            .post(format!("{}/admin/v1/campaigns", self.url))
            .bearer_auth(self.manager_token())
            .json(body)
            .send()
            .await
            .expect("create campaign");
        let status = res.status();
        let body: Value = res.json().await.expect("json");
        assert_eq!(status, 201, "create campaign: {body}");
        body
    }

    /// Sends a claim with `{}` for `customer` with idempotency key `key`; returns status and body.
    pub async fn claim(&self, campaign: &str, customer: &str, key: &str) -> (u16, Value) {
        claim_at(&self.http, &self.url, &self.token(customer), campaign, key).await
    }

    /// POSTs `body` (JSON) to `/api/v1/claims/{id}/{action}` (`pay`, `release`, ...) with
    /// `token` as bearer; returns the status and the JSON body (`null` when none).
    pub async fn claim_action(
        &self,
        id: &str,
        action: &str,
        token: &str,
        body: &impl Serialize,
    ) -> (u16, Value) {
        let res = self
            .http
            .post(format!("{}/api/v1/claims/{id}/{action}", self.url))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .expect("request");
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// `GET /admin/v1/campaigns/{c}/reconcile` with the viewer token; panics unless 200.
    pub async fn reconcile(&self, c: &str) -> Value {
        let path = format!("/admin/v1/campaigns/{c}/reconcile");
        let (s, b) = self
            .admin(reqwest::Method::GET, &path, Some(self.viewer_token()), None)
            .await;
        assert_eq!(s, 200, "{b}");
        b
    }

    /// Every customer of `customers` claims `campaign` at once, each from her own task (key
    /// `k-<customer>`); returns status and body per customer, in order.
    pub async fn stampede(&self, campaign: &str, customers: &[String]) -> Vec<(u16, Value)> {
        futures::future::join_all(customers.iter().map(|c| {
            let token = self.token(c);
            let (http, url, campaign) = (self.http.clone(), self.url.clone(), campaign.to_string());
            let key = format!("k-{c}");
            tokio::spawn(async move { claim_at(&http, &url, &token, &campaign, &key).await })
        }))
        .await
        .into_iter()
        .map(|r| r.expect("task"))
        .collect()
    }

    /// `n` new customers (unique ids) claim `campaign` at once; panics unless every claim is
    /// a 201. Returns the `claim` objects of the replies, in order.
    pub async fn winners(&self, campaign: &str, n: usize) -> Vec<Value> {
        let run = unique("win");
        let people: Vec<String> = (0..n).map(|i| format!("{run}-{i}")).collect();
        futures::future::join_all(people.iter().map(|p| self.claim(campaign, p, "k")))
            .await
            .into_iter()
            .map(|(status, body)| {
                assert_eq!(status, 201, "{body}");
                body["claim"].clone()
            })
            .collect()
    }

    /// Joins `campaign`'s waiting room as `customer` directly at this origin, signed as the edge
    /// would when this origin has an edge secret. Returns status and JSON body.
    pub async fn join(&self, campaign: &str, customer: &str) -> (u16, Value) {
        let path = format!("/api/v1/campaigns/{campaign}/queue");
        let auth = format!("Bearer {}", self.token(customer));
        let mut headers = vec![("authorization", auth.clone())];
        if let Some(secret) = &self.config.edge_secret {
            headers.extend(edge_headers(
                secret.expose(),
                "POST",
                &path,
                b"",
                Some(&auth),
                None,
                None,
            ));
        }
        let url = format!("{}{path}", self.url);
        let r = send_raw(&self.http, reqwest::Method::POST, &url, None, &headers, "").await;
        (r.status, r.body)
    }

    /// Sends a claim directly to this origin as `customer`, signed as the edge would (this
    /// origin must have an edge secret), with an optional `Flashgate-Admission` token.
    pub async fn signed_claim(
        &self,
        campaign: &str,
        customer: &str,
        admission: Option<&str>,
    ) -> RawReply {
        self.signed_claim_with_key(campaign, customer, admission, &unique("k"))
            .await
    }

    /// [`TestOrigin::signed_claim`] with the `Idempotency-Key` `key` (a retry sends the same).
    pub async fn signed_claim_with_key(
        &self,
        campaign: &str,
        customer: &str,
        admission: Option<&str>,
        key: &str,
    ) -> RawReply {
        let secret = self.config.edge_secret.as_ref().expect("an edge secret");
        let path = format!("/api/v1/campaigns/{campaign}/claims");
        let auth = format!("Bearer {}", self.token(customer));
        let key = key.to_string();
        let mut headers = vec![
            ("authorization", auth.clone()),
            ("idempotency-key", key.clone()),
            ("content-type", "application/json".to_string()),
        ];
        headers.extend(edge_headers(
            secret.expose(),
            "POST",
            &path,
            b"{}",
            Some(&auth),
            Some(&key),
            None,
        ));
        if let Some(a) = admission {
            headers.push((flashgate_shared::queue::ADMISSION_HEADER, a.to_string()));
        }
        let url = format!("{}{path}", self.url);
        send_raw(
            &self.http,
            reqwest::Method::POST,
            &url,
            None,
            &headers,
            "{}",
        )
        .await
    }

    /// A request counter of this origin's metrics (e.g. `|m| &m.claim_requests`): what reached
    /// the origin.
    pub fn origin_count(
        &self,
        counter: impl Fn(&flashgate_origin::metrics::Metrics) -> &Counter,
    ) -> u64 {
        counter(&self.origin.state.metrics).get()
    }

    /// `GET /api/v1/campaigns/{id}` body.
    pub async fn status(&self, campaign: &str) -> Value {
        self.http
            .get(format!("{}/api/v1/campaigns/{campaign}", self.url))
            .send()
            .await
            .expect("status")
            .json()
            .await
            .expect("json")
    }

    /// `campaigns.remaining` in PostgreSQL.
    pub async fn remaining(&self, campaign: &str) -> i64 {
        sqlx::query_scalar("SELECT remaining FROM campaigns WHERE id = $1")
            .bind(campaign)
            .fetch_one(&self.db)
            .await
            .expect("remaining")
    }

    /// Number of claim rows of the campaign with one of `statuses` (all rows when empty).
    pub async fn claim_rows(&self, campaign: &str, statuses: &[&str]) -> i64 {
        let statuses: Vec<String> = statuses.iter().map(|s| s.to_string()).collect();
        sqlx::query_scalar(
            "SELECT count(*) FROM claims WHERE campaign_id = $1
               AND (cardinality($2::text[]) = 0 OR status = ANY($2))",
        )
        .bind(campaign)
        .bind(&statuses)
        .fetch_one(&self.db)
        .await
        .expect("count claims")
    }
}
