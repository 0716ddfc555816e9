//! Managers' writes on gift campaigns, each with its `gift_audit` row in the same transaction,
//! and the reads of the admin API. Values are checked by the caller
//! ([`crate::http::gifts::admin`]); the table constraints check them again.

use crate::db::{Conn, Db};
use flashgate_shared::api::gifts::{
    CapRule, Gift, GiftCampaign, GiftCampaignState, GiftKind, MembersAdded, NewGiftCampaign,
    NewSegment, Segment,
};

/// Creates a campaign (state `active`) with its audit row. `None` when the id exists.
pub async fn create_campaign(
    db: &Db,
    actor: &str,
    c: &NewGiftCampaign,
) -> sqlx::Result<Option<GiftCampaign>> {
    let row = sqlx::query!(
        r#"WITH c AS (
                 INSERT INTO gift_campaigns (id, name, starts_at, ends_at)
                 VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING
                 RETURNING id, name, starts_at, ends_at, state
             ), audit AS (
                 INSERT INTO gift_audit (campaign_id, actor, action, params)
                 SELECT id, $5, 'create_campaign',
                        jsonb_build_object('name', name, 'starts_at', starts_at,
                                           'ends_at', ends_at)
                   FROM c
             )
             SELECT id, name, starts_at, ends_at, state AS "state: GiftCampaignState" FROM c"#,
        c.id,
        c.name,
        c.starts_at,
        c.ends_at,
        actor,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| GiftCampaign {
        id: r.id,
        name: r.name,
        starts_at: r.starts_at,
        ends_at: r.ends_at,
        state: r.state,
        segments: Vec::new(),
    }))
}

/// A campaign with its segments; `None` when unknown.
pub async fn campaign(db: &Db, id: &str) -> sqlx::Result<Option<GiftCampaign>> {
    let Some(r) = sqlx::query!(
        r#"SELECT id, name, starts_at, ends_at, state AS "state: GiftCampaignState"
             FROM gift_campaigns WHERE id = $1"#,
        id
    )
    .fetch_optional(db)
    .await?
    else {
        return Ok(None);
    };
    let ids = sqlx::query_scalar!(
        "SELECT id FROM gift_segments WHERE campaign_id = $1 ORDER BY id",
        id
    )
    .fetch_all(db)
    .await?;
    let mut segments = Vec::with_capacity(ids.len());
    for s in ids {
        segments.extend(segment(db, id, &s).await?);
    }
    Ok(Some(GiftCampaign {
        id: r.id,
        name: r.name,
        starts_at: r.starts_at,
        ends_at: r.ends_at,
        state: r.state,
        segments,
    }))
}

/// A segment with its gift and caps (by `per_days`); `None` when unknown.
pub async fn segment(db: &Db, campaign: &str, id: &str) -> sqlx::Result<Option<Segment>> {
    let mut tx = db.begin().await?;
    let s = segment_on(&mut tx, campaign, id).await?;
    tx.commit().await?;
    Ok(s)
}

/// [`segment`] on one connection (inside a transaction).
async fn segment_on(ex: &mut Conn<'_>, campaign: &str, id: &str) -> sqlx::Result<Option<Segment>> {
    let Some(s) = sqlx::query!(
        r#"SELECT id, amount, currency, kind AS "kind: GiftKind"
             FROM gift_segments WHERE campaign_id = $1 AND id = $2"#,
        campaign,
        id
    )
    .fetch_optional(&mut *ex)
    .await?
    else {
        return Ok(None);
    };
    let caps = sqlx::query_as!(
        CapRule,
        r#"SELECT max_grants AS max, per_days FROM gift_cap_rules
            WHERE campaign_id = $1 AND segment_id = $2 ORDER BY per_days"#,
        campaign,
        id
    )
    .fetch_all(ex)
    .await?;
    Ok(Some(Segment {
        id: s.id,
        gift: Gift {
            amount: s.amount,
            currency: s.currency,
            kind: s.kind,
        },
        caps,
    }))
}

/// What creating a segment did.
#[derive(Debug)]
pub enum SegmentCreated {
    Created(Segment),
    UnknownCampaign,
    Exists,
}

