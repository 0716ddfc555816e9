//! The crowd through a waiting room (`stampede --waiting-room`): every customer joins the
//! queue at her planned arrival (a double-tapper joins again at her double tap and must get
//! the same ticket back), polls her place at the edge honouring `Retry-After` (capped), and
//! claims once, with the admission token, as soon as a poll says `admitted`. She stops
//! polling at `sold_out` or `ended`. Repeat tries of the plan are not played: in a waiting
//! room a customer claims once, when admitted.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, RETRY_AFTER};
use tokio::sync::Semaphore;
use tokio::time::{sleep, sleep_until, Instant};

use flashgate_shared::admission::open_ticket;
use flashgate_shared::queue::{
    JoinReply, QueueState, StatusReply, ADMISSION_HEADER, TICKET_HEADER,
};

use super::plan::{Plan, PlannedTry, TapKind};
use super::report::queue::Visit;
use super::report::{Answerer, TryOutcome};
use super::run::{backoff, not_sent, one_try, parse_retry_after, us_since, SendConfig};

/// The header workerd (Miniflare) takes the client's address from when a request sets it.
const CF_CONNECTING_IP: &str = "cf-connecting-ip";

/// The address customer `c` comes from: one per customer in 198.18.0.0/15 (RFC 2544's
/// benchmarking range), so the edge's per-IP limit sees a crowd, as it would behind
/// Cloudflare, and not every customer behind 127.0.0.1. (Cloudflare itself sets this header
/// and ignores the client's.)
pub fn client_ip(c: u32) -> String {
    let n = c % (1 << 17);
    format!("198.{}.{}.{}", 18 + (n >> 16), (n >> 8) & 0xff, n & 0xff)
}

/// Result label of the claim of a customer who was never admitted (sold out first).
pub const NOT_ADMITTED: &str = "not_admitted";

/// How the crowd goes through the queue.
#[derive(Debug, Clone)]
pub struct RoomConfig {
    /// `…/api/v1/campaigns/{id}/queue` on the target.
    pub queue_url: String,
    /// The campaign id (tickets must name it).
    pub campaign: String,
    /// The key tickets are signed with (`FLASHGATE_EDGE_SECRET`): each ticket is opened with
    /// it, which checks the signature and gives its sequence number.
    pub edge_secret: Vec<u8>,
    /// Longest wait between two polls, whatever `Retry-After` says.
    pub max_poll_wait: Duration,
}

/// One answer of the queue endpoint.
struct Answer {
    status: u16,
    by: Answerer,
    retry_after: Option<Duration>,
    body: Vec<u8>,
}

async fn send(req: reqwest::RequestBuilder, sem: &Semaphore) -> Result<Answer, String> {
    let _permit = sem.acquire().await.map_err(|e| e.to_string())?;
    let resp = req.send().await.map_err(|e| e.to_string())?;
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let by = Answerer::from_header(header(flashgate_shared::ANSWERED_BY_HEADER).as_deref());
    let retry_after = parse_retry_after(header(RETRY_AFTER.as_str()).as_deref());
    let status = resp.status().as_u16();
    let body = resp.bytes().await.map_err(|e| e.to_string())?.to_vec();
    Ok(Answer {
        status,
        by,
        retry_after,
        body,
    })
}

fn sample(a: &Answer) -> String {
    format!(
        "HTTP {} ({}): {}",
        a.status,
        a.by.as_str(),
        String::from_utf8_lossy(&a.body[..a.body.len().min(300)])
    )
}

/// Everything one customer task needs.
struct Ctx {
    client: reqwest::Client,
    cfg: Arc<SendConfig>,
    room: Arc<RoomConfig>,
    auth: Arc<Vec<String>>,
    sem: Arc<Semaphore>,
    t0: Instant,
    deadline: Instant,
}

