//! The capacity model. One campaign per variant, each with `V = visitors / variants` visitors,
//! `S = stock / variants` units and `T = V × tries` taps; every variant's crowd arrives at once,
//! so rates add up over the variants. Counts go into one-second buckets; a "peak" is the
//! busiest second, a "total" the whole sale. Notation: `A` the arrival window, `F(t)` its
//! cumulative share ([`cdf`]), `r` = `admit_per_second`, `ttl` the edge's status TTL, `I` edge
//! isolates, `c.*` the [`Calibration`].
//!
//! **Without a waiting room** (claims straight at the edge):
//! - sell-out `t_so = F⁻¹(S / V)` (the S-th first tap wins the last unit; none when `V < S`);
//! - every tap before `t_so` is forwarded: `S` winners, the rest other answers (double taps);
//! - after `t_so` the edge forwards the taps of one round trip (`c.edge_origin_round_trip_ms`:
//!   each isolate learns `sold_out` from the first answer) and a share
//!   `c.edge_forward_share_after_sold_out` of the rest: those are the origin's `sold_out`
//!   answers; the edge answers every other tap `sold_out`.
//!
//! **With a waiting room** (taps are joins; steps of `dt` = horizon / 400,000 within 1 ms..1 s,
//! FIFO as a fluid queue):
//! - a join enters the line `lag` = [`ADMIT_LAG_MS`] after it is made: admission does not pass
//!   an arrival key until the edge's report of it has had time to arrive;
//! - admission: a budget growing `r × dt` per step, capped at `r` (one second's worth), admits
//!   `min(budget, line, S − admitted)`;
//! - the edge shows the admissions at `r` a second at most (its reveal point: a burst of
//!   admissions is spread over the next second), and the waits and claims count from there;
//! - an admitted visitor claims `d = ttl + poll / 2` after she is shown (the edge's lag plus
//!   half a poll interval at the front of the line, where `Retry-After` is 1 s), with as many
//!   taps as she joins with (`tries`: the first wins, the others are the origin's replays):
//!   `t_so` = the last admission shown + `d`;
//! - a waiting visitor (in the line or on her way into it) at place `x` polls every
//!   `clamp(x / 2r, 1, 30)` s, so a queue of `Q`
//!   polls `min(Q, 2r) + 2r ln(min(Q, 60r) / 2r) + max(0, Q − 60r) / 30` times a second
//!   ([`poll_rate`]); with `--poll-seconds P`, `Q / P`;
//! - after `t_so + ttl` those left hear `sold_out`: one more poll each (at the same rate), or,
//!   in a sale with unpaid holds (`outlook: may_return`), a poll every 15 s until
//!   `t_so + hold`, then one more within 30 s; late joiners poll once;
//! - queue wait of the `x`-th visitor (x ≤ S): `D⁻¹(x) − A⁻¹(x) + d`, `A(t) = V F(t)` the
//!   joins so far, `D(t)` the admissions so far; p50 / p95 over the admitted.
//!
//! **On a fixed capacity** (`edge_cores`, `origins` or `clients` given; no waiting room): the
//! taps queue for what that capacity answers, see [`bounded`].
//!
//! **Both**, per second and campaign:
//! - join reports `= min(J, I)` for `J` joins (the edge issues the tickets; each isolate
//!   reports those it issued once a second per campaign), carrying every join's ticket;
//! - presence reports `= min(polls, I)` (one per isolate and second), with one ticket per poll;
//! - status fetches `= min(edge requests, I / ttl)`;
//! - edge cores `= Σ requests of a kind / c.edge_<kind>_per_core_second / utilisation`;
//!   `I` defaults to the edge cores, rounded up;
//! - origin core-µs `= Σ answers of a kind × c.origin_core_us_per_<kind>`; origins
//!   `= ⌈peak cores / (cores per origin × utilisation)⌉`, at least 1;
//! - Redis ops `= winners × c.redis_ops_per_winner + other answers + join reports + reports
//!   (one op each) + admitted claims × c.redis_ops_per_admitted_claim + 10/s per live waiting
//!   room`; Redis core-µs `= ops × c.redis_core_us_per_op + joins ×
//!   c.redis_core_us_per_reported_ticket + tickets × c.redis_core_us_per_presence_ticket`; the part of it on one campaign's queue
//!   slot `{c}` (join reports, reports, admission, joins, tickets) is one primary's, per campaign;
//! - PostgreSQL claims/s = winners/s; a grouped commit takes the claims arriving at an origin
//!   during one commit: `b = clamp(claims/s ÷ origins × c.postgres_commit_latency_ms, 1,
//!   c.commit_batch_max)`, commits/s `= claims/s ÷ b`; cores `= claims/s ×
//!   c.postgres_core_us_per_claim`;
//! - Redis memory: `c.redis_bytes_per_campaign + winners × (c.redis_bytes_per_winner +
//!   c.redis_bytes_per_key_stamp) + joiners × (c.redis_bytes_per_queued_visitor +
//!   c.redis_bytes_per_present_ticket)` per campaign, kept until `hold + grace` after the end,
//!   then 0 (the ended campaign's keys expire).
//! - second wave: `(1 − paid) × S` units come back `hold` after their claims; with a waiting
//!   room and visitors left they sell again by `t_so + hold + d`.

