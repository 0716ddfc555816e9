//! The waiting room's part of the stampede report: queue waits, fairness (Kendall τ), the
//! origin's peak claims per second against the admit rate, and the share of polls the edge
//! answered. Pure computation from what each customer saw; rendering for the text report.

use std::collections::BTreeMap;

use serde::Serialize;

use flashgate_shared::queue::keys::EDGE_BLOCK;
use flashgate_shared::queue::RANDOM_BLOCK;

use super::{hist, latency_of, Answerer, Latency, TryOutcome};

/// What one customer of a waiting-room stampede saw, from the join to the last poll.
#[derive(Debug, Clone, Default)]
pub struct Visit {
    pub customer: u32,
    /// When the first join was sent and answered, µs after the start.
    pub join_sent_us: Option<u64>,
    pub join_answered_us: Option<u64>,
    /// HTTP status of the first join's final answer (201 expected), 0 if none.
    pub join_status: u16,
    /// The ticket of the first join, and its sequence number (read from the ticket's payload).
    pub ticket: Option<String>,
    pub sequence: Option<u64>,
    /// A second join (a double tap): its HTTP status (200 expected) and whether it returned
    /// the same ticket.
    pub rejoin: Option<(u16, bool)>,
    /// Polls sent, and how many the edge answered (`Flashgate-Answered-By: edge`).
    pub polls: u64,
    pub polls_edge: u64,
    /// Polls and joins answered 429 `rate_limited` (then retried after `Retry-After`).
    pub rate_limited: u64,
    /// When a poll (or the join) first said `admitted`, µs after the start.
    pub admitted_us: Option<u64>,
    /// The `eta_seconds` the first join's answer gave.
    pub eta_at_join_s: Option<u64>,
    /// Last queue state seen (`waiting`, `admitted`, `sold_out`, `ended`, `paused`), or an
    /// error label (`http_<status>`, `transport_error`, `deadline`).
    pub last_state: String,
    /// For an answer outside the contract: its status and the start of its body.
    pub unexpected: Option<String>,
}

/// The waiting room's figures of a run. Times in ms after the start of the run.
#[derive(Debug, Clone, Serialize)]
pub struct QueueReport {
    pub admit_per_second: u32,
    pub queueing: String,
    pub prequeue_seconds: u32,
    /// The longest wait between two polls of a customer (`--max-poll-wait-ms`): customers poll
    /// at `Retry-After` up to this.
    pub max_poll_wait_ms: u64,
    /// Customers whose join got a ticket; joins answered otherwise, by status.
    pub joined: u64,
    pub join_failures: BTreeMap<String, u64>,
    /// Re-joins (double taps), and those answered 200 with the same ticket.
    pub rejoins: u64,
    pub rejoins_same_ticket: u64,
    /// Distinct sequence numbers among the tickets (unique = `joined`).
    pub distinct_sequences: u64,
    /// Arrival-ordered numbers (above [`RANDOM_BLOCK`]: FIFO joins after the start), and
    /// whether they are exactly `RANDOM_BLOCK + 1 ..= RANDOM_BLOCK + arrivals`; the numbers
    /// drawn at random (the prequeue, a `random` queue) lie below it.
    pub arrival_sequences: u64,
    pub arrivals_contiguous: bool,
    /// Join answered → admitted (`responses` = customers admitted).
    pub wait: Option<Latency>,
    /// How far the ETA given at the join was from the wait that followed, over the customers
    /// admitted (those who stayed): see [`EtaError`].
    pub eta_error: Option<EtaError>,
    /// Kendall τ-b between join order and admission order (see [`fairness_tau`]), over
    /// every customer with a ticket; `None` with fewer than two.
    pub fairness_tau: Option<f64>,
    pub fairness_pairs_n: u64,
    /// Customers in arrival order (FIFO) placed ahead of someone whose join had been
    /// answered before theirs was sent (see [`fifo_violations`]); 0 for a FIFO queue.
    pub fifo_violations: u64,
    /// Claims (attempts included) the origin answered in its busiest second, and when.
    pub origin_peak_claims_per_s: u64,
    pub origin_peak_second: Option<u64>,
    /// Polls in all, answered by the edge, and the share.
    pub polls: u64,
    pub polls_edge: u64,
    pub edge_poll_share: Option<f64>,
    pub rate_limited: u64,
    /// Last queue state per customer → customers.
    pub final_states: BTreeMap<String, u64>,
    /// First answers outside the contract, by label.
    pub unexpected_samples: BTreeMap<String, String>,
}

