//! The changes a campaign manager makes to a campaign (`PATCH /admin/v1/campaigns/{id}`):
//! pause, resume, close, restock, set stock, move the end, set the waiting room or the hold
//! extension.
//!
//! Each change is ONE SQL statement — never read-modify-write: a CTE locks the row and keeps it
//! as it was (`before`), the `UPDATE` computes the new values from the row's own columns under a
//! condition (`after`), and an `INSERT` writes the audit row from both; the statement is its
//! own transaction, so the change and its audit row commit together or not at all. When the
//! condition refuses (already paused, stock below the units claimed, …) nothing is written and
//! `before` tells why.
//!
//! After the commit and before the answer, the rest of the system follows ([`follow`]): this
//! origin's campaign cache is dropped, a stock change is applied to the Redis gate by
//! [`crate::gate::adjust`] (relative moves bounded by PostgreSQL's `remaining`, so takes in
//! flight are kept; the sold-out flag cleared or set), a gate not loaded is loaded, and this
//! origin forgets its sold-out memory. Other origins see the change
//! within `FLASHGATE_CAMPAIGN_CACHE_MS`; the edge within its status TTL plus one origin round
//! trip. A pause stops claims at once anyway: the claim commit refuses in SQL when `paused`.

use crate::db::Db;
use crate::gate::Gate;
use chrono::{DateTime, Utc};
use flashgate_shared::api::{check_hold_extension, check_stock, check_year, MAX_STOCK};
pub use flashgate_shared::api::{ChangeRequest, GateFollow};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::audit::AuditEntry;
use super::roles::Admin;
use crate::gate;
use crate::webhooks::{self, events::NewEvent};
use flashgate_shared::api::webhooks::{CampaignData, EventType};
use flashgate_shared::queue::WaitingRoom;

/// A validated change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Claims are answered `paused` until resumed.
    Pause,
    /// Claims flow again.
    Resume,
    /// Ends the campaign now (`ends_at = now`; a campaign not started yet also gets
    /// `starts_at` just before that, so it reads `ended`).
    Close,
    /// Adds units to stock and remaining.
    Restock { add: i64 },
    /// Sets the total stock; remaining moves by the same difference. Never below the units
    /// already claimed.
    SetStock { stock: i64 },
    /// Moves the end. On a campaign closed before it started, `starts_at` goes back to the
    /// planned start (a new end never opens it early); an end not after it is refused.
    SetEndsAt { ends_at: DateTime<Utc> },
    /// Sets or changes the waiting room (and opens its queue in Redis).
    SetWaitingRoom { waiting_room: WaitingRoom },
    /// The waiting room stops admitting (refused without a waiting room).
    PauseAdmission,
    /// The waiting room admits again.
    ResumeAdmission,
    /// Sale: sets `hold_extension_seconds` (0 = off).
    SetHoldExtension { seconds: i64 },
}

