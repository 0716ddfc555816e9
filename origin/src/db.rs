//! How the origin's statements reach PostgreSQL: kept as named prepared statements, or not.
//!
//! sqlx prepares every statement under a name (`sqlx_s_N`) and, with its statement cache on,
//! reuses it on the same connection. Behind a pooler in transaction mode (PgBouncer before
//! 1.21, RDS Proxy and the like) a client's connection is someone else's between two
//! transactions: names collide (`prepared statement "sqlx_s_1" already exists`) or are missing
//! on the server the pooler picked. Turning sqlx's statement cache off is not enough, since a
//! statement is still prepared under a fresh name (never closed). So every statement of the
//! origin says `.persistent(keep_statements())`: `false` with `FLASHGATE_DB_POOLER=transaction`
//! makes it an unnamed statement, which PostgreSQL replaces with the next one.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::DbPooler;

/// Whether statements are kept as named prepared statements; set once at start-up by
/// [`set_pooler`]. Process-wide, since a process runs one origin (in-process tests that start
/// several origins with different settings get the last one's, both of which are correct).
static KEEP_STATEMENTS: AtomicBool = AtomicBool::new(true);

/// `true` (named, cached statements: fastest) on a direct connection; `false` behind a
/// transaction pooler. Pass it to sqlx's `.persistent(…)` on every statement.
pub fn keep_statements() -> bool {
    KEEP_STATEMENTS.load(Ordering::Relaxed)
}

/// Sets [`keep_statements`] for the origin's `FLASHGATE_DB_POOLER`.
pub fn set_pooler(pooler: DbPooler) {
    KEEP_STATEMENTS.store(pooler == DbPooler::None, Ordering::Relaxed);
}
