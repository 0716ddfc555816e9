//! Holds: the life of a sale claim after the claim path.
//!
//! ```text
//! held ──pay──▶ paid
//!   ├──extend──▶ held        (held_until later, once per claim)
//!   ├──release──▶ released   (unit back)
//!   └──sweeper──▶ expired    (unit back, once held_until has passed)
//! ```
//!
//! - [`change`]: pay and release of one hold;
//! - [`extend`]: the one extension of a hold's `held_until`;
//! - [`expiry`]: the expiry sweeper (holds past `held_until`);
//! - [`returns`]: giving units back to the Redis gate, and the drain of `gate_returns`.
//!
//! Every change is one conditional SQL statement (data-modifying CTEs) that checks the current
//! status and changes it, returns the unit to `campaigns.remaining` when the claim leaves an
//! active status, queues the unit's return to the Redis gate (`gate_returns`) and appends the
//! ledger row — never read-then-write. Two changes racing on one claim are serialised by the
//! row lock; the loser's `WHERE status = 'held'` no longer matches and it changes nothing.
//! Answers for the losers (and for repeats) are then built from a plain read of the row.
//!
//! After the commit the unit goes back to the gate with [`crate::gate::give_back`], which acts
//! only while the customer's holder still names this claim: exactly once, whoever (release, the
//! sweeper on this or another origin, the drain of `gate_returns`) calls it.

pub mod change;
pub mod expiry;
pub mod extend;
pub mod returns;

/// A claim whose unit went back to `remaining` in PostgreSQL and must go back to the gate.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Returned {
    /// The claim that left its active status (released or expired).
    pub claim_id: String,
    /// Its campaign.
    pub campaign_id: String,
    /// Its customer, whose gate holder names `claim_id` until the give-back.
    pub customer_id: String,
}
