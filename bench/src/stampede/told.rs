//! The check that nothing was committed behind a customer's back: every claim in PostgreSQL
//! was answered 201 to some request of its customer, or is returned to her by
//! `GET /api/v1/campaigns/{id}/claims/mine` (her active claim, else her latest).

use std::collections::HashSet;

use super::db::Facts;
use super::report::{Report, TryOutcome};
use flashgate_tests::history::lookups::claims_mine;

/// Claims looked up through `/claims/mine` at most (the rest count as not looked up).
const LOOKUPS_MAX: usize = 2_000;

/// Adds the check. `auth[i]` is the `Authorization` value of customer `i` ([`super::customer_id`]);
/// `target` is where the crowd's claims went.
pub async fn add_check(
    http: &reqwest::Client,
    target: &str,
    campaign: &str,
    auth: &[String],
    facts: &Facts,
    outcomes: &[TryOutcome],
    report: &mut Report,
) {
    let answered: HashSet<&str> = outcomes
        .iter()
        .filter(|o| o.status == 201)
        .filter_map(|o| o.claim.as_ref().map(|(id, _)| id.as_str()))
        .collect();
    let mut untold: Vec<(&str, &str)> = facts
        .claims
        .iter()
        .filter(|(id, _)| !answered.contains(id.as_str()))
        .map(|(id, who)| (id.as_str(), who.as_str()))
        .collect();
    untold.sort_unstable();
    let (mut mine, mut neither) = (0usize, Vec::new());
    for &(id, who) in untold.iter().take(LOOKUPS_MAX) {
        let index = who.strip_prefix('c').and_then(|n| n.parse::<usize>().ok());
        let Some(token) = index.and_then(|i| auth.get(i)) else {
            neither.push(id);
            continue;
        };
        if lookup(http, target, campaign, token).await.as_deref() == Some(id) {
            mine += 1;
        } else {
            neither.push(id);
        }
    }
    let not_looked = untold.len().saturating_sub(LOOKUPS_MAX);
    report.add_check(
        "every claim in PostgreSQL was answered 201 to its customer or is returned by /claims/mine",
        neither.is_empty() && not_looked == 0,
        format!(
            "{} claims, {} not in any 201: {mine} returned by /claims/mine, {} neither{}{}",
            facts.claims.len(),
            untold.len(),
            neither.len(),
            if not_looked > 0 {
                format!(", {not_looked} not looked up")
            } else {
                String::new()
            },
            if neither.is_empty() {
                String::new()
            } else {
                format!(" (e.g. {})", neither[..neither.len().min(5)].join(", "))
            }
        ),
    );
}

/// The id of the claim `/claims/mine` returns to the bearer of `token`, `None` when none
/// (retried as [`claims_mine`] says).
async fn lookup(
    http: &reqwest::Client,
    target: &str,
    campaign: &str,
    token: &str,
) -> Option<String> {
    let url = format!(
        "{}/api/v1/campaigns/{campaign}/claims/mine",
        target.trim_end_matches('/')
    );
    let answer = claims_mine(http, &url, token, None).await;
    let body: serde_json::Value = serde_json::from_slice(&answer.body).ok()?;
    body["claim"]["id"].as_str().map(str::to_string)
}
