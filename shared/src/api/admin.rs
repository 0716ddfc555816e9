//! Admin API bodies (`/admin/v1/...`): the campaign as managers see it with live counts, the
//! change request and its reply, the audit trail, the per-second series, and the reconcile
//! report. The origin
//! computes them; the admin CLI and the tests read and send these same types.
//!
//! With the `sqlx` feature (the origin's), [`Counts`] and [`AuditEntry`] also read straight
//! from PostgreSQL rows (`sqlx::FromRow`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::campaigns::{CampaignKind, CampaignStatus};
use super::promo::AdminCode;

/// A campaign as the admin API shows it: the public status plus the settings managers see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AdminCampaign {
    /// The public status (flattened: its fields stand at the top level).
    #[serde(flatten)]
    pub status: CampaignStatus,
    /// Sale: hold length in seconds; `null` for a giveaway.
    pub hold_seconds: Option<i64>,
    /// Sale: seconds a hold may be extended by, once per claim (0 = off; at most 3,600).
    #[serde(default)]
    pub hold_extension_seconds: i64,
    /// True while a manager has the campaign paused.
    pub paused: bool,
    /// Shards of the campaign's Redis gate (1..=1024).
    pub gate_shards: i64,
    /// The waiting room option; absent when the campaign has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_room: Option<crate::queue::WaitingRoom>,
    /// The waiting room's live figures (read from Redis); absent without a waiting room, or
    /// when Redis could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<crate::queue::QueueView>,
}

/// Claim counts of a campaign, by status and over time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct Counts {
    /// Sale: units held, waiting for payment.
    pub held: i64,
    /// Sale: units paid.
    pub paid: i64,
    /// Giveaway: coupons issued, not yet redeemed.
    pub issued: i64,
    /// Giveaway: coupons redeemed.
    pub redeemed: i64,
    /// Sale: holds released or expired (their units went back).
    pub returned: i64,
    /// Every claim ever written for the campaign (a growing counter: its rate is claims/s).
    pub claims_total: i64,
    /// Claims written in the last 60 seconds.
    pub claims_last_minute: i64,
}

/// A campaign as `GET /admin/v1/campaigns[/{id}]` shows it: [`AdminCampaign`]'s fields, flat,
/// plus live counts and times (RFC 3339 UTC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CampaignView {
    /// The campaign's status and settings (flattened).
    #[serde(flatten)]
    pub campaign: AdminCampaign,
    /// Live claim counts.
    pub counts: Counts,
    /// When the campaign was created (RFC 3339 UTC).
    pub created_at: DateTime<Utc>,
    /// When the campaign row last changed (RFC 3339 UTC).
    pub updated_at: DateTime<Utc>,
    /// The origin's clock when the view was read.
    pub as_of: DateTime<Utc>,
    /// One campaign's view (`GET /admin/v1/campaigns/{id}`, a change's reply) of a campaign
    /// with variants: each variant's status and live counts, by id. Absent from the list and
    /// on a campaign without variants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variants: Option<Vec<VariantView>>,
}

/// One variant in a campaign's admin view: its status (flattened) and its live claim counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VariantView {
    /// Id, name, stock, remaining and state, as the public status shows them.
    #[serde(flatten)]
    pub status: super::VariantStatus,
    /// Sale: units of this variant held, waiting for payment.
    pub held: i64,
    /// Sale: units of this variant paid.
    pub paid: i64,
    /// Giveaway: coupons of this variant issued, not yet redeemed.
    pub issued: i64,
    /// Giveaway: coupons of this variant redeemed.
    pub redeemed: i64,
}

/// `GET /admin/v1/campaigns` body: the newest campaigns, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CampaignList {
    /// Newest first, at most 500.
    pub campaigns: Vec<CampaignView>,
}

/// What `"action"` of a [`ChangeRequest`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeAction {
    /// Claims are answered `paused` until resumed.
    Pause,
    /// Claims flow again.
    Resume,
    /// Ends the campaign now.
    Close,
    /// Adds units (goes with `add`).
    Restock,
    /// Stops the waiting room admitting customers (the queue keeps its order).
    PauseAdmission,
    /// The waiting room admits customers again.
    ResumeAdmission,
}

