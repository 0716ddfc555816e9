//! The per-variant part of a `--variants` run's report: for each variant, its tries, its
//! demand, when it sold out and the edge's share of the tries sent after that; the units
//! (stock, active claims, remaining) are filled in from PostgreSQL by the read-back.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::{ms, Answerer, TryOutcome};

/// One variant's line of the report (JSON: one object of `variants`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VariantLine {
    pub id: String,
    /// Units, active claims and remaining of the variant, read back from PostgreSQL (`None`
    /// without the read-back).
    pub stock: Option<i64>,
    pub claims: Option<i64>,
    pub remaining: Option<i64>,
    /// Tries sent naming the variant.
    pub tries: u64,
    /// Customers who asked for it: a try of hers naming it was sent and not answered
    /// `already_claimed` (that answer goes to a customer who holds a claim already, of this
    /// or another variant). Its claims must be min(stock, demand).
    pub demand: u64,
    /// Customers with a 201 naming it.
    pub winners: u64,
    /// Its first `sold_out` answer, ms after the start.
    pub sold_out_ms: Option<f64>,
    /// Tries naming it first sent after `sold_out_ms` by customers who won nothing in the run,
    /// and how many of them the edge answered (a winner's taps go to the origin by design, as
    /// in the campaign's figure).
    pub tries_after_sold_out: u64,
    pub edge_answered_after_sold_out: u64,
    pub edge_share_after_sold_out: Option<f64>,
}

/// The lines of the variants `ids` (index `i` is the outcomes' `variant: Some(i)`) from the
/// outcomes; tries without a variant, or naming an index past `ids`, count nowhere.
pub fn compute(ids: &[String], outcomes: &[TryOutcome]) -> Vec<VariantLine> {
    let mut lines: Vec<VariantLine> = ids
        .iter()
        .map(|id| VariantLine {
            id: id.clone(),
            stock: None,
            claims: None,
            remaining: None,
            tries: 0,
            demand: 0,
            winners: 0,
            sold_out_ms: None,
            tries_after_sold_out: 0,
            edge_answered_after_sold_out: 0,
            edge_share_after_sold_out: None,
        })
        .collect();
    let of = |o: &TryOutcome| o.variant.map(|v| v as usize).filter(|&v| v < ids.len());
    let mut demand: Vec<HashSet<u32>> = vec![HashSet::new(); ids.len()];
    let mut winners: Vec<HashSet<u32>> = vec![HashSet::new(); ids.len()];
    let mut sold_out: HashMap<usize, u64> = HashMap::new();
    let mut any_winner = HashSet::new();
    for o in outcomes.iter().filter(|o| o.sent_us.is_some()) {
        let Some(v) = of(o) else { continue };
        lines[v].tries += 1;
        if o.result != "already_claimed" {
            demand[v].insert(o.customer);
        }
        match (o.result.as_str(), o.answered_us) {
            ("claimed", _) => {
                winners[v].insert(o.customer);
                any_winner.insert(o.customer);
            }
            ("sold_out", Some(at)) => {
                let first = sold_out.entry(v).or_insert(at);
                *first = (*first).min(at);
            }
            _ => {}
        }
    }
    for o in outcomes {
        let (Some(v), Some(sent)) = (of(o), o.sent_us) else {
            continue;
        };
        let after = sold_out.get(&v).is_some_and(|&cut| sent > cut);
        if after && !any_winner.contains(&o.customer) {
            lines[v].tries_after_sold_out += 1;
            lines[v].edge_answered_after_sold_out += u64::from(o.answered_by == Answerer::Edge);
        }
    }
    for (v, line) in lines.iter_mut().enumerate() {
        line.demand = demand[v].len() as u64;
        line.winners = winners[v].len() as u64;
        line.sold_out_ms = sold_out.get(&v).map(|&us| ms(us));
        line.edge_share_after_sold_out = (line.tries_after_sold_out > 0)
            .then(|| line.edge_answered_after_sold_out as f64 / line.tries_after_sold_out as f64);
    }
    lines
}

