//! The audit trail of managers' changes (`admin_audit`, migrations 0004–0006): who (the admin
//! token's name), what, the campaign's (or code's) facts before and after, and when. Code
//! actions (disable, enable, batch export) are rows with `code` or `batch_id` instead of
//! `campaign_id` ([`crate::promo::admin`]). Rows are written by
//! the change's own statement ([`super::toggles::apply`]; for `create`,
//! [`crate::campaigns::store::insert`]; for a manager's early draw, `draw_run`, the draw's
//! transaction, [`crate::access::run::draw`]) and never updated or deleted.

use crate::db::Db;
pub use flashgate_shared::api::admin::AuditEntry;

/// Most entries one `GET /admin/v1/campaigns/{id}/audit` returns (the newest).
pub const MAX_ENTRIES: i64 = 1_000;

/// The newest [`MAX_ENTRIES`] entries of campaign `c`, newest first.
pub async fn list(db: &Db, c: &str) -> sqlx::Result<Vec<AuditEntry>> {
    sqlx::query_as!(
        AuditEntry,
        "SELECT seq, campaign_id, code, batch_id, actor, action, params, before, after, at
           FROM admin_audit WHERE campaign_id = $1
          ORDER BY seq DESC LIMIT $2",
        c,
        MAX_ENTRIES,
    )
    .fetch_all(db)
    .await
}