impl Change {
    /// The audit trail's name of the action.
    pub fn action(&self) -> &'static str {
        match self {
            Change::Pause => "pause",
            Change::Resume => "resume",
            Change::Close => "close",
            Change::Restock { .. } => "restock",
            Change::SetStock { .. } => "set_stock",
            Change::SetEndsAt { .. } => "set_ends_at",
            Change::SetWaitingRoom { .. } => "set_waiting_room",
            Change::PauseAdmission => "pause_admission",
            Change::ResumeAdmission => "resume_admission",
            Change::SetHoldExtension { .. } => "set_hold_extension",
        }
    }

    /// The parameters as stored in the audit row (and read by the statement).
    fn params(&self) -> Value {
        match self {
            Change::Restock { add } => json!({ "add": add }),
            Change::SetStock { stock } => json!({ "stock": stock }),
            Change::SetEndsAt { ends_at } => json!({ "ends_at": ends_at }),
            Change::SetWaitingRoom { waiting_room } => json!({ "waiting_room": waiting_room }),
            Change::SetHoldExtension { seconds } => json!({ "hold_extension_seconds": seconds }),
            _ => json!({}),
        }
    }

    /// The webhook event of the change, if it has one.
    pub fn event(&self) -> Option<EventType> {
        match self {
            Change::Pause => Some(EventType::CampaignPaused),
            Change::Resume => Some(EventType::CampaignResumed),
            Change::Close => Some(EventType::CampaignClosed),
            Change::Restock { .. } => Some(EventType::CampaignRestocked),
            _ => None,
        }
    }

    /// True when the change moves stock (the gate's remaining must follow).
    pub fn moves_stock(&self) -> bool {
        matches!(self, Change::Restock { .. } | Change::SetStock { .. })
    }

    /// `SET` list and condition of the `UPDATE` (`c` is the row, `$4` the params, `$5`
    /// [`MAX_STOCK`]).
    fn sql(&self) -> (&'static str, &'static str) {
        match self {
            Change::Pause => ("paused = true", "NOT c.paused"),
            Change::Resume => ("paused = false", "c.paused"),
            Change::Close => (
                "ends_at = now(), starts_at = least(c.starts_at, now() - interval '1 millisecond')",
                "c.ends_at > now()",
            ),
            Change::Restock { .. } => (
                "stock = c.stock + ($4::jsonb->>'add')::bigint,
                 remaining = c.remaining + ($4::jsonb->>'add')::bigint",
                "c.stock + ($4::jsonb->>'add')::bigint <= $5",
            ),
            Change::SetStock { .. } => (
                "stock = ($4::jsonb->>'stock')::bigint,
                 remaining = c.remaining + (($4::jsonb->>'stock')::bigint - c.stock)",
                "($4::jsonb->>'stock')::bigint >= c.stock - c.remaining
                 AND ($4::jsonb->>'stock')::bigint <> c.stock",
            ),
            Change::SetWaitingRoom { .. } => (
                "waiting_room = $4::jsonb->'waiting_room'",
                "c.waiting_room IS DISTINCT FROM $4::jsonb->'waiting_room'",
            ),
            Change::PauseAdmission => (
                "queue_paused = true",
                "NOT c.queue_paused AND c.waiting_room IS NOT NULL",
            ),
            Change::ResumeAdmission => ("queue_paused = false", "c.queue_paused"),
            // Sales only (a giveaway has no hold_seconds).
            Change::SetHoldExtension { .. } => (
                "hold_extension_seconds = ($4::jsonb->>'hold_extension_seconds')::int",
                "c.hold_seconds IS NOT NULL
                 AND c.hold_extension_seconds <> ($4::jsonb->>'hold_extension_seconds')::int",
            ),
            // A campaign closed before it started keeps its planned start (the `starts_at`
            // before its latest close, in the audit trail): a new end never opens it early.
            Change::SetEndsAt { .. } => (
                "ends_at = ($4::jsonb->>'ends_at')::timestamptz,
                 starts_at = greatest(c.starts_at, (SELECT (a.before->>'starts_at')::timestamptz
                       FROM admin_audit a WHERE a.campaign_id = c.id AND a.action = 'close'
                      ORDER BY a.seq DESC LIMIT 1))",
                "($4::jsonb->>'ends_at')::timestamptz > greatest(c.starts_at,
                     (SELECT (a.before->>'starts_at')::timestamptz
                        FROM admin_audit a WHERE a.campaign_id = c.id AND a.action = 'close'
                       ORDER BY a.seq DESC LIMIT 1))
                 AND ($4::jsonb->>'ends_at')::timestamptz <> c.ends_at",
            ),
        }
    }
}

