//! `stampede --waiting-room`: the campaign option from the flags, the play through the
//! queue ([`super::queue`]), and the waiting room's figures and checks
//! ([`super::report::queue`]).

use std::time::Duration;

use anyhow::{anyhow, bail};
use flashgate_shared::queue::{Queueing, WaitingRoom};

use super::plan::Plan;
use super::queue::{self, RoomConfig};
use super::report::queue::{self as queue_report, RoomOption, Visit};
use super::report::{Report, TryOutcome};
use super::run::SendConfig;
use super::{base, Args};

/// The `waiting_room` option of the campaign to create, from the flags; `None` without
/// `--waiting-room`. Errors: a bound of the option broken (the origin's own message).
pub(super) fn option(args: &Args) -> anyhow::Result<Option<WaitingRoom>> {
    if !args.waiting_room {
        return Ok(None);
    }
    let room = WaitingRoom {
        admit_per_second: args.admit_per_second,
        queueing: queueing(args)?,
        prequeue_seconds: args.prequeue_seconds,
        admission_ttl_seconds: args.admission_ttl_seconds,
        presence_window_seconds: flashgate_shared::queue::DEFAULT_PRESENCE_WINDOW_SECONDS,
        second_wave_admission_ttl_seconds: flashgate_shared::queue::DEFAULT_SECOND_WAVE_TTL_SECONDS,
        challenge: Default::default(),
        pow_difficulty: flashgate_shared::pow::DEFAULT_DIFFICULTY,
        challenge_fail_open: false,
        challenge_failure: Default::default(),
        invite_only: false,
    };
    room.validate()
        .map_err(|m| anyhow!("--waiting-room: {m}"))?;
    Ok(Some(room))
}

fn queueing(args: &Args) -> anyhow::Result<Queueing> {
    serde_json::from_value(serde_json::Value::String(args.queueing.clone()))
        .map_err(|_| anyhow!("--queueing must be fifo or random"))
}

/// Plays the crowd through the campaign's queue at the target.
pub(super) async fn play(
    args: &Args,
    campaign: &str,
    send: SendConfig,
    plan: &Plan,
    auth: Vec<String>,
) -> anyhow::Result<(Vec<Visit>, Vec<TryOutcome>)> {
    let Some(secret) = args.edge_secret.as_deref() else {
        bail!("--waiting-room needs --edge-secret (FLASHGATE_EDGE_SECRET) to open the tickets");
    };
    let room = RoomConfig {
        queue_url: format!("{}/api/v1/campaigns/{campaign}/queue", base(&args.target)),
        campaign: campaign.to_string(),
        edge_secret: secret.as_bytes().to_vec(),
        max_poll_wait: Duration::from_millis(args.max_poll_wait_ms.max(1)),
    };
    queue::play(send, room, plan, auth).await
}

/// Adds the waiting room's figures and checks to the report.
pub(super) fn report(
    args: &Args,
    report: &mut Report,
    visits: &[Visit],
    claims: &[TryOutcome],
) -> anyhow::Result<()> {
    let opt = RoomOption {
        admit_per_second: args.admit_per_second,
        queueing: queueing(args)?,
        prequeue_seconds: args.prequeue_seconds,
        max_poll_wait_ms: args.max_poll_wait_ms,
    };
    let q = queue_report::compute(&opt, visits, claims);
    super::report::series::add_queue(&mut report.timeline, visits);
    let arrived = visits.iter().filter(|v| v.join_sent_us.is_some()).count() as u64;
    report.add_check(
        "every join got a ticket (201) naming its customer and campaign",
        q.joined == arrived,
        format!(
            "{} of {arrived} customers; failures {:?}",
            q.joined, q.join_failures
        ),
    );
    report.add_check(
        "sequence numbers unique; arrival-ordered ones contiguous",
        q.distinct_sequences == q.joined && q.arrivals_contiguous,
        format!(
            "{} distinct among {} tickets; {} in arrival order, {}",
            q.distinct_sequences,
            q.joined,
            q.arrival_sequences,
            if q.arrivals_contiguous {
                "contiguous"
            } else {
                "with gaps"
            }
        ),
    );
    report.add_check(
        "a re-join answers 200 with the same ticket",
        q.rejoins_same_ticket == q.rejoins,
        format!("{} of {} re-joins", q.rejoins_same_ticket, q.rejoins),
    );
    let burst = 2 * u64::from(opt.admit_per_second);
    report.add_check(
        "claims reaching the origin <= admit rate + one second's burst (any second)",
        q.origin_peak_claims_per_s <= burst,
        format!(
            "peak {} claims/s at the origin, bound {burst} (2 x {}/s)",
            q.origin_peak_claims_per_s, opt.admit_per_second
        ),
    );
    let refused = claims
        .iter()
        .filter(|o| matches!(o.result.as_str(), "queued" | "forbidden"))
        .count();
    report.add_check(
        "no admitted claim refused as queued or forbidden",
        refused == 0,
        format!("{refused} claims"),
    );
    let stuck: u64 = q
        .final_states
        .iter()
        .filter(|(s, _)| !matches!(s.as_str(), "admitted" | "sold_out" | "ended"))
        .map(|(_, n)| n)
        .sum();
    report.add_check(
        "every customer ended admitted, sold_out or ended (none left waiting)",
        stuck == 0,
        format!("final states {:?}", q.final_states),
    );
    if args.min_edge_share > 0.0 {
        report.add_check(
            format!(
                "edge answered >= {:.0} % of the polls",
                args.min_edge_share * 100.0
            ),
            q.edge_poll_share.is_some_and(|s| s >= args.min_edge_share),
            format!("{} of {}", q.polls_edge, q.polls),
        );
    } else {
        report.add_skip("edge share of the polls", "--min-edge-share 0");
    }
    let fifo = opt.queueing == Queueing::Fifo && args.starts_in <= 0.0;
    if fifo {
        report.add_check(
            "FIFO: nobody placed ahead of someone whose join was answered before theirs was sent",
            q.fifo_violations == 0,
            format!("{} customers out of order", q.fifo_violations),
        );
    } else {
        report.add_skip(
            "FIFO: arrival order kept",
            "random order or a prequeue: drawn at random by design",
        );
    }
    if fifo && args.min_fifo_tau > 0.0 && q.fairness_pairs_n >= 2 {
        report.add_check(
            format!(
                "FIFO: Kendall tau(join order, admission order) >= {}",
                args.min_fifo_tau
            ),
            q.fairness_tau.is_some_and(|t| t >= args.min_fifo_tau),
            format!("{:?} over {} customers", q.fairness_tau, q.fairness_pairs_n),
        );
    } else {
        report.add_skip(
            "FIFO: Kendall tau(join order, admission order)",
            "random order, a prequeue, fewer than two tickets, or --min-fifo-tau 0",
        );
    }
    report.queue = Some(q);
    Ok(())
}
