//! Workers glue of the waiting room (wasm32 only): queue polls answered at the edge, the
//! presence reports of the tickets that polled, and the pace and admission check of claims. The
//! decisions are in [`crate::queue`], [`crate::presence`] and [`crate::page`].

use super::caller;
use super::isolate::isolate_tag;
use super::joins::with_recent_keys;
use super::origin::post_signed;
use super::request_url::RequestUrl;
use super::respond::{edge_json_headers, respond};
use super::{answer, now_ms, status_for};
use crate::config::EdgeConfig;
use crate::decide::Answer;
use crate::limit::{Action, Limiter};
use crate::presence::Presence;
use crate::{page, queue};
use flashgate_shared::queue::presence::{presence_path, PresenceReport};
use flashgate_shared::queue::TICKET_HEADER;
use std::cell::RefCell;
use std::rc::Rc;
use worker::{Request, Response, Result};

/// Checked tickets kept per isolate.
const TICKET_CACHE_CAPACITY: usize = 50_000;
/// Campaigns whose forwarding pace is kept per isolate (a forgotten pace is a full bucket: at
/// most one extra second's burst for a campaign dropped and seen again).
const PACE_CAPACITY: usize = 10_000;

thread_local! {
    static TICKETS: RefCell<queue::TicketCache> =
        RefCell::new(queue::TicketCache::new(TICKET_CACHE_CAPACITY));
    /// Kept apart from the rate limits' buckets ([`caller::limit`]), whose per-customer keys
    /// could fill it and start it over.
    static PACE: RefCell<Limiter> = RefCell::new(Limiter::new(PACE_CAPACITY));
    /// The tickets that polled here, per campaign, until their report is sent.
    static PRESENCE: RefCell<Presence> = RefCell::new(Presence::new(&isolate_tag()));
    /// Reports due, sent by the fetch handler after the answer (`waitUntil`).
    static OUTBOX: RefCell<Vec<(String, PresenceReport)>> = const { RefCell::new(Vec::new()) };
}

/// The presence reports due (campaign id, report), taken out of the outbox.
pub(super) fn take_reports() -> Vec<(String, PresenceReport)> {
    OUTBOX.with(|o| std::mem::take(&mut *o.borrow_mut()))
}

/// Sends presence report `report` of campaign `id` to the origin, signed with the edge secret;
/// once more with the same report id when the first try got no answer or a 5xx (the origin
/// counts a report id once). Runs after the answer (`waitUntil`); failures are logged.
pub(super) async fn send_report(cfg: Rc<EdgeConfig>, id: String, report: PresenceReport) {
    let path = presence_path(&id);
    let body = serde_json::to_vec(&report).unwrap_or_default();
    for _ in 0..2 {
        let sent = post_signed(&cfg, &path, &body).await;
        match sent {
            Ok((code, _, _)) if code < 500 => {
                if code != 200 {
                    worker::console_error!("presence report for {id} refused: {code}");
                }
                return;
            }
            Ok((code, _, _)) => worker::console_error!("presence report for {id}: {code}"),
            Err(e) => worker::console_error!("presence report for {id}: {e}"),
        }
    }
}

/// Takes one of campaign `id`'s forwarding tokens (`admit_per_second` of them per second,
/// one second's burst); 429 `queued` + `Retry-After` ([`queue::paced`]) when spent.
pub(super) fn pace(id: &str, admit_per_second: u32) -> std::result::Result<(), Answer> {
    let now = now_ms();
    PACE.with(|p| {
        p.borrow_mut()
            .take(Action::Forward, id, admit_per_second, now)
            .map_err(queue::paced)
    })
}

/// The queue secret, or 503 (logged) when the edge has none.
pub(super) fn queue_secret(cfg: &EdgeConfig) -> std::result::Result<&[u8], Answer> {
    cfg.edge_secret.as_deref().ok_or_else(|| {
        worker::console_error!("waiting room: FLASHGATE_EDGE_SECRET is not set");
        Answer::unavailable()
    })
}

