//! The gate audit's check of the coupon codes' cached state in Redis ([`super::flags`]):
//! after a release, the code's used-up flag and her cached use must follow PostgreSQL. A
//! release writes PostgreSQL first and Redis right after; when that Redis write failed (Redis
//! refusing writes, a failover), the flag would stay "used up" and turn away customers while
//! uses are left, until some try reached the row.
//!
//! Every [`crate::repair::audit::AUDIT_EVERY`], on the origin whose turn it is, the uses
//! released between [`RELEASE_WINDOW_S`] and [`RELEASE_SETTLE_S`] ago are read with their
//! code's counter (one statement, through a partial index on the release time). For each:
//! - **the flags**: when Redis holds the code's state at an older `version` than PostgreSQL's,
//!   PostgreSQL's state is written (the same version-conditional write as every writer's, so
//!   a newer state is never overwritten);
//! - **her cached use**: dropped if it still names the released use (conditional on the value,
//!   as the release's own drop).
//!
//! A use released within the last [`RELEASE_SETTLE_S`] is left to its own release, whose Redis
//! write is normally a moment behind. Bound: a missed write is repaired
//! `RELEASE_SETTLE_S` + at most one audit period after the release.

use std::collections::HashMap;

use crate::db::Db;
use crate::redis_conn::RedisConn;

use super::flags;
use crate::error::StoreError;

/// Uses released up to this many seconds ago are looked at.
pub const RELEASE_WINDOW_S: f64 = 60.0;
/// Uses released less than this many seconds ago are left to their own release.
pub const RELEASE_SETTLE_S: f64 = 1.0;
/// Released uses looked at per audit at most.
const LIMIT: i64 = 10_000;

/// What the code audit repaired.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CodeRepairs {
    /// Codes whose cached flags were older than PostgreSQL's counter, rewritten.
    pub flags: i64,
    /// Cached uses that still named a released use, dropped.
    pub holders: i64,
}

/// Checks and repairs the cached state of the codes with recently released uses (see the
/// module doc). Errors: PostgreSQL or Redis failing (nothing further is repaired this pass).
pub async fn audit_codes(db: &Db, redis: &mut RedisConn) -> Result<CodeRepairs, StoreError> {
    let rows = sqlx::query!(
        r#"SELECT u.id, u.code, u.customer_id, c.uses_left, c.version,
                  c.disabled_at IS NOT NULL AS "disabled!"
             FROM coupon_uses u JOIN coupon_codes c ON c.code = u.code
            WHERE u.status = 'released'
              AND u.updated_at > now() - make_interval(secs => $1)
              AND u.updated_at <= now() - make_interval(secs => $2)
            ORDER BY u.updated_at
            LIMIT $3"#,
        RELEASE_WINDOW_S,
        RELEASE_SETTLE_S,
        LIMIT,
    )
    .fetch_all(db)
    .await?;
    let mut out = CodeRepairs::default();
    let mut codes: HashMap<&str, (i64, i64, bool)> = HashMap::new();
    for r in &rows {
        codes.insert(&r.code, (r.uses_left, r.version, r.disabled));
        if flags::drop_holder(redis, &r.code, &r.customer_id, &r.id).await? {
            out.holders += 1;
            tracing::warn!(code = %r.code, use_id = %r.id,
                "code audit: a cached use naming a released use was dropped");
        }
    }
    for (code, (uses_left, version, disabled)) in codes {
        let cached = flags::cached_version(redis, code).await?;
        if cached.is_some_and(|v| v < version)
            && flags::publish(redis, code, uses_left, version, disabled).await?
        {
            out.flags += 1;
            tracing::warn!(
                code,
                uses_left,
                version,
                "code audit: the cached flags were behind PostgreSQL; rewritten"
            );
        }
    }
    Ok(out)
}
