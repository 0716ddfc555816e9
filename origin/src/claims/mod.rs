//! Claims: the claim path and the queries on the `claims` table.
//!
//! The path, in the order [`service::claim`] runs it:
//! 1. the campaign from this origin's cache; a campaign that is not `active` by the origin's
//!    clock (scheduled, paused, ended) is answered at once;
//! 2. this origin's memory of the sold-out flag ([`crate::gate::flags`]): a loser is answered
//!    without Redis;
//! 3. the idempotency record in Redis ([`crate::idempotency`]): a repeated key gets its first
//!    reply, `in_progress` or `idempotency_key_reused`;
//! 4. the gate's atomic take in Redis ([`crate::gate`]), in the same script as step 3
//!    ([`crate::gate::begin_take`]: one round trip);
//! 5. the grouped PostgreSQL commit ([`commit`]), where the record decides; the winner is
//!    answered only after it;
//! 6. the gate and the idempotency record learn the outcome (a winner's: one script,
//!    [`crate::gate::confirm`]).
//!
//! - [`service`]: the claim decision (steps 1–6);
//! - [`commit`]: grouped commits of concurrent winners;
//! - [`store`]: queries on `claims`.
//!
//! A take left pending by an origin that died before step 6 is settled by
//! [`crate::gate::settle`]. The life after a claim is in [`crate::holds`] (sale holds) and
//! [`crate::giveaway`] (giveaway coupons).

pub mod commit;
pub mod service;
pub mod store;