impl ChangeAction {
    /// The wire name: `pause`, `resume`, `close`, `restock`, `pause_admission`,
    /// `resume_admission`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeAction::Pause => "pause",
            ChangeAction::Resume => "resume",
            ChangeAction::Close => "close",
            ChangeAction::Restock => "restock",
            ChangeAction::PauseAdmission => "pause_admission",
            ChangeAction::ResumeAdmission => "resume_admission",
        }
    }
}

/// `PATCH /admin/v1/campaigns/{id}` body, exactly one of:
/// `{"action":"pause"}`, `{"action":"resume"}`, `{"action":"close"}`,
/// `{"action":"restock","add":n}`, `{"set_stock":n}`, `{"ends_at":"<RFC 3339>"}`,
/// `{"action":"pause_admission"}`, `{"action":"resume_admission"}`,
/// `{"waiting_room":{…}}` (sets or changes the waiting room; it cannot be removed),
/// `{"hold_extension_seconds":n}` (sale: 0 turns hold extension off).
/// Unknown fields are refused. `action` stays a string on the wire so that an unknown action
/// is a 422 `validation_failed` naming it (not a 400); build requests with the constructors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChangeRequest {
    /// The action (see [`ChangeAction::as_str`]); an unknown one is a 422 `validation_failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// With `"action":"restock"`: units to add (1..=[`MAX_STOCK`](super::campaigns::MAX_STOCK)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add: Option<i64>,
    /// New total stock (1..=[`MAX_STOCK`](super::campaigns::MAX_STOCK), never below the units
    /// already claimed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_stock: Option<i64>,
    /// New end: after `starts_at` and in the future (an end that has passed is a 422 naming
    /// `ends_at`; `close` ends a campaign now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<DateTime<Utc>>,
    /// Sets or changes the waiting room ([`crate::queue::WaitingRoom`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_room: Option<crate::queue::WaitingRoom>,
    /// Sale: sets the seconds a hold may be extended by, once per claim (0 = off,
    /// ..=[`MAX_HOLD_EXTENSION_SECONDS`](super::campaigns::MAX_HOLD_EXTENSION_SECONDS)). Holds
    /// already extended keep their `held_until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_extension_seconds: Option<i64>,
}

impl ChangeRequest {
    /// `{"action": <action>}` (for `restock` use [`ChangeRequest::restock`]).
    pub fn action(action: ChangeAction) -> Self {
        ChangeRequest {
            action: Some(action.as_str().to_string()),
            ..Default::default()
        }
    }

    /// `{"action":"restock","add":add}`.
    pub fn restock(add: i64) -> Self {
        ChangeRequest {
            add: Some(add),
            ..Self::action(ChangeAction::Restock)
        }
    }

    /// `{"set_stock":stock}`.
    pub fn set_stock(stock: i64) -> Self {
        ChangeRequest {
            set_stock: Some(stock),
            ..Default::default()
        }
    }

    /// `{"waiting_room":w}`.
    pub fn waiting_room(w: crate::queue::WaitingRoom) -> Self {
        ChangeRequest {
            waiting_room: Some(w),
            ..Default::default()
        }
    }

    /// `{"hold_extension_seconds":seconds}`.
    pub fn hold_extension(seconds: i64) -> Self {
        ChangeRequest {
            hold_extension_seconds: Some(seconds),
            ..Default::default()
        }
    }

    /// `{"ends_at":ends_at}`.
    pub fn ends_at(ends_at: DateTime<Utc>) -> Self {
        ChangeRequest {
            ends_at: Some(ends_at),
            ..Default::default()
        }
    }
}

/// How the Redis gate followed a change (`gate` of [`ChangeReply`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum GateFollow {
    /// Nothing in the gate depends on this change.
    NotNeeded,
    /// The gate's remaining and sold-out flag were updated.
    Updated,
    /// The gate was (re)loaded from PostgreSQL.
    Reloaded,
    /// Redis failed; the gate is corrected from PostgreSQL on its next load (the claim commit
    /// still decides in SQL, so nothing can oversell meanwhile).
    Pending,
}