impl Ctx {
    /// Joins, retrying 5xx, transport errors and 429 after `Retry-After` (capped), up to
    /// `max_attempts`. The final answer, or the last error.
    /// A re-join presents her `ticket` (she gets it back).
    async fn join(
        &self,
        customer: u32,
        v: &mut Visit,
        ticket: Option<&str>,
    ) -> Result<Answer, String> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut req = self
                .client
                .post(&self.room.queue_url)
                .header(CF_CONNECTING_IP, client_ip(customer))
                .header(AUTHORIZATION, &self.auth[customer as usize]);
            if let Some(t) = ticket {
                req = req.header(TICKET_HEADER, t);
            }
            let got = send(req, &self.sem).await;
            let retry_after = match &got {
                Ok(a) if a.status == 429 => {
                    v.rate_limited += 1;
                    a.retry_after
                }
                Ok(a) if a.status < 500 => return got,
                Ok(a) => a.retry_after,
                Err(_) => None,
            };
            let wait = backoff(attempt, retry_after, self.cfg.max_backoff, 1.0);
            if attempt >= self.cfg.max_attempts || Instant::now() + wait >= self.deadline {
                return got;
            }
            sleep(wait).await;
        }
    }

    /// Reads a join answer into the visit; the ticket and its sequence number when it is a
    /// valid one for this customer.
    fn read_join(&self, customer: u32, a: &Answer) -> Option<(String, JoinReply, u64)> {
        let reply: JoinReply = serde_json::from_slice(&a.body).ok()?;
        let t = open_ticket(&self.room.edge_secret, &reply.ticket, &self.room.campaign).ok()?;
        (t.place.customer == super::customer_id(customer))
            .then(|| (reply.ticket.clone(), reply, t.place.sequence))
    }

    async fn visit(&self, first: PlannedTry, rejoin_at_us: Option<u64>) -> (Visit, TryOutcome) {
        let c = first.customer;
        let mut v = Visit {
            customer: c,
            ..Visit::default()
        };
        v.join_sent_us = Some(us_since(self.t0));
        let joined = self.join(c, &mut v, None).await;
        v.join_answered_us = Some(us_since(self.t0));
        let (ticket, reply) = match &joined {
            Ok(a) => {
                v.join_status = a.status;
                match (a.status, self.read_join(c, a)) {
                    (201, Some((ticket, reply, seq))) => {
                        v.sequence = Some(seq);
                        v.ticket = Some(ticket.clone());
                        v.eta_at_join_s = Some(reply.eta_seconds);
                        (ticket, reply)
                    }
                    _ => {
                        v.last_state = format!("join_http_{}", a.status);
                        v.unexpected = Some(sample(a));
                        return (v, not_sent(&first));
                    }
                }
            }
            Err(e) => {
                v.last_state = "join_transport_error".into();
                v.unexpected = Some(e.clone());
                return (v, not_sent(&first));
            }
        };
        if let Some(at) = rejoin_at_us {
            sleep_until(self.t0 + Duration::from_micros(at)).await;
            v.rejoin = Some(match self.join(c, &mut v, Some(&ticket)).await {
                Ok(a) => (
                    a.status,
                    self.read_join(c, &a).is_some_and(|(t, _, _)| t == ticket),
                ),
                Err(_) => (0, false),
            });
        }
        let mut wait = match reply.state {
            QueueState::Waiting | QueueState::Paused => {
                Duration::from_secs((reply.eta_seconds / 2).clamp(1, 30))
            }
            _ => Duration::ZERO,
        };
        // Polls until admitted, sold out, ended, or the deadline.
        let token = loop {
            let wait_now = wait.min(self.room.max_poll_wait);
            if Instant::now() + wait_now >= self.deadline {
                v.last_state = "deadline".into();
                break None;
            }
            sleep(wait_now).await;
            let req = self
                .client
                .get(&self.room.queue_url)
                .header(CF_CONNECTING_IP, client_ip(c))
                .header(TICKET_HEADER, &ticket);
            v.polls += 1;
            let a = match send(req, &self.sem).await {
                Ok(a) => a,
                Err(e) => {
                    v.last_state = "poll_transport_error".into();
                    v.unexpected = Some(e);
                    wait = Duration::from_secs(1);
                    continue;
                }
            };
            v.polls_edge += u64::from(a.by == Answerer::Edge);
            wait = a.retry_after.unwrap_or(Duration::from_secs(1));
            if a.status == 429 {
                v.rate_limited += 1;
                continue;
            }
            let reply = (a.status == 200)
                .then(|| serde_json::from_slice::<StatusReply>(&a.body).ok())
                .flatten();
            let Some(reply) = reply else {
                v.last_state = format!("poll_http_{}", a.status);
                v.unexpected = Some(sample(&a));
                if a.status >= 500 {
                    continue;
                }
                break None;
            };
            v.last_state = serde_json::to_value(reply.state)
                .ok()
                .and_then(|s| s.as_str().map(str::to_string))
                .unwrap_or_default();
            match reply.state {
                QueueState::Admitted => {
                    v.admitted_us = Some(us_since(self.t0));
                    if reply.admission_token.is_none() {
                        v.unexpected = Some(format!("admitted without a token: {}", sample(&a)));
                    }
                    break reply.admission_token;
                }
                QueueState::SoldOut | QueueState::Ended | QueueState::Lapsed => break None,
                QueueState::Waiting | QueueState::Paused => {}
            }
        };
        let claim = match token {
            Some(token) => {
                let _permit = self.sem.acquire().await;
                // Due at the admission: the send lag of a claim is then the generator's own.
                let first = PlannedTry {
                    at_us: v.admitted_us.unwrap_or(first.at_us),
                    ..first
                };
                one_try(
                    self.client.clone(),
                    self.cfg.clone(),
                    first,
                    self.auth.clone(),
                    vec![(ADMISSION_HEADER, token), (CF_CONNECTING_IP, client_ip(c))],
                    (self.t0, self.deadline),
                )
                .await
            }
            None => TryOutcome {
                result: NOT_ADMITTED.to_string(),
                ..not_sent(&first)
            },
        };
        (v, claim)
    }
}

