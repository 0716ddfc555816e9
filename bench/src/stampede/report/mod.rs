//! The stampede report: pure computation from the outcomes of the tries, plus rendering;
//! [`queue`] adds the waiting room's part (waits, order, admissions).

use std::collections::{BTreeMap, HashMap, HashSet};

use hdrhistogram::Histogram;
use serde::Serialize;

use super::plan::{Plan, TapKind};

mod lost_reply;
pub mod queue;
mod render;
pub mod series;
pub mod variants;

pub use lost_reply::LostReplyReport;

/// Who answered a response, from the `Flashgate-Answered-By` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answerer {
    Edge,
    Origin,
    /// No (or an unknown) header, or no response at all.
    Unknown,
}

impl Answerer {
    pub fn from_header(v: Option<&str>) -> Self {
        match v.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
            Some("edge") => Answerer::Edge,
            Some("origin") => Answerer::Origin,
            _ => Answerer::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Answerer::Edge => "edge",
            Answerer::Origin => "origin",
            Answerer::Unknown => "unknown",
        }
    }
}

/// Result label of a try that never got an HTTP answer.
pub const TRANSPORT_ERROR: &str = "transport_error";
/// Result label of a planned try that was not sent before the run's deadline.
pub const NOT_SENT: &str = "not_sent";

/// What happened to one try (its final attempt, after retries).
#[derive(Debug, Clone)]
pub struct TryOutcome {
    pub customer: u32,
    pub kind: TapKind,
    /// The variant its claim named, as an index into the campaign's variants (`--variants`);
    /// `None` without variants.
    pub variant: Option<u32>,
    /// When it was due, microseconds after the start.
    pub due_us: u64,
    /// When its first attempt was sent; `None` if never sent.
    pub sent_us: Option<u64>,
    /// When its last attempt was sent (the one the final answer is to); `None` if never sent.
    pub last_sent_us: Option<u64>,
    /// When its final answer arrived.
    pub answered_us: Option<u64>,
    /// HTTP status of the final answer (0 if none).
    pub status: u16,
    /// `result` of the final answer's body (`claimed`, `sold_out`, …) or
    /// [`TRANSPORT_ERROR`] / [`NOT_SENT`] / `http_<status>` when the body had none.
    pub result: String,
    pub answered_by: Answerer,
    /// Attempts made (1 + retries).
    pub attempts: u32,
    /// Retries caused by 503 / transport errors, and by `in_progress` (or an admitted claim
    /// paced with 429 `queued`).
    pub retries_unavailable: u32,
    pub retries_in_progress: u32,
    /// For `claimed` and `already_claimed`: the claim id and its customer as returned.
    pub claim: Option<(String, String)>,
    /// Latency of each answered attempt, microseconds, by answerer.
    pub latencies: Vec<(Answerer, u64)>,
    /// For a 5xx (after retries), an answer without a `result`, or a transport error: the
    /// start of the body or the error, for the report.
    pub unexpected: Option<String>,
}

/// Latency figures of one answerer, milliseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Latency {
    pub responses: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Whether a check held, failed, or did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    Pass,
    Fail,
    /// The check did not run (e.g. `--no-db-check`): printed `SKIP`, never `PASS`.
    Skip,
}

impl CheckStatus {
    /// The label of the text report.
    pub fn label(self) -> &'static str {
        match self {
            CheckStatus::Pass => " ok ",
            CheckStatus::Fail => "FAIL",
            CheckStatus::Skip => "SKIP",
        }
    }
}

/// One invariant or target and whether it held. JSON `{"name", "status": "pass" | "fail" |
/// "skip", "detail"}`.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub status: CheckStatus,
    pub detail: String,
}

