//! The audit trail of managers' changes (`admin_audit`, migrations 0004–0006): who (the admin
//! token's name), what, the campaign's (or code's) facts before and after, and when. Code
//! actions (disable, enable, batch export) are rows with `code` or `batch_id` instead of
//! `campaign_id` ([`crate::promo::admin`]). Rows are written by
//! the change's own statement ([`super::toggles::apply`]; for `create`,
//! [`crate::campaigns::store::insert`]) and never updated or deleted.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::PgPool;

/// Most entries one `GET /admin/v1/campaigns/{id}/audit` returns (the newest).
pub const MAX_ENTRIES: i64 = 1_000;

/// One row of the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
pub struct AuditEntry {
    /// Order of the changes (grows with each change).
    pub seq: i64,
    /// The campaign changed; `null` (left out) for a code action.
    #[serde(
        rename = "campaign",
        alias = "campaign_id",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub campaign_id: Option<String>,
    /// The code disabled or enabled (`disable`, `enable`); left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[sqlx(default)]
    pub code: Option<String>,
    /// The batch of one-time codes exported (`export`); left out otherwise.
    #[serde(
        rename = "batch",
        alias = "batch_id",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[sqlx(default)]
    pub batch_id: Option<String>,
    /// Name of the admin token that made the change.
    pub actor: String,
    /// `create`, `pause`, `resume`, `close`, `restock`, `set_stock` or `set_ends_at` (campaigns);
    /// `disable`, `enable` (codes); `export` (a batch of one-time codes as CSV).
    pub action: String,
    /// The request's parameters (`{"add": 5}`, `{"stock": 7}`, `{"ends_at": …}`, `{}`).
    pub params: Value,
    /// stock, remaining, paused, starts_at, ends_at before the change (`null` for `create`);
    /// for a code, `{"disabled", "disabled_at"}`; `null` for an export.
    pub before: Value,
    /// The same facts after it.
    pub after: Value,
    /// When the change was made (RFC 3339 UTC), just before its commit.
    pub at: DateTime<Utc>,
}

/// The newest [`MAX_ENTRIES`] entries of campaign `c`, newest first.
pub async fn list(db: &PgPool, c: &str) -> sqlx::Result<Vec<AuditEntry>> {
    sqlx::query_as(
        "SELECT seq, campaign_id, actor, action, params, before, after, at
           FROM admin_audit WHERE campaign_id = $1
          ORDER BY seq DESC LIMIT $2",
    )
    .bind(c)
    .bind(MAX_ENTRIES)
    .fetch_all(db)
    .await
}