/// The error of the ETA a join answers, over the admitted customers: `|eta − wait| /
/// max(wait, 1 s)`, with `eta` the join's `eta_seconds` and `wait` join answered → admitted.
/// The 1 s floor keeps a customer admitted at once (ETA 0, wait 300 ms) from counting as an
/// infinite error: the ETA is given in whole seconds.
#[derive(Debug, Clone, Serialize)]
pub struct EtaError {
    pub customers: u64,
    /// Relative error quantiles (0.25 = 25 %).
    pub p50: f64,
    pub p90: f64,
    /// Absolute error quantiles, in seconds.
    pub p50_abs_seconds: f64,
    pub p90_abs_seconds: f64,
}

/// The [`EtaError`] of `visits`; `None` when nobody admitted had an ETA.
pub fn eta_error(visits: &[Visit]) -> Option<EtaError> {
    let mut rel = Vec::new();
    let mut abs = Vec::new();
    for v in visits {
        let (Some(j), Some(a), Some(eta)) = (v.join_answered_us, v.admitted_us, v.eta_at_join_s)
        else {
            continue;
        };
        let wait_s = a.saturating_sub(j) as f64 / 1e6;
        let off = (eta as f64 - wait_s).abs();
        abs.push(off);
        rel.push(off / wait_s.max(1.0));
    }
    if rel.is_empty() {
        return None;
    }
    let q = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * p).round() as usize]
    };
    Some(EtaError {
        customers: rel.len() as u64,
        p50: q(&mut rel, 0.5),
        p90: q(&mut rel, 0.9),
        p50_abs_seconds: q(&mut abs, 0.5),
        p90_abs_seconds: q(&mut abs, 0.9),
    })
}

/// Number of pairs `(i < j)` out of order in `v` (merge sort, O(n log n)); sorts `v`.
fn count_inversions(v: &mut [u64]) -> u64 {
    let n = v.len();
    if n < 2 {
        return 0;
    }
    let mut buf = v.to_vec();
    let mut swaps = 0u64;
    let mut width = 1;
    while width < n {
        let mut lo = 0;
        while lo < n {
            let mid = (lo + width).min(n);
            let hi = (lo + 2 * width).min(n);
            let (mut i, mut j, mut k) = (lo, mid, lo);
            while i < mid && j < hi {
                if v[j] < v[i] {
                    buf[k] = v[j];
                    swaps += (mid - i) as u64;
                    j += 1;
                } else {
                    buf[k] = v[i];
                    i += 1;
                }
                k += 1;
            }
            buf[k..k + (mid - i)].copy_from_slice(&v[i..mid]);
            k += mid - i;
            buf[k..k + (hi - j)].copy_from_slice(&v[j..hi]);
            v[lo..hi].copy_from_slice(&buf[lo..hi]);
            lo = hi;
        }
        width *= 2;
    }
    swaps
}

/// Pairs tied within runs of equal values of a sorted key: Σ t(t-1)/2.
fn tied_pairs<T: PartialEq>(sorted: impl Iterator<Item = T>) -> u64 {
    let mut total = 0u64;
    let mut run = 0u64;
    let mut last: Option<T> = None;
    for x in sorted {
        if last.as_ref() == Some(&x) {
            run += 1;
        } else {
            total += run * run.saturating_sub(1) / 2;
            run = 1;
            last = Some(x);
        }
    }
    total + run * run.saturating_sub(1) / 2
}