/// Creates a segment with its caps and audit row in one transaction.
pub async fn create_segment(
    db: &Db,
    actor: &str,
    campaign: &str,
    s: &NewSegment,
) -> sqlx::Result<SegmentCreated> {
    let mut tx = db.begin().await?;
    let known = sqlx::query_scalar!(
        "SELECT id FROM gift_campaigns WHERE id = $1 FOR SHARE",
        campaign
    )
    .fetch_optional(&mut *tx)
    .await?;
    if known.is_none() {
        return Ok(SegmentCreated::UnknownCampaign);
    }
    let inserted = sqlx::query_scalar!(
        "INSERT INTO gift_segments (campaign_id, id, amount, currency, kind)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING id",
        campaign,
        s.id,
        s.gift.amount,
        s.gift.currency,
        s.gift.kind as _,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if inserted.is_none() {
        return Ok(SegmentCreated::Exists);
    }
    write_caps(&mut tx, campaign, &s.id, &s.caps).await?;
    sqlx::query!(
        "INSERT INTO gift_audit (campaign_id, actor, action, params)
         VALUES ($1, $2, 'create_segment', $3)",
        campaign,
        actor,
        serde_json::to_value(s).expect("segments serialise"),
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(segment(db, campaign, &s.id)
        .await?
        .map_or(SegmentCreated::Exists, SegmentCreated::Created))
}

/// Replaces the segment's caps (delete, then insert from `UNNEST`).
async fn write_caps(
    tx: &mut Conn<'_>,
    campaign: &str,
    segment: &str,
    caps: &[CapRule],
) -> sqlx::Result<()> {
    let max: Vec<i32> = caps.iter().map(|c| c.max).collect();
    let days: Vec<i32> = caps.iter().map(|c| c.per_days).collect();
    sqlx::query!(
        "DELETE FROM gift_cap_rules WHERE campaign_id = $1 AND segment_id = $2",
        campaign,
        segment
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "INSERT INTO gift_cap_rules (campaign_id, segment_id, max_grants, per_days)
         SELECT $1, $2, m, d FROM UNNEST($3::int[], $4::int[]) AS u (m, d)",
        campaign,
        segment,
        &max,
        &days,
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Replaces a segment's caps with its audit row (caps before and after) in one transaction;
/// the next fulfilment reads them. `None` when the segment is unknown.
pub async fn set_caps(
    db: &Db,
    actor: &str,
    campaign: &str,
    seg: &str,
    caps: &[CapRule],
) -> sqlx::Result<Option<Segment>> {
    let mut tx = db.begin().await?;
    let Some(before) = segment_on(&mut tx, campaign, seg).await? else {
        return Ok(None);
    };
    sqlx::query!(
        "SELECT id FROM gift_segments WHERE campaign_id = $1 AND id = $2 FOR UPDATE",
        campaign,
        seg
    )
    .fetch_one(&mut *tx)
    .await?;
    write_caps(&mut tx, campaign, seg, caps).await?;
    sqlx::query!(
        "INSERT INTO gift_audit (campaign_id, actor, action, params)
         VALUES ($1, $2, 'set_caps', jsonb_build_object('segment', $3::text, 'before', $4::jsonb,
                                                        'after', $5::jsonb))",
        campaign,
        actor,
        seg,
        serde_json::to_value(&before.caps).expect("caps serialise"),
        serde_json::to_value(caps).expect("caps serialise"),
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    segment(db, campaign, seg).await
}

/// What adding members did.
#[derive(Debug)]
pub enum MembersResult {
    Added(MembersAdded),
    UnknownSegment,
    /// This many of the MSISDNs are in another segment of the campaign: nothing was written.
    InOtherSegment(i64),
}

/// Adds `msisdns` (validated) to a segment in one statement (`UNNEST`, `ON CONFLICT DO
/// NOTHING`) with its audit row. Idempotent: MSISDNs already in the segment count as
/// `already`.
pub async fn add_members(
    db: &Db,
    actor: &str,
    campaign: &str,
    seg: &str,
    msisdns: &[String],
) -> sqlx::Result<MembersResult> {
    let r = sqlx::query!(
        r#"WITH input AS (SELECT DISTINCT u AS msisdn FROM UNNEST($3::text[]) AS u),
         seg AS (SELECT id FROM gift_segments WHERE campaign_id = $1 AND id = $2),
         other AS (SELECT count(*) AS n FROM gift_members m JOIN input i USING (msisdn)
                    WHERE m.campaign_id = $1 AND m.segment_id <> $2),
         ins AS (
             INSERT INTO gift_members (campaign_id, msisdn, segment_id)
             SELECT $1, i.msisdn, seg.id FROM input i, seg, other WHERE other.n = 0
             ON CONFLICT DO NOTHING RETURNING 1
         ), audit AS (
             INSERT INTO gift_audit (campaign_id, actor, action, params)
             SELECT $1, $4, 'add_members',
                    jsonb_build_object('segment', $2::text, 'count', (SELECT count(*) FROM input),
                                       'added', (SELECT count(*) FROM ins))
               FROM seg, other WHERE other.n = 0
         )
         SELECT EXISTS (SELECT 1 FROM seg) AS "segment!", (SELECT n FROM other) AS "other!",
                (SELECT count(*) FROM input) AS "distinct!", (SELECT count(*) FROM ins) AS "added!""#,
        campaign,
        seg,
        msisdns,
        actor,
    )
    .fetch_one(db)
    .await?;
    Ok(if !r.segment {
        MembersResult::UnknownSegment
    } else if r.other > 0 {
        MembersResult::InOtherSegment(r.other)
    } else {
        MembersResult::Added(MembersAdded {
            added: r.added as u64,
            already: (r.distinct - r.added) as u64,
        })
    })
}
