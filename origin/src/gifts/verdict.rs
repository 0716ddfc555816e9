//! The one eligibility decision of a subscriber, shared by the preview (on the pool, changes
//! nothing) and the fulfilment (inside its transaction, after the advisory lock).
//!
//! One statement reads the campaign clock (`gift_now` of `migrations/0009_gift_fulfilment.sql`:
//! PostgreSQL's, UTC), the campaign, the subscriber's segment with its gift, and for every cap rule of that segment her grants
//! inside the rule's sliding window `(now − per_days days, now]`. A rule with `max` grants
//! already in its window refuses; it frees when the `max`-th most recent of them leaves the
//! window, so `next_eligible_at` is the latest of `recent[max] + per_days` over the refusing
//! rules. A grant made exactly `per_days` days ago no longer counts.
//!
//! A day is 24 hours: the windows are written in hours (`make_interval(hours => 24 * per_days)`),
//! never in days, because `timestamptz ± n days` steps calendar days in the session's
//! `TimeZone` (23 or 25 hours across a daylight-saving change there), and the result must not
//! depend on the session (tests/tests/it/gifts/caps.rs runs it in `America/New_York`).

use chrono::{DateTime, Utc};
use flashgate_shared::api::gifts::{Gift, GiftCampaignState, GiftKind};

/// What the campaign would do for a subscriber now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No such campaign.
    UnknownCampaign,
    /// Paused, closed, before `starts_at` or at/after `ends_at`.
    NotActive,
    /// She is in no segment of the campaign.
    NotInSegment,
    /// A cap rule is used up until the given time.
    CapReached { next_eligible_at: DateTime<Utc> },
    /// She would get the gift of `segment`.
    Eligible { segment: String, gift: Gift },
}

/// A verdict and the campaign clock's time it was decided at.
#[derive(Debug, Clone)]
pub struct Decision {
    pub now: DateTime<Utc>,
    pub verdict: Verdict,
}

/// Decides for `msisdn` in `campaign` (one statement; see the module documentation).
/// `test_clock`: read the campaign's test clock ([`super::settings::GiftSettings`]).
pub async fn decide<'e>(
    ex: impl sqlx::PgExecutor<'e>,
    campaign: &str,
    msisdn: &str,
    test_clock: bool,
) -> sqlx::Result<Decision> {
    let row = sqlx::query!(
        r#"WITH clock AS (SELECT gift_now($1, $3) AS at),
         c AS (SELECT state, starts_at, ends_at FROM gift_campaigns WHERE id = $1),
         m AS (SELECT s.id, s.amount, s.currency, s.kind
                 FROM gift_members m
                 JOIN gift_segments s ON s.campaign_id = m.campaign_id AND s.id = m.segment_id
                WHERE m.campaign_id = $1 AND m.msisdn = $2),
         caps AS (
             SELECT r.max_grants, r.per_days,
                    ARRAY(SELECT l.created_at FROM gift_ledger l, clock
                           WHERE l.campaign_id = $1 AND l.msisdn = $2
                             AND l.created_at > clock.at - make_interval(hours => 24 * r.per_days)
                           ORDER BY l.created_at DESC) AS recent
               FROM gift_cap_rules r JOIN m ON r.segment_id = m.id
              WHERE r.campaign_id = $1)
         SELECT clock.at AS "now!",
                c.state AS "state?: GiftCampaignState", c.starts_at AS "starts_at?",
                c.ends_at AS "ends_at?",
                m.id AS "segment?", m.amount AS "amount?", m.currency AS "currency?",
                m.kind AS "kind?: GiftKind",
                (SELECT max(recent[max_grants] + make_interval(hours => 24 * per_days))
                   FROM caps WHERE cardinality(recent) >= max_grants) AS next_eligible_at
           FROM clock LEFT JOIN c ON true LEFT JOIN m ON true"#,
        campaign,
        msisdn,
        test_clock,
    )
    .fetch_one(ex)
    .await?;
    let now = row.now;
    let verdict = match (row.state, row.starts_at, row.ends_at) {
        (None, _, _) | (_, None, _) | (_, _, None) => Verdict::UnknownCampaign,
        (Some(state), Some(starts_at), Some(ends_at))
            if state != GiftCampaignState::Active || now < starts_at || now >= ends_at =>
        {
            Verdict::NotActive
        }
        _ => match (row.segment, row.amount, row.currency, row.kind) {
            (Some(segment), Some(amount), Some(currency), Some(kind)) => {
                match row.next_eligible_at {
                    Some(next_eligible_at) => Verdict::CapReached { next_eligible_at },
                    None => Verdict::Eligible {
                        segment,
                        gift: Gift {
                            amount,
                            currency,
                            kind,
                        },
                    },
                }
            }
            _ => Verdict::NotInSegment,
        },
    };
    Ok(Decision { now, verdict })
}
