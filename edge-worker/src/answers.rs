//! The edge's own answers, counted per campaign, second and result, in plain Rust: the claim
//! answers an isolate gave itself (sold out, not started, queued, rate limited, …) and the
//! joins that failed their challenge (`challenge_<reason>`), sent to the origin in one
//! [`AnswerReport`] per campaign at most every second ([`crate::reporter`]), after the
//! answers (`waitUntil`), so no customer waits for it. The origin adds them to the campaign's
//! per-second counts of the dashboard (docs/EDGE.md, "Answer reports").

use std::collections::{BTreeMap, HashMap};

use flashgate_shared::answers::{
    is_result_label, AnswerCount, AnswerReport, CHALLENGE_PREFIX, CLAIM_RESULTS, MAX_REPORT_ROWS,
};

use crate::reporter::{Next, Schedule};

/// Campaigns whose counts an isolate keeps at most (beyond, those without a running reporter
/// are dropped).
pub const MAX_CAMPAIGNS: usize = 1_000;

/// Rows (second, result) kept per campaign between reports at most; an answer past it is not
/// counted (the origin is not taking the reports).
pub const MAX_PENDING_ROWS: usize = 4 * MAX_REPORT_ROWS;

/// One campaign's counts not reported yet, by (Unix second, result).
#[derive(Debug, Default)]
struct Batch {
    counts: BTreeMap<(i64, String), u64>,
    schedule: Schedule,
}

/// The isolate's counts. Report ids are `<isolate tag>-a<counter>`, unique per isolate run.
#[derive(Debug)]
pub struct Tally {
    tag: String,
    sent: u64,
    reporters: u64,
    batches: HashMap<String, Batch>,
}

impl Tally {
    /// Counts of an isolate named `tag` (`[A-Za-z0-9_-]`, up to 40 bytes).
    pub fn new(tag: &str) -> Self {
        Tally {
            tag: tag.chars().take(40).collect(),
            sent: 0,
            reporters: 0,
            batches: HashMap::new(),
        }
    }

    /// Counts one answer with `result` given for `campaign` at `now_ms`. Returns the number of
    /// a reporter to start when none runs for the campaign ([`Schedule::wake`]): the caller
    /// starts it, and it calls [`Self::next`]. Only [`CLAIM_RESULTS`] and challenge failures
    /// (`challenge_<reason>`) are counted.
    pub fn add(&mut self, campaign: &str, result: &str, now_ms: i64) -> Option<u64> {
        let counted = CLAIM_RESULTS.contains(&result)
            || (result.starts_with(CHALLENGE_PREFIX) && is_result_label(result));
        if !counted {
            return None;
        }
        if !self.batches.contains_key(campaign) && self.batches.len() >= MAX_CAMPAIGNS {
            self.batches.retain(|_, b| b.schedule.running());
        }
        let b = self.batches.entry(campaign.to_string()).or_default();
        let second = now_ms.div_euclid(1000);
        // Found without building a key when the row is there (the common case: a burst of one
        // result within one second).
        let row = b
            .counts
            .range_mut((second, String::new())..(second + 1, String::new()))
            .find(|((_, r), _)| r == result);
        if let Some((_, n)) = row {
            *n += 1;
        } else if b.counts.len() < MAX_PENDING_ROWS {
            b.counts.insert((second, result.to_string()), 1);
        } else {
            return None;
        }
        b.schedule.wake(&mut self.reporters, now_ms)
    }

    /// Puts back the rows of a report that could not be delivered (sent again in the next).
    pub fn put_back(&mut self, campaign: &str, rows: Vec<AnswerCount>) {
        let b = self.batches.entry(campaign.to_string()).or_default();
        for r in rows {
            *b.counts.entry((r.second, r.result)).or_default() += r.count;
        }
    }

    /// Reporter `reporter`'s next step at `now_ms` for `campaign` ([`Schedule::turn`]): a
    /// report of up to [`MAX_REPORT_ROWS`] rows (oldest seconds first), the wait, or
    /// [`Next::Stop`].
    pub fn next(&mut self, campaign: &str, reporter: u64, now_ms: i64) -> Next<AnswerReport> {
        let Some(b) = self.batches.get_mut(campaign) else {
            return Next::Stop;
        };
        if let Err(next) = b.schedule.turn(reporter, !b.counts.is_empty(), now_ms) {
            return next;
        }
        let mut counts = Vec::with_capacity(b.counts.len().min(MAX_REPORT_ROWS));
        while counts.len() < MAX_REPORT_ROWS {
            let Some(((second, result), count)) = b.counts.pop_first() else {
                break;
            };
            counts.push(AnswerCount {
                second,
                result,
                count,
            });
        }
        self.sent += 1;
        Next::Send(AnswerReport {
            report_id: format!("{}-a{}", self.tag, self.sent),
            counts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(r: &AnswerReport) -> Vec<(i64, &str, u64)> {
        r.counts
            .iter()
            .map(|c| (c.second, c.result.as_str(), c.count))
            .collect()
    }

    #[test]
    fn answers_are_counted_per_second_and_result_and_reported_once_a_second() {
        let mut t = Tally::new("iso");
        let r1 = t.add("c", "sold_out", 1_000).expect("starts a reporter");
        assert_eq!(t.add("c", "sold_out", 1_100), None);
        t.add("c", "challenge_forged", 1_200);
        t.add("c", "sold_out", 2_050);
        // Not counted: not about the sale, or no label.
        t.add("c", "not_found", 2_060);
        t.add("c", "unauthorized", 2_060);
        t.add("c", "challenge_Forged", 2_060);
        let Next::Send(r) = t.next("c", r1, 2_100) else {
            panic!("due at once")
        };
        assert_eq!(r.report_id, "iso-a1");
        assert_eq!(
            rows(&r),
            vec![
                (1, "challenge_forged", 1),
                (1, "sold_out", 2),
                (2, "sold_out", 1)
            ]
        );
        assert!(r.validate(2).is_ok(), "{r:?}");
        t.add("c", "queued", 2_500);
        assert_eq!(t.next("c", r1, 2_600), Next::Wait(500));
        // A report that did not get through comes back, added to what came since.
        t.put_back(
            "c",
            vec![AnswerCount {
                second: 2,
                result: "queued".into(),
                count: 4,
            }],
        );
        let Next::Send(r) = t.next("c", r1, 3_100) else {
            panic!("a second later")
        };
        assert_eq!(rows(&r), vec![(2, "queued", 5)]);
        assert_eq!(r.report_id, "iso-a2");
        assert_eq!(t.next("c", r1, 4_100), Next::Stop);
        assert!(
            t.add("d", "rate_limited", 4_100).is_some(),
            "its own reporter"
        );
    }

    #[test]
    fn a_report_holds_at_most_the_bound_and_pending_rows_are_bounded() {
        let mut t = Tally::new("iso");
        let mut r = t.add("c", "sold_out", 0).unwrap();
        for s in 1..(MAX_PENDING_ROWS as i64 + 10) {
            // A reporter past its life is replaced: the newest one reports.
            if let Some(newer) = t.add("c", "sold_out", s * 1000) {
                r = newer;
            }
        }
        let mut total = 0;
        for i in 0..4 {
            let Next::Send(rep) = t.next("c", r, 5_000_000 + i * 1_000) else {
                panic!("due")
            };
            assert_eq!(rep.counts.len(), MAX_REPORT_ROWS);
            total += rep.counts.len();
        }
        assert_eq!(total, MAX_PENDING_ROWS);
        assert_eq!(t.next("c", r, 5_010_000), Next::Stop);
    }
}
