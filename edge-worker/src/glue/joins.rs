//! Workers glue of joins answered at the edge (wasm32 only): `POST
//! /api/v1/campaigns/{id}/queue` rate limited, then, when the customer token verified here,
//! answered with her ticket from this isolate ([`crate::joins::issue`]), or the one she
//! presents again; the tickets issued go to the origin in one report per campaign and second
//! (`POST /edge/v1/campaigns/{id}/joins`, edge-signed), sent by a reporter that runs after the
//! answers (`waitUntil`).

use super::isolate::isolate_tag;
use super::origin::post_report;
use super::request_url::RequestUrl;
use super::respond::{answer, edge_json_headers, respond};
use super::{caller, now_ms, pass_through, shared_limit, status_for, telemetry};
use crate::access::{self, open_shadow, InviteMemo, INVITE_MEMO_CAPACITY};
use crate::config::EdgeConfig;
use crate::decide::{self, Answer};
use crate::joins::{Issued, Next};
use crate::queue;
use flashgate_shared::admission::{open_ticket, sign_ticket, Ticket};
use flashgate_shared::api::is_valid_slug;
use flashgate_shared::queue::access::ChallengeKind;
use flashgate_shared::queue::joins::{joins_path, IssuedReport};
use flashgate_shared::queue::{JoinReply, TICKET_HEADER};
use flashgate_shared::MAX_CLAIM_BODY_BYTES;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use worker::{js_sys, Delay, Env, Request, Response, Result};

/// Tries of one report (the same report id each time: the origin counts it once).
const REPORT_TRIES: u32 = 3;

thread_local! {
    static ISSUED: RefCell<Issued> = RefCell::new(Issued::new(&isolate_tag()));
    /// The tickets issued for invites at this isolate (a replay gets the first again).
    static INVITES: RefCell<InviteMemo> = RefCell::new(InviteMemo::new(INVITE_MEMO_CAPACITY));
    /// Campaigns whose reporter is to start after this request's answer (`waitUntil`).
    static STARTS: RefCell<Vec<(String, u64)>> = const { RefCell::new(Vec::new()) };
}

/// `f` of the arrival keys this isolate issued lately for campaign `id` (increasing; see
/// [`Issued::recent_keys`]), without copying them.
pub(super) fn with_recent_keys<R>(id: &str, f: impl FnOnce(&[u64]) -> R) -> R {
    ISSUED.with(|i| f(i.borrow().recent_keys(id)))
}

/// The reporters to start (campaign id, reporter number), taken out.
pub(super) fn take_starts() -> Vec<(String, u64)> {
    STARTS.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

/// `POST /api/v1/campaigns/{id}/queue`: rate limited per IP and per customer (when the
/// customer token verifies; the origin answers a bad one), then answered here
/// ([`join_here`]) when the token verified here, else passed through.
pub(super) async fn join(
    mut req: Request,
    env: &Env,
    cfg: &EdgeConfig,
    id: &str,
    url: &RequestUrl,
) -> Result<Response> {
    let (ip, customer) = match caller::joining(&req, cfg).await? {
        Ok(found) => found,
        Err(a) => return answer(&a),
    };
    // A verified customer's join is answered here; the origin answers any other (a bad
    // token's 401) on its own, as without an edge secret to sign tickets with.
    match (customer, &cfg.edge_secret) {
        (Some(customer), Some(_)) if is_valid_slug(id) => {
            // Read whole (the runtime resets a client whose body is left unread); the join has
            // no body to speak of, and one past the bound is refused as the origin would.
            match req.bytes().await {
                Ok(body) if body.len() > MAX_CLAIM_BODY_BYTES => answer(&decide::too_large()),
                Ok(body) => {
                    let join = Join {
                        env,
                        id,
                        customer: &customer,
                        body: &body,
                        ip: ip.as_deref(),
                    };
                    join_here(&req, cfg, &join, url).await
                }
                Err(_) => answer(&decide::unreadable_body()),
            }
        }
        _ => pass_through(req, cfg, url).await,
    }
}

/// A join whose customer token verified here.
struct Join<'a> {
    /// The worker's bindings (the rate-limit bindings among them).
    env: &'a Env,
    /// Campaign id.
    id: &'a str,
    /// The customer (the token's `sub`).
    customer: &'a str,
    /// The request body, read whole: empty or a [`flashgate_shared::queue::access::JoinBody`]
    /// (its fields used when the waiting room has a challenge or invites).
    body: &'a [u8],
    /// The client's IP, when known.
    ip: Option<&'a str>,
}

