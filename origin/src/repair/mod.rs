//! Checks and repairs that look across the gate, the claims and the codes, so they sit above
//! what they repair (docs/ARCHITECTURE.md, "Layers"):
//! - [`settle`]: takes whose origin never confirmed them, settled against PostgreSQL;
//! - [`audit`]: the gate audit, every second on one origin, lowering a gate that promises more
//!   than PostgreSQL has and repairing holders ([`holders`]) and the codes' cached state;
//! - [`variant_audit`], [`variant_reconcile`]: the same, per variant, for a campaign with
//!   variants;
//! - [`repaired`]: what the audit's checks share (the tally of repairs, the shortfall kept
//!   from one pass to the next);
//! - [`reconcile`]: the read-only report of the gate against the record (`GET
//!   …/reconcile`, `flashgate reconcile`);
//! - [`cleanup`]: the Redis keys of ended, settled campaigns expire after a grace period, or
//!   are purged at once ([`keys`] finds them).

pub mod audit;
pub mod cleanup;
pub mod holders;
pub mod keys;
pub mod reconcile;
pub mod repaired;
pub mod settle;
pub mod variant_audit;
pub mod variant_reconcile;