/// The variants' lines as a table for the text report.
pub fn render(lines: &[VariantLine], s: &mut String) {
    use std::fmt::Write;
    let n = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    let _ = writeln!(
        s,
        "variants    {:<10}{:>8}{:>8}{:>10}{:>8}{:>8}{:>14}{:>18}{:>10}",
        "id",
        "stock",
        "claims",
        "remaining",
        "demand",
        "tries",
        "sold out at",
        "after: edge/tries",
        "share"
    );
    for l in lines {
        let _ = writeln!(
            s,
            "            {:<10}{:>8}{:>8}{:>10}{:>8}{:>8}{:>14}{:>18}{:>10}",
            l.id,
            n(l.stock),
            n(l.claims),
            n(l.remaining),
            l.demand,
            l.tries,
            l.sold_out_ms
                .map_or("-".to_string(), |v| format!("{v:.1} ms")),
            format!(
                "{}/{}",
                l.edge_answered_after_sold_out, l.tries_after_sold_out
            ),
            l.edge_share_after_sold_out
                .map_or("-".to_string(), |v| format!("{:.2} %", v * 100.0)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::outcome;
    use super::*;

    fn at(v: u32, customer: u32, sent_ms: u64, result: &str, who: Answerer) -> TryOutcome {
        TryOutcome {
            variant: Some(v),
            ..outcome(customer, sent_ms, result, who)
        }
    }

    #[test]
    fn each_variant_has_its_own_sell_out_demand_and_edge_share() {
        let ids = vec!["v0".to_string(), "v1".to_string()];
        let outs = vec![
            at(0, 1, 0, "claimed", Answerer::Origin),
            at(1, 2, 1, "claimed", Answerer::Origin),
            at(0, 3, 2, "sold_out", Answerer::Origin), // v0 sold out at 4.5 ms
            at(1, 1, 3, "already_claimed", Answerer::Origin), // customer 1 holds v0
            at(1, 4, 5, "claimed", Answerer::Origin),  // v1 still sells
            at(0, 5, 10, "sold_out", Answerer::Edge),
            at(0, 6, 11, "sold_out", Answerer::Edge),
            at(0, 7, 12, "sold_out", Answerer::Origin),
            at(0, 2, 13, "already_claimed", Answerer::Origin), // a winner: apart
            at(1, 8, 20, "sold_out", Answerer::Origin),        // v1 sold out at 22.5 ms
            at(1, 9, 30, "sold_out", Answerer::Edge),
            outcome(10, 40, "sold_out", Answerer::Edge), // no variant: counted nowhere
        ];
        let l = compute(&ids, &outs);
        assert_eq!(l[0].tries, 6);
        assert_eq!(l[0].demand, 5, "customers 1, 3, 5, 6, 7");
        assert_eq!(l[0].winners, 1);
        assert_eq!(l[0].sold_out_ms, Some(4.5));
        assert_eq!(
            (l[0].tries_after_sold_out, l[0].edge_answered_after_sold_out),
            (3, 2)
        );
        assert_eq!(l[0].edge_share_after_sold_out, Some(2.0 / 3.0));
        assert_eq!(l[1].tries, 5);
        assert_eq!(l[1].demand, 4, "customers 2, 4, 8, 9 (1 held v0)");
        assert_eq!(l[1].winners, 2);
        assert_eq!(l[1].sold_out_ms, Some(22.5));
        assert_eq!(l[1].edge_share_after_sold_out, Some(1.0));
        assert_eq!(l[1].stock, None);
        let mut s = String::new();
        render(&l, &mut s);
        assert!(s.contains("66.67 %") && s.contains("22.5 ms"), "{s}");
    }

    #[test]
    fn a_variant_that_never_sold_out_has_no_share() {
        let ids = vec!["v0".to_string()];
        let l = compute(&ids, &[at(0, 1, 0, "claimed", Answerer::Origin)]);
        assert_eq!(
            (l[0].sold_out_ms, l[0].edge_share_after_sold_out),
            (None, None)
        );
        assert_eq!((l[0].demand, l[0].winners), (1, 1));
    }
}