/// Answers join `j` to campaign `j.id`: 200 with the ticket she presents again
/// (`Flashgate-Ticket`, hers and this campaign's), or the one her invite got at this isolate,
/// else 201 with a new one, issued here, once her invite and challenge pass
/// ([`crate::access`]); a failed challenge gets an infinite-queue ticket (never reported) or
/// 403. Errors as a poll's (404, 409 `no_waiting_room`, 503 without a status), 400
/// `invalid_json` for a body neither empty nor a JSON object of the join's fields, 403
/// `forbidden` for a bad invite, 409 `conflict` before the prequeue opens, 429 `rate_limited`
/// past a budget held across isolates (asked only for a join that gets a new ticket), 503 when
/// this isolate holds too many tickets not reported yet.
async fn join_here(
    req: &Request,
    cfg: &EdgeConfig,
    j: &Join<'_>,
    url: &RequestUrl,
) -> Result<Response> {
    let (id, customer) = (j.id, j.customer);
    let Some(secret) = cfg.edge_secret.as_deref() else {
        return answer(&Answer::unavailable());
    };
    let (entry, _fresh) = status_for(cfg, id, url).await;
    let Some(entry) = entry else {
        return answer(&Answer::unavailable());
    };
    let (status, known) = match queue::waiting_room(&entry) {
        Ok(found) => found,
        Err(a) => return answer(&a),
    };
    let now = now_ms();
    let presented = req.headers().get(TICKET_HEADER).ok().flatten();
    if let Some(raw) = presented.as_deref() {
        if let Some(t) = open_ticket(secret, raw, id)
            .ok()
            .filter(|t| t.place.customer == customer)
        {
            return reply(200, raw.to_string(), &t, &entry, secret, None, now);
        }
        if let Some((t, key)) =
            open_shadow(secret, raw, id).filter(|(t, _)| t.place.customer == customer)
        {
            return reply(200, raw.to_string(), &t, &entry, secret, Some(&key), now);
        }
    }
    let acc = known.access;
    // Checked with access options or without: a join's body is empty or a JSON object of its
    // fields, never ignored.
    let body = match access::parse_body(j.body) {
        Ok(body) => body,
        Err(a) => return answer(&a),
    };
    let mut invite = None;
    let mut gate = access::Gate::Pass;
    if !acc.is_open() {
        let now_s = now.div_euclid(1000);
        let jti = match access::check_invite(secret, &acc, &body, id, customer, now_s) {
            Ok(jti) => jti,
            Err(a) => return answer(&a),
        };
        if let Some(jti) = &jti {
            let first = INVITES.with(|m| m.borrow().get(id, customer, jti).map(str::to_string));
            if let Some(raw) = first {
                if let Ok(t) = open_ticket(secret, &raw, id) {
                    return reply(200, raw, &t, &entry, secret, None, now);
                }
            }
        }
        invite = jti;
        // About to check a challenge (a Turnstile check is a subrequest) and issue a ticket:
        // counted across isolates (as below, in a room without access options).
        if let Err(a) = across_isolates(j, cfg).await {
            return answer(&a);
        }
        let check = match acc.challenge {
            ChallengeKind::None => Ok(()),
            ChallengeKind::Pow => access::check_pow(secret, &body, id, customer, now_s),
            ChallengeKind::Turnstile => {
                super::access::turnstile(cfg, body.turnstile_token.as_deref(), j.ip).await
            }
        };
        gate = match access::gate(&acc, check) {
            Ok(g) => g,
            Err(a) => {
                if let Err(f) = check {
                    telemetry::challenge_failed(id, f, true);
                }
                return answer(&a);
            }
        };
    }
    if acc.is_open() {
        if let Err(a) = across_isolates(j, cfg).await {
            return answer(&a);
        }
    }
    if !ISSUED.with(|i| i.borrow().has_room(id)) {
        return answer(&Answer::unavailable());
    }
    let salt = (js_sys::Math::random() * 1024.0) as u32;
    let issued = crate::joins::issue(secret, id, customer, known, status.starts_at, now, salt);
    let mut ticket = match issued {
        Ok(t) => t,
        Err(a) => return answer(&a),
    };
    if let access::Gate::InfiniteQueue(f) = gate {
        // Signed with the shadow key, kept out of the reports: the origin never sees it.
        telemetry::challenge_failed(id, f, false);
        let key = access::shadow_secret(secret);
        let raw = sign_ticket(&key, &ticket);
        return reply(201, raw, &ticket, &entry, secret, Some(&key), now);
    }
    ticket.place.sequence = ISSUED.with(|i| {
        let mut i = i.borrow_mut();
        let seq = i.monotonic(ticket.place.sequence);
        i.note_key(id, seq, now);
        seq
    });
    let raw = sign_ticket(secret, &ticket);
    if let Some(jti) = &invite {
        INVITES.with(|m| m.borrow_mut().put(id, customer, jti, raw.clone()));
    }
    if let Some(reporter) = ISSUED.with(|i| i.borrow_mut().add(id, raw.clone(), now)) {
        STARTS.with(|s| s.borrow_mut().push((id.to_string(), reporter)));
    }
    reply(201, raw, &ticket, &entry, secret, None, now)
}

