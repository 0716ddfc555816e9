//! The schedule of a stampede: who taps when, with which idempotency key.
//!
//! Shape (a flash sale's stampede, scaled to one machine):
//! - every customer who takes part taps once ("first" taps); their times follow a front-loaded
//!   arrival curve over the window (a truncated exponential, see [`arrival_offset`]);
//! - a share of them double-tap 30–400 ms later: some resend the same request (same
//!   idempotency key: a retried tap), some open a second tab (a new key);
//! - the rest of the try budget are "repeat" tries: customers who already tapped press Buy
//!   again later in the window, each time with a new key.
//!
//! With `each` set (`--tries-per-customer N`) the shape is simpler: every customer sends
//! exactly `N` tries, each with a new key, at `N` independent times along the same curve (the
//! earliest is her first tap, the others repeat taps); no double taps.
//!
//! Everything is decided by a seeded RNG, so the same flags give the same plan.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// What kind of tap a try is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum TapKind {
    /// The customer's first tap.
    First,
    /// A second tap with the same idempotency key as the first (the app resent it).
    DoubleSameKey,
    /// A second tap with a new idempotency key (a second tab).
    DoubleNewKey,
    /// A later tap with a new key.
    Repeat,
}

impl TapKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TapKind::First => "first",
            TapKind::DoubleSameKey => "double_same_key",
            TapKind::DoubleNewKey => "double_new_key",
            TapKind::Repeat => "repeat",
        }
    }
}

/// One planned try.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlannedTry {
    /// When it is due, in microseconds after the start of the stampede.
    pub at_us: u64,
    /// Customer index, `0..customers`.
    pub customer: u32,
    /// Idempotency-key index (unique per key; a same-key double tap repeats its first's).
    pub key: u32,
    pub kind: TapKind,
}

/// Inputs of [`build`].
#[derive(Debug, Clone, Copy)]
pub struct PlanParams {
    pub customers: u32,
    pub tries: u32,
    /// Length of the arrival window, in microseconds.
    pub window_us: u64,
    /// Share of customers who double-tap (0..=1).
    pub double_tap: f64,
    /// Share of the double taps that reuse the first tap's key (0..=1).
    pub same_key: f64,
    /// Tries per customer: when above 0, every one of `customers` sends exactly this many
    /// (`tries`, `double_tap` and `same_key` are then unused; see [`build_each`]).
    pub each: u32,
    pub seed: u64,
}

/// A plan: the tries sorted by due time, plus counts for the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Plan {
    #[serde(skip)]
    pub tries: Vec<PlannedTry>,
    /// Customers with at least one planned try.
    pub customers: u32,
    pub first: u32,
    pub double_same_key: u32,
    pub double_new_key: u32,
    pub repeat: u32,
    /// Distinct idempotency keys.
    pub keys: u32,
}

/// Mean of the arrival curve as a share of the window: a quarter of the window, so about a
/// third of the first taps land in the first tenth of it and 98 % within the window.
pub const CURVE_MEAN_SHARE: f64 = 0.25;

/// Maps a uniform `u` in [0, 1) to an offset in [0, window) along a truncated exponential
/// with mean `CURVE_MEAN_SHARE * window`: front-loaded, most taps in the first seconds.
pub fn arrival_offset(u: f64, window_us: u64) -> u64 {
    let w = window_us as f64;
    if w <= 0.0 {
        return 0;
    }
    let tau = CURVE_MEAN_SHARE * w;
    let mass = 1.0 - (-w / tau).exp();
    let t = -tau * (1.0 - u.clamp(0.0, 1.0) * mass).ln();
    (t.max(0.0) as u64).min(window_us.saturating_sub(1))
}

