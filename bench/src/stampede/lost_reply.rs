//! The "lost reply" share (`--lost-reply`): a share of the winners never saw their 201 (the
//! network dropped it) and, after the sell-out, retry with the same idempotency key. Each must
//! get her 201 back with the same claim: through the edge, that is the winners filter letting
//! her claim through to the origin, which replays her first reply (docs/EDGE.md).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::plan::{Plan, PlannedTry, TapKind};
use super::report::{Answerer, LostReplyReport, Report, TryOutcome};
use super::run::{self, SendConfig};

/// True when customer `c` is among the `share` of winners who lose their reply: a hash of
/// the seed and the customer, so the same run picks the same winners.
pub fn picked(seed: u64, customer: u32, share: f64) -> bool {
    let mut x = seed ^ (u64::from(customer)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x as f64 / u64::MAX as f64) < share.clamp(0.0, 1.0)
}

/// Sends the retries of the picked winners (after the crowd, so after the sell-out when the
/// campaign sold out), at most `cfg.concurrency` at a time; adds the figures and a check to
/// `report`, and counts the retries among the tries after the sell-out (they are the origin's
/// to answer).
pub async fn retry_winners(
    cfg: SendConfig,
    plan: &Plan,
    outcomes: &[TryOutcome],
    auth: Vec<String>,
    (share, seed): (f64, u64),
    report: &mut Report,
) -> anyhow::Result<()> {
    // Each winner's try that got the 201, with its key.
    let mut firsts: HashMap<u32, (PlannedTry, String)> = HashMap::new();
    for (t, o) in plan.tries.iter().zip(outcomes) {
        if let (201, Some((id, _))) = (o.status, &o.claim) {
            firsts.entry(t.customer).or_insert((*t, id.clone()));
        }
    }
    let mut lost = LostReplyReport {
        share,
        winners: firsts.len() as u64,
        ..LostReplyReport::default()
    };
    let mut chosen: Vec<(PlannedTry, String)> = firsts
        .into_values()
        .filter(|(t, _)| picked(seed, t.customer, share))
        .collect();
    chosen.sort_by_key(|(t, _)| t.customer);
    let client = run::client(&cfg)?;
    let cfg = Arc::new(cfg);
    let auth = Arc::new(auth);
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(60);
    let sem = Arc::new(tokio::sync::Semaphore::new(cfg.concurrency.max(1)));
    let mut handles = Vec::with_capacity(chosen.len());
    for (t, claim) in chosen {
        let permit = sem.clone().acquire_owned().await?;
        let (client, cfg, auth) = (client.clone(), cfg.clone(), auth.clone());
        let retry = PlannedTry {
            kind: TapKind::DoubleSameKey,
            ..t
        };
        handles.push(tokio::spawn(async move {
            let _permit = permit;
            let o = run::one_try(client, cfg, retry, auth, Vec::new(), (t0, deadline)).await;
            (claim, o)
        }));
    }
    let sold_out = report.sell_out_ms.is_some();
    for h in handles {
        let (claim, o) = h.await?;
        lost.retried += 1;
        lost.after_sell_out += u64::from(sold_out);
        let edge = o.answered_by == Answerer::Edge;
        lost.answered_by_edge += u64::from(edge);
        if sold_out {
            report.tries_after_sell_out += 1;
            report.edge_answered_after_sell_out += u64::from(edge);
        }
        let same = o.claim.as_ref().is_some_and(|(id, _)| *id == claim);
        if o.status == 201 && same {
            lost.got_their_201 += 1;
        } else if lost.failures.len() < 5 {
            lost.failures.push(format!(
                "customer {}: HTTP {} {} (by {})",
                o.customer,
                o.status,
                o.result,
                o.answered_by.as_str()
            ));
        }
    }
    if report.tries_after_sell_out > 0 {
        report.edge_share_after_sell_out =
            Some(report.edge_answered_after_sell_out as f64 / report.tries_after_sell_out as f64);
    }
    report.add_check(
        "every winner whose 201 was lost got it back with the same key after the sell-out",
        lost.retried > 0 && lost.got_their_201 == lost.retried && sold_out,
        format!(
            "{} of {} retries got their 201 with the same claim ({} winners, share {:.0} %, {} answered by the edge){}{}",
            lost.got_their_201,
            lost.retried,
            lost.winners,
            share * 100.0,
            lost.answered_by_edge,
            if sold_out { "" } else { "; the campaign did not sell out" },
            if lost.failures.is_empty() {
                String::new()
            } else {
                format!("; {}", lost.failures.join("; "))
            }
        ),
    );
    report.lost_reply = Some(lost);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_about_the_share_and_always_the_same() {
        let n = (0..10_000).filter(|c| picked(7, *c, 0.1)).count();
        assert!((800..1_200).contains(&n), "{n}");
        assert_eq!(
            (0..100).filter(|c| picked(7, *c, 0.1)).collect::<Vec<_>>(),
            (0..100).filter(|c| picked(7, *c, 0.1)).collect::<Vec<_>>()
        );
        assert_eq!((0..1_000).filter(|c| picked(7, *c, 0.0)).count(), 0);
        assert_eq!((0..1_000).filter(|c| picked(7, *c, 1.0)).count(), 1_000);
    }
}