use super::output::{EdgePlan, OriginPlan, Plan, PostgresPlan, QueuePlan, Rate, RedisPlan, Times};
use super::{Arrival, Calibration, Inputs, Kind};
use flashgate_shared::queue::keys::ADMIT_LAG_MS;

/// Cumulative share of the first taps by `t` seconds: see [`Arrival`].
pub fn cdf(arrival: Arrival, window: f64, t: f64) -> f64 {
    let t = t.clamp(0.0, window);
    match arrival {
        Arrival::Uniform => t / window,
        Arrival::Burst => {
            let tau = window / 4.0;
            (1.0 - (-t / tau).exp()) / (1.0 - (-4.0f64).exp())
        }
    }
}

/// When the share `u` (0..=1) of the first taps has arrived: the inverse of [`cdf`].
pub fn inverse_cdf(arrival: Arrival, window: f64, u: f64) -> f64 {
    let u = u.clamp(0.0, 1.0);
    match arrival {
        Arrival::Uniform => u * window,
        Arrival::Burst => {
            let tau = window / 4.0;
            (-tau * (1.0 - u * (1.0 - (-4.0f64).exp())).ln()).min(window)
        }
    }
}

/// Polls per second of `q` waiting visitors at admission rate `r`, each polling at her
/// `Retry-After` (`clamp(place / 2r, 1, 30)` s), or every `poll` seconds when given.
pub fn poll_rate(q: f64, r: f64, poll: Option<f64>) -> f64 {
    if q <= 0.0 {
        return 0.0;
    }
    if let Some(p) = poll {
        return q / p;
    }
    let fast = q.min(2.0 * r);
    let middle = if q > 2.0 * r {
        2.0 * r * (q.min(60.0 * r) / (2.0 * r)).ln()
    } else {
        0.0
    };
    fast + middle + (q - 60.0 * r).max(0.0) / 30.0
}

/// Counts of one second of one campaign.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    status: f64,
    joins: f64,
    polls: f64,
    edge_sold_out: f64,
    forwarded: f64,
    winners: f64,
    origin_sold_out: f64,
    other: f64,
    join_reports: f64,
    reports: f64,
    status_fetches: f64,
    waiting_room_live: f64,
}

impl Bucket {
    fn edge_requests(&self) -> f64 {
        self.status + self.joins + self.polls + self.edge_sold_out + self.forwarded
    }
}

