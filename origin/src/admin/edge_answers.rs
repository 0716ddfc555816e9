//! The edge's own answers per campaign, second and result (`POST
//! /edge/v1/campaigns/{id}/answers`, [`AnswerReport`]): each edge isolate counts the claim
//! answers it gave itself and the joins that failed their challenge, and reports them at most
//! once a second per campaign. They are added to `campaign_answer_seconds`, kept for the
//! campaign's life, which the series reads next to the origin's claims ([`super::series`]).
//!
//! A report counts once: its id goes into `edge_answer_reports` in the statement that adds its
//! counts, and a report id seen before adds nothing. Report ids older than
//! [`REPORT_ID_KEPT_S`] are deleted as reports come (an edge signature is refused after 60 s,
//! so an older report cannot arrive again).

use std::collections::BTreeMap;

use flashgate_shared::answers::{AnswerReceipt, AnswerReport};
use flashgate_shared::queue::presence::REPORT_ID_KEPT_S;

use crate::db::Db;

/// Adds report `r` (checked by the caller: [`AnswerReport::validate`]) to campaign `c`'s
/// answer counts, in one statement, once per report id.
pub async fn record(db: &Db, c: &str, r: &AnswerReport) -> sqlx::Result<AnswerReceipt> {
    let mut seconds = Vec::with_capacity(r.counts.len());
    let mut results = Vec::with_capacity(r.counts.len());
    let mut counts = Vec::with_capacity(r.counts.len());
    for row in &r.counts {
        seconds.push(row.second);
        results.push(row.result.clone());
        counts.push(i64::try_from(row.count).unwrap_or(i64::MAX));
    }
    let added = sqlx::query_scalar!(
        r#"WITH fresh AS (
               INSERT INTO edge_answer_reports (campaign_id, report_id) VALUES ($1, $2)
               ON CONFLICT DO NOTHING RETURNING 1 AS one),
           added AS (
               INSERT INTO campaign_answer_seconds (campaign_id, second, result, count)
               SELECT $1, to_timestamp(s), r, sum(n)::bigint
                 FROM unnest($3::bigint[], $4::text[], $5::bigint[]) AS u(s, r, n)
                WHERE EXISTS (SELECT 1 FROM fresh)
                GROUP BY s, r
               ON CONFLICT (campaign_id, second, result)
                  DO UPDATE SET count = campaign_answer_seconds.count + EXCLUDED.count
               RETURNING 1 AS one)
           SELECT CASE WHEN EXISTS (SELECT 1 FROM fresh) THEN $6::bigint END AS "added""#,
        c,
        r.report_id,
        &seconds,
        &results,
        &counts,
        counts.iter().fold(0i64, |t, n| t.saturating_add(*n)),
    )
    .fetch_one(db)
    .await?;
    sqlx::query!(
        "DELETE FROM edge_answer_reports
          WHERE campaign_id = $1 AND received_at < now() - make_interval(secs => $2)",
        c,
        REPORT_ID_KEPT_S as f64,
    )
    .execute(db)
    .await?;
    Ok(match added {
        Some(n) => AnswerReceipt {
            counted: u64::try_from(n).unwrap_or(0),
            duplicate: false,
        },
        None => AnswerReceipt {
            counted: 0,
            duplicate: true,
        },
    })
}

/// The edge's answers of campaign `c` in the `len` seconds from Unix second `from`, per result:
/// one count per second, in order (0 where none was reported).
pub async fn per_second(
    db: &Db,
    c: &str,
    from: i64,
    len: usize,
) -> sqlx::Result<BTreeMap<String, Vec<i64>>> {
    let until = from.saturating_add(i64::try_from(len).unwrap_or(i64::MAX));
    let rows = sqlx::query!(
        r#"SELECT floor(extract(epoch FROM second))::bigint AS "second!", result,
                  count
             FROM campaign_answer_seconds
            WHERE campaign_id = $1 AND second >= to_timestamp($2) AND second < to_timestamp($3)"#,
        c,
        from as f64,
        until as f64,
    )
    .fetch_all(db)
    .await?;
    let mut out: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for row in rows {
        let Ok(i) = usize::try_from(row.second - from) else {
            continue;
        };
        let Some(slot) = out
            .entry(row.result)
            .or_insert_with(|| vec![0; len])
            .get_mut(i)
        else {
            continue;
        };
        *slot = slot.saturating_add(row.count);
    }
    Ok(out)
}