impl TryFrom<ChangeRequest> for Change {
    type Error = String;
    /// Checks the body: exactly one change, numbers in range. The message is for humans.
    fn try_from(r: ChangeRequest) -> Result<Self, String> {
        let given = [
            r.action.is_some(),
            r.set_stock.is_some(),
            r.ends_at.is_some(),
            r.waiting_room.is_some(),
            r.hold_extension_seconds.is_some(),
        ]
        .iter()
        .filter(|x| **x)
        .count();
        if given != 1 {
            return Err(
                "give exactly one of: action (pause, resume, close, restock, pause_admission, \
                 resume_admission), set_stock, ends_at, waiting_room, hold_extension_seconds"
                    .into(),
            );
        }
        if r.add.is_some() && r.action.as_deref() != Some("restock") {
            return Err("add goes with \"action\":\"restock\" only".into());
        }
        if let Some(n) = r.set_stock {
            return Ok(Change::SetStock {
                stock: check_stock("set_stock", n)?,
            });
        }
        if let Some(n) = r.hold_extension_seconds {
            return Ok(Change::SetHoldExtension {
                seconds: check_hold_extension(n)?,
            });
        }
        if let Some(waiting_room) = r.waiting_room {
            waiting_room.validate()?;
            return Ok(Change::SetWaitingRoom { waiting_room });
        }
        if let Some(ends_at) = r.ends_at {
            check_year("ends_at", ends_at)?;
            return Ok(Change::SetEndsAt { ends_at });
        }
        match r.action.as_deref().unwrap_or_default() {
            "pause" => Ok(Change::Pause),
            "resume" => Ok(Change::Resume),
            "close" => Ok(Change::Close),
            "pause_admission" => Ok(Change::PauseAdmission),
            "resume_admission" => Ok(Change::ResumeAdmission),
            "restock" => {
                let add = r
                    .add
                    .ok_or("restock needs \"add\": the number of units to add")?;
                Ok(Change::Restock {
                    add: check_stock("add", add)?,
                })
            }
            other => Err(format!(
                "unknown action '{}' (pause, resume, close, restock, pause_admission, resume_admission)",
                other.chars().take(40).collect::<String>()
            )),
        }
    }
}

/// The campaign facts a change can touch, as kept in the audit row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    pub stock: i64,
    pub remaining: i64,
    pub paused: bool,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    /// The waiting room option (`null` without one).
    #[serde(default)]
    pub waiting_room: Option<WaitingRoom>,
    /// True while the waiting room's admission is paused.
    #[serde(default)]
    pub queue_paused: bool,
    /// Seconds a hold may be extended by (0 = off).
    #[serde(default)]
    pub hold_extension_seconds: i32,
}

/// What the statement did.
#[derive(Debug, Clone)]
pub enum Applied {
    /// Unknown campaign.
    NotFound,
    /// Changed and audited.
    Changed {
        before: Facts,
        after: Facts,
        /// Boxed: the largest variant by far.
        audit: Box<AuditEntry>,
    },
    /// The condition refused; nothing was written. `before` is the locked row.
    Unchanged { before: Facts },
}

