//! The plain-Rust part of a join answered at the edge, on the host, for counting its
//! instructions with callgrind (`scripts/profile-edge`): the same steps, in the same order, as
//! the worker's join in `edge-worker/src/glue/joins.rs` for a new customer joining a
//! waiting room with no access options (her customer token verified through the isolate's
//! verified-token cache, the campaign index, her ticket issued and signed, kept for the next
//! report, and the join's reply: her position and ETA as a poll shows them, as JSON). The
//! calls into the Workers runtime (headers, body, response) are not in it: they run in
//! workerd, not here.
//!
//! Usage: `join_cost JOINS FIFO`: mints one HS256 token per join (a new customer each), then
//! answers the joins inside `measured` (callgrind: `--collect-atstart=no
//! --toggle-collect=*measured*`), one millisecond apart. FIFO 1: a `fifo` room after its start
//! (arrival keys); 0: its prequeue (a keyed draw per customer). Prints the answers' status
//! counts.

mod common;

use flashgate_edge_worker::config::EdgeConfig;
use flashgate_edge_worker::decide::TokenCache;
use flashgate_edge_worker::index::{Check, IndexSlot};
use flashgate_edge_worker::joins::{self, Issued};
use flashgate_edge_worker::queue;
use flashgate_edge_worker::status::{self, StatusEntry};
use flashgate_shared::admission::sign_ticket;
use flashgate_shared::queue::JoinReply;
use flashgate_shared::token::{bearer, NumericDate};

const EDGE_SECRET: &[u8] = b"profile-edge-signing-secret-of-at-least-32-bytes";
const CAMPAIGN: &str = "spring-drop";
/// 2030-01-01T11:00:00Z.
const NOW_MS: i64 = 1_893_495_600_000;

/// What the isolate holds while the waiting room takes joins.
struct Isolate {
    cfg: EdgeConfig,
    tokens: TokenCache,
    index: IndexSlot,
    status: StatusEntry,
    issued: Issued,
}

fn isolate(fifo: bool) -> Isolate {
    let cfg = common::settings();
    let index = common::index_of(CAMPAIGN, NOW_MS);
    // FIFO: started an hour ago; else it starts in an hour, its prequeue open for two.
    let (state, starts_at) = if fifo {
        ("active", "2030-01-01T10:00:00Z")
    } else {
        ("scheduled", "2030-01-01T12:00:00Z")
    };
    let status_body = format!(
        r#"{{"id":"{CAMPAIGN}","name":"Drop","kind":"sale","state":"{state}","stock":500,"remaining":500,"starts_at":"{starts_at}","ends_at":"2030-01-01T14:00:00Z","queue":{{"now_serving":0,"admit_per_second":100,"admission_ttl_seconds":120,"prequeue_seconds":7200}}}}"#
    );
    let status = status::from_origin(CAMPAIGN, 200, status_body.as_bytes(), NOW_MS)
        .expect("a waiting room's status");
    Isolate {
        tokens: TokenCache::new(4_096),
        cfg,
        index,
        status,
        issued: Issued::new("profile"),
    }
}

/// One join as the glue answers it: 201 and the reply's JSON length, or the refusal's status.
fn answer(iso: &mut Isolate, authorization: &str, now_ms: i64) -> (u16, usize) {
    let Some(token) = bearer(authorization) else {
        return (401, 0);
    };
    let Ok(customer) = iso
        .tokens
        .verify(token, &iso.cfg.tokens, NumericDate::from_unix_ms(now_ms))
    else {
        return (401, 0);
    };
    let (ttl, stale) = (iso.cfg.status_ttl_ms, iso.cfg.status_max_stale_ms);
    if iso.index.check(CAMPAIGN, now_ms, ttl, stale, ttl) == Check::NotFound {
        return (404, 0);
    }
    let (status, known) = match queue::waiting_room(&iso.status) {
        Ok(found) => found,
        Err(a) => return (a.status, 0),
    };
    if !iso.issued.has_room(CAMPAIGN) {
        return (503, 0);
    }
    let issued = joins::issue(
        EDGE_SECRET,
        CAMPAIGN,
        &customer,
        known,
        status.starts_at,
        now_ms,
        (now_ms % 1024) as u32,
    );
    let mut ticket = match issued {
        Ok(t) => t,
        Err(a) => return (a.status, 0),
    };
    ticket.place.sequence = iso.issued.monotonic(ticket.place.sequence);
    iso.issued.note_key(CAMPAIGN, ticket.place.sequence, now_ms);
    let raw = sign_ticket(EDGE_SECRET, &ticket);
    // The reporter's start is the glue's (a Workers task), not counted here.
    let _ = iso.issued.add(CAMPAIGN, raw.clone(), now_ms);
    let poll = match queue::poll(
        &iso.status,
        &ticket,
        EDGE_SECRET,
        now_ms,
        iso.issued.recent_keys(CAMPAIGN),
    ) {
        Ok(p) => p,
        Err(a) => return (a.status, 0),
    };
    let body = JoinReply {
        ticket: raw,
        position: poll.reply.position,
        eta_seconds: poll.reply.eta_seconds,
        state: poll.reply.state,
    };
    (201, serde_json::to_vec(&body).map_or(0, |b| b.len()))
}

/// The counted part: one join per token, a millisecond apart, with a report taken every
/// 1,000 joins as the reporter would. Counts the 201s and any other answer.
#[inline(never)]
fn measured(iso: &mut Isolate, headers: &[String]) -> [u64; 2] {
    let mut seen = [0u64; 2];
    for (i, h) in headers.iter().enumerate() {
        let now = NOW_MS + i as i64;
        let (code, _) = answer(iso, h, now);
        seen[usize::from(code != 201)] += 1;
        if i % 1_000 == 999 {
            let _ = iso.issued.next(CAMPAIGN, 1, now + 1_000);
        }
    }
    seen
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let (Some(Ok(joins)), Some(Ok(fifo))) = (args.next(), args.next()) else {
        eprintln!("usage: join_cost JOINS FIFO");
        std::process::exit(2);
    };
    let headers = common::bearer_headers(joins, NOW_MS);
    let mut iso = isolate(fifo == 1);
    let [joined, other] = measured(&mut iso, &headers);
    println!(
        "joins {}: {joined} answered 201 with a new ticket, {other} other",
        headers.len()
    );
    if other > 0 || joined == 0 {
        std::process::exit(1);
    }
}