/// Plays the crowd of `plan` through the queue. Returns each customer's visit and her claim
/// (`not_sent` when she was never admitted), in customer order.
pub async fn play(
    cfg: SendConfig,
    room: RoomConfig,
    plan: &Plan,
    auth: Vec<String>,
) -> anyhow::Result<(Vec<Visit>, Vec<TryOutcome>)> {
    let t0 = Instant::now();
    let ctx = Arc::new(Ctx {
        client: super::run::client(&cfg)?,
        sem: Arc::new(Semaphore::new(cfg.concurrency.max(1))),
        t0,
        deadline: t0 + cfg.max_duration,
        cfg: Arc::new(cfg),
        room: Arc::new(room),
        auth: Arc::new(auth),
    });
    let rejoin: HashMap<u32, u64> = plan
        .tries
        .iter()
        .filter(|t| matches!(t.kind, TapKind::DoubleSameKey | TapKind::DoubleNewKey))
        .map(|t| (t.customer, t.at_us))
        .collect();
    let mut handles = Vec::with_capacity(plan.customers as usize);
    for t in plan.tries.iter().filter(|t| t.kind == TapKind::First) {
        let due = ctx.t0 + Duration::from_micros(t.at_us);
        if due >= ctx.deadline {
            break;
        }
        sleep_until(due).await;
        let (ctx, t, again) = (ctx.clone(), *t, rejoin.get(&t.customer).copied());
        handles.push(tokio::spawn(async move { ctx.visit(t, again).await }));
    }
    let mut visits = Vec::with_capacity(handles.len());
    let mut claims = Vec::with_capacity(handles.len());
    for h in handles {
        let (v, c) = h.await?;
        visits.push(v);
        claims.push(c);
    }
    Ok((visits, claims))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_benchmarking_address_per_customer() {
        let ips: std::collections::HashSet<String> = (0..1u32 << 17).map(client_ip).collect();
        assert_eq!(ips.len(), 1 << 17);
        for ip in [client_ip(0), client_ip((1 << 17) - 1), client_ip(300)] {
            let a: std::net::Ipv4Addr = ip.parse().unwrap();
            assert!(a.octets()[0] == 198 && (a.octets()[1] & 0xfe) == 18, "{a}");
        }
        assert_eq!(client_ip(0), "198.18.0.0");
        assert_eq!(client_ip(300), "198.18.1.44");
    }
}