/// Kendall's τ-b of the pairs `(x, y)`, in O(n log n) (Knight's algorithm: sort by `(x, y)`,
/// count the inversions of `y` with a merge sort; ties corrected as in τ-b). 1.0 when the two
/// orders agree, -1.0 when reversed, about 0 when unrelated; `None` with fewer than two pairs
/// or when either order is all ties.
pub fn kendall_tau_b(pairs: &[(u64, u64)]) -> Option<f64> {
    let n = pairs.len() as u64;
    if n < 2 {
        return None;
    }
    let mut p = pairs.to_vec();
    p.sort_unstable();
    let n0 = n * (n - 1) / 2;
    let tx = tied_pairs(p.iter().map(|q| q.0));
    let txy = tied_pairs(p.iter().copied());
    let mut ys: Vec<u64> = p.iter().map(|q| q.1).collect();
    let discordant = count_inversions(&mut ys);
    let ty = tied_pairs(ys.iter().copied());
    // Pairs tied in neither: n0 - tx - ty + txy, of which `discordant` are discordant.
    let untied = (n0 + txy) as f64 - (tx + ty) as f64;
    let concordant = untied - discordant as f64;
    let denom = (((n0 - tx) as f64) * ((n0 - ty) as f64)).sqrt();
    (denom > 0.0).then(|| (concordant - discordant as f64) / denom)
}

/// Fairness of the queue: Kendall τ-b between join order (when each customer's join was
/// answered, client clock, µs) and admission order (the ticket's sequence number, which
/// `now_serving` passes in increasing order, so the order in which customers are let through
/// to claim). Over every customer with a ticket, not only those admitted: with a small stock
/// the admitted few all joined within milliseconds, where the client's clock cannot order
/// concurrent joins. Why not the time each claim was sent: a customer learns of her admission
/// only at her next poll (1–30 s apart, `Retry-After`), so claims admitted within one poll
/// interval arrive in an order that says nothing about the queue. Exact (O(n log n)), no
/// sampling. Returns the τ and the number of customers it was computed over.
pub fn fairness_tau(visits: &[Visit]) -> (Option<f64>, u64) {
    let pairs: Vec<(u64, u64)> = visits
        .iter()
        .filter_map(|v| Some((v.join_answered_us?, v.sequence?)))
        .collect();
    (kendall_tau_b(&pairs), pairs.len() as u64)
}

/// FIFO as a strict rule that concurrency cannot blur: when A's join was answered before B's
/// was sent, A's number was drawn first, so in arrival order A must be ahead of B. Counts the
/// customers B with an arrival-ordered number (above [`RANDOM_BLOCK`]) behind whom such an
/// A stands. O(n log n): B in order of sending, A in order of answer, the largest number among
/// the A answered so far.
pub fn fifo_violations(visits: &[Visit]) -> u64 {
    let joined: Vec<(u64, u64, u64)> = visits
        .iter()
        .filter_map(|v| Some((v.join_sent_us?, v.join_answered_us?, v.sequence?)))
        .filter(|&(_, _, s)| s > RANDOM_BLOCK)
        .collect();
    let mut by_sent = joined.clone();
    by_sent.sort_unstable_by_key(|j| j.0);
    let mut by_answer = joined;
    by_answer.sort_unstable_by_key(|j| j.1);
    let (mut i, mut max_before, mut bad) = (0, 0u64, 0u64);
    for &(sent, _, seq) in &by_sent {
        while i < by_answer.len() && by_answer[i].1 < sent {
            max_before = max_before.max(by_answer[i].2);
            i += 1;
        }
        bad += u64::from(max_before > seq);
    }
    bad
}