/// Applies `change` to campaign `id` in one statement (with its audit row), writes its webhook
/// event (`campaign.paused`, `.resumed`, `.closed`, `.restocked`) in the same transaction, and
/// commits.
pub async fn apply(db: &Db, id: &str, who: &Admin, change: Change) -> sqlx::Result<Applied> {
    let (set, condition) = change.sql();
    let sql = format!(
        "WITH before AS (
             SELECT id, stock, remaining, paused, starts_at, ends_at, waiting_room, queue_paused,
                    hold_extension_seconds
               FROM campaigns WHERE id = $1 FOR UPDATE
         ), after AS (
             UPDATE campaigns c SET {set}, updated_at = now()
               FROM before b
              WHERE c.id = b.id AND {condition}
             RETURNING c.id, c.stock, c.remaining, c.paused, c.starts_at, c.ends_at,
                       c.waiting_room, c.queue_paused, c.hold_extension_seconds
         ), audit AS (
             INSERT INTO admin_audit (campaign_id, actor, action, params, before, after)
             SELECT a.id, $2, $3, $4::jsonb, to_jsonb(b) - 'id', to_jsonb(a) - 'id'
               FROM after a, before b
             RETURNING seq, campaign_id, actor, action, params, before, after, at
         )
         SELECT to_jsonb(b) - 'id' AS before,
                (SELECT to_jsonb(a) FROM audit a) AS audit
           FROM before b"
    );
    let mut tx = db.begin().await?;
    let row: Option<(Value, Option<Value>)> = sqlx::query_as(&sql)
        .bind(id)
        .bind(&who.name)
        .bind(change.action())
        .bind(change.params())
        .bind(MAX_STOCK)
        .fetch_optional(&mut *tx)
        .await?;
    let Some((before, audit)) = row else {
        return Ok(Applied::NotFound);
    };
    fn decode<T: serde::de::DeserializeOwned>(v: Value) -> sqlx::Result<T> {
        serde_json::from_value(v).map_err(|e| sqlx::Error::Decode(Box::new(e)))
    }
    let before: Facts = decode(before)?;
    let applied = match audit {
        None => Applied::Unchanged { before },
        Some(audit) => {
            let audit: AuditEntry = decode(audit)?;
            let after: Facts = decode(audit.after.clone())?;
            if let Some(kind) = change.event() {
                let data = CampaignData {
                    stock: after.stock,
                    remaining: after.remaining,
                    paused: after.paused,
                    ends_at: after.ends_at,
                };
                let event = NewEvent::campaign(kind, id, data);
                webhooks::events::emit(&mut tx, &[event]).await?;
            }
            Applied::Changed {
                before,
                after,
                audit: Box::new(audit),
            }
        }
    };
    tx.commit().await?;
    Ok(applied)
}

/// Why a refused change was refused, for the answer: `Ok(())` when it was simply a no-op
/// (already paused, already that stock, …), `Err(message)` for a conflict with the campaign's
/// current facts.
pub fn refusal(change: Change, before: &Facts) -> Result<(), String> {
    match change {
        Change::Restock { add } if before.stock + add > MAX_STOCK => Err(format!(
            "stock {} + {add} would exceed {MAX_STOCK}",
            before.stock
        )),
        Change::SetStock { stock } if stock < before.stock - before.remaining => Err(format!(
            "stock cannot go below the {} units already claimed",
            before.stock - before.remaining
        )),
        Change::SetEndsAt { ends_at } if ends_at <= before.starts_at => Err(format!(
            "ends_at must be after starts_at ({})",
            before.starts_at.to_rfc3339()
        )),
        Change::SetEndsAt { ends_at } if ends_at != before.ends_at => Err(
            "ends_at must be after the campaign's planned start: it was closed before it \
             started, and a new end keeps the planned start (see the audit trail)"
                .into(),
        ),
        Change::PauseAdmission | Change::ResumeAdmission if before.waiting_room.is_none() => {
            Err("the campaign has no waiting room".into())
        }
        // Refused with another value: only a giveaway refuses (it has no holds).
        Change::SetHoldExtension { seconds }
            if i64::from(before.hold_extension_seconds) != seconds =>
        {
            Err("hold_extension_seconds applies to sale campaigns only".into())
        }
        _ => Ok(()),
    }
}

