//! The origin's reconciliation of the campaign, as one of the stampede's checks.

use anyhow::Context;

use super::base;
use super::report::Report;

/// Asks the origin to reconcile the campaign (stock = remaining + held + paid / issued +
/// redeemed, the Redis gate against PostgreSQL, oversold and stranded units) and adds the
/// result as a check; the full answer goes into the report.
pub(super) async fn add_check(
    http: &reqwest::Client,
    origin: &str,
    token: &str,
    campaign: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let resp = http
        .get(format!(
            "{}/admin/v1/campaigns/{campaign}/reconcile",
            base(origin)
        ))
        .bearer_auth(token)
        .send()
        .await
        .context("reconciling the campaign at the origin")?;
    let status = resp.status();
    let body: serde_json::Value = resp.json().await.unwrap_or_default();
    let ok = status.is_success() && body["ok"] == true;
    report.add_check(
        "origin reconcile: no oversold or stranded unit, gate agrees with PostgreSQL",
        ok,
        format!(
            "HTTP {status}, oversold {}, stranded {}, faults {}",
            body["oversold"], body["stranded"], body["faults"]
        ),
    );
    report.reconcile = Some(body);
    Ok(())
}