/// Builds the plan. Total tries = `p.tries`; customers taking part = `min(customers, tries)`.
/// With `p.each` above 0: [`build_each`].
pub fn build(p: &PlanParams) -> Plan {
    if p.each > 0 {
        return build_each(p);
    }
    let mut rng = StdRng::seed_from_u64(p.seed);
    let participants = p.customers.min(p.tries);
    let mut budget = p.tries - participants;
    let mut tries = Vec::with_capacity(p.tries as usize);
    let mut next_key = 0u32;
    let mut plan = Plan {
        customers: participants,
        first: participants,
        ..Plan::default()
    };

    // First taps, and the first-tap time of each participant for the later taps.
    let mut first_at = Vec::with_capacity(participants as usize);
    for c in 0..participants {
        let at = arrival_offset(rng.random::<f64>(), p.window_us);
        first_at.push(at);
        tries.push(PlannedTry {
            at_us: at,
            customer: c,
            key: next_key,
            kind: TapKind::First,
        });
        next_key += 1;
    }

    // Double taps, 30–400 ms after the first.
    let double_p = p.double_tap.clamp(0.0, 1.0);
    let same_p = p.same_key.clamp(0.0, 1.0);
    for c in 0..participants {
        if budget == 0 {
            break;
        }
        if !rng.random_bool(double_p) {
            continue;
        }
        budget -= 1;
        let at = first_at[c as usize] + rng.random_range(30_000..400_000);
        let (key, kind) = if rng.random_bool(same_p) {
            plan.double_same_key += 1;
            (tries[c as usize].key, TapKind::DoubleSameKey)
        } else {
            plan.double_new_key += 1;
            next_key += 1;
            (next_key - 1, TapKind::DoubleNewKey)
        };
        tries.push(PlannedTry {
            at_us: at,
            customer: c,
            key,
            kind,
        });
    }

    // Repeat tries: a customer who already tapped taps again later in the window.
    if participants > 0 {
        for _ in 0..budget {
            let c = rng.random_range(0..participants);
            let first = first_at[c as usize];
            let rest = p.window_us.saturating_sub(first);
            let at = first + 50_000 + (rng.random::<f64>() * rest as f64) as u64;
            tries.push(PlannedTry {
                at_us: at,
                customer: c,
                key: next_key,
                kind: TapKind::Repeat,
            });
            next_key += 1;
            plan.repeat += 1;
        }
    }

    tries.sort_by_key(|t| (t.at_us, t.customer, t.key));
    plan.keys = next_key;
    plan.tries = tries;
    plan
}

