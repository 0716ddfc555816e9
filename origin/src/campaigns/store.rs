//! PostgreSQL queries on the `campaigns` table.

use crate::db::Db;
use chrono::{DateTime, Utc};
use flashgate_shared::api::{CampaignKind, CampaignState, CampaignStatus, NewCampaign};
use flashgate_shared::queue::WaitingRoom;
use sqlx::types::Json;

/// One row of `campaigns`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CampaignRow {
    pub id: String,
    pub name: String,
    pub kind: CampaignKind,
    pub stock: i64,
    pub remaining: i64,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub hold_seconds: Option<i32>,
    /// Seconds a hold may be extended by, once per claim (0 = off; migration 0013).
    pub hold_extension_seconds: i32,
    pub paused: bool,
    /// Shards of the Redis gate (1..=1024).
    pub gate_shards: i32,
    /// The waiting room option; `None` without one.
    pub waiting_room: Option<Json<WaitingRoom>>,
    /// True while a manager has paused the waiting room's admission.
    pub queue_paused: bool,
}

impl CampaignRow {
    /// The campaign kind.
    pub fn kind(&self) -> CampaignKind {
        self.kind
    }

    /// The state at `now`, from the stored facts.
    pub fn state_at(&self, now: DateTime<Utc>) -> CampaignState {
        CampaignState::decide(
            now,
            self.starts_at,
            self.ends_at,
            self.paused,
            self.remaining,
        )
    }

    /// The waiting room option, if any.
    pub fn waiting_room(&self) -> Option<WaitingRoom> {
        self.waiting_room.as_ref().map(|w| w.0)
    }

    /// The public status at `now`.
    pub fn status_at(&self, now: DateTime<Utc>) -> CampaignStatus {
        CampaignStatus {
            id: self.id.clone(),
            name: self.name.clone(),
            kind: self.kind(),
            state: self.state_at(now),
            stock: self.stock,
            remaining: self.remaining,
            starts_at: self.starts_at,
            ends_at: self.ends_at,
        }
    }
}

/// Loads one campaign; `None` when the id is unknown.
pub async fn find(db: &Db, id: &str) -> sqlx::Result<Option<CampaignRow>> {
    sqlx::query_as!(
        CampaignRow,
        r#"SELECT id, name, kind AS "kind: CampaignKind", stock, remaining, starts_at, ends_at,
                  hold_seconds, hold_extension_seconds, paused, gate_shards,
                  waiting_room AS "waiting_room: Json<WaitingRoom>", queue_paused
             FROM campaigns WHERE id = $1"#,
        id
    )
    .fetch_optional(db)
    .await
}

/// Campaigns that have not ended at `now` (the ones whose gate must be loaded).
pub async fn live<'e>(db: impl sqlx::PgExecutor<'e>) -> sqlx::Result<Vec<CampaignRow>> {
    sqlx::query_as!(
        CampaignRow,
        r#"SELECT id, name, kind AS "kind: CampaignKind", stock, remaining, starts_at, ends_at,
                  hold_seconds, hold_extension_seconds, paused, gate_shards,
                  waiting_room AS "waiting_room: Json<WaitingRoom>", queue_paused
             FROM campaigns WHERE ends_at > now() ORDER BY starts_at"#
    )
    .fetch_all(db)
    .await
}

/// Inserts a validated campaign with `remaining = stock`, and its `create` audit row (actor:
/// the admin token's name; `before` is JSON `null`) in the same statement. Returns `None`
/// when the id exists (nothing is written).
pub async fn insert<'e>(
    db: impl sqlx::PgExecutor<'e>,
    c: &NewCampaign,
    actor: &str,
) -> sqlx::Result<Option<CampaignRow>> {
    let hold = match c.kind {
        CampaignKind::Sale => Some(
            c.hold_seconds
                .unwrap_or(flashgate_shared::api::DEFAULT_HOLD_SECONDS) as i32,
        ),
        CampaignKind::Giveaway => None,
    };
    sqlx::query_as!(
        CampaignRow,
        r#"WITH created AS (
             INSERT INTO campaigns (id, name, kind, stock, remaining, starts_at, ends_at, hold_seconds,
                                    gate_shards, waiting_room, hold_extension_seconds)
             VALUES ($1, $2, $3, $4, $4, $5, $6, $7, $9, $10, $11)
             ON CONFLICT (id) DO NOTHING
             RETURNING *
         ), audit AS (
             INSERT INTO admin_audit (campaign_id, actor, action, params, before, after)
             SELECT id, $8, 'create', jsonb_build_object('name', name, 'kind', kind,
                                                         'gate_shards', gate_shards),
                    'null'::jsonb,
                    jsonb_build_object('stock', stock, 'remaining', remaining, 'paused', paused,
                                       'starts_at', starts_at, 'ends_at', ends_at,
                                       'waiting_room', waiting_room,
                                       'hold_extension_seconds', hold_extension_seconds)
               FROM created
         )
         SELECT id AS "id!", name AS "name!", kind AS "kind!: CampaignKind", stock AS "stock!",
                remaining AS "remaining!", starts_at AS "starts_at!", ends_at AS "ends_at!",
                hold_seconds, hold_extension_seconds AS "hold_extension_seconds!",
                paused AS "paused!", gate_shards AS "gate_shards!",
                waiting_room AS "waiting_room: Json<WaitingRoom>", queue_paused AS "queue_paused!"
           FROM created"#,
        c.id,
        c.name,
        c.kind.as_str(),
        c.total_stock(),
        c.starts_at,
        c.ends_at,
        hold,
        actor,
        c.shards() as i32,
        c.waiting_room.map(Json) as Option<Json<WaitingRoom>>,
        c.hold_extension_seconds.unwrap_or(0) as i32,
    )
    .fetch_optional(db)
    .await
}
