//! `false_sold_out`: no `sold_out` answered while the record shows units that stayed unsold to
//! the end of the run, beyond a stated bound.
//!
//! From PostgreSQL's claims, the free units over time: the stock, less one at each claim's
//! `created_at`, plus one at each `released` / `expired` claim's `updated_at` (its unit went
//! back). A `sold_out` sent at `t` is *false* when free units existed at `t` and at every later
//! change to the end (the minimum of the free units from `t` on is above 0): such a unit was
//! never taken again, so a later customer could have had it. Claims committed after `t` (takes
//! in flight) count against it, since the minimum runs to the end.
//!
//! A false `sold_out` is measured from the last change the record shows at or before it (a
//! claim committed or a unit back; the campaign's start when none): the units were free from
//! then on, as far as PostgreSQL knows. A take whose commit failed and whose unit went back
//! later leaves no row, so its pending time counts in the window too. False `sold_out`s with
//! the same start form one [`Window`], from that start to the last of them; one that comes
//! more than the bound (`--sold-out-grace-ms`) after its start fails the check. Times: the
//! generator's `sent_at` against PostgreSQL's `now()`, one clock on one machine.
//!
//! On a campaign with variants, a variant's `sold_out` (`{"result":"sold_out","variant":…}`)
//! is held against that variant's free units (its stock and its claims), a campaign's
//! `sold_out` against the campaign's.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use super::outcome::CheckResult;
use super::read::CampaignRecord;
use super::record::Operation;

/// A stretch in which `sold_out` was answered while units were free for good.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Window {
    /// When the units were free from, as far as the record shows (RFC 3339 UTC).
    pub free_since: DateTime<Utc>,
    /// The first and the last false `sold_out` of the window (their `sent_at`).
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    /// From `free_since` to `last`, ms.
    pub length_ms: i64,
    /// Free units at the end of the run (the least from `free_since` on).
    pub free_units: i64,
    /// `sold_out` answers in the window, and how many of them came after the bound.
    pub sold_outs: u64,
    pub beyond_bound: u64,
}

impl Window {
    /// One line for a human.
    pub fn describe(&self) -> String {
        let t = |x: &DateTime<Utc>| x.to_rfc3339_opts(SecondsFormat::Millis, true);
        format!(
            "{} sold_out from {} to {} while {} unit(s) were free since {}: {} ms, {} beyond the bound",
            self.sold_outs,
            t(&self.first),
            t(&self.last),
            self.free_units,
            t(&self.free_since),
            self.length_ms,
            self.beyond_bound
        )
    }
}

/// The free units over time (of `variant` only, when given): `(time, free units from then
/// on)`, sorted, starting with the campaign's start and stock; and, per entry, the least free
/// units from it to the end.
fn free_units(c: &CampaignRecord, variant: Option<&str>) -> (Vec<(DateTime<Utc>, i64)>, Vec<i64>) {
    let stock = variant.map_or(c.stock, |v| c.variants.get(v).copied().unwrap_or(0));
    let mut changes: Vec<(DateTime<Utc>, i64)> = Vec::new();
    let of_it = |x: &&super::read::ClaimRow| variant.is_none() || x.variant.as_deref() == variant;
    for claim in c.claims.values().filter(of_it) {
        changes.push((claim.created_at, -1));
        if matches!(claim.status.as_str(), "released" | "expired") {
            changes.push((claim.updated_at, 1));
        }
    }
    changes.sort();
    let mut steps = vec![(
        c.starts_at
            .min(changes.first().map_or(c.starts_at, |x| x.0)),
        stock,
    )];
    let mut free = stock;
    for (t, d) in changes {
        free += d;
        steps.push((t, free));
    }
    let mut least = vec![0; steps.len()];
    let mut m = i64::MAX;
    for i in (0..steps.len()).rev() {
        m = m.min(steps[i].1);
        least[i] = m;
    }
    (steps, least)
}

/// The check and the windows; one item per `sold_out` answer to a claim.
pub fn false_sold_out(
    ops: &[&Operation],
    c: &CampaignRecord,
    grace_ms: u64,
) -> (CheckResult, Vec<Window>) {
    let mut r = CheckResult::new("false_sold_out");
    // By the variant the answer names (`None`: the campaign's sold_out).
    let mut groups: std::collections::BTreeMap<Option<&str>, Vec<&Operation>> = Default::default();
    for o in ops.iter().copied() {
        if o.op.is_claim() && o.status == Some(409) && o.result() == Some("sold_out") {
            let v = o.body.get("variant").and_then(|v| v.as_str());
            groups
                .entry(v.filter(|_| !c.variants.is_empty()))
                .or_default()
                .push(o);
        }
    }
    let mut windows: Vec<Window> = Vec::new();
    for (variant, mut sold_outs) in groups {
        sold_outs.sort_by_key(|o| (o.sent_at, o.seq));
        let (steps, least) = free_units(c, variant);
        let first_window = windows.len();
        judge(
            &mut r,
            &mut windows,
            first_window,
            &sold_outs,
            (&steps, &least),
            grace_ms,
        );
    }
    (r, windows)
}

