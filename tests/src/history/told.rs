//! The checks between what customers were told and what PostgreSQL kept: every 201 names a
//! claim that exists under that customer with the status it said (`201_names_claim`), and
//! every claim was told to its customer by a 201 or found by her `/claims/mine` lookup
//! (`claims_told`; otherwise an acknowledged-but-lost winner).

use std::collections::HashSet;

use super::outcome::CheckResult;
use super::read::CampaignRecord;
use super::record::{OpKind, Operation};

/// True when a claim said to be in `said` may be in `now` at the end of the run: a hold may
/// have been paid, released or expired since; a coupon redeemed.
pub fn may_have_become(said: &str, now: &str) -> bool {
    said == now
        || matches!(
            (said, now),
            ("held", "paid" | "released" | "expired") | ("issued", "redeemed")
        )
}

/// `201_names_claim`: each claim request answered 201 names (`claim.id`) a claim of this
/// campaign in PostgreSQL whose customer is the one who asked (and the one the body names),
/// in the status the body said or one it may have become since ([`may_have_become`]). One item
/// per 201.
pub fn answers_name_claims(ops: &[&Operation], c: &CampaignRecord) -> CheckResult {
    let mut r = CheckResult::new("201_names_claim");
    for op in ops
        .iter()
        .filter(|o| o.op.is_claim() && o.status == Some(201))
    {
        r.count(wrong_201(op, c).map(|why| format!("{}: {why}", op.brief())));
    }
    r
}

fn wrong_201(op: &Operation, c: &CampaignRecord) -> Option<String> {
    let Some(id) = op.claim_id() else {
        return Some("the 201 names no claim".to_string());
    };
    let Some(row) = c.claims.get(id) else {
        return Some(format!("claim {id} is not in PostgreSQL"));
    };
    if row.customer != op.customer {
        return Some(format!(
            "claim {id} belongs to {} in PostgreSQL",
            row.customer
        ));
    }
    let claim = &op.body["claim"];
    if let Some(who) = claim.get("customer").and_then(|v| v.as_str()) {
        if who != op.customer {
            return Some(format!("the body names customer {who}"));
        }
    }
    if let Some(campaign) = claim.get("campaign").and_then(|v| v.as_str()) {
        if campaign != c.id {
            return Some(format!("the body names campaign {campaign}"));
        }
    }
    let said = claim.get("status").and_then(|v| v.as_str()).unwrap_or("");
    (!may_have_become(said, &row.status)).then(|| {
        format!(
            "the body said status {said:?}, PostgreSQL has {}",
            row.status
        )
    })
}

/// `claims_told`: each claim in PostgreSQL was answered 201 (naming it) to its customer, or a
/// `/claims/mine` lookup of hers returned it. One item per claim.
pub fn claims_told(ops: &[&Operation], c: &CampaignRecord) -> CheckResult {
    let mut r = CheckResult::new("claims_told");
    let told: HashSet<(&str, &str)> = ops
        .iter()
        .filter(|o| {
            (o.op.is_claim() && o.status == Some(201))
                || (o.op == OpKind::Lookup && o.status == Some(200))
        })
        .filter_map(|o| Some((o.claim_id()?, o.customer.as_str())))
        .collect();
    for claim in c.claims.values() {
        r.count(
            (!told.contains(&(claim.id.as_str(), claim.customer.as_str()))).then(|| {
                format!(
                    "claim {} of {} ({}, created {}): never answered 201 to her nor returned by \
                     /claims/mine (an acknowledged-but-lost winner)",
                    claim.id,
                    claim.customer,
                    claim.status,
                    claim.created_at.to_rfc3339()
                )
            }),
        );
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_and_coupons_move_forward_only() {
        assert!(may_have_become("held", "held"));
        assert!(may_have_become("held", "expired"));
        assert!(may_have_become("issued", "redeemed"));
        assert!(!may_have_become("paid", "held"));
        assert!(!may_have_become("held", "issued"));
        assert!(!may_have_become("", "held"));
    }
}