/// Counts join `j`, about to get a new ticket, against her budget of joins and her IP's held
/// across isolates ([`shared_limit::check`]); `Err` is the 429.
async fn across_isolates(j: &Join<'_>, cfg: &EdgeConfig) -> std::result::Result<(), Answer> {
    let budget = crate::shared_limit::Budget::Joins;
    shared_limit::check(j.env, cfg, budget, j.customer, j.ip).await
}

/// The join's answer: her ticket, position, ETA and state as a poll would show them now (an
/// infinite-queue ticket's as [`access::shadow_poll`] shows them, with `shadow` its key).
fn reply(
    code: u16,
    raw: String,
    ticket: &Ticket,
    entry: &crate::status::StatusEntry,
    secret: &[u8],
    shadow: Option<&[u8]>,
    now: i64,
) -> Result<Response> {
    let id = &ticket.place.campaign;
    let polled = match shadow {
        Some(key) => access::shadow_poll(entry, ticket, key, now),
        None => with_recent_keys(id, |own| queue::poll(entry, ticket, secret, now, own)),
    };
    let poll = match polled {
        Ok(p) => p,
        Err(a) => return answer(&a),
    };
    let body = JoinReply {
        ticket: raw,
        position: poll.reply.position,
        eta_seconds: poll.reply.eta_seconds,
        state: poll.reply.state,
    };
    let headers = edge_json_headers()?;
    Ok(respond(
        code,
        headers,
        serde_json::to_vec(&body).unwrap_or_default(),
    ))
}

/// Reporter `reporter` of campaign `id` at this isolate: sends its issued tickets, one report
/// at most every second, until none is pending or a newer reporter took over. Runs after the answers (`waitUntil`). A report that
/// got no answer or a 5xx is tried again with the same id; one that never got through is put
/// back for the next report.
pub(super) async fn report(cfg: Rc<EdgeConfig>, id: String, reporter: u64) {
    loop {
        let next = ISSUED.with(|i| i.borrow_mut().next(&id, reporter, now_ms()));
        match next {
            Next::Stop => return,
            Next::Wait(ms) => {
                Delay::from(Duration::from_millis(u64::try_from(ms).unwrap_or(0))).await;
            }
            Next::Send(r) => {
                if !send_report(&cfg, &id, &r).await {
                    ISSUED.with(|i| i.borrow_mut().put_back(&id, r.tickets));
                }
            }
        }
    }
}

/// Sends report `r` of campaign `id`, up to [`REPORT_TRIES`] times ([`post_report`]).
async fn send_report(cfg: &EdgeConfig, id: &str, r: &IssuedReport) -> bool {
    let body = serde_json::to_vec(r).unwrap_or_default();
    post_report(
        cfg,
        "joins report",
        id,
        &joins_path(id),
        &body,
        REPORT_TRIES,
    )
    .await
}
