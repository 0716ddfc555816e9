//! The checker's results: one row per check and campaign (operations checked, failures, the
//! first offending operations), the false-sold-out windows, a text table and the JSON form.

use serde::Serialize;

use super::sold_out::Window;

/// Offending operations kept per check (the count covers them all).
pub const EXAMPLES_MAX: usize = 5;

/// The result of one check on one campaign.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CheckResult {
    /// The check's name ([`super::check::CHECKS`]).
    pub name: &'static str,
    /// Operations (or claims, or customers, as the check says) examined.
    pub checked: u64,
    /// How many of them failed.
    pub failed: u64,
    /// The first [`EXAMPLES_MAX`] failures, one line each.
    pub examples: Vec<String>,
}

impl CheckResult {
    /// A check with nothing examined yet.
    pub fn new(name: &'static str) -> Self {
        CheckResult {
            name,
            checked: 0,
            failed: 0,
            examples: Vec::new(),
        }
    }

    /// Counts one item examined; a failure when `why` is `Some`.
    pub fn count(&mut self, why: Option<String>) {
        self.checked += 1;
        if let Some(why) = why {
            self.fail(why);
        }
    }

    /// Counts one failure (of an item already counted as checked).
    pub fn fail(&mut self, why: String) {
        self.failed += 1;
        if self.examples.len() < EXAMPLES_MAX {
            self.examples.push(why);
        }
    }

    /// True when nothing failed.
    pub fn passed(&self) -> bool {
        self.failed == 0
    }
}

/// Every check on one campaign.
#[derive(Debug, Clone, Serialize)]
pub struct CampaignOutcome {
    pub campaign: String,
    pub stock: i64,
    /// Active claims at the end (units taken).
    pub taken: i64,
    /// Claims of every status at the end.
    pub claims: u64,
    /// Operations of the history on this campaign.
    pub operations: u64,
    pub checks: Vec<CheckResult>,
    /// Windows in which `sold_out` was answered while units stayed unsold to the end.
    pub sold_out_windows: Vec<Window>,
    /// The longest of them, ms (0 when none).
    pub longest_sold_out_window_ms: i64,
}

/// The checker's whole answer.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The false-sold-out bound used, ms (`--sold-out-grace-ms`).
    pub sold_out_grace_ms: u64,
    /// True when every check passed on every campaign.
    pub passed: bool,
    pub campaigns: Vec<CampaignOutcome>,
}

impl Outcome {
    /// The result of check `name` on `campaign`, if both exist.
    pub fn check(&self, campaign: &str, name: &str) -> Option<&CheckResult> {
        self.campaigns
            .iter()
            .find(|c| c.campaign == campaign)?
            .checks
            .iter()
            .find(|c| c.name == name)
    }

    /// The names of the checks that failed, on any campaign (each once, in check order).
    pub fn failed_checks(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        for c in &self.campaigns {
            for r in c.checks.iter().filter(|r| !r.passed()) {
                if !names.contains(&r.name) {
                    names.push(r.name);
                }
            }
        }
        names
    }

    /// The text report: per campaign a table of checks (checked, failed, PASS/FAIL), the
    /// first offending operations under a failed check, and the false-sold-out windows.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for c in &self.campaigns {
            out += &format!(
                "campaign {}: stock {}, taken {}, claims {}, operations {}\n",
                c.campaign, c.stock, c.taken, c.claims, c.operations
            );
            out += &format!(
                "  {:<20} {:>10} {:>8}  result\n",
                "check", "checked", "failed"
            );
            for r in &c.checks {
                out += &format!(
                    "  {:<20} {:>10} {:>8}  {}\n",
                    r.name,
                    r.checked,
                    r.failed,
                    if r.passed() { "PASS" } else { "FAIL" }
                );
                for e in &r.examples {
                    out += &format!("      {e}\n");
                }
            }
            if c.sold_out_windows.is_empty() {
                out += "  false sold-out windows: none\n";
            } else {
                out += &format!(
                    "  false sold-out windows: {} (longest {} ms, bound {} ms)\n",
                    c.sold_out_windows.len(),
                    c.longest_sold_out_window_ms,
                    self.sold_out_grace_ms
                );
                for w in c.sold_out_windows.iter().take(EXAMPLES_MAX) {
                    out += &format!("      {}\n", w.describe());
                }
            }
        }
        out += &format!(
            "history check: {}\n",
            if self.passed {
                "PASS".to_string()
            } else {
                format!("FAIL ({})", self.failed_checks().join(", "))
            }
        );
        out
    }
}