fn bucket(buckets: &mut Vec<Bucket>, t: f64) -> &mut Bucket {
    let i = t.max(0.0) as usize;
    if buckets.len() <= i {
        buckets.resize(i + 1, Bucket::default());
    }
    &mut buckets[i]
}

/// What the simulation of one campaign found besides its buckets.
struct Run {
    buckets: Vec<Bucket>,
    sell_out: Option<f64>,
    first_winner: Option<f64>,
    queue: Option<(f64, f64, f64, f64)>,
}

/// The sale of one campaign without a waiting room: exact counts per second from [`cdf`].
fn direct(i: &Inputs, c: &Calibration, v: f64, s: f64) -> Run {
    let a = i.arrival_seconds;
    let f = |t: f64| cdf(i.arrival, a, t);
    let taps = v * i.tries_per_visitor;
    let sell_out = (v >= s).then(|| inverse_cdf(i.arrival, a, s / v));
    let rtt = c.edge_origin_round_trip_ms / 1000.0;
    let share = c.edge_forward_share_after_sold_out;
    let mut buckets = Vec::new();
    let seconds = a.ceil() as usize;
    for k in 0..seconds {
        let (b0, b1) = (k as f64, (k as f64 + 1.0).min(a));
        let all = taps * (f(b1) - f(b0));
        let (pre_end, rtt_end) = match sell_out {
            Some(t) => (t.clamp(b0, b1), (t + rtt).clamp(b0, b1)),
            None => (b1, b1),
        };
        let pre = taps * (f(pre_end) - f(b0));
        let in_rtt = taps * (f(rtt_end) - f(pre_end));
        let post = (all - pre - in_rtt).max(0.0);
        let winners = v * (f(pre_end) - f(b0));
        let b = bucket(&mut buckets, b0);
        b.status = i.status_reads_per_visitor * v * (f(b1) - f(b0));
        b.winners = winners;
        b.other = pre - winners;
        b.origin_sold_out = in_rtt + share * post;
        b.forwarded = pre + b.origin_sold_out;
        b.edge_sold_out = post - share * post;
    }
    Run {
        buckets,
        sell_out,
        first_winner: Some(0.0),
        queue: None,
    }
}

