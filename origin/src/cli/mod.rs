//! Command-line clients of the origin's HTTP API (the `flashgate` binary's subcommands that do
//! not run a server), and `flashgate token`.

pub mod access;
pub mod admin;
pub mod draw;
pub mod exit;
pub mod plan;
pub mod reconcile;
pub mod token;
pub mod webhooks;