/// The whole report; also written as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub run: RunInfo,
    pub plan: Plan,
    /// When the first try was due (the start the times of the report count from), ms since
    /// the Unix epoch; set by the binary.
    pub started_unix_ms: Option<i64>,
    /// Tries planned (= sent + not sent).
    pub tries: u64,
    pub tries_sent: u64,
    pub tries_not_sent: u64,
    /// Customers with at least one try sent.
    pub distinct_customers: u64,
    pub retries_unavailable: u64,
    pub retries_in_progress: u64,
    /// result → answerer → tries (final answers).
    pub outcomes: BTreeMap<String, BTreeMap<String, u64>>,
    /// answerer → tries (final answers).
    pub by_answerer: BTreeMap<String, u64>,
    /// Customers with a 201.
    pub winners: u64,
    /// Distinct claim ids in 201 answers.
    pub winning_claim_ids: u64,
    /// Time of the first `sold_out` answer, ms after the start.
    pub first_sold_out_ms: Option<f64>,
    /// Time of the last 201, ms after the start.
    pub last_claimed_ms: Option<f64>,
    /// Sell-out moment used below: the first `sold_out` answer (the moment the flag was out).
    pub sell_out_ms: Option<f64>,
    /// Time of the last answer, ms after the start.
    pub last_answer_ms: Option<f64>,
    /// Tries first sent after the sell-out moment by customers who won nothing in this run, and
    /// how many of them the edge answered (a winner's own later taps go to the origin by design:
    /// the edge's winners filter forwards them so she gets her claim back; they are counted in
    /// `winner_tries_after_sell_out`).
    pub tries_after_sell_out: u64,
    pub edge_answered_after_sell_out: u64,
    pub edge_share_after_sell_out: Option<f64>,
    /// Tries first sent after the sell-out moment by customers who won (forwarded to the origin).
    pub winner_tries_after_sell_out: u64,
    /// How late the tries were sent against the plan (the machine's limit), ms.
    pub send_lag_p50_ms: f64,
    pub send_lag_p99_ms: f64,
    /// Tries sent per second from the first to the last send.
    pub send_rate_per_s: f64,
    /// Tries that found all `concurrency` slots busy at their due time and waited for one: in
    /// a closed loop most of a stampede's, in an open loop 0 unless the cap was reached.
    pub tries_held_by_cap: u64,
    /// answerer → latency of every answered attempt.
    pub latency: BTreeMap<String, Latency>,
    /// Tries whose final answer was outside the API contract (a 500, a body without
    /// `result`, a transport error), and the first such answer of each result.
    pub unexpected_answers: u64,
    pub unexpected_samples: BTreeMap<String, String>,
    pub checks: Vec<Check>,
    /// Checks that did not run.
    pub checks_skipped: u64,
    /// The waiting room's figures, when the crowd went through the queue (`--waiting-room`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<queue::QueueReport>,
    /// The lost-reply retries of winners after the sell-out (`--lost-reply`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_reply: Option<LostReplyReport>,
    /// Per variant (`--variants`): its tries, demand, sell-out and the edge's share after it,
    /// and its units read back from PostgreSQL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variants: Option<Vec<variants::VariantLine>>,
    /// The run as time series (answers/s, latency, remaining, the queue): what the plots draw.
    pub timeline: series::Timeline,
    /// The origin's reconciliation of the campaign after the run
    /// (`GET /admin/v1/campaigns/{id}/reconcile`), when an admin token was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconcile: Option<serde_json::Value>,
    pub passed: bool,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// A histogram of microseconds, 1 µs to 1 hour, 3 significant digits.
pub(super) fn hist() -> Histogram<u64> {
    // 1 µs .. 1 hour, 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// p50/p95/p99/max of a histogram of microseconds, in ms.
pub(super) fn latency_of(h: &Histogram<u64>) -> Latency {
    Latency {
        responses: h.len(),
        p50_ms: ms(h.value_at_quantile(0.50)),
        p95_ms: ms(h.value_at_quantile(0.95)),
        p99_ms: ms(h.value_at_quantile(0.99)),
        max_ms: ms(h.max()),
    }
}

/// Facts about the run that are not in the outcomes.
#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    pub campaign: String,
    pub kind: String,
    pub stock: i64,
    pub target: String,
    /// The edge's runtime (`workerd`, `miniflare`) when known.
    pub edge_runtime: Option<String>,
    /// Requests in flight at most (`--concurrency`, or `--open-loop-cap` with `open_loop`).
    pub concurrency: usize,
    /// Sent in an open loop (`--open-loop`): each try at its due time, whatever the answers.
    pub open_loop: bool,
    pub seed: u64,
    pub window_ms: u64,
}

