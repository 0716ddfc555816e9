//! Manager actions on codes, each one SQL statement with its audit row (`admin_audit`,
//! migration 0006), like the campaign toggles ([`crate::admin::toggles`]):
//! - disable / enable a code (`PATCH /admin/v1/codes/{code}`): sets or clears
//!   `coupon_codes.disabled_at` and bumps the counter's `version`, so the cached state in Redis
//!   ([`super::flags`]) takes the change in order with the uses' own writes;
//! - the export of a batch of one-time codes as CSV: one `export` row (who, which batch, how
//!   many codes) written before the first code is sent.

use crate::db::Db;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::admin::audit::AuditEntry;

/// What a manager does to a code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeAction {
    /// Every origin refuses the code (422 `not_applicable`, `reason: "disabled"`).
    Disable,
    /// The code applies again.
    Enable,
}

impl CodeAction {
    /// The wire and audit name: `disable` or `enable`.
    pub fn as_str(self) -> &'static str {
        match self {
            CodeAction::Disable => "disable",
            CodeAction::Enable => "enable",
        }
    }

    /// Parses the `action` of a `PATCH /admin/v1/codes/{code}` body; the error is for humans.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "disable" => Ok(CodeAction::Disable),
            "enable" => Ok(CodeAction::Enable),
            other => Err(format!(
                "unknown action '{}' (disable, enable)",
                other.chars().take(40).collect::<String>()
            )),
        }
    }
}

/// The code after a disable / enable.
#[derive(Debug, Clone)]
pub struct Switched {
    /// False when the code already was that way (nothing written, no audit row).
    pub changed: bool,
    /// When it was disabled; `None` while enabled.
    pub disabled_at: Option<DateTime<Utc>>,
    /// The counter (for the cached state): uses left and its version.
    pub uses_left: i64,
    pub version: i64,
    /// The audit row of the change, when changed.
    pub audit: Option<AuditEntry>,
}

fn decode<T: serde::de::DeserializeOwned>(v: Value) -> sqlx::Result<T> {
    serde_json::from_value(v).map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

/// Disables or enables `code` (normalised) in one statement with its audit row, by `actor`
/// (the admin token's name). `None` when no such code.
pub async fn switch(
    db: &Db,
    code: &str,
    actor: &str,
    action: CodeAction,
) -> sqlx::Result<Option<Switched>> {
    let row = sqlx::query!(
        r#"WITH before AS (
                 SELECT code, disabled_at, uses_left, version
                   FROM coupon_codes WHERE code = $1 FOR UPDATE
             ), after AS (
                 UPDATE coupon_codes c
                    SET disabled_at = CASE WHEN $3 = 'disable' THEN now() END,
                        version = c.version + 1
                   FROM before b
                  WHERE c.code = b.code AND (b.disabled_at IS NULL) = ($3 = 'disable')
                 RETURNING c.code, c.disabled_at, c.uses_left, c.version
             ), audit AS (
                 INSERT INTO admin_audit (code, actor, action, params, before, after)
                 SELECT a.code, $2, $3, '{}'::jsonb,
                        jsonb_build_object('disabled', b.disabled_at IS NOT NULL,
                                           'disabled_at', b.disabled_at),
                        jsonb_build_object('disabled', a.disabled_at IS NOT NULL,
                                           'disabled_at', a.disabled_at)
                   FROM after a, before b
                 RETURNING seq, campaign_id, code, batch_id, actor, action, params, before,
                           after, at
             )
             SELECT CASE WHEN EXISTS (SELECT 1 FROM after)
                         THEN (SELECT disabled_at FROM after) ELSE b.disabled_at END
                        AS disabled_at,
                    coalesce((SELECT uses_left FROM after), b.uses_left) AS "uses_left!",
                    coalesce((SELECT version FROM after), b.version) AS "version!",
                    (SELECT to_jsonb(x) FROM audit x) AS audit,
                    (SELECT to_jsonb(a) FROM after a) AS after
               FROM before b"#,
        code,
        actor,
        action.as_str(),
    )
    .fetch_optional(db)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    Ok(Some(Switched {
        changed: row.after.is_some(),
        disabled_at: row.disabled_at,
        uses_left: row.uses_left,
        version: row.version,
        audit: row.audit.map(decode).transpose()?,
    }))
}

/// Writes the `export` audit row of batch `id` by `actor`: `params` `{"count": n}` (codes in
/// the batch). Returns the batch's rules id and the row; `None` when no such batch.
pub async fn audit_export(
    db: &Db,
    id: &str,
    actor: &str,
) -> sqlx::Result<Option<(i64, AuditEntry)>> {
    let row = sqlx::query!(
        r#"WITH b AS (SELECT id, rules_id, count FROM coupon_batches WHERE id = $1),
         audit AS (
             INSERT INTO admin_audit (batch_id, actor, action, params, before, after)
             SELECT id, $2, 'export', jsonb_build_object('count', count), 'null'::jsonb,
                    'null'::jsonb
               FROM b
             RETURNING seq, campaign_id, code, batch_id, actor, action, params, before, after,
                       at
         )
         SELECT b.rules_id AS "rules_id!", (SELECT to_jsonb(x) FROM audit x) AS "audit!"
           FROM b"#,
        id,
        actor,
    )
    .fetch_optional(db)
    .await?;
    row.map(|r| Ok((r.rules_id, decode(r.audit)?))).transpose()
}