/// `GET /api/v1/campaigns/{id}/queue`: answered at the edge, never forwarded.
pub(super) async fn poll(
    req: Request,
    cfg: &EdgeConfig,
    id: &str,
    url: &RequestUrl,
) -> Result<Response> {
    match poll_answer(&req, cfg, id, url).await {
        Ok(resp) => Ok(resp),
        Err(a) => answer(&a),
    }
}

async fn poll_answer(
    req: &Request,
    cfg: &EdgeConfig,
    id: &str,
    url: &RequestUrl,
) -> std::result::Result<Response, Answer> {
    // Each header read is a call into the runtime: the client's IP is read only while the
    // per-IP limit is on.
    let req_headers = req.headers();
    let ip = if cfg.limits.ip_per_s > 0 {
        caller::ip_of(req_headers)
    } else {
        None
    };
    caller::limit(cfg, Action::AnyPerIp, None, ip.as_deref())?;
    let secret = queue_secret(cfg)?;
    let (entry, _fresh) = status_for(cfg, id, url).await;
    let entry = entry.ok_or_else(Answer::unavailable)?;
    let header = req_headers.get(TICKET_HEADER).ok().flatten();
    let raw = header.or_else(|| {
        url.parsed()
            .ok()?
            .query_pairs()
            .find(|(k, _)| k == "ticket")
            .map(|(_, v)| v.into_owned())
    });
    // An unknown campaign or one without a waiting room is said before the ticket is looked at.
    let (_, known) = queue::waiting_room(&entry)?;
    let html = page::wants_html(req_headers.get("accept").ok().flatten().as_deref());
    if html && raw.as_deref().is_none_or(|r| r.trim().is_empty()) {
        // A browser without a ticket gets the join page: its script joins.
        let body = page::render_join(id, &known.access, entry.variants(), &cfg.turnstile);
        let built = (|| {
            let headers = edge_json_headers()?;
            headers.set("content-type", "text/html; charset=utf-8")?;
            Ok::<_, worker::Error>(respond(200, headers, body.into_bytes()))
        })();
        return built.map_err(|_| Answer::unavailable());
    }
    let checked = TICKETS.with(|t| t.borrow_mut().check(secret, raw.as_deref(), id));
    // A ticket of the infinite queue opens with the shadow key: polled as any other, never
    // admitted, never reported.
    let shadow = match checked {
        Ok(_) => None,
        Err(_) => raw
            .as_deref()
            .and_then(|r| crate::access::open_shadow(secret, r, id)),
    };
    let ticket = match (&shadow, checked) {
        (Some((t, _)), _) => t.clone(),
        (None, checked) => checked?,
    };
    caller::limit(cfg, Action::Poll, Some(&ticket.place.customer), None)?;
    if let (Some(raw), None) = (raw.as_deref(), &shadow) {
        let due = PRESENCE.with(|p| p.borrow_mut().seen(id, raw, now_ms()));
        if let Some(report) = due {
            OUTBOX.with(|o| o.borrow_mut().push((id.to_string(), report)));
        }
    }
    let poll = match &shadow {
        Some((_, key)) => crate::access::shadow_poll(&entry, &ticket, key, now_ms())?,
        None => with_recent_keys(id, |own| {
            queue::poll(&entry, &ticket, secret, now_ms(), own)
        })?,
    };
    let built = (|| {
        let headers = edge_json_headers()?;
        let body = if html {
            headers.set("content-type", "text/html; charset=utf-8")?;
            page::render(
                id,
                raw.as_deref().unwrap_or_default(),
                &poll.reply,
                poll.retry_after_s,
            )
        } else {
            serde_json::to_string(&poll.reply).unwrap_or_default()
        };
        headers.set("retry-after", &poll.retry_after_s.to_string())?;
        Ok::<_, worker::Error>(respond(200, headers, body.into_bytes()))
    })();
    built.map_err(|_| Answer::unavailable())
}
