//! Workers glue of joins answered at the edge (wasm32 only): a join whose customer token
//! verified here gets her ticket from this isolate ([`crate::joins::issue`]), or the one she
//! presents again; the tickets issued go to the origin in one report per campaign and second
//! (`POST /edge/v1/campaigns/{id}/joins`, edge-signed), sent by a reporter that runs after the
//! answers (`waitUntil`).

use super::origin::post_signed;
use super::respond::{answer, edge_json_headers, respond};
use super::{now_ms, status_for};
use crate::config::EdgeConfig;
use crate::decide::Answer;
use crate::joins::{Issued, Next};
use crate::queue;
use flashgate_shared::admission::{open_ticket, sign_ticket, Ticket};
use flashgate_shared::queue::joins::{joins_path, IssuedReport};
use flashgate_shared::queue::{JoinReply, TICKET_HEADER};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use worker::{js_sys, Delay, Request, Response, Result};

/// Tries of one report (the same report id each time: the origin counts it once).
const REPORT_TRIES: u32 = 3;

thread_local! {
    static ISSUED: RefCell<Issued> = RefCell::new(Issued::new(&super::queue::isolate_tag()));
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

/// Answers the join of `customer` (verified here) to campaign `id`: 200 with the ticket she
/// presents again (`Flashgate-Ticket`, hers and this campaign's), else 201 with a new one,
/// issued here. Errors as a poll's (404, 409 `no_waiting_room`, 503 without a status), 409
/// `conflict` before the prequeue opens, 503 when this isolate holds too many tickets not
/// reported yet.
pub(super) async fn join(
    req: &Request,
    cfg: &EdgeConfig,
    id: &str,
    customer: &str,
    url: &worker::Url,
) -> Result<Response> {
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
    let hers = presented
        .as_deref()
        .and_then(|raw| open_ticket(secret, raw, id).ok().map(|t| (raw, t)))
        .filter(|(_, t)| t.place.customer == customer);
    if let Some((raw, ticket)) = hers {
        return reply(200, raw.to_string(), &ticket, &entry, secret, now);
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
    ticket.place.sequence = ISSUED.with(|i| {
        let mut i = i.borrow_mut();
        let seq = i.monotonic(ticket.place.sequence);
        i.note_key(id, seq, now);
        seq
    });
    let raw = sign_ticket(secret, &ticket);
    if let Some(reporter) = ISSUED.with(|i| i.borrow_mut().add(id, raw.clone(), now)) {
        STARTS.with(|s| s.borrow_mut().push((id.to_string(), reporter)));
    }
    reply(201, raw, &ticket, &entry, secret, now)
}

/// The join's answer: her ticket, position, ETA and state as a poll would show them now.
fn reply(
    code: u16,
    raw: String,
    ticket: &Ticket,
    entry: &crate::status::StatusEntry,
    secret: &[u8],
    now: i64,
) -> Result<Response> {
    let id = &ticket.place.campaign;
    let poll = match with_recent_keys(id, |own| queue::poll(entry, ticket, secret, now, own)) {
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

/// Sends report `r` of campaign `id`, up to [`REPORT_TRIES`] times; true once the origin
/// answered it (a 4xx refusal included: sending it again would not help; logged).
async fn send_report(cfg: &EdgeConfig, id: &str, r: &IssuedReport) -> bool {
    let path = joins_path(id);
    let body = serde_json::to_vec(r).unwrap_or_default();
    for attempt in 0..REPORT_TRIES {
        if attempt > 0 {
            Delay::from(Duration::from_millis(500 * u64::from(attempt))).await;
        }
        let sent = post_signed(cfg, &path, &body).await;
        match sent {
            Ok((code, _, _)) if code < 500 => {
                if code != 200 {
                    worker::console_error!("joins report for {id} refused: {code}");
                }
                return true;
            }
            Ok((code, _, _)) => worker::console_error!("joins report for {id}: {code}"),
            Err(e) => worker::console_error!("joins report for {id}: {e}"),
        }
    }
    false
}
