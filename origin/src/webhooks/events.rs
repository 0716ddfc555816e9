//! The outbox of events: [`emit`] writes events in the caller's transaction, so an event exists
//! exactly when its change committed.
//!
//! One statement per call, whatever the number of events: each event gets the next sequence
//! number of its object (`claim`, `code_use`, `gift` or `campaign`, [`EventType::object_kind`]),
//! and one pending delivery row per enabled endpoint subscribed to its type. Every change writes its event,
//! subscribed or not (a later endpoint can replay it); with no endpoint the delivery insert
//! finds nothing to fan out to.
//!
//! The statement locks the enabled endpoints subscribed to its types `FOR KEY SHARE`, once
//! each: an endpoint being deleted waits for the claim's commit and then deletes the rows it
//! wrote ([`super::endpoints::delete`]). `webhook_deliveries` has no foreign keys (migration
//! 0022): they ran two trigger queries per row on the claim path.
//!
//! The sequence is the object's highest one plus one: changes of one object are serialised by
//! their own row lock (the claim's, the use's, the gift outbox row's or the campaign's
//! `UPDATE`), and the unique index on
//! `(object_kind, object_id, sequence)` refuses a second writer that did not hold it. An event
//! about an object its own transaction created ([`NewEvent::of_new_object`], a grouped commit's
//! `claim.held`) starts at 1 without looking the highest one up: no other transaction can
//! have written an event of an object that is not committed yet, and the unique index still
//! guards it.

use chrono::{DateTime, Utc};
use flashgate_shared::api::webhooks::{
    CampaignData, ClaimData, CodeUseData, EventData, EventType, GiftData,
};
use flashgate_shared::api::ClaimStatus;

use crate::db::Conn;

/// An event to write: its type, campaign (none for a promo code use), object and data.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub kind: EventType,
    pub campaign: Option<String>,
    pub object_id: String,
    pub data: EventData,
    /// A claim event whose `data` already names the claim's variant, or the absence of one
    /// ([`NewEvent::with_variant`]): [`emit`] does not read it from the claim's row.
    pub variant_known: bool,
    /// The object was created in the transaction that writes this event, so it has no earlier
    /// event ([`NewEvent::of_new_object`]).
    pub new_object: bool,
}

impl NewEvent {
    /// A `claim.*` or `coupon.*` event about claim `id` of `campaign`.
    pub fn claim(
        kind: EventType,
        campaign: &str,
        id: &str,
        customer: &str,
        status: ClaimStatus,
        held_until: Option<DateTime<Utc>>,
        payment_ref: Option<&str>,
    ) -> Self {
        NewEvent {
            kind,
            campaign: Some(campaign.to_string()),
            object_id: id.to_string(),
            data: EventData::Claim(ClaimData {
                claim_id: id.to_string(),
                customer: customer.to_string(),
                status,
                held_until,
                payment_ref: payment_ref.map(str::to_string),
                variant: None,
            }),
            variant_known: false,
            new_object: false,
        }
    }

    /// This claim event with the claim's variant as its writer knows it (`None`: a campaign
    /// without variants), so [`emit`] does not look it up. No change to other events.
    pub fn with_variant(mut self, variant: Option<&str>) -> Self {
        if let EventData::Claim(data) = &mut self.data {
            data.variant = variant.map(str::to_string);
            self.variant_known = true;
        }
        self
    }

    /// This event with its object created in the writer's own transaction: [`emit`] numbers
    /// it from 1 without reading the object's earlier events (it has none).
    pub fn of_new_object(mut self) -> Self {
        self.new_object = true;
        self
    }

    /// A `campaign.*` event about `campaign` with its counts after the change.
    pub fn campaign(kind: EventType, campaign: &str, data: CampaignData) -> Self {
        NewEvent {
            kind,
            campaign: Some(campaign.to_string()),
            object_id: campaign.to_string(),
            data: EventData::Campaign(data),
            variant_known: false,
            new_object: false,
        }
    }

    /// A `code_use.*` event about a promo code use (no campaign).
    pub fn code_use(kind: EventType, data: CodeUseData) -> Self {
        NewEvent {
            kind,
            campaign: None,
            object_id: data.use_id.clone(),
            data: EventData::CodeUse(data),
            variant_known: false,
            new_object: false,
        }
    }

    /// A `gift.*` event about a fulfilment of gift campaign `campaign`.
    pub fn gift(kind: EventType, campaign: &str, data: GiftData) -> Self {
        NewEvent {
            kind,
            campaign: Some(campaign.to_string()),
            object_id: data.fulfilment_id.clone(),
            data: EventData::Gift(data),
            variant_known: false,
            new_object: false,
        }
    }
}

/// Writes `events` (in order: two events of one object get increasing sequence numbers) and
/// their pending deliveries inside the caller's transaction. Returns the deliveries queued.
/// A claim event's `data` gets the claim's `variant` here, from its row as the transaction
/// sees it, when it has one, unless the event already names it ([`NewEvent::with_variant`]).
pub async fn emit(conn: &mut Conn<'_>, events: &[NewEvent]) -> sqlx::Result<u64> {
    if events.is_empty() {
        return Ok(0);
    }
    let types: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.object_kind()).collect();
    let campaigns: Vec<Option<&str>> = events.iter().map(|e| e.campaign.as_deref()).collect();
    let objects: Vec<&str> = events.iter().map(|e| e.object_id.as_str()).collect();
    let look: Vec<bool> = events
        .iter()
        .map(|e| matches!(e.data, EventData::Claim(_)) && !e.variant_known)
        .collect();
    let new: Vec<bool> = events.iter().map(|e| e.new_object).collect();
    let payloads: Vec<serde_json::Value> = events
        .iter()
        .map(|e| serde_json::to_value(&e.data).unwrap_or_default())
        .collect();
    let done = sqlx::query!(
        r#"WITH t AS (
               SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[],
                                    $6::bool[], $7::bool[])
                        WITH ORDINALITY AS t(type, kind, campaign, obj, payload, look, new, ord)
           ), p AS (
               SELECT id, event_types FROM webhook_endpoints
                WHERE enabled AND event_types && $1::text[]
                  FOR KEY SHARE
           ), ev AS (
               INSERT INTO webhook_events (id, type, campaign_id, object_kind, object_id,
                                           sequence, payload)
               SELECT gen_random_uuid(), t.type, t.campaign, t.kind, t.obj,
                      CASE WHEN t.new THEN 0
                           ELSE coalesce((SELECT max(e.sequence) FROM webhook_events e
                                           WHERE e.object_kind = t.kind AND e.object_id = t.obj),
                                         0) END
                      + row_number() OVER (PARTITION BY t.kind, t.obj ORDER BY t.ord)::int,
                      CASE WHEN t.look THEN t.payload || coalesce(
                          (SELECT jsonb_build_object('variant', c.variant) FROM claims c
                            WHERE c.id = t.obj AND c.variant IS NOT NULL),
                          '{}'::jsonb) ELSE t.payload END
                 FROM t
               RETURNING id, type
           )
           INSERT INTO webhook_deliveries (event_id, endpoint_id)
           SELECT ev.id, p.id FROM ev JOIN p ON ev.type = ANY (p.event_types)"#,
        &types[..] as &[&str],
        &kinds[..] as &[&str],
        &campaigns[..] as &[Option<&str>],
        &objects[..] as &[&str],
        &payloads[..],
        &look[..],
        &new[..],
    )
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected())
}
