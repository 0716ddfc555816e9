//! Schema migrations as a step of their own (`flashgate migrate`), and the schema check of an
//! origin started with `FLASHGATE_MIGRATE=false`.
//!
//! The migrations are sqlx's (`migrations/`, embedded; their bookkeeping table is sqlx's
//! `_sqlx_migrations`, so `sqlx migrate info` reads it). They are applied in **one
//! transaction** that first takes the transaction-scoped advisory lock
//! `pg_advisory_xact_lock(MIGRATION_LOCK_KEY)`: several origins (or `flashgate migrate` runs)
//! starting at once queue on that lock, and each one after the first finds every migration
//! applied and applies nothing. sqlx's own lock is turned off: it is a session-scoped
//! `pg_advisory_lock`, which a transaction pooler (PgBouncer `pool_mode = transaction`) does
//! not keep, while a transaction-scoped lock holds through any pooler, since a transaction
//! stays on one server connection. Each migration runs in a savepoint of that transaction, so
//! a failing one leaves the schema as it was.

use std::collections::HashSet;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};

use crate::db::Db;

/// The key of the migration lock, `pg_advisory_xact_lock(MIGRATION_LOCK_KEY)`: the bytes of
/// "fg-migr" (any fixed number shared by every origin works; this one is unlikely to be used
/// by another application on the same database).
pub const MIGRATION_LOCK_KEY: i64 = 0x0066_672d_6d69_6772;

/// The migrations embedded in this binary, without sqlx's session-scoped lock (the caller,
/// [`run`], holds the transaction-scoped one).
pub fn migrator() -> Migrator {
    let mut m = sqlx::migrate!("../migrations");
    m.set_locking(false);
    m
}

/// The newest migration version this binary knows (`migrations/NNNN_*.sql`).
pub fn required_version() -> i64 {
    migrator().iter().map(|m| m.version).max().unwrap_or(0)
}

/// What a migration run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// Versions this run applied (empty when the schema was already current).
    pub applied: Vec<i64>,
    /// The newest version applied in the database after the run.
    pub current: i64,
}

/// Applies the pending migrations over one connection made with `options` (a direct URL to
/// the server is best: `FLASHGATE_MIGRATION_DATABASE_URL`; a transaction pooler works too),
/// inside one transaction holding the migration lock. Errors: the connection failing, a
/// migration failing (nothing of the run is kept), or a migration already applied whose file
/// changed since (sqlx's checksum check).
pub async fn run(options: &PgConnectOptions) -> Result<Migrated, MigrateError> {
    let mut conn = PgConnection::connect_with(options).await?;
    let mut tx = conn.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK_KEY)
        .persistent(false)
        .execute(&mut *tx)
        .await?;
    let before = applied_versions(&mut tx).await?;
    migrator().run_direct(&mut *tx).await?;
    let after = applied_versions(&mut tx).await?;
    tx.commit().await?;
    conn.close().await?;
    let mut applied: Vec<i64> = after.difference(&before).copied().collect();
    applied.sort_unstable();
    Ok(Migrated {
        applied,
        current: after.iter().copied().max().unwrap_or(0),
    })
}

/// The schema is older than this binary needs: `missing` versions are not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the database schema is older than this origin needs: migration(s) {missing:?} not applied \
     (newest applied: {current}, needed: {required}); run `flashgate migrate` first, or start \
     with FLASHGATE_MIGRATE=true"
)]
pub struct SchemaTooOld {
    pub missing: Vec<i64>,
    pub current: i64,
    pub required: i64,
}

/// Checks that every migration of this binary is applied (what `serve` does with
/// `FLASHGATE_MIGRATE=false`). A database with migrations newer than this binary passes: an
/// origin of the previous release keeps serving while a newer one rolls out (migrations only
/// add). Errors: [`SchemaTooOld`] inside `anyhow`, or the query failing.
pub async fn check_schema(db: &Db) -> anyhow::Result<i64> {
    // In a transaction: behind a transaction pooler both reads stay on one server connection
    // (their statements are unnamed already).
    let mut tx = db.begin().await?;
    let applied = applied_versions(tx.raw()).await?;
    tx.commit().await?;
    let missing: Vec<i64> = migrator()
        .iter()
        .map(|m| m.version)
        .filter(|v| !applied.contains(v))
        .collect();
    let current = applied.iter().copied().max().unwrap_or(0);
    if !missing.is_empty() {
        return Err(SchemaTooOld {
            missing,
            current,
            required: required_version(),
        }
        .into());
    }
    Ok(current)
}

/// Versions recorded as successfully applied; none when the bookkeeping table does not exist
/// yet (a new database). Never fails on a missing table, so it can run inside the migration
/// transaction (a failed statement would abort it).
async fn applied_versions(db: &mut PgConnection) -> Result<HashSet<i64>, sqlx::Error> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .persistent(false)
        .fetch_one(&mut *db)
        .await?;
    if !exists {
        return Ok(HashSet::new());
    }
    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
            .persistent(false)
            .fetch_all(&mut *db)
            .await?;
    Ok(versions.into_iter().collect())
}
