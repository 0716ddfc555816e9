//! The run as time series: answers per second by answerer and result, latency p50/p99, the
//! remaining stock and, with a waiting room, the queue. Written into the JSON report
//! (`timeline`) and drawn by [`crate::stampede::plots`].

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use super::queue::Visit;
use super::{hist, TryOutcome};

/// Buckets a run is cut into at most (the bucket grows with the run: 100 ms at least).
const MAX_BUCKETS: u64 = 240;
/// The smallest bucket, ms.
const MIN_BUCKET_MS: u64 = 100;

/// Time series of a run, one value per bucket of `bucket_ms` from the start of the run
/// (bucket `i` covers `[i × bucket_ms, (i + 1) × bucket_ms)` ms).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Timeline {
    pub bucket_ms: u64,
    /// `"<answerer>/<result>"` (e.g. `edge/sold_out`) → final answers per second arriving in
    /// each bucket.
    pub answers_per_s: BTreeMap<String, Vec<f64>>,
    /// Tries first sent in each bucket, per second (e.g. the tries made while a fault lasted).
    pub sent_per_s: Vec<f64>,
    /// Latency of the final attempts answered in each bucket, ms (`null` for an empty bucket).
    pub latency_p50_ms: Vec<Option<f64>>,
    pub latency_p99_ms: Vec<Option<f64>>,
    /// The stock less the customers told 201 by the end of each bucket, as the crowd saw it.
    pub remaining: Vec<i64>,
    /// With a waiting room: customers who had joined and not yet been admitted, and customers
    /// admitted in all, at the end of each bucket, as the crowd saw them (from the join and
    /// poll answers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_waiting: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_admitted: Option<Vec<u64>>,
}

impl Timeline {
    /// Buckets in the series.
    pub fn len(&self) -> usize {
        self.remaining.len()
    }

    /// Whether the run had no answer at all.
    pub fn is_empty(&self) -> bool {
        self.remaining.is_empty()
    }

    /// The start of bucket `i`, seconds after the start of the run.
    pub fn at_s(&self, i: usize) -> f64 {
        (i as u64 * self.bucket_ms) as f64 / 1000.0
    }

    fn bucket(&self, us: u64) -> usize {
        (us / 1000 / self.bucket_ms) as usize
    }
}

/// The series of a run's final answers; `stock` is the campaign's.
pub fn timeline(stock: i64, outcomes: &[TryOutcome]) -> Timeline {
    let end_us = outcomes
        .iter()
        .filter_map(|o| o.answered_us)
        .max()
        .unwrap_or(0);
    let bucket_ms = (end_us / 1000 / MAX_BUCKETS + 1).max(MIN_BUCKET_MS);
    let n = (end_us / 1000 / bucket_ms + 1) as usize;
    let mut t = Timeline {
        bucket_ms,
        answers_per_s: BTreeMap::new(),
        sent_per_s: vec![0.0; n],
        latency_p50_ms: vec![None; n],
        latency_p99_ms: vec![None; n],
        remaining: vec![stock; n],
        queue_waiting: None,
        queue_admitted: None,
    };
    if outcomes.iter().all(|o| o.answered_us.is_none()) {
        t.sent_per_s.clear();
        t.latency_p50_ms.clear();
        t.latency_p99_ms.clear();
        t.remaining.clear();
        return t;
    }
    let per_s = 1000.0 / bucket_ms as f64;
    let mut latency = vec![hist(); n];
    let mut won_in = vec![0i64; n];
    let mut winners = HashSet::new();
    for o in outcomes {
        if let Some(sent) = o.sent_us {
            let i = t.bucket(sent).min(n - 1);
            t.sent_per_s[i] += per_s;
        }
        let Some(at) = o.answered_us else { continue };
        let i = t.bucket(at);
        let series = format!("{}/{}", o.answered_by.as_str(), o.result);
        t.answers_per_s
            .entry(series)
            .or_insert_with(|| vec![0.0; n])[i] += per_s;
        if let Some(&(_, us)) = o.latencies.last() {
            latency[i].saturating_record(us.max(1));
        }
        if o.result == "claimed" && winners.insert(o.customer) {
            won_in[i] += 1;
        }
    }
    let mut won = 0;
    for i in 0..n {
        won += won_in[i];
        t.remaining[i] = stock - won;
        if !latency[i].is_empty() {
            t.latency_p50_ms[i] = Some(latency[i].value_at_quantile(0.5) as f64 / 1000.0);
            t.latency_p99_ms[i] = Some(latency[i].value_at_quantile(0.99) as f64 / 1000.0);
        }
    }
    t
}

