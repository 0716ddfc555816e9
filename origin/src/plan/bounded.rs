//! The sale without a waiting room on a fixed capacity (`--edge-cores`, `--origins`,
//! `--clients`): the taps queue, first come first served, for what the edge, the origins and a
//! closed-loop generator can answer, instead of all being answered in the second they arrive.
//! Notation of [`super`]; `μ` a rate of taps answered per second, per variant (the fixed
//! capacity is shared evenly by the variants' campaigns), a bound not given being unbounded:
//! - before the sell-out every tap is forwarded: `μ_pre = min(E × c.edge_claims_forwarded_per_core_second,
//!   O × cores × 10⁶ / u_pre, N / rtt)` for `E` edge cores, `O` origins, `N` clients and
//!   `u_pre = (c.origin_core_us_per_winner + (k − 1) × c.origin_core_us_per_other_claim_answer) / k`
//!   the origin's CPU per tap, `k` the tries per visitor (one tap in `k` is a winner's);
//! - the `P = T × S / V` taps arriving before the S-th first tap are the ones forwarded (all
//!   `T` when `V < S`); the sell-out is when the queue has answered the `P`-th;
//! - for a round trip after it, taps are still forwarded (at `μ_pre`) and the origin answers
//!   `sold_out`; then the edge answers at `μ_post = E × c.edge_sold_out_answers_per_core_second`
//!   (a share `c.edge_forward_share_after_sold_out` still forwarded);
//! - a fluid queue in steps of `dt` = horizon / 400,000 within 1 ms..1 s.
//!
//! With every bound above the crowd's rate it gives [`super::direct`]'s figures.

use super::{bucket, cdf, Run};
use crate::plan::{Calibration, Inputs};

/// `(μ_pre, μ_post)` of one variant's campaign, or `None` when no capacity is fixed.
pub fn rates(i: &Inputs, c: &Calibration) -> Option<(f64, f64)> {
    if i.edge_cores.is_none() && i.origins.is_none() && i.clients.is_none() {
        return None;
    }
    let variants = f64::from(i.variants);
    let k = i.tries_per_visitor;
    let u_pre =
        (c.origin_core_us_per_winner + (k - 1.0) * c.origin_core_us_per_other_claim_answer) / k;
    let rtt = c.edge_origin_round_trip_ms / 1000.0;
    let mut pre = f64::INFINITY;
    let mut post = f64::INFINITY;
    if let Some(e) = i.edge_cores {
        pre = pre.min(e * c.edge_claims_forwarded_per_core_second / variants);
        post = e * c.edge_sold_out_answers_per_core_second / variants;
    }
    if let Some(o) = i.origins {
        let cores = o as f64 * i.cores_per_origin;
        if u_pre > 0.0 {
            pre = pre.min(cores * 1e6 / u_pre / variants);
        }
    }
    if let Some(n) = i.clients {
        pre = pre.min(n as f64 / rtt / variants);
    }
    Some((pre, post))
}

/// One variant's sale (`v` visitors, `s` units) through the queue of [`rates`].
pub fn direct(i: &Inputs, c: &Calibration, v: f64, s: f64, (mu_pre, mu_post): (f64, f64)) -> Run {
    let a = i.arrival_seconds;
    let f = |t: f64| cdf(i.arrival, a, t);
    let taps = v * i.tries_per_visitor;
    let sells_out = v >= s;
    let pre_total = if sells_out { taps * s / v } else { taps };
    let win_share = if sells_out {
        s / pre_total
    } else {
        1.0 / i.tries_per_visitor
    };
    let rtt = c.edge_origin_round_trip_ms / 1000.0;
    let share = c.edge_forward_share_after_sold_out;
    let horizon = a + pre_total / mu_pre + rtt + (taps - pre_total) / mu_post + 1.0;
    let dt = (horizon / 400_000.0).clamp(0.001, 1.0);
    let steps = (horizon / dt).ceil() as usize;
    let (mut served, mut sell_out) = (0.0f64, None::<f64>);
    let mut buckets = Vec::new();
    for step in 0..steps {
        let (t0, t1) = (step as f64 * dt, (step as f64 + 1.0) * dt);
        let arrived = taps * f(t1);
        let b = bucket(&mut buckets, t0);
        b.status += i.status_reads_per_visitor * v * (f(t1) - f(t0));
        // Seconds of answering left in this step.
        let mut left = dt;
        if served < pre_total {
            let n = (arrived - served)
                .min(pre_total - served)
                .min(left * mu_pre)
                .max(0.0);
            served += n;
            left -= n / mu_pre;
            b.winners += n * win_share;
            b.other += n * (1.0 - win_share);
            b.forwarded += n;
            if sells_out && served >= pre_total * (1.0 - 1e-12) {
                sell_out = Some(t1 - left);
            }
        }
        if let Some(t) = sell_out {
            let waiting = (arrived - served).max(0.0);
            if t0 < t + rtt {
                let n = waiting.min(left * mu_pre);
                served += n;
                b.origin_sold_out += n;
                b.forwarded += n;
            } else {
                let n = waiting.min(left * mu_post);
                served += n;
                b.origin_sold_out += share * n;
                b.forwarded += share * n;
                b.edge_sold_out += (1.0 - share) * n;
            }
        }
        if t1 >= a && served >= taps * (1.0 - 1e-12) {
            break;
        }
    }
    Run {
        buckets,
        sell_out,
        first_winner: Some(0.0),
        queue: None,
    }
}
