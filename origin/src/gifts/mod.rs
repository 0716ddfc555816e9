//! Gift fulfilment (docs/GIFTS.md): gift campaigns whose segments each carry one gift (mobile
//! credit), frequency caps as rows, and grants made exactly once per request, then delivered
//! by the provider through an outbox.
//!
//! - [`verdict`]: the one eligibility decision (campaign, segment, caps on PostgreSQL's clock);
//! - [`fulfil`]: the four layers of a fulfilment (key, advisory lock, re-check, ledger);
//! - [`deliveries`]: fulfilments with their delivery status, a manager's retry;
//! - [`history`]: the append-only delivery history of outbox rows (every call, every retry);
//! - [`store`]: managers' writes (campaigns, segments, caps, members) with their audit rows;
//! - [`provider`]: the provider trait and its HTTP client;
//! - [`relay`]: the outbox relay (background task, `FOR UPDATE SKIP LOCKED`);
//! - [`metrics`]: lock wait, replays, provider errors and retries, outbox lag;
//! - the routes are in `crate::http::gifts`;
//! - [`demo`]: `flashgate gifts seed-demo`;
//! - [`settings`]: the `FLASHGATE_GIFT_*` settings.

pub mod deliveries;
pub mod demo;
pub mod fulfil;
pub mod history;
pub mod metrics;
pub mod provider;
pub mod relay;
pub mod settings;
pub mod store;
pub mod verdict;

use std::sync::Arc;

use crate::db::Db;

/// The handles of the fulfilment path.
#[derive(Clone)]
pub struct GiftService {
    pub db: Db,
    pub metrics: Arc<metrics::GiftMetrics>,
    /// Read the campaign's test clock ([`settings::GiftSettings::gift_test_clock`]).
    pub test_clock: bool,
}
