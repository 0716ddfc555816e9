//! The checks on PostgreSQL's final state alone: no campaign oversold, no customer with two
//! active claims, no variant oversold.

use std::collections::BTreeMap;

use super::outcome::CheckResult;
use super::read::CampaignRecord;

/// `oversold`: active claims (held, paid, issued, redeemed) ≤ stock. One item: the campaign.
pub fn oversold(c: &CampaignRecord) -> CheckResult {
    let mut r = CheckResult::new("oversold");
    let taken = taken(c);
    r.count((taken > c.stock).then(|| {
        format!(
            "campaign {}: {taken} active claims, stock {} ({} oversold)",
            c.id,
            c.stock,
            taken - c.stock
        )
    }));
    r
}

/// `variant_oversold`: on a campaign with variants, each variant's active claims ≤ its stock.
/// One item per variant (none without variants).
pub fn variant_oversold(c: &CampaignRecord) -> CheckResult {
    let mut r = CheckResult::new("variant_oversold");
    for (v, stock) in &c.variants {
        let taken = c
            .claims
            .values()
            .filter(|x| x.is_active() && x.variant.as_deref() == Some(v.as_str()))
            .count() as i64;
        r.count((taken > *stock).then(|| {
            format!(
                "campaign {} variant {v}: {taken} active claims, stock {stock} ({} oversold)",
                c.id,
                taken - stock
            )
        }));
    }
    r
}

/// `one_active_claim`: no customer holds two active claims. One item per customer with a claim.
pub fn one_active_claim(c: &CampaignRecord) -> CheckResult {
    let mut r = CheckResult::new("one_active_claim");
    let mut by_customer: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for claim in c.claims.values() {
        let ids = by_customer.entry(claim.customer.as_str()).or_default();
        if claim.is_active() {
            ids.push(claim.id.as_str());
        }
    }
    for (customer, active) in by_customer {
        r.count((active.len() > 1).then(|| {
            format!(
                "customer {customer}: {} active claims ({})",
                active.len(),
                active.join(", ")
            )
        }));
    }
    r
}

/// Active claims of the campaign.
pub fn taken(c: &CampaignRecord) -> i64 {
    c.claims.values().filter(|x| x.is_active()).count() as i64
}
