//! The rate limits that hold across isolates: the Workers rate-limit binding, asked only for
//! the requests that cost something (a join that is about to get a ticket, a claim about to be
//! forwarded to the origin), after the isolate-local buckets of [`crate::limit`] let them
//! through.
//!
//! The binding counts a key's requests over a period of 10 or 60 s, shared by the isolates of a
//! Cloudflare location (eventually consistent). The edge uses 10 s ([`PERIOD_S`]): each budget
//! is its per-second rate × 10 per 10 s, the limit being fixed in wrangler.toml's
//! `[[ratelimits]]` (the binding takes no limit per call). The local buckets stay first: they
//! keep the one-second burst no binding period can express, and they answer without leaving
//! the isolate. Without a binding, a budget is the local bucket's alone; a binding that throws
//! leaves the local verdict (counted, and logged). See docs/EDGE.md.

use crate::config::Limits;
use crate::decide::Answer;

/// The period of every budget, s (wrangler.toml: `simple = { limit = …, period = 10 }`).
pub const PERIOD_S: u32 = 10;

/// A budget held across isolates, each the binding of its own name and namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Joins answered with a new ticket, per customer: `FLASHGATE_JOIN_LIMITER`.
    Joins,
    /// Claims forwarded to the origin on a campaign with a waiting room, per customer:
    /// `FLASHGATE_CLAIM_LIMITER`.
    Claims,
    /// Both, per client IP (the key of [`flashgate_shared::ip_limit::limit_key_of`]):
    /// `FLASHGATE_IP_LIMITER`.
    Ip,
}

impl Budget {
    /// Every budget, in the order of [`Counts`].
    pub const ALL: [Budget; 3] = [Budget::Joins, Budget::Claims, Budget::Ip];

    /// The name of its binding (wrangler.toml `[[ratelimits]] name`).
    pub fn binding(self) -> &'static str {
        match self {
            Budget::Joins => "FLASHGATE_JOIN_LIMITER",
            Budget::Claims => "FLASHGATE_CLAIM_LIMITER",
            Budget::Ip => "FLASHGATE_IP_LIMITER",
        }
    }

    /// Its per-second rate in `limits`; 0 turns the budget off, as it turns off the local
    /// bucket of the same limit.
    pub fn per_s(self, limits: &Limits) -> u32 {
        match self {
            Budget::Joins => limits.joins_per_s,
            Budget::Claims => limits.claims_per_s,
            Budget::Ip => limits.ip_per_s,
        }
    }

    /// The `limit` its binding should declare: the per-second rate × [`PERIOD_S`].
    pub fn limit_per_period(self, limits: &Limits) -> u64 {
        u64::from(self.per_s(limits)) * u64::from(PERIOD_S)
    }

    fn label(self) -> &'static str {
        match self {
            Budget::Joins => "joins",
            Budget::Claims => "claims",
            Budget::Ip => "ip",
        }
    }
}

/// What the binding of one budget said about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not asked: no binding of that name, the budget is off, or no key (an unknown IP).
    Off,
    /// Within the budget.
    Passed,
    /// Over the budget.
    Refused,
    /// The binding threw (or is not a rate-limit binding): the local verdict stands.
    Failed,
}

impl Outcome {
    const COUNTED: [Outcome; 3] = [Outcome::Passed, Outcome::Refused, Outcome::Failed];

    fn label(self) -> &'static str {
        match self {
            Outcome::Off => "off",
            Outcome::Passed => "passed",
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
        }
    }
}

/// The verdict on a request the local buckets let through, given what its budgets' bindings
/// said: 429 `rate_limited` with `Retry-After` of one period when any refused; through
/// otherwise (a failed binding does not block a customer).
pub fn verdict(outcomes: &[Outcome]) -> Result<(), Answer> {
    if outcomes.contains(&Outcome::Refused) {
        Err(crate::limit::rate_limited(PERIOD_S))
    } else {
        Ok(())
    }
}

