//! Histories: every operation of a stampede and its answer, one JSON line each, and the
//! checker that holds them against the final PostgreSQL state (docs/HISTORY.md).
//!
//! - [`record`]: the line type, shared by the writer and the checker.
//! - [`writer`]: writes a history file during a run (`stampede --history FILE`).
//! - [`lookups`]: the stampede's end-of-run `/claims/mine` lookups, recorded.
//! - [`read`]: reads a history file and the final state of its campaigns from PostgreSQL.
//! - [`check`]: runs every check, per campaign; [`outcome`]: their results, table and JSON.
//! - one module per check: [`truth`] (oversold, one active claim per customer), [`told`]
//!   (201s against claims, claims against what customers were told), [`sold_out`] (false
//!   sold-out windows), [`replays`], [`contract`].
//!
//! The binary is `check_history` (tests/src/bin/check_history.rs).

pub mod check;
pub mod contract;
pub mod lookups;
pub mod outcome;
pub mod read;
pub mod record;
pub mod replays;
pub mod sold_out;
pub mod told;
pub mod truth;
pub mod writer;
