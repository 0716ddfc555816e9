//! Claims: the claim path and the queries on the `claims` table.
//!
//! The path, in the order [`service::claim`] runs it, numbered as in the README's picture and
//! docs/ARCHITECTURE.md (the request checks before it, step 0, are the handler's):
//! 1. campaign state: the campaign from this origin's cache (a campaign that is not `active`
//!    by the origin's clock — scheduled, paused, ended — is answered at once), then this
//!    origin's memory of the sold-out flag ([`crate::gate::flags`]): a loser is answered
//!    without Redis;
//! 2. one Lua step in the Redis gate ([`crate::gate::begin_take`], one round trip): the
//!    idempotency record ([`crate::idempotency`]: a repeated key gets its first reply,
//!    `in_progress` or `idempotency_key_reused`), then the gate's atomic take
//!    ([`crate::gate`]);
//! 3. the grouped PostgreSQL commit ([`commit`]), where the record decides; the winner is
//!    answered only after it.
//!
//! After step 3 the gate and the idempotency record learn the outcome (a winner's: one script,
//! [`crate::gate::confirm`]).
//!
//! - [`service`]: the claim decision (steps 1–3 and the settling);
//! - [`commit`]: grouped commits of concurrent winners;
//! - [`store`]: queries on `claims`;
//! - [`feed`]: the claims feed of a campaign (admin API and its CSV export).
//!
//! A take left pending by an origin that died before the settling is settled by
//! [`crate::repair::settle`]. The life after a claim is in [`crate::holds`] (sale holds) and
//! [`crate::giveaway`] (giveaway coupons).

pub mod commit;
pub mod feed;
pub mod service;
pub mod store;