/// One row of the audit trail of managers' changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
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
    #[cfg_attr(feature = "sqlx", sqlx(default))]
    pub code: Option<String>,
    /// The batch of one-time codes exported (`export`); left out otherwise.
    #[serde(
        rename = "batch",
        alias = "batch_id",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "sqlx", sqlx(default))]
    pub batch_id: Option<String>,
    /// Name of the admin token that made the change.
    pub actor: String,
    /// `create`, `pause`, `resume`, `close`, `restock`, `set_stock`, `set_ends_at`,
    /// `set_waiting_room`, `pause_admission`, `resume_admission`, `set_hold_extension`, `set_variant`
    /// (a variant added or changed) or
    /// `export` (the claims feed as CSV) (campaigns); `disable`, `enable` (codes); `export` (a
    /// batch of one-time codes as CSV).
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

/// `GET /admin/v1/campaigns/{id}/audit` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditList {
    /// The campaign id.
    pub campaign: String,
    /// Newest first, at most 1,000 entries.
    pub entries: Vec<AuditEntry>,
}

/// `PATCH /admin/v1/campaigns/{id}` 200 body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChangeReply {
    /// False when the campaign already was that way (nothing written, no audit row).
    pub changed: bool,
    /// The campaign after the change, with live counts.
    pub campaign: CampaignView,
    /// The audit row of the change; `null` when nothing changed.
    pub audit: Option<AuditEntry>,
    /// How the Redis gate followed.
    pub gate: GateFollow,
}

/// `GET /admin/v1/campaigns/{id}/series` 200 body: a campaign's answers and units, one value
/// per second over the last `seconds` seconds (oldest first; the last is the current second,
/// still counting). Every array has `seconds` values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CampaignSeries {
    /// The campaign id.
    pub campaign: String,
    /// The first second of the series (RFC 3339 UTC, whole seconds); value `i` is the second
    /// `from + i` seconds.
    pub from: DateTime<Utc>,
    /// Seconds in the series (1 to 3,600).
    pub seconds: i64,
    /// Claims made in each second, by every origin (rows of PostgreSQL's `claims`).
    pub claims: Vec<i64>,
    /// `sold_out` answers this origin gave in each second (counted in its memory for the last
    /// 600 s, 0 before: the other origins' and the edge's own sold-out answers are not in it).
    pub sold_out: Vec<i64>,
    /// Units remaining at the end of each second, by the claims, returned holds and manager
    /// changes PostgreSQL recorded since.
    pub remaining: Vec<i64>,
    /// The answers the edge gave itself in each second, summed over its isolates, by result:
    /// claim answers (`sold_out`, `not_started`, `ended`, `paused`, `queued`, `rate_limited`)
    /// and joins that failed their challenge (`challenge_<reason>`: `missing`, `malformed`,
    /// `forged`, `foreign`, `expired`, `unsolved`, `rejected`, `provider_error`). Only results
    /// reported in the span are present; from the edge's answer reports, kept for the
    /// campaign's life (up to a second behind).
    #[serde(default)]
    pub edge: BTreeMap<String, Vec<i64>>,
}

/// `PATCH /admin/v1/codes/{code}` 200 body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CodeChangeReply {
    /// False when the code already was that way (nothing written, no audit row).
    pub changed: bool,
    /// The code after the change, with `uses_left` and `disabled_at`.
    pub code: AdminCode,
    /// The audit row of the change; `null` when nothing changed.
    pub audit: Option<AuditEntry>,
}

/// Units of a campaign by claim status, from PostgreSQL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatusCounts {
    /// Sale: units held, waiting for payment.
    pub held: i64,
    /// Sale: units paid.
    pub paid: i64,
    /// Sale: holds released (their units went back).
    pub released: i64,
    /// Sale: holds expired unpaid (their units went back).
    pub expired: i64,
    /// Giveaway: coupons issued, not yet redeemed.
    pub issued: i64,
    /// Giveaway: coupons redeemed.
    pub redeemed: i64,
}

