//! Claims: the claim path (idempotency → local flag → Redis gate → grouped PostgreSQL commit),
//! and the queries on the `claims` table.

pub mod commit;
pub mod idempotency;
pub mod lifecycle;
pub mod service;
pub mod store;
