//! Same-run comparisons of legs 4 and 5: rounds of a base leg and a leg with the feature,
//! their order alternated from round to round (base first, then the feature first, …) so that
//! the machine's drift over the run weighs on both alike; each round's ratio and their median.
//! One base leg against one feature leg is at the mercy of whatever else the machine did
//! meanwhile; the median of several rounds is not.

use super::measure::Leg;

/// Runs `rounds` rounds of `base` and `with` (each called with the round's index from 0),
/// printing each leg as it ends and each round's ratio `with / base`. Returns the ratios in
/// round order.
pub async fn alternate(
    rounds: usize,
    mut base: impl AsyncFnMut(usize) -> Leg,
    mut with: impl AsyncFnMut(usize) -> Leg,
) -> Vec<f64> {
    let mut ratios = Vec::with_capacity(rounds);
    for r in 0..rounds.max(1) {
        let (b, w) = if r % 2 == 0 {
            let b = base(r).await;
            b.print();
            let w = with(r).await;
            w.print();
            (b, w)
        } else {
            let w = with(r).await;
            w.print();
            let b = base(r).await;
            b.print();
            (b, w)
        };
        let ratio = w.rate() / b.rate();
        println!("  round {}: {ratio:.2}x", r + 1);
        ratios.push(ratio);
    }
    ratios
}

/// The median of `ratios` (the mean of the middle two when their number is even); 0 when
/// there is none.
pub fn median(ratios: &[f64]) -> f64 {
    let mut v = ratios.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `ratios` as the bench prints them: `0.91, 0.88, …`.
pub fn listed(ratios: &[f64]) -> String {
    ratios
        .iter()
        .map(|r| format!("{r:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}
