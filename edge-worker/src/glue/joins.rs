//! Workers glue of grouped joins (wasm32 only): a join whose customer token verified here waits
//! for its campaign's group in flight at this isolate, then goes to the origin in the next
//! group (`POST /edge/v1/campaigns/{id}/joins`, edge-signed); each join gets its own answer out
//! of the group's. The decisions are in [`crate::joins`].

use super::respond::respond;
use super::{now_ms, send_bounded, sign_forwarded, wait_until};
use crate::config::EdgeConfig;
use crate::decide::Answer;
use crate::joins::{JoinGroups, Outcome};
use flashgate_shared::queue::joins::{joins_path, JoinGroup, JoinGroupReply};
use flashgate_shared::ANSWERED_BY_HEADER;
use std::cell::RefCell;
use worker::{js_sys, Headers, Method, Request, RequestInit, Response, Result};

/// Largest answer to a group read from the origin, bytes (500 replies of about 400 bytes,
/// with room).
const MAX_GROUP_REPLY_BYTES: usize = 1 << 20;

thread_local! {
    static GROUPS: RefCell<JoinGroups> = RefCell::new(JoinGroups::new());
}

/// Joins `customer` (verified here) to campaign `id`'s queue through this isolate's groups and
/// answers her as her own join would have been answered: 201 or 200 with her ticket, or the
/// group's error (404, 409, 503 with `Retry-After`, …). 503 `unavailable` when no answer came
/// within two origin timeouts.
pub(super) async fn join(cfg: &EdgeConfig, id: &str, customer: &str) -> Result<Response> {
    let stale_ms = cfg.origin_timeout_ms.saturating_add(1_000);
    let deadline = now_ms().saturating_add(stale_ms.saturating_mul(2));
    let me = GROUPS.with(|g| g.borrow_mut().enqueue(id, customer));
    loop {
        if let Some(outcome) = GROUPS.with(|g| g.borrow_mut().take(id, me)) {
            return reply(outcome);
        }
        if now_ms() >= deadline {
            GROUPS.with(|g| g.borrow_mut().abandon(id, me));
            return reply(outcome_of(&Answer::unavailable()));
        }
        let group = GROUPS.with(|g| g.borrow_mut().lead(id, now_ms(), stale_ms));
        match group {
            Some(group) => {
                let (ids, customers): (Vec<u64>, Vec<String>) = group.into_iter().unzip();
                let answers = send_group(cfg, id, customers).await;
                GROUPS.with(|g| g.borrow_mut().settle(id, &ids, answers));
            }
            // A waiter is never woken from the leader's I/O context: it looks again on short
            // timers of its own.
            None => {
                wait_until(deadline, || {
                    GROUPS.with(|g| !g.borrow().should_wait(id, me, now_ms(), stale_ms))
                })
                .await
            }
        }
    }
}

/// Sends one group and returns an answer per customer, in order: each her own on a 200, the
/// origin's error for all on a refusal, 503 for all when the origin could not be reached or
/// answered something else.
async fn send_group(cfg: &EdgeConfig, id: &str, customers: Vec<String>) -> Vec<Outcome> {
    let n = customers.len();
    let path = joins_path(id);
    let body = serde_json::to_vec(&JoinGroup { customers }).unwrap_or_default();
    let sent = async {
        let headers = Headers::new();
        headers.set("content-type", "application/json")?;
        sign_forwarded(cfg, &headers, None, "POST", &path, &body)?;
        let mut init = RequestInit::new();
        init.with_method(Method::Post)
            .with_headers(headers)
            .with_body(Some(js_sys::Uint8Array::from(body.as_slice()).into()));
        let req = Request::new_with_init(&format!("{}{path}", cfg.origin_url), &init)?;
        send_bounded(req, cfg.origin_timeout_ms, Some(MAX_GROUP_REPLY_BYTES)).await
    }
    .await;
    let unavailable = || vec![outcome_of(&Answer::unavailable()); n];
    match sent {
        Ok((200, _, body)) => match serde_json::from_slice::<JoinGroupReply>(&body) {
            Ok(r) if r.joins.len() == n => r
                .joins
                .into_iter()
                .map(|j| Outcome {
                    status: j.status,
                    body: serde_json::to_vec(&j.reply).unwrap_or_default(),
                    retry_after: None,
                    from_origin: true,
                })
                .collect(),
            _ => {
                worker::console_error!("joins of {id}: the origin's answer is not the group's");
                unavailable()
            }
        },
        Ok((code, headers, body)) if (400..500).contains(&code) || code == 503 => {
            let retry_after = headers.get("retry-after").ok().flatten();
            vec![
                Outcome {
                    status: code,
                    body,
                    retry_after,
                    from_origin: true,
                };
                n
            ]
        }
        Ok((code, _, _)) => {
            worker::console_error!("joins of {id}: the origin answered {code}");
            unavailable()
        }
        Err(e) => {
            worker::console_error!("joins of {id}: {e}");
            unavailable()
        }
    }
}

/// An answer the edge made itself, as an [`Outcome`].
fn outcome_of(a: &Answer) -> Outcome {
    Outcome {
        status: a.status,
        body: a.body.clone().into_bytes(),
        retry_after: a.retry_after_s.map(|s| s.to_string()),
        from_origin: false,
    }
}

/// The response for one join: JSON, `Cache-Control: private, no-store`, answered by the origin
/// (it gave the place or the refusal) unless the edge made the answer.
fn reply(o: Outcome) -> Result<Response> {
    let headers = super::respond::edge_json_headers()?;
    if o.from_origin {
        headers.set(ANSWERED_BY_HEADER, "origin")?;
    }
    if let Some(s) = &o.retry_after {
        headers.set("retry-after", s)?;
    }
    Ok(respond(o.status, headers, o.body))
}
