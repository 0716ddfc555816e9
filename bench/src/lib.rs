//! The stampede load generator (`stampede`), shared by the `stampede` binary, the giveaway
//! bench (its progress bar) and the integration tests that drive a stampede in-process.
pub mod stampede;
