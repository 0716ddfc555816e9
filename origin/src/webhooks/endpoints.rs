//! Endpoints: managers' writes (each with its `webhook_audit` row in the same statement), the
//! relay's disabling of an endpoint that answered 410, and the reads of the admin API.
//!
//! Inputs are checked by the caller (`crate::http::webhooks`) before anything is written.

use chrono::{DateTime, Utc};
use flashgate_shared::api::webhooks::{Endpoint, EndpointWithSecret, EventType};
use uuid::Uuid;

use crate::db::Db;

/// Most endpoints one list returns.
pub const MAX_LISTED: i64 = 500;

/// The admin view's columns of `webhook_endpoints`.
struct Row {
    id: Uuid,
    url: String,
    description: String,
    event_types: Vec<String>,
    enabled: bool,
    disabled_reason: Option<String>,
    previous_secret_until: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
}

impl From<Row> for Endpoint {
    fn from(r: Row) -> Self {
        Endpoint {
            id: r.id.to_string(),
            url: r.url,
            description: r.description,
            event_types: r
                .event_types
                .iter()
                .filter_map(|t| EventType::parse(t))
                .collect(),
            enabled: r.enabled,
            disabled_reason: r.disabled_reason,
            previous_secret_until: r.previous_secret_until,
            created_at: r.created_at,
        }
    }
}

/// A checked new endpoint.
#[derive(Debug, Clone)]
pub struct Checked {
    pub url: String,
    pub event_types: Vec<EventType>,
    pub description: String,
    pub enabled: bool,
    pub secret: String,
}

fn names(types: &[EventType]) -> Vec<String> {
    types.iter().map(|t| t.as_str().to_string()).collect()
}

/// Writes endpoint `new` and its `create` audit row (the secret never goes to the audit).
pub async fn create(db: &Db, actor: &str, new: &Checked) -> sqlx::Result<EndpointWithSecret> {
    let id = Uuid::new_v4();
    let row = sqlx::query_as!(
        Row,
        r#"WITH e AS (
               INSERT INTO webhook_endpoints (id, url, description, event_types, enabled, secret)
               VALUES ($1, $2, $3, $4, $5, $6)
               RETURNING *
           ), a AS (
               INSERT INTO webhook_audit (endpoint_id, actor, action, params)
               SELECT id, $7, 'create', jsonb_build_object('url', url, 'event_types',
                      event_types, 'description', description, 'enabled', enabled) FROM e
           )
           SELECT id AS "id!", url AS "url!", description AS "description!",
                  event_types AS "event_types!", enabled AS "enabled!", disabled_reason,
                  previous_secret_until, created_at AS "created_at!" FROM e"#,
        id,
        new.url,
        new.description,
        &names(&new.event_types),
        new.enabled,
        new.secret,
        actor,
    )
    .fetch_one(db)
    .await?;
    Ok(EndpointWithSecret {
        endpoint: row.into(),
        secret: new.secret.clone(),
    })
}

/// Every endpoint (at most [`MAX_LISTED`]), oldest first.
pub async fn list(db: &Db) -> sqlx::Result<Vec<Endpoint>> {
    let rows = sqlx::query_as!(
        Row,
        "SELECT id, url, description, event_types, enabled, disabled_reason,
                previous_secret_until, created_at
           FROM webhook_endpoints ORDER BY created_at, id LIMIT $1",
        MAX_LISTED
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Endpoint::from).collect())
}

/// One endpoint; `None` when unknown.
pub async fn find(db: &Db, id: Uuid) -> sqlx::Result<Option<Endpoint>> {
    let row = sqlx::query_as!(
        Row,
        "SELECT id, url, description, event_types, enabled, disabled_reason,
                previous_secret_until, created_at
           FROM webhook_endpoints WHERE id = $1",
        id
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(Endpoint::from))
}

/// A checked change: `None` fields stay.
#[derive(Debug, Clone, Default)]
pub struct CheckedChange {
    pub url: Option<String>,
    pub event_types: Option<Vec<EventType>>,
    pub description: Option<String>,
    pub enabled: Option<bool>,
}

