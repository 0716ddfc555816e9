//! The stampede load generator: many customers tap "claim" on one campaign at once, through
//! the edge (or straight at the origin), and the invariants are read back from PostgreSQL.
//!
//! - [`plan`]: who taps when (front-loaded arrivals, double taps, repeat taps), seeded.
//! - [`run`]: sends the tries with bounded concurrency, retries and backoff.
//! - [`report`]: outcomes, timeline, latency per answerer, checks; text and JSON.
//! - [`db`]: the invariants read back from PostgreSQL.
//! - [`plots`]: SVG plots of the run's time series, beside the JSON report.
//! - [`progress`]: the live progress line while the tries are sent.
//! - [`lost_reply`]: winners whose 201 was lost retry with the same key after the sell-out.
//! - `recorded`: the history of `--history` (every request and answer; `flashgate_tests::history`).
//! - `reconcile`: the origin's reconciliation as a check.
//! - [`variants`]: `--variants N`, the campaign's variants and their per-variant checks.
//!
//! The binary is `stampede` (bench/src/bin/stampede.rs); `stampede --help` lists the flags.
//! All traffic goes to loopback addresses only: other targets are refused.

mod campaign;
pub mod db;
pub mod lost_reply;
pub mod plan;
pub mod plots;
pub mod progress;
pub mod queue;
mod reconcile;
mod recorded;
pub mod report;
pub mod run;
mod told;
pub mod variants;
mod waiting_room;

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use chrono::Utc;
use clap::Parser;
use flashgate_shared::api::CampaignKind;
use flashgate_shared::token::SigningKey;

use self::report::Report;

