//! Runs every check of a history against the final record, per campaign.

use std::collections::BTreeMap;

use super::outcome::{CampaignOutcome, Outcome};
use super::read::{BadInput, Record};
use super::record::Operation;
use super::{contract, replays, sold_out, told, truth};

/// The checks, in the order they are reported.
pub const CHECKS: [&str; 8] = [
    "oversold",
    "variant_oversold",
    "one_active_claim",
    "201_names_claim",
    "claims_told",
    "false_sold_out",
    "replays_identical",
    "contract",
];

/// The default of `--sold-out-grace-ms`: the documented staleness of a unit coming back as
/// seen by every edge isolate (docs/ARCHITECTURE.md, "Staleness bounds"), with the default
/// settings: status TTL (1,000 ms) + 2 × the origin's campaign cache (2 × 100 ms) + one
/// origin round trip (allowed 300 ms).
pub const DEFAULT_SOLD_OUT_GRACE_MS: u64 = 1_500;

/// How the checks are run.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The false-sold-out bound, ms.
    pub sold_out_grace_ms: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sold_out_grace_ms: DEFAULT_SOLD_OUT_GRACE_MS,
        }
    }
}

/// Checks `history` against `record`, per campaign of the history. Errors: a campaign of the
/// history is missing from `record`.
pub fn check(
    history: &[Operation],
    record: &Record,
    options: Options,
) -> Result<Outcome, BadInput> {
    let mut by_campaign: BTreeMap<&str, Vec<&Operation>> = BTreeMap::new();
    for op in history {
        by_campaign.entry(&op.campaign).or_default().push(op);
    }
    let mut campaigns = Vec::new();
    for (id, ops) in by_campaign {
        let c = record.get(id).ok_or_else(|| {
            BadInput(format!("campaign {id} of the history is not in the record"))
        })?;
        let (false_sold_out, windows) =
            sold_out::false_sold_out(&ops, c, options.sold_out_grace_ms);
        campaigns.push(CampaignOutcome {
            campaign: id.to_string(),
            stock: c.stock,
            taken: truth::taken(c),
            claims: c.claims.len() as u64,
            operations: ops.len() as u64,
            checks: vec![
                truth::oversold(c),
                truth::variant_oversold(c),
                truth::one_active_claim(c),
                told::answers_name_claims(&ops, c),
                told::claims_told(&ops, c),
                false_sold_out,
                replays::replays_identical(&ops, c),
                contract::contract(&ops),
            ],
            longest_sold_out_window_ms: windows.iter().map(|w| w.length_ms).max().unwrap_or(0),
            sold_out_windows: windows,
        });
    }
    let passed = campaigns
        .iter()
        .all(|c| c.checks.iter().all(|r| r.passed()));
    Ok(Outcome {
        sold_out_grace_ms: options.sold_out_grace_ms,
        passed,
        campaigns,
    })
}

/// Reads the history at `path` and its campaigns' final state from `database_url`, and checks
/// them ([`check`]). Errors: bad input (exit 2 of `check_history`).
pub async fn check_file(
    path: &std::path::Path,
    database_url: &str,
    options: Options,
) -> Result<Outcome, BadInput> {
    let history = super::read::read_history(path)?;
    let record =
        super::read::read_record(database_url, &super::read::campaigns_of(&history)).await?;
    check(&history, &record, options)
}
