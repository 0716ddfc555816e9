//! The integration tests, one binary: one module per product area, each test against real
//! PostgreSQL, Redis, origins and (where named) the edge worker in workerd. One binary links
//! the origin, sqlx, axum and reqwest once instead of once per file.
//!
//! `cargo test -p flashgate-tests --test it -- <area>::` runs an area (`holds::`), and
//! `-- <area>::<module>::<test>` one test. The JSON-log tests (`log_secrets`,
//! `trace_context`) are binaries of their own: they read every line of the process's one log
//! subscriber.

mod admin;
mod api;
mod claims;
mod draws;
mod edge;
mod gate;
mod gifts;
mod giveaway;
mod holds;
mod ops;
mod promo;
mod variants;
mod waiting_room;
mod webhooks;