/// Makes the gate follow a committed change of campaign `c` from `before` to `after`.
pub async fn follow(
    db: &Db,
    redis: &mut Gate,
    c: &str,
    change: Change,
    before: &Facts,
    after: &Facts,
) -> GateFollow {
    let result: Result<GateFollow, String> = async {
        if change.moves_stock() {
            let delta = after.remaining - before.remaining;
            let moved = gate::adjust(redis, c, delta, after.remaining)
                .await
                .map_err(|e| e.to_string())?;
            if moved.is_some() {
                return Ok(GateFollow::Updated);
            }
        } else if matches!(change, Change::SetWaitingRoom { .. }) {
            crate::queue::store::open(&mut redis.redis(), c)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(GateFollow::NotNeeded);
        } else if matches!(change, Change::SetEndsAt { .. }) {
            // An end moved later may revive a campaign whose gate was never loaded.
            if gate::load::is_loaded(redis, c)
                .await
                .map_err(|e| e.to_string())?
            {
                return Ok(GateFollow::NotNeeded);
            }
        } else {
            return Ok(GateFollow::NotNeeded);
        }
        // Not loaded: nothing is in flight in it, so a full load is right.
        gate::load::load(db, redis, c)
            .await
            .map_err(|e| e.to_string())?;
        Ok(GateFollow::Reloaded)
    }
    .await;
    result.unwrap_or_else(|e| {
        tracing::warn!(campaign = c, error = %e, "gate did not follow an admin change");
        GateFollow::Pending
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Change, String> {
        Change::try_from(serde_json::from_str::<ChangeRequest>(s).map_err(|e| e.to_string())?)
    }

    #[test]
    fn bodies() {
        assert_eq!(parse(r#"{"action":"pause"}"#), Ok(Change::Pause));
        assert_eq!(parse(r#"{"action":"resume"}"#), Ok(Change::Resume));
        assert_eq!(parse(r#"{"action":"close"}"#), Ok(Change::Close));
        assert_eq!(
            parse(r#"{"action":"pause_admission"}"#),
            Ok(Change::PauseAdmission)
        );
        assert!(matches!(
            parse(r#"{"waiting_room":{"admit_per_second":5}}"#),
            Ok(Change::SetWaitingRoom { .. })
        ));
        assert!(parse(r#"{"waiting_room":{"admit_per_second":0}}"#).is_err());
        assert_eq!(
            parse(r#"{"hold_extension_seconds":120}"#),
            Ok(Change::SetHoldExtension { seconds: 120 })
        );
        assert_eq!(
            parse(r#"{"action":"restock","add":5}"#),
            Ok(Change::Restock { add: 5 })
        );
        assert_eq!(
            parse(r#"{"set_stock":7}"#),
            Ok(Change::SetStock { stock: 7 })
        );
        assert!(matches!(
            parse(r#"{"ends_at":"2030-01-01T00:00:00Z"}"#),
            Ok(Change::SetEndsAt { .. })
        ));
        for bad in [
            r#"{}"#,
            r#"{"action":"restock"}"#,
            r#"{"action":"restock","add":0}"#,
            r#"{"action":"restock","add":-3}"#,
            r#"{"action":"restock","add":10000001}"#,
            r#"{"action":"pause","add":1}"#,
            r#"{"action":"explode"}"#,
            r#"{"set_stock":0}"#,
            r#"{"set_stock":5,"action":"pause"}"#,
            r#"{"action":"pause","extra":1}"#,
            r#"{"action":"restock","add":1e3}"#,
            r#"{"action":"restock","add":99999999999999999999}"#,
            r#"{"ends_at":"-200000-01-01T00:00:00Z"}"#,
            r#"{"ends_at":"+200000-01-01T00:00:00Z"}"#,
            r#"{"hold_extension_seconds":3601}"#,
            r#"{"hold_extension_seconds":-1}"#,
            r#"{"hold_extension_seconds":60,"action":"pause"}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refusals_explain_conflicts_only() {
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        let before = Facts {
            stock: 10,
            remaining: 3,
            paused: true,
            starts_at: t("2030-01-01T00:00:00Z"),
            ends_at: t("2030-01-02T00:00:00Z"),
            waiting_room: None,
            queue_paused: false,
            hold_extension_seconds: 0,
        };
        assert!(refusal(Change::PauseAdmission, &before).is_err());
        assert!(refusal(Change::Pause, &before).is_ok());
        assert!(refusal(Change::SetStock { stock: 6 }, &before).is_err());
        assert!(refusal(Change::SetStock { stock: 10 }, &before).is_ok());
        assert!(refusal(Change::Restock { add: MAX_STOCK }, &before).is_err());
        assert!(refusal(
            Change::SetEndsAt {
                ends_at: t("2029-01-01T00:00:00Z")
            },
            &before
        )
        .is_err());
    }
}