/// The Redis gate of a campaign as reconciliation saw it. `null` in the report when the gate
/// is not loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GateView {
    /// Units the gate may still hand out, over every shard.
    pub remaining: i64,
    /// Takes still committing, over every shard.
    pub pending: i64,
    /// Customers the gate remembers as holding a unit, over every shard.
    pub holders: i64,
    /// Each shard of the gate, in order (one entry for a campaign of one shard).
    #[serde(default)]
    pub shards: Vec<GateShardView>,
    /// Whether the sold-out flag is set.
    pub sold_out_flag: bool,
    /// Gate holders naming a claim that is not active in PostgreSQL (blocks the customer).
    pub stale_holders: i64,
    /// Active claims in PostgreSQL the gate does not know (the customer could take twice at the
    /// gate; PostgreSQL's unique index still refuses).
    pub missing_holders: i64,
}

/// One shard of the Redis gate in a [`GateView`] (shard 0 has hash tag `{c}`, shard `s` has
/// `{c:s}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GateShardView {
    /// Shard number, from 0.
    pub shard: u16,
    /// Units this shard may still hand out.
    pub remaining: i64,
    /// Takes of this shard's customers still committing.
    pub pending: i64,
    /// This shard's customers holding a unit.
    pub holders: i64,
}

/// Drift found and repaired by the gate audit, in a [`ReconcileReport`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DriftView {
    /// Units taken off this campaign's gate because it promised more than PostgreSQL had.
    pub lowered: i64,
    /// Units put back on this campaign's gate because it had lost them.
    pub raised: i64,
    /// Holders of this campaign's gate that named no active claim, dropped (the unit given
    /// back when PostgreSQL had released the claim).
    pub holders_dropped: i64,
    /// Active claims of this campaign whose missing holder was written.
    pub holders_restored: i64,
    /// When the audit last repaired this campaign's gate (RFC 3339 UTC); `null` when never.
    pub last_repair_at: Option<DateTime<Utc>>,
    /// Promo codes (all of them, not only this campaign's) whose cached used-up or disabled
    /// flag was behind PostgreSQL after a release, rewritten.
    pub code_flags: i64,
    /// Cached code uses that still named a released use, dropped (all codes).
    pub code_holders_dropped: i64,
    /// When the audit last repaired a code's cached state (RFC 3339 UTC); `null` when never.
    pub codes_last_repair_at: Option<DateTime<Utc>>,
}

/// `POST /admin/v1/campaigns/{id}/purge` body and `flashgate admin purge <campaign>` output:
/// the Redis keys of an ended campaign with no hold outstanding, deleted at once (PostgreSQL
/// keeps everything; reconcile still answers, without the gate part).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PurgeReport {
    /// The campaign id.
    pub campaign: String,
    /// How many Redis keys of the campaign were deleted (0 when they had expired already).
    pub keys_deleted: u64,
}

