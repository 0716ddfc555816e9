//! A campaign's per-second series over the last minutes, up to an hour
//! (`GET /admin/v1/campaigns/{id}/series`, drawn by the dashboard): claims and remaining from
//! PostgreSQL, so the spike of a sell-out is there whenever the page is opened and whichever
//! origin made the claims; the edge's own answers from its reports, in PostgreSQL too
//! ([`super::edge_answers`]); `sold_out` answers from this origin's memory
//! ([`crate::telemetry::series`]).
//!
//! Remaining at the end of each second is worked back from the campaign's `remaining` now:
//! each later second's claims took one unit each, its returned holds (claims `released` /
//! `expired`, at their `updated_at`: both are final) gave one back, and its manager changes
//! (audit rows: create, restock, set stock) moved it by `after.remaining - before.remaining`.
//! One statement reads it all (one snapshot). Returned holds are looked up among the claims
//! made since the window's start less the hold time and 10 minutes, on the
//! `(campaign_id, created_at)` index: a statement that scanned all of a large campaign's claims
//! (or ledger rows) at every dashboard poll would cost ~0.6 ms per thousand claims. A hold
//! returned later than that after its claim (the sweeper down for as long) is missed, and
//! remaining reads one lower before its return.

use chrono::{DateTime, Utc};
pub use flashgate_shared::api::admin::CampaignSeries;

use crate::db::Db;
use crate::telemetry::series::AnswerSeries;

/// Seconds a series covers when the request does not say.
pub const DEFAULT_SECONDS: i64 = 300;

/// Most seconds one series covers (an hour: a sale from its start). This origin's own sold-out
/// answers are kept for the last
/// [`WINDOW_SECONDS`](crate::telemetry::series::WINDOW_SECONDS) only.
pub const MAX_SECONDS: i64 = 3_600;

/// Seconds of a series from `from` to `now`, both included: 1 for a `from` at or after `now`,
/// at most [`MAX_SECONDS`].
pub fn seconds_since(from: DateTime<Utc>, now: DateTime<Utc>) -> i64 {
    (now.timestamp() - from.timestamp() + 1).clamp(1, MAX_SECONDS)
}

/// One second's changes as PostgreSQL recorded them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Changes {
    claims: i64,
    returned: i64,
    managed: i64,
}

/// The series of campaign `id` over the last `seconds` seconds (1..=[`MAX_SECONDS`], checked
/// by the caller); `None` when the campaign is unknown.
pub async fn read(
    db: &Db,
    sold_out: &AnswerSeries,
    id: &str,
    seconds: i64,
) -> sqlx::Result<Option<CampaignSeries>> {
    // Row kind 0: the campaign (remaining now, first second of the window); 1: one second of
    // changes (Unix second, claims, returned holds, manager change of remaining).
    let rows: Vec<(i32, i64, i64, i64, i64)> = sqlx::query_as(
        "WITH c AS (
             -- truncated in UTC: date_trunc of a timestamptz works in the session's TimeZone
             SELECT remaining,
                    date_trunc('second', clock_timestamp() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
                        - make_interval(secs => $2 - 1)
                        AS since,
                    make_interval(secs => coalesce(hold_seconds, 0)) + interval '10 minutes'
                        AS hold
               FROM campaigns WHERE id = $1),
         ev AS (
             SELECT created_at AS at, 1 AS claims, 0 AS returned, 0::bigint AS managed
               FROM claims WHERE campaign_id = $1 AND created_at >= (SELECT since FROM c)
             UNION ALL
             SELECT updated_at, 0, 1, 0 FROM claims
              WHERE campaign_id = $1 AND status IN ('released', 'expired')
                AND updated_at >= (SELECT since FROM c)
                AND created_at >= (SELECT since - hold FROM c)
             UNION ALL
             SELECT at, 0, 0, (after->>'remaining')::bigint
                              - coalesce((before->>'remaining')::bigint, 0)
               FROM admin_audit
              WHERE campaign_id = $1 AND after ? 'remaining' AND at >= (SELECT since FROM c))
         SELECT 0, floor(extract(epoch FROM since))::bigint, remaining, 0::bigint, 0::bigint
           FROM c
         UNION ALL
         SELECT 1, floor(extract(epoch FROM at))::bigint, sum(claims)::bigint,
                sum(returned)::bigint, sum(managed)::bigint
           FROM ev GROUP BY 2",
    )
    .bind(id)
    .bind(seconds as f64)
    .fetch_all(db)
    .await?;
    let Some(&(_, from, remaining_now, _, _)) = rows.iter().find(|r| r.0 == 0) else {
        return Ok(None);
    };
    let len = seconds as usize;
    let mut changes = vec![Changes::default(); len];
    for &(_, second, claims, returned, managed) in rows.iter().filter(|r| r.0 == 1) {
        // A row stamped at or after the statement's own clock second lands in the last one.
        let i = usize::try_from(second - from).unwrap_or(0).min(len - 1);
        changes[i].claims += claims;
        changes[i].returned += returned;
        changes[i].managed += managed;
    }
    let edge = super::edge_answers::per_second(db, id, from, len).await?;
    let newest = from + seconds - 1;
    let sold_out = sold_out
        .counts(id, from, len, newest)
        .into_iter()
        .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
        .collect();
    Ok(Some(CampaignSeries {
        campaign: id.to_string(),
        from: DateTime::<Utc>::from_timestamp(from, 0).unwrap_or_default(),
        seconds,
        claims: changes.iter().map(|c| c.claims).collect(),
        sold_out,
        remaining: remaining_back(remaining_now, &changes),
        edge,
    }))
}

/// Remaining at the end of each second, given remaining at the end of the last one and what
/// each second changed (a later second's claims are units that were still there before it).
fn remaining_back(remaining_now: i64, changes: &[Changes]) -> Vec<i64> {
    let mut out = vec![0; changes.len()];
    let mut at_end = remaining_now;
    for (i, c) in changes.iter().enumerate().rev() {
        out[i] = at_end;
        at_end = at_end + c.claims - c.returned - c.managed;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_is_worked_back_from_now() {
        let ch = |claims, returned, managed| Changes {
            claims,
            returned,
            managed,
        };
        // Created with 10 in second 0, 4 claims in second 1, one hold back and a restock of
        // 5 in second 2, 3 claims in second 3: 10, 6, 12, 9.
        let changes = [ch(0, 0, 10), ch(4, 0, 0), ch(0, 1, 5), ch(3, 0, 0)];
        assert_eq!(remaining_back(9, &changes), vec![10, 6, 12, 9]);
        assert_eq!(remaining_back(0, &[]), Vec::<i64>::new());
    }

    #[test]
    fn a_series_since_a_time_is_at_least_a_second_and_at_most_an_hour() {
        let now = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        let ago = |s| now - chrono::Duration::seconds(s);
        assert_eq!(seconds_since(ago(299), now), 300);
        assert_eq!(seconds_since(ago(0), now), 1);
        assert_eq!(seconds_since(ago(-5), now), 1, "a start ahead of the clock");
        assert_eq!(seconds_since(ago(86_400), now), MAX_SECONDS);
    }
}
