//! Signed lifecycle webhooks (docs/WEBHOOKS.md): every change of a claim or a campaign writes
//! an event to an outbox in the change's own transaction; a relay posts it, signed after
//! Standard Webhooks 1.0, to every enabled endpoint subscribed to its type.
//!
//! - [`events`]: the outbox (`webhook_events`) and its one writer, [`events::emit`];
//! - [`endpoints`]: managers' endpoint writes (audited), the relay's disabling on a 410;
//! - [`deliveries`]: deliveries per endpoint, replays;
//! - [`sign`]: secrets and signatures;
//! - [`urls`]: which receiver URLs are allowed;
//! - [`relay`]: the relay (background task, `FOR UPDATE SKIP LOCKED`, the retry schedule);
//! - [`claims_first`]: when the relay gives way to a burst of claims;
//! - [`metrics`]: deliveries by result and endpoint, lag, queue depth;
//! - [`settings`]: the `FLASHGATE_WEBHOOK_*` settings;
//! - the routes are in `crate::http::webhooks`.

pub mod claims_first;
pub mod deliveries;
pub mod endpoints;
pub mod events;
pub mod metrics;
pub mod relay;
pub mod settings;
pub mod sign;
pub mod urls;