/// The sale of one campaign through a waiting room admitting `r` a second: a fluid FIFO queue
/// in steps of `dt`.
fn queued(i: &Inputs, v: f64, s: f64, r: f64) -> Run {
    let a = i.arrival_seconds;
    let f = |t: f64| cdf(i.arrival, a, t);
    let ttl = i.status_ttl_seconds;
    let delay = ttl + i.poll_seconds.unwrap_or(1.0) / 2.0;
    let may_return = i.kind == Kind::Sale && i.hold_seconds > 0.0 && i.paid_share < 1.0;
    let tail = ttl
        + 30.0
        + if may_return {
            i.hold_seconds + 30.0
        } else {
            0.0
        };
    // A join enters the line this long after it is made (the edge's report of it).
    let lag = ADMIT_LAG_MS as f64 / 1000.0;
    let horizon = a + lag + 2.0 * s / r + 2.0 + delay + tail;
    let dt = (horizon / 400_000.0).clamp(0.001, 1.0);
    let steps = (horizon / dt).ceil() as usize;
    let admits = s.min(v);
    let mut buckets = Vec::new();
    let (mut queue, mut admitted, mut budget, mut peak_queue) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    let mut on_the_way = 0.0f64;
    let mut cumulative = Vec::with_capacity(steps);
    let mut admission_end: Option<f64> = None;
    // When the edge has shown the last admission.
    let mut reveal_end: Option<f64> = None;
    let mut revealed = 0.0f64;
    let mut first_admit: Option<f64> = None;
    let mut left_at_learn: Option<f64> = None;
    let mut final_polls_left = 0.0;
    for k in 0..steps {
        let (t0, t1) = (k as f64 * dt, (k as f64 + 1.0) * dt);
        let joiners = v * (f(t1) - f(t0));
        let entering = v * (f(t1 - lag) - f(t0 - lag));
        let sell_out = reveal_end.filter(|_| s <= v).map(|e| e + delay);
        let learnt = sell_out.is_some_and(|t| t1 > t + ttl);
        {
            let b = bucket(&mut buckets, t0);
            b.status += i.status_reads_per_visitor * joiners;
            b.joins += i.tries_per_visitor * joiners;
            if admission_end.is_none() || admitted < admits {
                b.waiting_room_live += dt;
            }
        }
        if admission_end.is_some() {
            // Late joiners hear `sold_out` at their first poll.
            bucket(&mut buckets, t0).polls += joiners;
        } else {
            // Joined, on the way into the line (at most those joined so far).
            on_the_way += joiners;
            let entered = entering.min(on_the_way);
            on_the_way -= entered;
            queue += entered;
        }
        let waiting = queue + on_the_way;
        budget = (budget + r * dt).min(r);
        let n = budget.min(queue).min(admits - admitted).max(0.0);
        if n > 0.0 {
            first_admit.get_or_insert(t0);
        }
        admitted += n;
        queue -= n;
        budget -= n;
        // The edge shows admissions at the admit rate at most (its reveal point).
        let shown = (revealed + r * dt).min(admitted) - revealed;
        revealed += shown;
        cumulative.push(revealed);
        peak_queue = peak_queue.max(waiting);
        if shown > 0.0 {
            // Her taps after the first carry her admission token too: the edge forwards them,
            // the origin answers each as a replay or `already_claimed`.
            let repeats = shown * (i.tries_per_visitor - 1.0).max(0.0);
            let b = bucket(&mut buckets, t1 + delay);
            b.winners += shown;
            b.other += repeats;
            b.forwarded += shown + repeats;
        }
        if admission_end.is_none() && admitted >= admits - 1e-9 && (s <= v || f(t1 - lag) >= 1.0) {
            admission_end = Some(t1);
        }
        if reveal_end.is_none() && admission_end.is_some() && revealed >= admits - 1e-9 {
            reveal_end = Some(t1);
        }
        let polls = if !learnt {
            poll_rate(waiting, r, i.poll_seconds) * dt
        } else {
            let left = *left_at_learn.get_or_insert_with(|| {
                final_polls_left = waiting;
                waiting
            });
            let end = sell_out.unwrap_or(0.0) + i.hold_seconds;
            if may_return && t0 < end {
                left / 15.0 * dt
            } else {
                let rate = if may_return {
                    left / 30.0
                } else {
                    poll_rate(left, r, i.poll_seconds)
                };
                let e = (rate * dt).min(final_polls_left);
                final_polls_left -= e;
                e
            }
        };
        bucket(&mut buckets, t0).polls += polls;
    }
    let sell_out = reveal_end.filter(|_| s <= v).map(|e| e + delay);
    // Queue waits of the admitted, FIFO: the x-th joiner is admitted when `cumulative`
    // reaches x.
    let n = 2_000;
    let mut waits: Vec<f64> = (0..n)
        .map(|j| {
            let x = admits * (j as f64 + 0.5) / n as f64;
            let step = cumulative.partition_point(|&d| d < x);
            let admitted_at = (step as f64 + 1.0) * dt;
            let joined_at = inverse_cdf(i.arrival, a, x / v);
            (admitted_at - joined_at).max(0.0) + delay
        })
        .collect();
    waits.sort_by(f64::total_cmp);
    let p = |q: f64| waits[((n as f64 * q) as usize).min(n - 1)];
    Run {
        buckets,
        sell_out,
        first_winner: first_admit.map(|t| t + delay),
        queue: Some((p(0.5), p(0.95), peak_queue, delay)),
    }
}

