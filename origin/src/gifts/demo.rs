//! `flashgate gifts seed-demo`: the demo campaign `WORLDCUP_2026`, written through the same
//! store functions as the admin API (audit actor `seed-demo`). Running it again changes
//! nothing (the campaign, segments and members exist).
//!
//! - `segment-1`: 20 EGP (2000 minor units) of mobile credit, at most one per day;
//!   member 201000000001;
//! - `segment-2`: 50 EGP (5000), at most one per 3 days **and** at most two per 7 days;
//!   members 201000000002 and 201000000003.
//!
//! The campaign runs from an hour before the first seed to 90 days after it.

use crate::db::Db;
use chrono::{Duration, Utc};
use flashgate_shared::api::gifts::{CapRule, GiftKind, NewGift, NewGiftCampaign, NewSegment};

use super::store::{self, MembersResult};

/// The demo campaign's id.
pub const DEMO_CAMPAIGN: &str = "WORLDCUP_2026";
/// Who the audit trail names for the seed.
pub const SEED_ACTOR: &str = "seed-demo";

/// The demo segments: id, gift amount (EGP minor units), caps, members.
pub fn demo_segments() -> Vec<(NewSegment, Vec<String>)> {
    let seg = |id: &str, amount, caps: Vec<CapRule>| NewSegment {
        id: id.into(),
        gift: NewGift {
            amount,
            currency: "EGP".into(),
            kind: GiftKind::MobileCredit,
        },
        caps,
    };
    vec![
        (
            seg("segment-1", 2_000, vec![CapRule::at_most(1, 1)]),
            vec!["201000000001".into()],
        ),
        (
            seg(
                "segment-2",
                5_000,
                vec![CapRule::at_most(1, 3), CapRule::at_most(2, 7)],
            ),
            vec!["201000000002".into(), "201000000003".into()],
        ),
    ]
}

/// Loads the demo data; returns the campaign as the admin API shows it, as JSON.
/// Errors: PostgreSQL's, or a demo MSISDN already in another segment.
pub async fn seed(db: &Db) -> anyhow::Result<serde_json::Value> {
    let now = Utc::now();
    let campaign = NewGiftCampaign {
        id: DEMO_CAMPAIGN.into(),
        name: "World Cup 2026 gifts".into(),
        starts_at: now - Duration::hours(1),
        ends_at: now + Duration::days(90),
    };
    store::create_campaign(db, SEED_ACTOR, &campaign).await?;
    for (segment, members) in demo_segments() {
        store::create_segment(db, SEED_ACTOR, DEMO_CAMPAIGN, &segment).await?;
        if let MembersResult::InOtherSegment(n) =
            store::add_members(db, SEED_ACTOR, DEMO_CAMPAIGN, &segment.id, &members).await?
        {
            anyhow::bail!("{n} demo msisdns are in another segment of {DEMO_CAMPAIGN}");
        }
    }
    let shown = store::campaign(db, DEMO_CAMPAIGN).await?;
    Ok(serde_json::to_value(shown)?)
}