/// Whether the `n`th failure of a budget's binding in this isolate is logged: the first and
/// every 100th, so a broken binding shows in the log without flooding it.
pub fn log_failure(n: u64) -> bool {
    n == 1 || n % 100 == 0
}

/// The bindings' outcomes counted per isolate, by budget and outcome (not [`Outcome::Off`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts([[u64; 3]; 3]);

impl Counts {
    /// Counts `outcome` of `budget`; gives the count so far of that pair (0 for
    /// [`Outcome::Off`], which is not counted).
    pub fn add(&mut self, budget: Budget, outcome: Outcome) -> u64 {
        let Some(o) = Outcome::COUNTED.iter().position(|&c| c == outcome) else {
            return 0;
        };
        let b = Budget::ALL.iter().position(|&x| x == budget).unwrap_or(0);
        self.0[b][o] += 1;
        self.0[b][o]
    }

    /// The counts in the Prometheus text format
    /// (`flashgate_edge_shared_limit_total{budget,outcome}`); empty while none was asked.
    pub fn render(&self) -> String {
        if self.0.iter().flatten().all(|&n| n == 0) {
            return String::new();
        }
        let name = "flashgate_edge_shared_limit_total";
        let mut out = format!(
            "# HELP {name} Answers of the rate-limit bindings to this isolate by budget and outcome.\n# TYPE {name} counter\n"
        );
        for (b, budget) in Budget::ALL.iter().enumerate() {
            for (o, outcome) in Outcome::COUNTED.iter().enumerate() {
                out.push_str(&format!(
                    "{name}{{budget=\"{}\",outcome=\"{}\"}} {}\n",
                    budget.label(),
                    outcome.label(),
                    self.0[b][o]
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_of_any_budget_is_a_429_and_a_failure_is_not() {
        use Outcome::*;
        assert_eq!(verdict(&[Passed, Off]), Ok(()));
        assert_eq!(verdict(&[Failed, Failed]), Ok(()));
        assert_eq!(verdict(&[Off, Off]), Ok(()));
        let a = verdict(&[Passed, Refused]).unwrap_err();
        assert_eq!((a.status, a.retry_after_s), (429, Some(10)));
        assert!(a.body.starts_with(r#"{"result":"rate_limited""#));
        assert_eq!(verdict(&[Refused, Failed]).unwrap_err(), a);
    }

    #[test]
    fn budgets_are_the_rates_times_ten_and_off_with_them() {
        let limits = Limits {
            claims_per_s: 5,
            joins_per_s: 2,
            polls_per_s: 2,
            ip_per_s: 0,
            ipv6_prefix: Default::default(),
        };
        let per_period: Vec<u64> = Budget::ALL
            .iter()
            .map(|b| b.limit_per_period(&limits))
            .collect();
        assert_eq!(per_period, vec![20, 50, 0]);
        assert_eq!(Budget::Ip.per_s(&limits), 0);
        assert_eq!(Budget::Joins.binding(), "FLASHGATE_JOIN_LIMITER");
    }

    #[test]
    fn outcomes_are_counted_and_failures_logged_sparingly() {
        let mut c = Counts::default();
        assert_eq!(c.render(), "");
        assert_eq!(c.add(Budget::Ip, Outcome::Off), 0);
        assert_eq!(c.render(), "");
        assert_eq!(c.add(Budget::Joins, Outcome::Passed), 1);
        assert_eq!(c.add(Budget::Joins, Outcome::Passed), 2);
        assert_eq!(c.add(Budget::Ip, Outcome::Failed), 1);
        let text = c.render();
        assert!(text.starts_with("# HELP flashgate_edge_shared_limit_total"));
        assert!(text.contains("{budget=\"joins\",outcome=\"passed\"} 2\n"));
        assert!(text.contains("{budget=\"ip\",outcome=\"failed\"} 1\n"));
        assert!(text.contains("{budget=\"claims\",outcome=\"refused\"} 0\n"));
        let logged: Vec<u64> = (1..=250).filter(|&n| log_failure(n)).collect();
        assert_eq!(logged, vec![1, 100, 200]);
    }
}