/// The plan of `p.each` tries per customer: `customers × each` tries, every one with its own
/// key (so with variants each names its own variant, picked at random from the key), at
/// independent times along the arrival curve over the window; a customer's earliest is her
/// `First`, the others `Repeat`.
pub fn build_each(p: &PlanParams) -> Plan {
    let mut rng = StdRng::seed_from_u64(p.seed);
    let mut tries = Vec::with_capacity(p.customers as usize * p.each as usize);
    for c in 0..p.customers {
        let mut at: Vec<u64> = (0..p.each)
            .map(|_| arrival_offset(rng.random::<f64>(), p.window_us))
            .collect();
        at.sort_unstable();
        for (i, at_us) in at.into_iter().enumerate() {
            tries.push(PlannedTry {
                at_us,
                customer: c,
                key: c * p.each + i as u32,
                kind: if i == 0 {
                    TapKind::First
                } else {
                    TapKind::Repeat
                },
            });
        }
    }
    tries.sort_by_key(|t| (t.at_us, t.customer, t.key));
    Plan {
        customers: p.customers,
        first: p.customers,
        repeat: p.customers * (p.each - 1),
        keys: p.customers * p.each,
        tries,
        ..Plan::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    fn params(customers: u32, tries: u32) -> PlanParams {
        PlanParams {
            customers,
            tries,
            window_us: 10_000_000,
            double_tap: 0.3,
            same_key: 0.5,
            each: 0,
            seed: 7,
        }
    }

    #[test]
    fn each_customer_sends_exactly_its_tries_with_new_keys() {
        let plan = build(&PlanParams {
            each: 3,
            ..params(3_000, 123)
        });
        assert_eq!(plan.tries.len(), 9_000);
        assert_eq!(
            (plan.customers, plan.first, plan.repeat),
            (3_000, 3_000, 6_000)
        );
        assert_eq!(plan.double_same_key + plan.double_new_key, 0);
        let mut per: HashMap<u32, Vec<&PlannedTry>> = HashMap::new();
        for t in &plan.tries {
            per.entry(t.customer).or_default().push(t);
        }
        assert_eq!(per.len(), 3_000);
        assert!(per.values().all(|ts| ts.len() == 3
            && ts[0].kind == TapKind::First
            && ts[1..].iter().all(|t| t.kind == TapKind::Repeat)));
        let keys: HashSet<u32> = plan.tries.iter().map(|t| t.key).collect();
        assert_eq!(keys.len() as u32, plan.keys);
        assert_eq!(plan.keys, 9_000);
        assert!(plan.tries.windows(2).all(|w| w[0].at_us <= w[1].at_us));
        assert!(plan.tries.iter().all(|t| t.at_us < 10_000_000));
    }

    #[test]
    fn arrival_curve_is_front_loaded_and_bounded() {
        let w = 10_000_000;
        assert_eq!(arrival_offset(0.0, w), 0);
        assert!(arrival_offset(0.999_999, w) < w);
        // Median of a truncated exponential with mean w/4: about 0.17 w.
        let median = arrival_offset(0.5, w) as f64 / w as f64;
        assert!((0.15..0.20).contains(&median), "median {median}");
        // Monotone.
        let mut last = 0;
        for i in 0..1000 {
            let t = arrival_offset(i as f64 / 1000.0, w);
            assert!(t >= last);
            last = t;
        }
        assert_eq!(arrival_offset(0.5, 0), 0);
    }

    #[test]
    fn default_shape_counts() {
        let plan = build(&params(100_000, 200_000));
        assert_eq!(plan.tries.len(), 200_000);
        assert_eq!(plan.customers, 100_000);
        assert_eq!(plan.first, 100_000);
        let doubles = plan.double_same_key + plan.double_new_key;
        assert!((28_500..31_500).contains(&doubles), "doubles {doubles}");
        assert_eq!(plan.first + doubles + plan.repeat, 200_000);
        let distinct: HashSet<u32> = plan.tries.iter().map(|t| t.customer).collect();
        assert_eq!(distinct.len(), 100_000);
        // Sorted by time, and front-loaded: over half the tries in the first 30 % of the window.
        assert!(plan.tries.windows(2).all(|w| w[0].at_us <= w[1].at_us));
        let early = plan.tries.iter().filter(|t| t.at_us < 3_000_000).count();
        assert!(early > 100_000, "early {early}");
    }

    #[test]
    fn keys_are_shared_only_by_same_key_double_taps() {
        let plan = build(&params(2_000, 5_000));
        let mut by_key: HashMap<u32, Vec<&PlannedTry>> = HashMap::new();
        for t in &plan.tries {
            by_key.entry(t.key).or_default().push(t);
        }
        assert_eq!(by_key.len() as u32, plan.keys);
        for group in by_key.values() {
            assert!(group.len() <= 2);
            if group.len() == 2 {
                assert_eq!(group[0].customer, group[1].customer);
                let kinds: HashSet<TapKind> = group.iter().map(|t| t.kind).collect();
                assert!(kinds.contains(&TapKind::First) && kinds.contains(&TapKind::DoubleSameKey));
            }
        }
        // Every later tap comes after that customer's first.
        let mut first: HashMap<u32, u64> = HashMap::new();
        for t in plan.tries.iter().filter(|t| t.kind == TapKind::First) {
            first.insert(t.customer, t.at_us);
        }
        for t in plan.tries.iter().filter(|t| t.kind != TapKind::First) {
            assert!(t.at_us > first[&t.customer]);
        }
    }

    #[test]
    fn fewer_tries_than_customers_and_determinism() {
        let plan = build(&params(1_000, 300));
        assert_eq!(plan.tries.len(), 300);
        assert_eq!(plan.customers, 300);
        assert_eq!(plan.repeat + plan.double_new_key + plan.double_same_key, 0);
        assert_eq!(
            build(&params(1_000, 3_000)).tries,
            build(&params(1_000, 3_000)).tries
        );
        assert_ne!(
            build(&params(1_000, 3_000)).tries,
            build(&PlanParams {
                seed: 8,
                ..params(1_000, 3_000)
            })
            .tries
        );
        assert!(build(&params(0, 10)).tries.is_empty());
    }
}