/// The busiest second of the claims the origin answered (every attempt that was not answered
/// by the edge counted, e.g. a retry after `in_progress`; an attempt the edge paced with 429
/// `queued` did not reach the origin), by when the try's last attempt was sent, over every
/// one-second window, not only whole seconds of the clock: `(claims, second the window starts
/// in)`.
pub fn origin_peak(outcomes: &[TryOutcome]) -> (u64, Option<u64>) {
    let mut sent: Vec<(u64, u64)> = outcomes
        .iter()
        .filter(|o| o.answered_by == Answerer::Origin)
        .filter_map(|o| {
            let by_edge = o.latencies.iter().filter(|(a, _)| *a == Answerer::Edge);
            let reached = o.attempts.max(1) as usize - by_edge.count();
            Some((o.last_sent_us.or(o.sent_us)?, reached.max(1) as u64))
        })
        .collect();
    sent.sort_unstable();
    let (mut best, mut at, mut in_window, mut end) = (0, None, 0, 0);
    for (start, &(t0, _)) in sent.iter().enumerate() {
        while end < sent.len() && sent[end].0 < t0 + 1_000_000 {
            in_window += sent[end].1;
            end += 1;
        }
        if in_window > best {
            (best, at) = (in_window, Some(t0 / 1_000_000));
        }
        in_window -= sent[start].1;
    }
    (best, at)
}

/// The option the campaign was created with, for the report.
#[derive(Debug, Clone, Copy)]
pub struct RoomOption {
    pub admit_per_second: u32,
    pub queueing: flashgate_shared::queue::Queueing,
    pub prequeue_seconds: u32,
    /// The generator's longest wait between two polls, ms.
    pub max_poll_wait_ms: u64,
}

/// Computes the waiting room's figures.
pub fn compute(opt: &RoomOption, visits: &[Visit], claims: &[TryOutcome]) -> QueueReport {
    let mut wait = hist();
    let mut q = QueueReport {
        admit_per_second: opt.admit_per_second,
        queueing: serde_json::to_value(opt.queueing)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        prequeue_seconds: opt.prequeue_seconds,
        max_poll_wait_ms: opt.max_poll_wait_ms,
        joined: 0,
        join_failures: BTreeMap::new(),
        rejoins: 0,
        rejoins_same_ticket: 0,
        distinct_sequences: 0,
        arrival_sequences: 0,
        arrivals_contiguous: false,
        wait: None,
        eta_error: eta_error(visits),
        fairness_tau: None,
        fairness_pairs_n: 0,
        fifo_violations: 0,
        origin_peak_claims_per_s: 0,
        origin_peak_second: None,
        polls: 0,
        polls_edge: 0,
        edge_poll_share: None,
        rate_limited: 0,
        final_states: BTreeMap::new(),
        unexpected_samples: BTreeMap::new(),
    };
    let mut seqs = Vec::new();
    for v in visits {
        if v.ticket.is_some() {
            q.joined += 1;
        } else if v.join_sent_us.is_some() {
            *q.join_failures
                .entry(format!("http_{}", v.join_status))
                .or_default() += 1;
        }
        seqs.extend(v.sequence);
        if let Some((status, same)) = v.rejoin {
            q.rejoins += 1;
            q.rejoins_same_ticket += u64::from(status == 200 && same);
        }
        q.polls += v.polls;
        q.polls_edge += v.polls_edge;
        q.rate_limited += v.rate_limited;
        if let (Some(j), Some(a)) = (v.join_answered_us, v.admitted_us) {
            wait.saturating_record(a.saturating_sub(j).max(1));
        }
        if v.join_sent_us.is_some() {
            *q.final_states.entry(v.last_state.clone()).or_default() += 1;
        }
        if let Some(u) = &v.unexpected {
            q.unexpected_samples
                .entry(v.last_state.clone())
                .or_insert_with(|| u.clone());
        }
    }
    seqs.sort_unstable();
    seqs.dedup();
    q.distinct_sequences = seqs.len() as u64;
    // Arrival numbers the origin gives; the edge's arrival keys (times) are only unique.
    let arrivals: Vec<u64> = seqs
        .iter()
        .copied()
        .filter(|&s| s > RANDOM_BLOCK && s < EDGE_BLOCK)
        .collect();
    q.arrival_sequences = arrivals.len() as u64;
    q.arrivals_contiguous = arrivals
        .iter()
        .zip(RANDOM_BLOCK + 1..)
        .all(|(&s, want)| s == want);
    if !wait.is_empty() {
        q.wait = Some(latency_of(&wait));
    }
    (q.fairness_tau, q.fairness_pairs_n) = fairness_tau(visits);
    q.fifo_violations = fifo_violations(visits);
    (q.origin_peak_claims_per_s, q.origin_peak_second) = origin_peak(claims);
    if q.polls > 0 {
        q.edge_poll_share = Some(q.polls_edge as f64 / q.polls as f64);
    }
    q
}