/// Adds the waiting room's series from what each customer saw: joined (first join answered)
/// and admitted (first `admitted` answer). Buckets past the answers' end are not added.
pub fn add_queue(t: &mut Timeline, visits: &[Visit]) {
    let n = t.len();
    let (mut joined_in, mut admitted_in) = (vec![0u64; n], vec![0u64; n]);
    for v in visits {
        if let Some(at) = v.join_answered_us {
            joined_in[t.bucket(at).min(n.saturating_sub(1))] += 1;
        }
        if let Some(at) = v.admitted_us {
            admitted_in[t.bucket(at).min(n.saturating_sub(1))] += 1;
        }
    }
    let (mut joined, mut admitted) = (0, 0);
    let (mut waiting, mut admitted_all) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        joined += joined_in[i];
        admitted += admitted_in[i];
        waiting.push(joined.saturating_sub(admitted));
        admitted_all.push(admitted);
    }
    t.queue_waiting = Some(waiting);
    t.queue_admitted = Some(admitted_all);
}

#[cfg(test)]
mod tests {
    use super::super::Answerer;
    use super::*;
    use crate::stampede::plan::TapKind;

    fn answer(customer: u32, at_ms: u64, result: &str, by: Answerer, lat_ms: u64) -> TryOutcome {
        TryOutcome {
            customer,
            kind: TapKind::First,
            variant: None,
            due_us: 0,
            sent_us: Some(at_ms * 1000),
            last_sent_us: Some(at_ms * 1000),
            answered_us: Some(at_ms * 1000),
            status: if result == "claimed" { 201 } else { 409 },
            result: result.into(),
            answered_by: by,
            attempts: 1,
            retries_unavailable: 0,
            retries_in_progress: 0,
            claim: None,
            latencies: vec![(by, lat_ms * 1000)],
            unexpected: None,
        }
    }

    #[test]
    fn answers_latency_and_remaining_per_bucket() {
        let outcomes = vec![
            answer(1, 10, "claimed", Answerer::Origin, 4),
            answer(1, 20, "claimed", Answerer::Origin, 6), // her retry: one unit, not two
            answer(2, 150, "claimed", Answerer::Origin, 8),
            answer(3, 160, "sold_out", Answerer::Edge, 1),
            answer(4, 250, "sold_out", Answerer::Edge, 2),
        ];
        let t = timeline(2, &outcomes);
        assert_eq!(t.bucket_ms, 100);
        assert_eq!(t.len(), 3);
        assert_eq!(t.remaining, vec![1, 0, 0]);
        assert_eq!(t.answers_per_s["origin/claimed"], vec![20.0, 10.0, 0.0]);
        assert_eq!(t.answers_per_s["edge/sold_out"], vec![0.0, 10.0, 10.0]);
        // The histogram keeps 3 significant digits.
        let near = |v: Option<f64>, want: f64| v.is_some_and(|v| (v - want).abs() <= want / 500.0);
        assert!(near(t.latency_p99_ms[0], 6.0), "{:?}", t.latency_p99_ms);
        assert!(near(t.latency_p50_ms[0], 4.0), "{:?}", t.latency_p50_ms);
        assert!(near(t.latency_p50_ms[2], 2.0), "{:?}", t.latency_p50_ms);
        assert_eq!(t.at_s(2), 0.2);
    }

    #[test]
    fn long_runs_keep_at_most_the_bucket_limit() {
        let t = timeline(1, &[answer(1, 600_000, "claimed", Answerer::Origin, 1)]);
        assert!(t.len() as u64 <= MAX_BUCKETS + 1, "{} buckets", t.len());
        assert_eq!(t.remaining.last(), Some(&0));
        assert!(timeline(1, &[]).is_empty());
    }

    #[test]
    fn the_queue_waits_until_admitted() {
        let outcomes = vec![answer(1, 250, "claimed", Answerer::Origin, 1)];
        let mut t = timeline(1, &outcomes);
        let visit = |c, join_ms: u64, admit_ms: Option<u64>| Visit {
            customer: c,
            join_answered_us: Some(join_ms * 1000),
            admitted_us: admit_ms.map(|m| m * 1000),
            ..Visit::default()
        };
        add_queue(
            &mut t,
            &[
                visit(1, 10, Some(120)),
                visit(2, 20, Some(230)),
                visit(3, 30, None),
            ],
        );
        assert_eq!(t.queue_waiting, Some(vec![3, 2, 1]));
        assert_eq!(t.queue_admitted, Some(vec![0, 1, 2]));
    }
}
