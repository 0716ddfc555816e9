//! flashgate origin: the claim service.
//!
//! An axum/tokio service over PostgreSQL (the truth, via sqlx) and Redis (the gate). Layout:
//! - [`config`]: settings from flags / env vars;
//! - [`server`]: start-up, background tasks, graceful shutdown;
//! - [`http`]: routes and request checks;
//! - [`claims`]: the claim path (idempotency, gate, grouped commit);
//! - [`gate`]: the Redis gate, its loading from PostgreSQL, the sold-out flags;
//! - [`campaigns`]: the campaign row and its cache;
//! - [`coupons`]: the coupon-code service (shared codes, one-time batches, guess limiting);
//! - [`redis_conn`]: the Redis handle, one server or a Redis Cluster;
//! - [`reconcile`]: unit accounting and gate-vs-PostgreSQL checks of one campaign;
//! - [`tasks`]: background reconciliation;
//! - [`admin`]: admin tokens and roles, campaign toggles with their audit trail;
//! - [`cli`]: the `flashgate admin …` client of the admin API.

pub mod admin;
pub mod campaigns;
pub mod claims;
pub mod cli;
pub mod config;
pub mod coupon;
pub mod coupons;
pub mod error;
pub mod gate;
pub mod http;
pub mod metrics;
pub mod reconcile;
pub mod redis_conn;
pub mod server;
pub mod state;
pub mod tasks;

/// The PostgreSQL migrations of `migrations/`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");