impl QueueReport {
    /// Appends the waiting room's lines to the text report.
    pub fn render(&self, s: &mut String) {
        use std::fmt::Write;
        let _ = writeln!(
            s,
            "queue       waiting room: admit {}/s, {}, prequeue {} s; {} joined ({} distinct sequence numbers; {} in arrival order, {}), join failures {:?}; re-joins {} ({} same ticket)",
            self.admit_per_second,
            self.queueing,
            self.prequeue_seconds,
            self.joined,
            self.distinct_sequences,
            self.arrival_sequences,
            if self.arrivals_contiguous { "contiguous" } else { "NOT contiguous" },
            self.join_failures,
            self.rejoins,
            self.rejoins_same_ticket
        );
        match &self.wait {
            Some(w) => {
                let _ = writeln!(
                    s,
                    "queue wait  join -> admitted: {} customers, p50 {:.0} ms, p95 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
                    w.responses, w.p50_ms, w.p95_ms, w.p99_ms, w.max_ms
                );
            }
            None => {
                let _ = writeln!(s, "queue wait  nobody was admitted");
            }
        }
        if let Some(e) = &self.eta_error {
            let _ = writeln!(
                s,
                "eta         error of the join's ETA vs the wait, {} admitted: p50 {:.1} % ({:.1} s), p90 {:.1} % ({:.1} s)",
                e.customers,
                e.p50 * 100.0,
                e.p50_abs_seconds,
                e.p90 * 100.0,
                e.p90_abs_seconds
            );
        }
        let tau = self
            .fairness_tau
            .map_or("-".to_string(), |t| format!("{t:.4}"));
        let _ = writeln!(
            s,
            "fairness    Kendall tau-b, join order vs admission order, over {} customers: {tau}; {} behind someone who had joined before they sent their join",
            self.fairness_pairs_n, self.fifo_violations
        );
        let _ = writeln!(
            s,
            "origin load peak {} claim requests/s at the origin (second {}), admit rate {}/s",
            self.origin_peak_claims_per_s,
            self.origin_peak_second
                .map_or("-".to_string(), |s| s.to_string()),
            self.admit_per_second
        );
        let share = self
            .edge_poll_share
            .map_or("-".to_string(), |v| format!("{:.2} %", v * 100.0));
        let _ = writeln!(
            s,
            "polls       {} polls, {} answered by the edge: {share}; {} answered 429 rate_limited; final states {:?}",
            self.polls, self.polls_edge, self.rate_limited, self.final_states
        );
        for (what, sample) in &self.unexpected_samples {
            let _ = writeln!(s, "unexpected  queue {what}: {}", sample.replace('\n', " "));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// τ-b by its definition, O(n²), to check the fast one against.
    fn tau_naive(p: &[(u64, u64)]) -> Option<f64> {
        let (mut c, mut d, mut tx, mut ty) = (0i64, 0i64, 0i64, 0i64);
        for i in 0..p.len() {
            for j in i + 1..p.len() {
                let dx = p[i].0.cmp(&p[j].0);
                let dy = p[i].1.cmp(&p[j].1);
                use std::cmp::Ordering::Equal;
                match (dx, dy) {
                    (Equal, Equal) => {}
                    (Equal, _) => tx += 1,
                    (_, Equal) => ty += 1,
                    _ if dx == dy => c += 1,
                    _ => d += 1,
                }
            }
        }
        let denom = (((c + d + tx) * (c + d + ty)) as f64).sqrt();
        (denom > 0.0).then(|| (c - d) as f64 / denom)
    }

    #[test]
    fn tau_of_known_orders() {
        let same: Vec<(u64, u64)> = (0..1000).map(|i| (i, i + 5)).collect();
        assert_eq!(kendall_tau_b(&same), Some(1.0));
        let reversed: Vec<(u64, u64)> = (0..1000).map(|i| (i, 1000 - i)).collect();
        assert_eq!(kendall_tau_b(&reversed), Some(-1.0));
        // One swapped neighbour pair among 4: (5 - 1) / 6.
        let one_swap = [(1, 1), (2, 3), (3, 2), (4, 4)];
        assert!((kendall_tau_b(&one_swap).unwrap() - 4.0 / 6.0).abs() < 1e-12);
        assert_eq!(kendall_tau_b(&[(1, 1)]), None);
        assert_eq!(kendall_tau_b(&[(1, 1), (1, 2)]), None, "x all tied");
    }

    #[test]
    fn tau_matches_the_definition_with_ties_and_shuffles() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let mut rng = StdRng::seed_from_u64(3);
        for n in [2usize, 3, 10, 57, 300] {
            for ties in [2u64, 10, 1_000_000] {
                let p: Vec<(u64, u64)> = (0..n)
                    .map(|_| (rng.random_range(0..ties), rng.random_range(0..ties)))
                    .collect();
                let (fast, slow) = (kendall_tau_b(&p), tau_naive(&p));
                match (fast, slow) {
                    (Some(a), Some(b)) => {
                        assert!((a - b).abs() < 1e-9, "n {n} ties {ties}: {a} vs {b}")
                    }
                    (a, b) => assert_eq!(a, b, "n {n} ties {ties}"),
                }
            }
        }
        // Random orders of 20,000: about 0.
        let mut ys: Vec<u64> = (0..20_000).collect();
        for i in (1..ys.len()).rev() {
            ys.swap(i, rng.random_range(0..=i));
        }
        let p: Vec<(u64, u64)> = ys.iter().enumerate().map(|(i, &y)| (i as u64, y)).collect();
        assert!(kendall_tau_b(&p).unwrap().abs() < 0.02);
    }

    fn visit(c: u32, joined_us: u64, seq: u64, admitted: bool) -> Visit {
        Visit {
            customer: c,
            join_sent_us: Some(joined_us - 100),
            join_answered_us: Some(joined_us),
            join_status: 201,
            ticket: Some(format!("t{c}")),
            sequence: Some(seq),
            rejoin: None,
            polls: 4,
            polls_edge: 3,
            rate_limited: 0,
            admitted_us: admitted.then_some(joined_us + 1_000_000),
            eta_at_join_s: None,
            last_state: if admitted { "admitted" } else { "sold_out" }.into(),
            unexpected: None,
        }
    }

    #[test]
    fn eta_error_against_the_wait() {
        // Waits of 10 s, 4 s and 0.5 s (floored to 1 s); ETAs 12 s, 4 s and 0 s.
        let mut visits: Vec<Visit> = [(10_000_000, 12), (4_000_000, 4), (500_000, 0)]
            .into_iter()
            .enumerate()
            .map(|(c, (wait_us, eta))| Visit {
                join_answered_us: Some(1_000),
                admitted_us: Some(1_000 + wait_us),
                eta_at_join_s: Some(eta),
                ..visit(c as u32, 1_000, RANDOM_BLOCK + c as u64 + 1, true)
            })
            .collect();
        // Not admitted: not counted.
        visits.push(Visit {
            eta_at_join_s: Some(99),
            ..visit(9, 1_000, RANDOM_BLOCK + 9, false)
        });
        let e = eta_error(&visits).expect("three admitted with an ETA");
        assert_eq!(e.customers, 3);
        // Relative errors 0.2, 0.0, 0.5: p50 0.2, p90 0.5.
        assert!((e.p50 - 0.2).abs() < 1e-9, "{e:?}");
        assert!((e.p90 - 0.5).abs() < 1e-9, "{e:?}");
        assert!((e.p50_abs_seconds - 0.5).abs() < 1e-9, "{e:?}");
        assert!((e.p90_abs_seconds - 2.0).abs() < 1e-9, "{e:?}");
        assert!(eta_error(&visits[3..]).is_none());
    }

    #[test]
    fn queue_figures() {
        let b = RANDOM_BLOCK;
        let mut visits = vec![
            visit(0, 1_000, b + 1, true),
            visit(1, 2_000, b + 2, true),
            visit(2, 3_000, b + 4, true), // joined before customer 3 but got a later sequence
            visit(3, 4_000, b + 3, true),
            visit(4, 5_000, b + 5, false),
        ];
        visits[1].rejoin = Some((200, true));
        visits[2].rejoin = Some((200, false));
        let opt = RoomOption {
            admit_per_second: 10,
            queueing: flashgate_shared::queue::Queueing::Fifo,
            prequeue_seconds: 0,
            max_poll_wait_ms: 2_000,
        };
        let q = compute(&opt, &visits, &[]);
        assert_eq!((q.joined, q.distinct_sequences), (5, 5));
        assert!(q.arrivals_contiguous);
        assert_eq!(q.arrival_sequences, 5);
        assert_eq!((q.rejoins, q.rejoins_same_ticket), (2, 1));
        assert_eq!(q.fairness_pairs_n, 5);
        assert!((q.fairness_tau.unwrap() - 8.0 / 10.0).abs() < 1e-12);
        // Customer 2's join was answered (3,000 µs) before customer 3's was sent (3,900 µs),
        // yet 3 got the earlier number.
        assert_eq!(q.fifo_violations, 1);
        assert_eq!(q.wait.as_ref().unwrap().responses, 4);
        assert!((q.wait.as_ref().unwrap().p50_ms - 1000.0).abs() < 1.0);
        assert_eq!((q.polls, q.polls_edge), (20, 15));
        assert_eq!(q.edge_poll_share, Some(0.75));
        assert_eq!(q.final_states["admitted"], 4);
        assert_eq!(q.queueing, "fifo");
        visits[4].sequence = Some(b + 7);
        assert!(!compute(&opt, &visits, &[]).arrivals_contiguous);
        // Drawn numbers (below the block) do not count as arrivals.
        visits[4].sequence = Some(12_345);
        let q2 = compute(&opt, &visits, &[]);
        assert!(q2.arrivals_contiguous);
        assert_eq!((q2.arrival_sequences, q2.distinct_sequences), (4, 5));
        let mut text = String::new();
        q.render(&mut text);
        assert!(text.contains("0.8000"), "{text}");
        assert!(text.contains("75.00 %"), "{text}");
    }

    #[test]
    fn origin_peak_looks_at_every_one_second_window() {
        use crate::stampede::report::tests::outcome;
        // Sent at 0.6 s, 1.2 s, 1.3 s, 1.5 s (+ 0.5 ms) and 3 s: whole seconds of the clock
        // hold at most 3, the window from 0.6 s holds 4.
        let mut claims: Vec<TryOutcome> = [600, 1_200, 1_300, 1_500, 3_000]
            .iter()
            .map(|&ms| outcome(1, ms, "claimed", Answerer::Origin))
            .collect();
        claims.push(outcome(2, 1_400, "sold_out", Answerer::Edge));
        assert_eq!(origin_peak(&claims), (4, Some(0)));
        claims[4].attempts = 3;
        assert_eq!(origin_peak(&claims), (4, Some(0)));
        claims[3].attempts = 2;
        assert_eq!(origin_peak(&claims), (5, Some(0)));
        // Paced twice by the edge, then sent at 3.1 s and answered by the origin: one claim
        // at the origin, at 3.1 s.
        claims[0].attempts = 3;
        claims[0].latencies = vec![
            (Answerer::Edge, 1),
            (Answerer::Edge, 1),
            (Answerer::Origin, 1),
        ];
        claims[0].last_sent_us = Some(3_100_000);
        assert_eq!(origin_peak(&claims), (4, Some(1)));
        assert_eq!(origin_peak(&[]), (0, None));
    }
}
