//! The edge's own answers, reported to the origin: each isolate counts the claim answers it
//! gave itself (sold out, not started, queued, rate limited, …) and the joins that failed
//! their challenge, per campaign, second and result, and sends them in one report per campaign
//! at most every [`REPORT_EVERY_MS`] (`POST /edge/v1/campaigns/{id}/answers`, edge-signed).
//! The origin adds them to the campaign's per-second answer counts, once per report id, for
//! the dashboard's whole-sale view (docs/EDGE.md, "Answer reports").

use serde::{Deserialize, Serialize};

pub use crate::queue::presence::REPORT_EVERY_MS;

/// Path of campaign `id`'s answer report (`POST`, edge only, signed with the edge secret).
pub fn answers_path(id: &str) -> String {
    format!("/edge/v1/campaigns/{id}/answers")
}

/// The claim results the edge counts: the campaign's answers it gives from its cached status,
/// its waiting room and its rate limits. Refusals of the request itself (a bad token or body,
/// an unknown campaign) are not: they say nothing of the sale, and their campaign id may be
/// any text.
pub const CLAIM_RESULTS: &[&str] = &[
    "sold_out",
    "not_started",
    "ended",
    "paused",
    "queued",
    "rate_limited",
];

/// Most rows (second, result) in one report; an isolate holding more sends the rest next.
pub const MAX_REPORT_ROWS: usize = 1_000;

/// Longest result label, bytes (`[a-z_]`).
pub const MAX_RESULT_LEN: usize = 40;

/// The result label of a join that failed its challenge for `reason` (`missing`, `forged`,
/// `rejected`, …): `challenge_<reason>`.
pub fn challenge_result(reason: &str) -> String {
    format!("{CHALLENGE_PREFIX}{reason}")
}

/// What the result label of every challenge failure starts with.
pub const CHALLENGE_PREFIX: &str = "challenge_";

/// Furthest a reported second may lie ahead of the origin's clock, seconds (the edge's clock
/// may run a little fast).
pub const MAX_AHEAD_S: i64 = 60;

/// Oldest a reported second may be, seconds before the origin's clock (an isolate puts back a
/// report it could not deliver, and sends it later).
pub const MAX_AGE_S: i64 = 86_400;

/// One row of a report: `count` answers with `result` given in Unix second `second`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AnswerCount {
    /// The Unix second (the edge's clock) the answers were given in.
    pub second: i64,
    /// The answer's `result` (`sold_out`, `not_started`, `queued`, `rate_limited`, …) or, for
    /// a join that failed its challenge, `challenge_<reason>`; 1..=40 bytes `[a-z_]`.
    pub result: String,
    /// Answers counted, at least 1.
    pub count: u64,
}

/// An answer report (`POST /edge/v1/campaigns/{id}/answers`): the answers one isolate gave
/// for the campaign since its last report. A retry with the same `report_id` is counted once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AnswerReport {
    /// Unique per report, 1..=64 characters `[A-Za-z0-9_-]`; a retry sends the same one.
    pub report_id: String,
    /// The counts, 1..=[`MAX_REPORT_ROWS`] rows, each (second, result) at most once.
    pub counts: Vec<AnswerCount>,
}

/// The origin's answer to an answer report (200).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AnswerReceipt {
    /// Answers this report added (0 for a report id counted before).
    pub counted: u64,
    /// True when this `report_id` was counted before (nothing changed).
    pub duplicate: bool,
}

/// True for a result label: 1..=[`MAX_RESULT_LEN`] bytes of `[a-z_]`.
pub fn is_result_label(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= MAX_RESULT_LEN
        && r.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

impl AnswerReport {
    /// Checks the shape against the origin's clock `now_s` (Unix seconds): a valid
    /// `report_id`, 1..=[`MAX_REPORT_ROWS`] rows, each with a result label, a count of at
    /// least 1, a second no more than [`MAX_AHEAD_S`] ahead nor [`MAX_AGE_S`] behind, and no
    /// (second, result) twice. The message of the first broken rule (400 `invalid_request`).
    pub fn validate(&self, now_s: i64) -> Result<(), String> {
        if !crate::queue::presence::is_valid_report_id(&self.report_id) {
            return Err("report_id must be 1 to 64 characters [A-Za-z0-9_-]".into());
        }
        if self.counts.is_empty() || self.counts.len() > MAX_REPORT_ROWS {
            return Err(format!("counts must hold 1 to {MAX_REPORT_ROWS} rows"));
        }
        let mut seen = std::collections::BTreeSet::new();
        for c in &self.counts {
            if !is_result_label(&c.result) {
                return Err(format!(
                    "a result must be 1 to {MAX_RESULT_LEN} characters [a-z_]"
                ));
            }
            if c.count == 0 {
                return Err("a count must be at least 1".into());
            }
            if c.second > now_s.saturating_add(MAX_AHEAD_S)
                || c.second < now_s.saturating_sub(MAX_AGE_S)
            {
                return Err(format!(
                    "second {} is not within a day before the origin's clock ({now_s})",
                    c.second
                ));
            }
            if !seen.insert((c.second, c.result.as_str())) {
                return Err(format!(
                    "second {} and result {} are counted twice",
                    c.second, c.result
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(second: i64, result: &str, count: u64) -> AnswerCount {
        AnswerCount {
            second,
            result: result.into(),
            count,
        }
    }

    #[test]
    fn a_report_needs_an_id_rows_labels_counts_and_seconds_near_now() {
        let now = 1_800_000_000;
        let ok = AnswerReport {
            report_id: "iso-a1".into(),
            counts: vec![row(now, "sold_out", 3), row(now, "challenge_forged", 1)],
        };
        assert!(ok.validate(now).is_ok());
        let with = |counts| AnswerReport {
            counts,
            ..ok.clone()
        };
        for bad in [
            AnswerReport {
                report_id: "a b".into(),
                ..ok.clone()
            },
            with(vec![]),
            with(vec![row(now, "Sold_Out", 1)]),
            with(vec![row(now, "", 1)]),
            with(vec![row(now, &"a".repeat(MAX_RESULT_LEN + 1), 1)]),
            with(vec![row(now, "sold_out", 0)]),
            with(vec![row(now + MAX_AHEAD_S + 1, "sold_out", 1)]),
            with(vec![row(now - MAX_AGE_S - 1, "sold_out", 1)]),
            with(vec![row(now, "sold_out", 1), row(now, "sold_out", 2)]),
            with(vec![row(now, "queued", 1); MAX_REPORT_ROWS + 1]),
        ] {
            assert!(bad.validate(now).is_err(), "{bad:?}");
        }
        assert_eq!(challenge_result("forged"), "challenge_forged");
        assert_eq!(answers_path("c1"), "/edge/v1/campaigns/c1/answers");
    }
}