/// Computes the report (without the database checks, which [`Report::add_check`] appends).
pub fn compute(info: &RunInfo, plan: &Plan, outcomes: &[TryOutcome]) -> Report {
    let mut report = Report {
        run: info.clone(),
        plan: plan.clone(),
        started_unix_ms: None,
        tries: outcomes.len() as u64,
        tries_sent: 0,
        tries_not_sent: 0,
        distinct_customers: 0,
        retries_unavailable: 0,
        retries_in_progress: 0,
        outcomes: BTreeMap::new(),
        by_answerer: BTreeMap::new(),
        winners: 0,
        winning_claim_ids: 0,
        first_sold_out_ms: None,
        last_claimed_ms: None,
        sell_out_ms: None,
        last_answer_ms: None,
        tries_after_sell_out: 0,
        edge_answered_after_sell_out: 0,
        edge_share_after_sell_out: None,
        winner_tries_after_sell_out: 0,
        send_lag_p50_ms: 0.0,
        send_lag_p99_ms: 0.0,
        send_rate_per_s: 0.0,
        tries_held_by_cap: 0,
        latency: BTreeMap::new(),
        unexpected_answers: 0,
        unexpected_samples: BTreeMap::new(),
        checks: Vec::new(),
        checks_skipped: 0,
        queue: None,
        lost_reply: None,
        variants: None,
        timeline: series::timeline(info.stock, outcomes),
        reconcile: None,
        passed: true,
    };

    let mut customers = HashSet::new();
    let mut winners = HashSet::new();
    let mut claim_ids = HashSet::new();
    let mut lat: HashMap<Answerer, Histogram<u64>> = HashMap::new();
    let mut lag = hist();
    let (mut first_send, mut last_send) = (u64::MAX, 0u64);
    let mut first_sold_out: Option<u64> = None;
    let mut last_claimed: Option<u64> = None;
    let mut last_answer: Option<u64> = None;

    for o in outcomes {
        *report
            .outcomes
            .entry(o.result.clone())
            .or_default()
            .entry(o.answered_by.as_str().to_string())
            .or_default() += 1;
        let Some(sent) = o.sent_us else {
            report.tries_not_sent += 1;
            continue;
        };
        report.tries_sent += 1;
        *report
            .by_answerer
            .entry(o.answered_by.as_str().to_string())
            .or_default() += 1;
        customers.insert(o.customer);
        report.retries_unavailable += o.retries_unavailable as u64;
        report.retries_in_progress += o.retries_in_progress as u64;
        first_send = first_send.min(sent);
        last_send = last_send.max(sent);
        lag.saturating_record(sent.saturating_sub(o.due_us).max(1));
        if let Some(sample) = &o.unexpected {
            // 503 after every retry is the contract's answer for a dependency down, not this.
            if o.status != 503 {
                report.unexpected_answers += 1;
                report
                    .unexpected_samples
                    .entry(format!("{} ({})", o.result, o.answered_by.as_str()))
                    .or_insert_with(|| sample.clone());
            }
        }
        for &(who, us) in &o.latencies {
            lat.entry(who)
                .or_insert_with(hist)
                .saturating_record(us.max(1));
        }
        if let Some(at) = o.answered_us {
            last_answer = Some(last_answer.map_or(at, |l| l.max(at)));
            match o.result.as_str() {
                "sold_out" => first_sold_out = Some(first_sold_out.map_or(at, |f| f.min(at))),
                "claimed" => {
                    last_claimed = Some(last_claimed.map_or(at, |l| l.max(at)));
                    winners.insert(o.customer);
                    if let Some((id, _)) = &o.claim {
                        claim_ids.insert(id.clone());
                    }
                }
                _ => {}
            }
        }
    }

    report.distinct_customers = customers.len() as u64;
    report.winners = winners.len() as u64;
    report.winning_claim_ids = claim_ids.len() as u64;
    report.first_sold_out_ms = first_sold_out.map(ms);
    report.last_claimed_ms = last_claimed.map(ms);
    report.last_answer_ms = last_answer.map(ms);
    report.sell_out_ms = first_sold_out.map(ms);
    if let Some(cut) = first_sold_out {
        for o in outcomes {
            if o.sent_us.is_some_and(|s| s > cut) && winners.contains(&o.customer) {
                report.winner_tries_after_sell_out += 1;
            } else if o.sent_us.is_some_and(|s| s > cut) {
                report.tries_after_sell_out += 1;
                if o.answered_by == Answerer::Edge {
                    report.edge_answered_after_sell_out += 1;
                }
            }
        }
        if report.tries_after_sell_out > 0 {
            report.edge_share_after_sell_out = Some(
                report.edge_answered_after_sell_out as f64 / report.tries_after_sell_out as f64,
            );
        }
    }
    if report.tries_sent > 0 {
        report.send_lag_p50_ms = ms(lag.value_at_quantile(0.5));
        report.send_lag_p99_ms = ms(lag.value_at_quantile(0.99));
        let span = (last_send - first_send).max(1) as f64 / 1e6;
        report.send_rate_per_s = (report.tries_sent as f64 / span).round();
    }
    for (who, h) in &lat {
        report
            .latency
            .insert(who.as_str().to_string(), latency_of(h));
    }
    report
}

