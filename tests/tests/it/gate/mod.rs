//! The Redis gate: its scripts, shards, the bounded step, the audit, orphaned takes, and
//! reconciliation.

mod audit;
mod bound;
mod orphaned_takes;
mod reconcile_faults;
mod scripts;
mod shards;