/// Flags of the `stampede` binary. Defaults are a flash sale's stampede scaled to one
/// machine.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "stampede",
    about = "flashgate stampede: a flash-sale crowd against one campaign, then the invariants read back from PostgreSQL"
)]
pub struct Args {
    /// Where the claims go: the edge (or an origin). Loopback only.
    #[arg(long, env = "FLASHGATE_EDGE_URL")]
    pub target: String,
    /// The origin, for creating the campaign (admin API). Loopback only.
    #[arg(long, env = "FLASHGATE_ORIGIN_URL")]
    pub origin: String,
    /// The runtime the edge at `--target` runs in (`workerd`, `miniflare`), as scripts/dev
    /// started it; only shown in the report, next to the send rate.
    #[arg(long, env = "FLASHGATE_EDGE_RUNTIME")]
    pub edge_runtime: Option<String>,
    /// Admin token of the origin (to create the campaign).
    #[arg(long, env = "FLASHGATE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Secret the customer tokens are signed with (HS256), as configured on origin and edge.
    #[arg(long, env = "FLASHGATE_CUSTOMER_TOKEN_SECRET", hide_env_values = true)]
    pub token_secret: String,
    /// `iss` written into every customer token: the origin's and edge's
    /// `FLASHGATE_JWT_ISSUER` when they check one.
    #[arg(long, env = "FLASHGATE_JWT_ISSUER")]
    pub iss: Option<String>,
    /// `aud` written into every customer token: the origin's and edge's
    /// `FLASHGATE_JWT_AUDIENCE` when they check one.
    #[arg(long, env = "FLASHGATE_JWT_AUDIENCE")]
    pub aud: Option<String>,
    /// PostgreSQL of the origin, to read the invariants back.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Use this existing campaign instead of creating one (its stock is read from its status).
    #[arg(long)]
    pub campaign: Option<String>,
    /// Kind of the campaign created: sale or giveaway.
    #[arg(long, default_value = "sale")]
    pub kind: String,
    /// Units of the campaign created.
    #[arg(long, default_value_t = 1_000)]
    pub stock: i64,
    /// Customers in the crowd.
    #[arg(long, default_value_t = 100_000)]
    pub customers: u32,
    /// Tries (taps) in all, double and repeat taps included; retries are extra.
    #[arg(long, default_value_t = 200_000)]
    pub tries: u32,
    /// Arrival window in seconds; arrivals are front-loaded inside it.
    #[arg(long, default_value_t = 10.0)]
    pub window: f64,
    /// Share of customers who double-tap.
    #[arg(long, default_value_t = 0.3)]
    pub double_tap: f64,
    /// Share of double taps that resend the same idempotency key (the rest use a new one).
    #[arg(long, default_value_t = 0.5)]
    pub same_key: f64,
    /// Every customer sends exactly this many tries, each with a new idempotency key (with
    /// `--variants`, each names a variant picked at random), at independent times over the
    /// window; the plan is then `--customers` × this, without double taps. 0: the shape of
    /// `--tries`, `--double-tap` and `--same-key`, which it cannot be given with.
    #[arg(long, default_value_t = 0, conflicts_with_all = ["tries", "double_tap", "same_key"])]
    pub tries_per_customer: u32,
    /// Closed loop (the default): requests in flight at most; a try due while all are busy
    /// waits for a free one, so slow answers hold back the tries behind them.
    #[arg(long, default_value_t = 128)]
    pub concurrency: usize,
    /// Open loop: every try goes out at its due instant whatever the earlier answers (a new
    /// connection when none is idle), as a real crowd does, bounded only by
    /// `--open-loop-cap`; `--concurrency` is then unused. The report counts the tries that
    /// still waited for a free slot (`tries_held_by_cap`): 0 means the crowd was sent open.
    #[arg(long)]
    pub open_loop: bool,
    /// Open loop: requests in flight at most (against running out of sockets; keep it
    /// under `ulimit -n` and the target's accept backlog, `net.core.somaxconn`).
    #[arg(long, default_value_t = 4_096, requires = "open_loop")]
    pub open_loop_cap: usize,
    /// Seed of the random choices (arrival times, who double-taps, who repeats).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Attempts per try on 503 / transport error / in_progress, first included.
    #[arg(long, default_value_t = 6)]
    pub max_attempts: u32,
    /// Longest wait between attempts, ms (caps Retry-After too).
    #[arg(long, default_value_t = 2_000)]
    pub max_backoff_ms: u64,
    /// Timeout of one request, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub request_timeout: f64,
    /// Stop sending after this many seconds (tries not sent by then are reported).
    #[arg(long, default_value_t = 300.0)]
    pub max_duration: f64,
    /// Fail unless at least this share of the tries sent after the sell-out were answered by
    /// the edge (0 turns the check off, e.g. when the target is an origin).
    #[arg(long, default_value_t = 0.95)]
    pub min_edge_share: f64,
    /// Share of the winners (0..=1) whose 201 is lost: after the crowd (so after the sell-out)
    /// each retries with the same key and must get her 201 back with the same claim; the
    /// retries count among the tries after the sell-out. 0: none. Not with `--waiting-room`.
    #[arg(long, default_value_t = 0.0)]
    pub lost_reply: f64,
    /// Write the report as JSON here, and its plots beside it (`<report>-answers.svg`,
    /// `-latency.svg`, `-remaining.svg`, and `-queue.svg` with a waiting room).
    #[arg(long)]
    pub report: Option<std::path::PathBuf>,
    /// Record every request and its answer here, one JSON line each (`check_history` checks
    /// it; docs/HISTORY.md). After the crowd, the customers who tried but never got a 201
    /// (with the read-back: those of them who have a claim in PostgreSQL) look their claim up
    /// through `/claims/mine`, recorded too.
    #[arg(long)]
    pub history: Option<std::path::PathBuf>,
    /// Skip the PostgreSQL read-back (then no invariant is checked).
    #[arg(long)]
    pub no_db_check: bool,
    /// Worker threads of the generator's runtime (the machine is shared with the servers).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Play the crowd through a waiting room: the campaign is created with the
    /// `waiting_room` option below; customers join, poll, and claim once admitted.
    #[arg(long)]
    pub waiting_room: bool,
    /// Waiting room: customers admitted per second.
    #[arg(long, requires = "waiting_room", default_value_t = 200)]
    pub admit_per_second: u32,
    /// Waiting room: order after the start, fifo or random.
    #[arg(long, requires = "waiting_room", default_value = "fifo", value_parser = ["fifo", "random"])]
    pub queueing: String,
    /// Waiting room: joins in this many seconds before the start are shuffled at the start.
    #[arg(long, requires = "waiting_room", default_value_t = 600)]
    pub prequeue_seconds: u32,
    /// Waiting room: lifetime of an admission token, seconds.
    #[arg(long, requires = "waiting_room", default_value_t = 120)]
    pub admission_ttl_seconds: u32,
    /// Seconds from the campaign's creation to its start (0: already started). With a
    /// waiting room, the joins before the start are the prequeue.
    #[arg(long, default_value_t = 0.0)]
    pub starts_in: f64,
    /// Waiting room: longest wait between two polls of a customer, ms (caps Retry-After).
    #[arg(long, default_value_t = 2_000)]
    pub max_poll_wait_ms: u64,
    /// Waiting room: fail unless Kendall tau between join order and admission order is at
    /// least this with `--queueing fifo` and no prequeue (0 turns the check off).
    #[arg(long, default_value_t = 0.9)]
    pub min_fifo_tau: f64,
    /// Waiting room: the key tickets are signed with (the edge secret), to open each ticket.
    #[arg(long, env = "FLASHGATE_EDGE_SECRET", hide_env_values = true)]
    pub edge_secret: Option<String>,
    /// Hold of the campaign created, in seconds (a sale's claims then expire unless paid):
    /// units come back to the gate during the run. The claims are then not expected to equal
    /// min(stock, customers who tried) at the end (units that came back after the crowd left
    /// stay remaining); the units are accounted for by `remaining = stock - active claims` and
    /// the origin's reconcile instead.
    #[arg(long)]
    pub hold_seconds: Option<i64>,
    /// Shards of the campaign's gate (1..=1024; default: the origin's, which follows the
    /// stock). `FLASHGATE_GATE_SHARDS` sets it for a whole script (e.g. the cluster demo).
    #[arg(long, env = "FLASHGATE_GATE_SHARDS")]
    pub gate_shards: Option<i64>,
    /// When stderr is not a terminal, a progress line every this many seconds (0: none). On a
    /// terminal the progress is a live bar instead.
    #[arg(long, default_value_t = 5.0)]
    pub progress_seconds: f64,
    /// Variants of the campaign created (0: none; at most 1,000): `--stock` split over them,
    /// each claim naming one, per-variant counts printed and checked ([`variants`]). Let the
    /// crowd outnumber every variant's stock: a tap sent to a sold-out variant is not sent to
    /// another, so `claims = min(stock, customers who tried)` needs each variant to sell out.
    #[arg(long, default_value_t = 0)]
    pub variants: u32,
}