impl Report {
    pub fn add_check(&mut self, name: impl Into<String>, ok: bool, detail: impl Into<String>) {
        self.passed &= ok;
        self.checks.push(Check {
            name: name.into(),
            status: if ok {
                CheckStatus::Pass
            } else {
                CheckStatus::Fail
            },
            detail: detail.into(),
        });
    }

    /// Records a check that did not run, and why: it neither passes nor fails the run, and
    /// is printed `SKIP`.
    pub fn add_skip(&mut self, name: impl Into<String>, why: impl Into<String>) {
        self.checks_skipped += 1;
        self.checks.push(Check {
            name: name.into(),
            status: CheckStatus::Skip,
            detail: why.into(),
        });
    }

    /// Count of final answers with `result`.
    pub fn count(&self, result: &str) -> u64 {
        self.outcomes
            .get(result)
            .map_or(0, |m| m.values().sum::<u64>())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn outcome(customer: u32, sent_ms: u64, result: &str, who: Answerer) -> TryOutcome {
        TryOutcome {
            customer,
            kind: TapKind::First,
            variant: None,
            due_us: sent_ms * 1000,
            sent_us: Some(sent_ms * 1000 + 500),
            last_sent_us: Some(sent_ms * 1000 + 500),
            answered_us: Some(sent_ms * 1000 + 2_500),
            status: if result == "claimed" { 201 } else { 409 },
            result: result.to_string(),
            answered_by: who,
            attempts: 1,
            retries_unavailable: 0,
            retries_in_progress: 0,
            claim: (result == "claimed")
                .then(|| (format!("claim-{customer}"), format!("c{customer}"))),
            latencies: vec![(who, 2_000)],
            unexpected: None,
        }
    }

    fn info() -> RunInfo {
        RunInfo {
            campaign: "x".into(),
            kind: "sale".into(),
            stock: 2,
            target: "http://127.0.0.1:1".into(),
            edge_runtime: None,
            concurrency: 4,
            open_loop: false,
            seed: 1,
            window_ms: 1000,
        }
    }

    #[test]
    fn counts_timeline_and_edge_share() {
        let mut outs = vec![
            outcome(1, 0, "claimed", Answerer::Origin),
            outcome(2, 1, "claimed", Answerer::Origin),
            outcome(3, 2, "sold_out", Answerer::Origin), // answered at 4.5 ms: the sell-out
            outcome(1, 3, "claimed", Answerer::Origin),  // same-key double tap of customer 1
            outcome(4, 10, "sold_out", Answerer::Edge),
            outcome(5, 11, "sold_out", Answerer::Edge),
            outcome(6, 12, "sold_out", Answerer::Edge),
            outcome(7, 13, "sold_out", Answerer::Origin),
        ];
        let mut not_sent = outcome(8, 50, NOT_SENT, Answerer::Unknown);
        not_sent.sent_us = None;
        not_sent.answered_us = None;
        not_sent.latencies.clear();
        outs.push(not_sent);
        let r = compute(&info(), &Plan::default(), &outs);
        assert_eq!(r.tries, 9);
        assert_eq!(r.tries_sent, 8);
        assert_eq!(r.tries_not_sent, 1);
        assert_eq!(r.distinct_customers, 7);
        assert_eq!(r.winners, 2);
        assert_eq!(r.winning_claim_ids, 2);
        assert_eq!(r.count("claimed"), 3);
        assert_eq!(r.count("sold_out"), 5);
        assert_eq!(r.outcomes["sold_out"]["edge"], 3);
        assert_eq!(r.sell_out_ms, Some(4.5));
        assert_eq!(r.last_claimed_ms, Some(5.5));
        assert_eq!(r.last_answer_ms, Some(15.5));
        // Sent after 4.5 ms: the 10..13 ms tries (the 3 ms double tap was sent at 3.5 ms).
        assert_eq!(r.tries_after_sell_out, 4);
        assert_eq!(r.edge_answered_after_sell_out, 3);
        assert_eq!(r.edge_share_after_sell_out, Some(0.75));
        assert_eq!(r.latency["origin"].responses, 5);
        assert!((r.latency["edge"].p50_ms - 2.0).abs() < 0.01);
        assert!((r.send_lag_p50_ms - 0.5).abs() < 0.01);
        assert_eq!(r.winner_tries_after_sell_out, 0);
        assert!(r.passed);
        let text = r.render();
        assert!(text.contains("75.00 %"), "{text}");
        // A winner's tap after the sell-out is forwarded by design: not in the edge's share.
        outs.push(outcome(2, 14, "already_claimed", Answerer::Origin));
        let r = compute(&info(), &Plan::default(), &outs);
        assert_eq!(r.winner_tries_after_sell_out, 1);
        assert_eq!(r.edge_share_after_sell_out, Some(0.75));
    }

    #[test]
    fn checks_decide_pass() {
        let mut r = compute(&info(), &Plan::default(), &[]);
        assert_eq!(r.edge_share_after_sell_out, None);
        r.add_check("a", true, "fine");
        assert!(r.passed);
        r.add_check("b", false, "broken");
        assert!(!r.passed);
        assert!(r.render().contains("[FAIL] b: broken"));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["passed"], false);
        assert_eq!(json["checks"][1]["status"], "fail");
    }

    #[test]
    fn a_skipped_check_prints_skip_never_pass() {
        let mut r = compute(&info(), &Plan::default(), &[]);
        r.add_check("a", true, "fine");
        r.add_skip("PostgreSQL read-back", "--no-db-check");
        assert!(r.passed, "a skip does not fail the run");
        let text = r.render();
        assert!(
            text.contains("[SKIP] PostgreSQL read-back: --no-db-check"),
            "{text}"
        );
        assert!(!text.contains("[ ok ] PostgreSQL"), "{text}");
        assert!(
            text.contains("PASS (1 checks skipped, not passed)"),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["checks"][0]["status"], "pass");
        assert_eq!(json["checks"][1]["status"], "skip");
        assert_eq!(json["checks_skipped"], 1);
    }

    #[test]
    fn answerer_header() {
        assert_eq!(Answerer::from_header(Some("edge")), Answerer::Edge);
        assert_eq!(Answerer::from_header(Some(" Origin")), Answerer::Origin);
        assert_eq!(Answerer::from_header(Some("cdn")), Answerer::Unknown);
        assert_eq!(Answerer::from_header(None), Answerer::Unknown);
    }
}