/// The plan for `inputs` under `calibration`. `inputs` must have passed [`Inputs::check`].
pub fn plan(inputs: &Inputs, calibration: &Calibration) -> Plan {
    let i = inputs;
    let c = calibration;
    let variants = f64::from(i.variants);
    let (v, s) = (i.visitors as f64 / variants, i.stock as f64 / variants);
    let mut run = match (i.admit_per_second, bounded::rates(i, c)) {
        (None, None) => direct(i, c, v, s),
        (None, Some(mu)) => bounded::direct(i, c, v, s, mu),
        (Some(r), _) => queued(i, v, s, r),
    };
    let util = i.target_utilisation;
    // Edge cores, from the edge's own requests (every variant).
    let edge_cores = |b: &Bucket| {
        variants
            * (b.status / c.edge_status_requests_per_core_second
                + b.polls / c.edge_polls_per_core_second
                + b.joins / c.edge_joins_per_core_second
                + b.edge_sold_out / c.edge_sold_out_answers_per_core_second
                + b.forwarded / c.edge_claims_forwarded_per_core_second)
            / util
    };
    let edge_cores_needed = run.buckets.iter().map(edge_cores).fold(0.0, f64::max);
    let isolates = i
        .edge_isolates
        .unwrap_or_else(|| edge_cores_needed.ceil().max(1.0) as u64);
    let iso = isolates as f64;
    for b in &mut run.buckets {
        b.join_reports = b.joins.min(iso);
        b.reports = b.polls.min(iso);
        b.status_fetches = b.edge_requests().min(iso / i.status_ttl_seconds);
    }
    let origin_us = |b: &Bucket| {
        b.winners * c.origin_core_us_per_winner
            + b.origin_sold_out * c.origin_core_us_per_sold_out
            + b.other * c.origin_core_us_per_other_claim_answer
            + b.join_reports * c.origin_core_us_per_join_report
            + b.joins * c.origin_core_us_per_reported_ticket
            + b.reports * c.origin_core_us_per_presence_report
            + b.polls * c.origin_core_us_per_presence_ticket
            + b.status_fetches * c.origin_core_us_per_status_fetch
    };
    let queued_claim_ops = if i.admit_per_second.is_some() {
        c.redis_ops_per_admitted_claim
    } else {
        0.0
    };
    let redis_ops = |b: &Bucket| {
        b.winners * (c.redis_ops_per_winner + queued_claim_ops)
            + b.other * c.redis_ops_per_other_claim_answer
            + b.join_reports * c.redis_ops_per_join_report
            + b.reports * c.redis_ops_per_presence_report
            + b.waiting_room_live * c.redis_ops_per_second_per_waiting_room
    };
    let redis_us = |b: &Bucket| {
        redis_ops(b) * c.redis_core_us_per_op
            + b.joins * c.redis_core_us_per_reported_ticket
            + b.polls * c.redis_core_us_per_presence_ticket
    };
    // One campaign's queue lives in its slot `{c}`: per variant, not summed.
    let queue_slot_us = |b: &Bucket| {
        (b.join_reports * c.redis_ops_per_join_report
            + b.reports * c.redis_ops_per_presence_report
            + b.waiting_room_live * c.redis_ops_per_second_per_waiting_room)
            * c.redis_core_us_per_op
            + b.joins * c.redis_core_us_per_reported_ticket
            + b.polls * c.redis_core_us_per_presence_ticket
    };
    let queue_slot_cores = run
        .buckets
        .iter()
        .map(|b| queue_slot_us(b) / 1e6)
        .fold(0.0, f64::max);
    let rate = |get: &dyn Fn(&Bucket) -> f64| Rate {
        peak_per_second: variants * run.buckets.iter().map(get).fold(0.0, f64::max),
        total: variants * run.buckets.iter().map(get).sum::<f64>(),
    };
    let origin_cores = rate(&|b| origin_us(b) / 1e6).peak_per_second;
    let origins_needed = (origin_cores / (i.cores_per_origin * util)).ceil().max(1.0) as u64;
    let claims = rate(&|b| b.winners);
    let per_commit =
        (claims.peak_per_second / origins_needed as f64 * c.postgres_commit_latency_ms / 1000.0)
            .clamp(1.0, f64::from(c.commit_batch_max));
    let commits = Rate {
        peak_per_second: claims.peak_per_second / per_commit,
        total: claims.total / per_commit,
    };
    let winners_total = claims.total;
    let joiners = if i.admit_per_second.is_some() {
        i.visitors as f64
    } else {
        0.0
    };
    let per_queued = c.redis_bytes_per_queued_visitor + c.redis_bytes_per_present_ticket;
    let per_winner = c.redis_bytes_per_winner + c.redis_bytes_per_key_stamp;
    let bytes =
        variants * c.redis_bytes_per_campaign + winners_total * per_winner + joiners * per_queued;
    let hold = if i.kind == Kind::Sale {
        i.hold_seconds
    } else {
        0.0
    };
    let second_units = if i.kind == Kind::Sale && hold > 0.0 && run.sell_out.is_some() {
        (1.0 - i.paid_share) * i.stock as f64
    } else {
        0.0
    };
    let wave_from = (second_units > 0.0)
        .then(|| run.first_winner.map(|t| t + hold))
        .flatten();
    let second_sell_out = match (second_units > 0.0, run.sell_out) {
        (true, Some(t)) => match &run.queue {
            Some((_, _, _, delay)) if i.visitors as f64 >= i.stock as f64 + second_units => {
                Some(t + hold + delay)
            }
            None if i.arrival_seconds > t + hold => Some(t + hold),
            _ => None,
        },
        _ => None,
    };
    Plan {
        inputs: i.clone(),
        edge: EdgePlan {
            status: rate(&|b| b.status),
            joins: rate(&|b| b.joins),
            polls: rate(&|b| b.polls),
            sold_out_answers: rate(&|b| b.edge_sold_out),
            claims_forwarded: rate(&|b| b.forwarded),
            cores_needed: edge_cores_needed,
            isolates,
        },
        origin: OriginPlan {
            winners: claims,
            sold_out_answers: rate(&|b| b.origin_sold_out),
            other_claim_answers: rate(&|b| b.other),
            claims: rate(&|b| b.winners + b.origin_sold_out + b.other),
            join_reports: rate(&|b| b.join_reports),
            presence_reports: rate(&|b| b.reports),
            status_fetches: rate(&|b| b.status_fetches),
            peak_busy_cores: origin_cores,
            origins_needed,
        },
        redis: RedisPlan {
            ops: rate(&redis_ops),
            peak_busy_cores: rate(&|b| redis_us(b) / 1e6).peak_per_second,
            peak_queue_slot_busy_cores: queue_slot_cores,
            bytes_per_queued_visitor: per_queued,
            bytes_per_winner: per_winner,
            bytes_per_campaign: c.redis_bytes_per_campaign,
            bytes_during_sale: bytes,
            bytes_after_sale: bytes,
            kept_after_end_seconds: hold + i.ended_keys_grace_seconds,
            bytes_after_grace: 0.0,
        },
        postgres: PostgresPlan {
            claims,
            commits,
            claims_per_commit_at_peak: per_commit,
            peak_busy_cores: claims.peak_per_second * c.postgres_core_us_per_claim / 1e6,
        },
        times: Times {
            sell_out_seconds: run.sell_out,
            second_wave_units: second_units,
            second_wave_from_seconds: wave_from,
            second_sell_out_seconds: second_sell_out,
            modelled_seconds: run.buckets.len() as f64,
        },
        queue: run.queue.map(|(p50, p95, peak, delay)| QueuePlan {
            wait_p50_seconds: p50,
            wait_p95_seconds: p95,
            peak_length: peak * variants,
            claim_delay_seconds: delay,
        }),
        calibration_source: c.source.clone(),
    }
}

#[path = "bounded.rs"]
mod bounded;

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
