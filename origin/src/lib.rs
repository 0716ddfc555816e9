//! flashgate origin: the claim service.
//!
//! An axum/tokio service over PostgreSQL (the truth, via sqlx) and Redis (the gate). Layout:
//! - [`claims`]: the claim path — the claim decision ([`claims::service`]), grouped commits,
//!   queries on `claims`;
//! - [`gate`]: the Redis gate (the take), its loading from PostgreSQL, the sold-out flags, and
//!   the settlement of orphaned takes;
//! - [`idempotency`]: idempotency records in Redis, shared by claims, promo code uses and admin
//!   writes;
//! - [`holds`]: the life of a sale claim after the claim path: pay, release, the expiry
//!   sweeper, units going back to the gate;
//! - [`giveaway`]: giveaway coupons: drawing their codes, redeem in store, lookup;
//! - [`gifts`]: gift fulfilment (segments, caps as rows, exactly-once grants, the outbox relay
//!   to the mobile-credit provider);
//! - [`promo`]: the promo code service (shared codes, one-time batches, guess limiting) under
//!   `/api/v1/codes/…`;
//! - [`queue`]: the waiting room: joins, the admitting task, the admission check on claims;
//! - [`campaigns`]: the campaign row and its cache ([`cache`]: how the `moka` caches fill);
//! - [`redis_conn`]: the Redis handle, one server or a Redis Cluster;
//! - [`repair`]: the settlement of orphaned takes, the gate audit, and reconciliation (unit
//!   accounting and gate-vs-PostgreSQL checks of one campaign);
//! - [`access`]: draw campaigns: entries, the draw task, the published result;
//! - [`admin`]: admin tokens and roles, campaign toggles with their audit trail;
//! - [`reply`]: the one reply type of business answers (status, exact body, typed outcome),
//!   kept by the idempotency records for replays;
//! - [`http`]: routes and request checks;
//! - [`server`]: start-up, background tasks, graceful shutdown;
//! - [`customer_tokens`]: customer token settings and the verifier that keeps the identity
//!   provider's JWKS fresh;
//! - [`config`], [`secret`]: settings from flags / env vars, and secrets kept out of logs;
//! - [`db`]: the PostgreSQL handle: named statements direct, unnamed in a transaction behind
//!   a transaction pooler;
//! - [`migrate`]: schema migrations as their own step, and the schema check of `serve`;
//! - [`panics`]: a panic inside a background task becomes a logged error;
//! - [`cli`]: the `flashgate admin …` client of the admin API.

pub mod access;
pub mod admin;
pub mod cache;
pub mod campaigns;
pub mod claims;
pub mod cli;
pub mod config;
pub mod config_doc;
pub mod customer_tokens;
pub mod db;
pub mod error;
pub mod gate;
pub mod gifts;
pub mod giveaway;
pub mod holds;
pub mod http;
pub mod idempotency;
pub mod layers;
pub mod telemetry;
pub use telemetry::metrics;
pub mod metrics_doc;
pub mod migrate;
pub mod outbox;
pub mod panics;
pub mod plan;
pub mod promo;
pub mod queue;
pub mod redis_conn;
pub mod repair;
pub mod reply;
pub mod secret;
pub mod server;
pub mod state;
pub mod webhooks;