/// `GET /admin/v1/campaigns/{id}/reconcile` body and `flashgate reconcile <campaign>` output.
/// Checks `stock = remaining + held + paid` (sale) or `stock = remaining + issued + redeemed`
/// (giveaway), the ledger against the claims, and the Redis gate against PostgreSQL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReconcileReport {
    /// The campaign id.
    pub campaign: String,
    /// Sale or giveaway (which statuses count as units out).
    pub kind: CampaignKind,
    /// `campaigns.stock` in PostgreSQL: total units.
    pub stock: i64,
    /// `campaigns.remaining` in PostgreSQL.
    pub remaining: i64,
    /// Claims by status.
    pub claims: StatusCounts,
    /// Units out: held + paid (sale) or issued + redeemed (giveaway).
    pub active: i64,
    /// Units out by the ledger: claimed/issued events minus released/expired events.
    pub ledger_active: i64,
    /// Ledger claim ids without a claim row.
    pub ledger_orphans: i64,
    /// Units handed out or available beyond the stock: `max(0, remaining + active − stock)`.
    pub oversold: i64,
    /// Units neither available nor held by a claim: `max(0, stock − remaining − active)`, plus
    /// units PostgreSQL has remaining that the gate will not hand out.
    pub stranded: i64,
    /// The gate, or `null` when it is not loaded (it is rebuilt from PostgreSQL on next use).
    pub gate: Option<GateView>,
    /// Drift the gate audit found and repaired (it runs every 2 s on one origin), counted since
    /// the campaign's gate was created or Redis last lost its memory. Repaired drift is not a
    /// fault: `faults` lists what is still apart now.
    #[serde(default)]
    pub drift: DriftView,
    /// On a campaign with variants, each variant's reconciliation, by id (absent on a campaign
    /// without variants). `oversold` and `stranded` above are then at least the sums of the
    /// variants', so a unit oversold in one variant is not hidden by one stranded in another.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<VariantReconcile>,
    /// Human-readable list of every disagreement found; empty when clean.
    pub faults: Vec<String>,
    /// True when `faults` is empty (so `oversold` and `stranded` are 0).
    pub ok: bool,
}

/// One variant in a [`ReconcileReport`]: `stock = remaining + active` in PostgreSQL, and the
/// gate's count of the variant against PostgreSQL's `remaining` of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VariantReconcile {
    /// The variant id.
    pub id: String,
    /// `campaign_variants.stock` in PostgreSQL.
    pub stock: i64,
    /// `campaign_variants.remaining` in PostgreSQL.
    pub remaining: i64,
    /// Active claims of this variant (held + paid, or issued + redeemed).
    pub active: i64,
    /// `max(0, remaining + active − stock)`.
    pub oversold: i64,
    /// `max(0, stock − remaining − active)`, plus units of this variant PostgreSQL has that the
    /// gate will not hand out.
    pub stranded: i64,
    /// The gate's count of this variant over every shard; `null` when the gate is not loaded.
    pub gate_remaining: Option<i64>,
    /// Takes of this variant still committing; `null` when the gate is not loaded.
    pub gate_pending: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn change_requests_have_the_documented_wire_shapes() {
        let cases = [
            (
                ChangeRequest::action(ChangeAction::Pause),
                json!({"action": "pause"}),
            ),
            (
                ChangeRequest::action(ChangeAction::Close),
                json!({"action": "close"}),
            ),
            (
                ChangeRequest::restock(5),
                json!({"action": "restock", "add": 5}),
            ),
            (ChangeRequest::set_stock(7), json!({"set_stock": 7})),
            (
                ChangeRequest::ends_at("2026-01-01T12:00:00Z".parse().unwrap()),
                json!({"ends_at": "2026-01-01T12:00:00Z"}),
            ),
        ];
        for (req, wire) in cases {
            assert_eq!(serde_json::to_value(&req).unwrap(), wire);
            assert_eq!(serde_json::from_value::<ChangeRequest>(wire).unwrap(), req);
        }
        assert!(serde_json::from_value::<ChangeRequest>(json!({"add": 1, "x": 1})).is_err());
    }

    #[test]
    fn campaign_view_is_flat_and_round_trips() {
        let wire = json!({
            "id": "s", "name": "S", "kind": "sale", "state": "active", "stock": 5,
            "remaining": 4, "starts_at": "2026-01-01T00:00:00Z",
            "ends_at": "2026-01-02T00:00:00Z", "hold_seconds": 600,
            "hold_extension_seconds": 0, "paused": false, "gate_shards": 1,
            "counts": {"held": 1, "paid": 0, "issued": 0, "redeemed": 0, "returned": 0,
                       "claims_total": 1, "claims_last_minute": 1},
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "as_of": "2026-01-01T01:00:00Z"
        });
        let v: CampaignView = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!((v.campaign.status.remaining, v.counts.held), (4, 1));
        assert_eq!(serde_json::to_value(&v).unwrap(), wire);
        assert_eq!(
            serde_json::to_value(GateFollow::NotNeeded).unwrap(),
            json!("not_needed")
        );
    }
}