/// Applies `change` to endpoint `id` with its `change` audit row; enabling clears the relay's
/// `disabled_reason`. `None` when unknown.
pub async fn change(
    db: &Db,
    actor: &str,
    id: Uuid,
    change: &CheckedChange,
) -> sqlx::Result<Option<Endpoint>> {
    let types = change.event_types.as_deref().map(names);
    let params = serde_json::json!({
        "url": change.url, "event_types": types, "description": change.description,
        "enabled": change.enabled,
    });
    let row = sqlx::query_as!(
        Row,
        r#"WITH e AS (
               UPDATE webhook_endpoints
                  SET url = coalesce($2, url), event_types = coalesce($3, event_types),
                      description = coalesce($4, description), enabled = coalesce($5, enabled),
                      disabled_reason = CASE WHEN $5 THEN NULL ELSE disabled_reason END,
                      updated_at = now()
                WHERE id = $1
               RETURNING *
           ), a AS (
               INSERT INTO webhook_audit (endpoint_id, actor, action, params)
               SELECT id, $6, 'change', jsonb_strip_nulls($7::jsonb) FROM e
           )
           SELECT id AS "id!", url AS "url!", description AS "description!",
                  event_types AS "event_types!", enabled AS "enabled!", disabled_reason,
                  previous_secret_until, created_at AS "created_at!" FROM e"#,
        id,
        change.url,
        types.as_deref(),
        change.description,
        change.enabled,
        actor,
        params,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(Endpoint::from))
}

/// Deletes endpoint `id` and its deliveries, with its `delete` audit row. False when unknown.
///
/// The deliveries go in a second statement of the transaction: deleting the endpoint's row
/// waits for the claim transactions that hold it `FOR KEY SHARE` while writing its deliveries
/// ([`super::events::emit`]), and only a later statement's snapshot sees what they committed.
pub async fn delete(db: &Db, actor: &str, id: Uuid) -> sqlx::Result<bool> {
    let mut tx = db.begin().await?;
    let n = sqlx::query_scalar!(
        r#"WITH e AS (
               DELETE FROM webhook_endpoints WHERE id = $1 RETURNING id, url
           ), a AS (
               INSERT INTO webhook_audit (endpoint_id, actor, action, params)
               SELECT id, $2, 'delete', jsonb_build_object('url', url) FROM e
           )
           SELECT count(*) AS "n!" FROM e"#,
        id,
        actor,
    )
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query!("DELETE FROM webhook_deliveries WHERE endpoint_id = $1", id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(n > 0)
}

/// Gives endpoint `id` secret `secret`; the one it had keeps signing (a second signature) for
/// `overlap_seconds`. With its `rotate_secret` audit row. `None` when unknown.
pub async fn rotate(
    db: &Db,
    actor: &str,
    id: Uuid,
    secret: &str,
    overlap_seconds: i64,
) -> sqlx::Result<Option<EndpointWithSecret>> {
    let row = sqlx::query_as!(
        Row,
        r#"WITH e AS (
               UPDATE webhook_endpoints
                  SET previous_secret = secret, secret = $2,
                      previous_secret_until = now() + make_interval(secs => $3::bigint),
                      updated_at = now()
                WHERE id = $1
               RETURNING *
           ), a AS (
               INSERT INTO webhook_audit (endpoint_id, actor, action, params)
               SELECT id, $4, 'rotate_secret',
                      jsonb_build_object('previous_secret_until', previous_secret_until) FROM e
           )
           SELECT id AS "id!", url AS "url!", description AS "description!",
                  event_types AS "event_types!", enabled AS "enabled!", disabled_reason,
                  previous_secret_until, created_at AS "created_at!" FROM e"#,
        id,
        secret,
        overlap_seconds,
        actor,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| EndpointWithSecret {
        endpoint: r.into(),
        secret: secret.to_string(),
    }))
}

/// The relay's answer to a 410: endpoint `id` is disabled with `reason`, audited as
/// `disabled_by_receiver` by actor `relay`, and its pending deliveries fail. Only once: false
/// when it was already disabled or is gone.
pub async fn disable_by_receiver(db: &Db, id: Uuid, reason: &str) -> sqlx::Result<bool> {
    let n = sqlx::query_scalar!(
        r#"WITH e AS (
               UPDATE webhook_endpoints SET enabled = false, disabled_reason = $2,
                      updated_at = now()
                WHERE id = $1 AND enabled
               RETURNING id
           ), d AS (
               UPDATE webhook_deliveries SET status = 'failed', last_error = $2
                WHERE endpoint_id IN (SELECT id FROM e) AND status = 'pending'
           ), a AS (
               INSERT INTO webhook_audit (endpoint_id, actor, action, params)
               SELECT id, 'relay', 'disabled_by_receiver', jsonb_build_object('reason', $2::text)
                 FROM e
           )
           SELECT count(*) AS "n!" FROM e"#,
        id,
        reason,
    )
    .fetch_one(db)
    .await?;
    Ok(n > 0)
}