/// Holds `sold_outs` (sorted) against the free units `steps` and their `least`, adding the
/// windows after `windows[first_window..]`.
fn judge(
    r: &mut CheckResult,
    windows: &mut Vec<Window>,
    first_window: usize,
    sold_outs: &[&Operation],
    (steps, least): (&[(DateTime<Utc>, i64)], &[i64]),
    grace_ms: u64,
) {
    for &op in sold_outs {
        r.checked += 1;
        // The last change at or before the answer (the start entry when none).
        let i = steps.partition_point(|s| s.0 <= op.sent_at).max(1) - 1;
        if least[i] <= 0 {
            continue;
        }
        let since = steps[i].0;
        let late_ms = (op.sent_at - since).num_milliseconds();
        let beyond = late_ms > i64::try_from(grace_ms).unwrap_or(i64::MAX);
        if beyond {
            r.fail(format!(
                "{}: {} unit(s) free since {} ({late_ms} ms before) and unsold to the end",
                op.brief(),
                least[i],
                since.to_rfc3339_opts(SecondsFormat::Millis, true)
            ));
        }
        let own = windows.len() > first_window;
        match windows.last_mut().filter(|_| own) {
            Some(w) if w.free_since == since => {
                w.last = op.sent_at;
                w.length_ms = late_ms;
                w.sold_outs += 1;
                w.beyond_bound += u64::from(beyond);
            }
            _ => windows.push(Window {
                free_since: since,
                first: op.sent_at,
                last: op.sent_at,
                length_ms: late_ms,
                free_units: least[i],
                sold_outs: 1,
                beyond_bound: u64::from(beyond),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::read::ClaimRow;
    use crate::history::record::OpKind;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_800_000_000_000 + ms).unwrap()
    }

    fn claim(id: &str, status: &str, created: i64, updated: i64) -> (String, ClaimRow) {
        let row = ClaimRow {
            id: id.into(),
            customer: format!("cust-{id}"),
            status: status.into(),
            created_at: at(created),
            updated_at: at(updated),
            variant: None,
        };
        (id.to_string(), row)
    }

    fn sold_out(seq: u64, ms: i64) -> Operation {
        Operation {
            seq,
            op: OpKind::Claim,
            campaign: "x".into(),
            customer: "late".into(),
            key: Some(format!("k{seq}")),
            sent_at: at(ms),
            answered_at: at(ms + 5),
            status: Some(409),
            error: None,
            retry_after: None,
            answered_by: None,
            replayed: false,
            body: serde_json::json!({"result": "sold_out"}),
        }
    }

    fn campaign(stock: i64, claims: Vec<(String, ClaimRow)>) -> CampaignRecord {
        CampaignRecord {
            id: "x".into(),
            stock,
            remaining: 0,
            starts_at: at(-1_000),
            claims: claims.into_iter().collect(),
            variants: Default::default(),
        }
    }

    #[test]
    fn a_unit_back_for_good_opens_a_window_measured_from_its_return() {
        // 2 units: a at 0 ms, b at 1,000 ms and released at 3,000 ms; 1 unit free at the end.
        let c = campaign(
            2,
            vec![
                claim("a", "held", 0, 0),
                claim("b", "released", 1_000, 3_000),
            ],
        );
        let ops = [sold_out(1, 2_000), sold_out(2, 3_500), sold_out(3, 6_000)];
        let refs: Vec<&Operation> = ops.iter().collect();
        let (r, w) = false_sold_out(&refs, &c, 1_500);
        assert_eq!((r.checked, r.failed), (3, 1), "{r:?}");
        assert!(r.examples[0].starts_with("#3 "), "{r:?}");
        assert_eq!(w.len(), 1);
        assert_eq!(
            (w[0].free_since, w[0].first, w[0].last),
            (at(3_000), at(3_500), at(6_000))
        );
        assert_eq!(
            (
                w[0].length_ms,
                w[0].sold_outs,
                w[0].beyond_bound,
                w[0].free_units
            ),
            (3_000, 2, 1, 1)
        );
    }

    #[test]
    fn takes_committed_later_and_a_sold_out_campaign_open_no_window() {
        // Sold out at the end: nothing was free for good.
        let c = campaign(1, vec![claim("a", "paid", 5_000, 6_000)]);
        let ops = [sold_out(1, 1_000), sold_out(2, 9_000)];
        let refs: Vec<&Operation> = ops.iter().collect();
        let (r, w) = false_sold_out(&refs, &c, 0);
        assert_eq!((r.checked, r.failed, w.len()), (2, 0, 0));
        // 3 units, one claim: a sold_out right after it is within the bound, one later is not.
        let c = campaign(3, vec![claim("a", "held", 1_000, 1_000)]);
        let ops = [sold_out(1, 1_200), sold_out(2, 4_000)];
        let refs: Vec<&Operation> = ops.iter().collect();
        let (r, w) = false_sold_out(&refs, &c, 1_500);
        assert_eq!((r.checked, r.failed), (2, 1));
        assert_eq!((w.len(), w[0].free_units, w[0].length_ms), (1, 2, 3_000));
    }
}
