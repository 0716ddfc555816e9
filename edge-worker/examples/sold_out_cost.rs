//! The plain-Rust part of the edge's sold-out answer on the host, for counting its
//! instructions with callgrind (`scripts/profile-edge`): the same decisions, in the same order,
//! as the worker's claim path in `edge-worker/src/glue/claim.rs` for a claim answered `sold_out`
//! at the edge (request checks and the customer token through the isolate's verified-token
//! cache, the campaign index, then the claim plan, [`flashgate_edge_worker::plan`]: the
//! sold-out gate and the winners filter; the claim count). The
//! calls into the Workers runtime (headers, body, response) are not in it: they run in
//! workerd, not here.
//!
//! Usage: `sold_out_cost CUSTOMERS REQUESTS`: mints one HS256 token per customer, answers
//! every token once (warm-up: each customer's first verification), then REQUESTS claims,
//! the customers in turn, inside `measured` (callgrind: `--collect-atstart=no
//! --toggle-collect=*measured*`). Prints the answers' status counts.

mod common;

use flashgate_edge_worker::config::EdgeConfig;
use flashgate_edge_worker::decide::{self, ClaimInput, TokenCache};
use flashgate_edge_worker::index::{Check, IndexSlot};
use flashgate_edge_worker::plan::{ClaimPlan, Do, Got};
use flashgate_edge_worker::status::{self, StatusEntry};
use flashgate_edge_worker::telemetry::Counts;
use flashgate_edge_worker::winners::{self, Look, WinnersSlot};
use flashgate_shared::token::NumericDate;
use flashgate_shared::winners_filter::WinnersFilter;

const CAMPAIGN: &str = "spring-sale";
const NOW_MS: i64 = 1_900_000_000_000;
/// [`answer`]'s value for a claim the worker forwards.
const FORWARDED: u16 = 0;

/// What the isolate holds while the campaign is sold out.
struct Isolate {
    cfg: EdgeConfig,
    tokens: TokenCache,
    index: IndexSlot,
    status: StatusEntry,
    winners: WinnersSlot,
    counts: Counts,
}

fn isolate() -> Isolate {
    let cfg = common::settings();
    let index = common::index_of(CAMPAIGN, NOW_MS);
    let status_body = format!(
        r#"{{"id":"{CAMPAIGN}","name":"Spring","kind":"giveaway","state":"sold_out","stock":1,"remaining":0,"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-02T00:00:00Z"}}"#
    );
    let status = status::from_origin(CAMPAIGN, 200, status_body.as_bytes(), NOW_MS)
        .expect("a sold-out status");
    let mut winners = WinnersSlot::default();
    let filter = WinnersFilter::build(["the-winner"], 250_000).encode();
    winners.start(winners::sold_key(Some(&status)), NOW_MS);
    winners.finish(
        winners::Fetched::from_origin(200, Some("\"w1\""), &filter, false),
        NOW_MS,
    );
    Isolate {
        tokens: TokenCache::new(4_096),
        cfg,
        index,
        status,
        winners,
        counts: Counts::default(),
    }
}

/// One claim: the HTTP status of the edge's answer (409 for `sold_out`), or [`FORWARDED`]
/// when the worker would send it to the origin (a customer the winners filter may list: about
/// 0.39 % of the customers who did not win).
fn answer(iso: &mut Isolate, authorization: &str, now_ms: i64) -> u16 {
    let input = ClaimInput {
        authorization: Some(authorization),
        idempotency_key: Some(b"bench-key"),
        content_type: Some("application/json"),
        content_length: None,
        body: Some(b"{}"),
    };
    let now = NumericDate::from_unix_ms(now_ms);
    let customer = match decide::check_claim(&input, &mut iso.tokens, &iso.cfg.tokens, now) {
        Ok(c) => c,
        Err(a) => return a.status,
    };
    if let Err(a) = decide::claim_campaign_check(CAMPAIGN) {
        return a.status;
    }
    let (ttl, stale) = (iso.cfg.status_ttl_ms, iso.cfg.status_max_stale_ms);
    if iso.index.check(CAMPAIGN, now_ms, ttl, stale, ttl) == Check::NotFound {
        return 404;
    }
    // The rules after the cached status, in the glue's order: the claim plan's.
    let mut plan = ClaimPlan::new(
        Some(&iso.status),
        true,
        now_ms,
        iso.cfg.not_started_skew_ms,
        b"{}",
    );
    let mut got = Got::Start;
    loop {
        got = match plan.next(got) {
            Do::Answer(a) => {
                iso.counts.add(a.body.as_bytes(), "edge");
                return a.status;
            }
            Do::Forward => return FORWARDED,
            Do::AskWinners => {
                let sold = winners::sold_key(Some(&iso.status));
                match iso.winners.look(&customer, sold, now_ms, ttl, stale, ttl) {
                    Look::Decided(v) => Got::Verdict(v),
                    // The worker would fetch the filter first.
                    _ => return FORWARDED,
                }
            }
            // The waiting room's steps: this campaign has none, so they are never asked.
            Do::Limit { .. } | Do::CheckAdmission | Do::Pace(_) => return FORWARDED,
        };
    }
}

/// The counted part: `requests` claims, the tokens in turn. Counts sold_out answers,
/// forwarded claims and any other answer.
#[inline(never)]
fn measured(iso: &mut Isolate, headers: &[String], requests: usize) -> [u64; 3] {
    let mut seen = [0u64; 3];
    for i in 0..requests {
        let kind = match answer(iso, &headers[i % headers.len()], NOW_MS + 1) {
            409 => 0,
            FORWARDED => 1,
            _ => 2,
        };
        seen[kind] += 1;
    }
    seen
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let (Some(Ok(customers)), Some(Ok(requests))) = (args.next(), args.next()) else {
        eprintln!("usage: sold_out_cost CUSTOMERS REQUESTS");
        std::process::exit(2);
    };
    let headers = common::bearer_headers(customers, NOW_MS);
    let mut iso = isolate();
    warm_up(&mut iso, &headers);
    let [sold_out, forwarded, other] = measured(&mut iso, &headers, requests);
    println!(
        "customers {}: each token verified once, then {sold_out} sold_out at the edge, \
         {forwarded} forwarded (winners filter), {other} other",
        headers.len()
    );
    if other > 0 {
        std::process::exit(1);
    }
}

/// Each token once, outside the counted part (each customer's first verification).
fn warm_up(iso: &mut Isolate, headers: &[String]) {
    for h in headers {
        answer(iso, h, NOW_MS);
    }
}