impl Args {
    /// Requests in flight at most: `--open-loop-cap` in the open loop, else `--concurrency`.
    pub fn in_flight_cap(&self) -> usize {
        if self.open_loop {
            self.open_loop_cap
        } else {
            self.concurrency
        }
    }
}

/// Refuses any URL whose host is not a loopback address.
pub fn require_loopback(url: &str) -> anyhow::Result<()> {
    let u = reqwest::Url::parse(url).with_context(|| format!("bad URL {url:?}"))?;
    let host = u.host_str().unwrap_or("");
    let ok = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if !ok || !matches!(u.scheme(), "http" | "https") {
        bail!("{url}: the stampede only sends to http(s) on loopback addresses (127.0.0.0/8, ::1, localhost)");
    }
    Ok(())
}

/// Customer id of customer index `i`.
pub fn customer_id(i: u32) -> String {
    format!("c{i:07}")
}

fn base(url: &str) -> &str {
    url.trim_end_matches('/')
}

/// Runs a whole stampede: campaign, plan, load, report, checks. The caller prints/writes.
pub async fn run_stampede(args: &Args) -> anyhow::Result<Report> {
    require_loopback(&args.target)?;
    require_loopback(&args.origin)?;
    let kind = CampaignKind::parse(&args.kind)
        .ok_or_else(|| anyhow!("--kind must be sale or giveaway, not {:?}", args.kind))?;
    if !(args.window > 0.0 && args.window <= 3600.0) {
        bail!("--window must be in (0, 3600] seconds");
    }
    variants::check_count(args.variants)?;
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()?;

    let history_file = recorded::open(args)?;
    let campaign = match &args.campaign {
        Some(id) => campaign::read_status(&http, &args.origin, id).await?,
        None => campaign::create(&http, args, kind).await?,
    };
    // The target must know the campaign and see it active before the crowd arrives.
    let mut seen = None;
    for _ in 0..50 {
        match campaign::read_status(&http, &args.target, &campaign.id).await {
            Ok(s)
                if s.state == flashgate_shared::api::CampaignState::Active
                    || (args.starts_in > 0.0
                        && s.state == flashgate_shared::api::CampaignState::Scheduled) =>
            {
                seen = Some(s);
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    if seen.is_none() {
        bail!(
            "campaign {} is not active (or scheduled, with --starts-in) at the target {} after 10 s",
            campaign.id,
            args.target
        );
    }

    let plan = plan::build(&plan::PlanParams {
        customers: args.customers,
        tries: args.tries,
        window_us: (args.window * 1e6) as u64,
        double_tap: args.double_tap,
        same_key: args.same_key,
        each: args.tries_per_customer,
        seed: args.seed,
    });
    // Six hours: within the verifiers' default longest lifetime (24 h).
    let exp = Utc::now().timestamp() + 3600 * 6;
    let key = SigningKey::hs256(None, args.token_secret.as_bytes());
    let auth: Vec<String> = (0..plan.customers)
        .map(|i| {
            let mut claims = serde_json::json!({"sub": customer_id(i), "exp": exp});
            if let Some(iss) = &args.iss {
                claims["iss"] = iss.as_str().into();
            }
            if let Some(aud) = &args.aud {
                claims["aud"] = aud.as_str().into();
            }
            format!("Bearer {}", key.sign(&claims))
        })
        .collect();
    eprintln!(
        "stampede: campaign {} ({}, stock {}): {} tries by {} customers over {} s via {} ({} loop, {} in flight at most)",
        campaign.id,
        campaign.kind.as_str(),
        campaign.stock,
        plan.tries.len(),
        plan.customers,
        args.window,
        args.target,
        if args.open_loop { "open" } else { "closed" },
        args.in_flight_cap()
    );
    let history = recorded::recorder(history_file, &campaign.id);
    let send = run::SendConfig {
        claims_url: format!(
            "{}/api/v1/campaigns/{}/claims",
            base(&args.target),
            campaign.id
        ),
        key_prefix: campaign.id.clone(),
        concurrency: args.in_flight_cap(),
        held_by_cap: Default::default(),
        max_attempts: args.max_attempts.max(1),
        max_backoff: Duration::from_millis(args.max_backoff_ms),
        request_timeout: Duration::from_secs_f64(args.request_timeout),
        max_duration: Duration::from_secs_f64(args.max_duration),
        progress: progress::Progress::new(
            "stampede",
            plan.tries.len() as u64,
            plan.customers as usize,
        ),
        history: history.clone(),
        variants: args.variants,
    };
    let reporter = send
        .progress
        .report(Duration::from_secs_f64(args.progress_seconds.max(0.0)));
    let auth_after = auth.clone();
    let held_by_cap = send.held_by_cap.clone();
    let started_unix_ms = Utc::now().timestamp_millis();
    let lost_reply =
        (args.lost_reply > 0.0 && !args.waiting_room).then(|| (send.clone(), auth.clone()));
    let sent = if args.waiting_room {
        waiting_room::play(args, &campaign.id, send, &plan, auth)
            .await
            .map(|(visits, claims)| (claims, Some(visits)))
    } else {
        run::send_all(send, &plan, auth).await.map(|o| (o, None))
    };
    reporter.finish().await;
    let (outcomes, visits) = sent?;

    let mut report = report::compute(
        &report::RunInfo {
            campaign: campaign.id.clone(),
            kind: campaign.kind.as_str().to_string(),
            stock: campaign.stock,
            target: args.target.clone(),
            edge_runtime: args.edge_runtime.clone(),
            concurrency: args.in_flight_cap(),
            open_loop: args.open_loop,
            seed: args.seed,
            window_ms: (args.window * 1000.0) as u64,
        },
        &plan,
        &outcomes,
    );
    report.started_unix_ms = Some(started_unix_ms);
    report.tries_held_by_cap = held_by_cap.load(std::sync::atomic::Ordering::Relaxed);
    variants::tally(&mut report, args.variants, &outcomes);
    if let Some(visits) = &visits {
        waiting_room::report(args, &mut report, visits, &outcomes)?;
    }
    if let Some((send, auth)) = lost_reply {
        let picked = (args.lost_reply, args.seed);
        lost_reply::retry_winners(send, &plan, &outcomes, auth, picked, &mut report).await?;
    }

    // Answers the crowd can check without the database.
    let mut claim_of: HashMap<u32, &str> = HashMap::new();
    let mut conflicting = 0u64;
    let mut wrong_customer = 0u64;
    for o in &outcomes {
        if let Some((id, cust)) = &o.claim {
            if *cust != customer_id(o.customer) {
                wrong_customer += 1;
            }
            match claim_of.get(&o.customer) {
                Some(prev) if *prev != id.as_str() => conflicting += 1,
                Some(_) => {}
                None => {
                    claim_of.insert(o.customer, id.as_str());
                }
            }
        }
    }
    // The truth read back (unless --no-db-check), before the checks that need the stock: a
    // manager may have restocked during the run, so the stock is the campaign's now.
    let facts = if args.no_db_check {
        None
    } else {
        let url = args
            .database_url
            .as_deref()
            .ok_or_else(|| anyhow!("--database-url (DATABASE_URL) is needed for the invariants; --no-db-check skips them"))?;
        variants::check(&mut report, url, &campaign.id, args.hold_seconds.is_some()).await?;
        Some(db::read_back(url, &campaign.id).await?)
    };
    if let Some(recorder) = &history {
        recorded::lookups(
            &http,
            args,
            recorder,
            &outcomes,
            facts.as_ref(),
            &auth_after,
        )
        .await?;
    }
    let stock = facts.as_ref().map_or(campaign.stock, |f| f.stock);
    if args.hold_seconds.is_some() {
        // Holds expire: a unit sold again goes to a new winner, and a customer whose hold
        // expired may win a second claim. The truth's checks (no oversell, no customer with
        // two active claims) stand for these.
        report.add_skip(
            "winners <= stock",
            "holds expire during the run (--hold-seconds): units are sold again",
        );
        report.add_check(
            "no answer carried another customer's claim",
            wrong_customer == 0,
            format!("{wrong_customer} answers carried another customer's claim"),
        );
    } else {
        report.add_check(
            "winners <= stock",
            report.winners as i64 <= stock,
            format!("{} winners, stock {}", report.winners, stock),
        );
        report.add_check(
            "one claim per customer in the answers",
            conflicting == 0 && wrong_customer == 0,
            format!(
                "{conflicting} answers carried a second claim id for a customer; {wrong_customer} carried another customer's claim"
            ),
        );
    }

    report.add_check(
        "every answer within the API contract (no 500, no transport error)",
        report.unexpected_answers == 0,
        format!("{} tries ended otherwise", report.unexpected_answers),
    );
    match &facts {
        None => report.add_skip(
            "PostgreSQL read-back (every invariant on the truth)",
            "--no-db-check",
        ),
        Some(facts) => {
            db::add_checks(&mut report, facts, &outcomes, args.hold_seconds.is_some());
            told::add_check(
                &http,
                &args.target,
                &campaign.id,
                &auth_after,
                facts,
                &outcomes,
                &mut report,
            )
            .await;
        }
    }
    if let Some(token) = args.admin_token.as_deref() {
        reconcile::add_check(&http, &args.origin, token, &campaign.id, &mut report).await?;
    } else {
        report.add_skip("origin reconcile", "no --admin-token");
    }
    if args.waiting_room {
        // The crowd's claims come after admission, not after the sell-out: the edge's share
        // is that of the polls (waiting_room::report).
    } else if args.min_edge_share == 0.0 {
        report.add_skip("edge share after the sell-out", "--min-edge-share 0");
    } else if args.variants > 0 {
        variants::add_edge_check(&mut report, args.min_edge_share);
    } else {
        let share = report.edge_share_after_sell_out;
        report.add_check(
            format!(
                "edge answered >= {:.0} % of the tries sent after the sell-out (winners' taps apart)",
                args.min_edge_share * 100.0
            ),
            share.is_some_and(|s| s >= args.min_edge_share),
            match share {
                Some(s) => format!(
                    "{:.2} % ({} of {})",
                    s * 100.0,
                    report.edge_answered_after_sell_out,
                    report.tries_after_sell_out
                ),
                None => "no sell-out, or no try after it".to_string(),
            },
        );
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_targets() {
        for ok in [
            "http://127.0.0.1:8080",
            "http://127.5.0.1/",
            "http://localhost:1",
            "http://[::1]:9000",
        ] {
            assert!(require_loopback(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://10.0.0.1:8080",
            "http://example.com",
            "http://192.168.1.2",
            "ftp://127.0.0.1",
            "nonsense",
        ] {
            assert!(require_loopback(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn default_flags_are_the_flash_sale_shape() {
        let a = Args::parse_from([
            "stampede",
            "--target",
            "http://127.0.0.1:1",
            "--origin",
            "http://127.0.0.1:2",
            "--token-secret",
            "s",
        ]);
        assert_eq!(
            (a.stock, a.customers, a.tries, a.window),
            (1_000, 100_000, 200_000, 10.0)
        );
        assert!((a.double_tap - 0.3).abs() < 1e-9);
        assert_eq!(customer_id(42), "c0000042");
    }
}
