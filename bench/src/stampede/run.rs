//! Sends the planned tries: each at its due time (or as soon as one of `concurrency` slots is
//! free), retrying 503s, transport errors and `in_progress` with bounded backoff. Closed or
//! open loop is only the size of `concurrency` (`stampede --open-loop`): with a cap the crowd
//! never reaches, every try goes out at its due time whatever the earlier answers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flashgate_shared::queue::ADMISSION_HEADER;
use rand::Rng;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use tokio::sync::Semaphore;
use tokio::time::{sleep, sleep_until, Instant};

use super::plan::{Plan, PlannedTry, TapKind};
use super::progress::Progress;
use super::report::{Answerer, TryOutcome, NOT_SENT, TRANSPORT_ERROR};
use flashgate_tests::history::record::OpKind;
use flashgate_tests::history::writer::{Answer, Recorder};

/// How the tries are sent.
#[derive(Debug, Clone)]
pub struct SendConfig {
    /// `…/api/v1/campaigns/{id}/claims` on the target.
    pub claims_url: String,
    /// Prefix of every idempotency key (unique per run, since keys are scoped per customer and
    /// a key reused on another campaign is refused).
    pub key_prefix: String,
    /// Requests in flight at most (`--concurrency`, or `--open-loop-cap`).
    pub concurrency: usize,
    /// Tries that found every slot busy at their due time and waited for one ([`send_all`]).
    pub held_by_cap: Arc<AtomicU64>,
    /// Attempts per try, first included.
    pub max_attempts: u32,
    /// Longest wait between two attempts (also caps a larger `Retry-After`).
    pub max_backoff: Duration,
    pub request_timeout: Duration,
    /// No try is sent after this long; no retry starts after it either.
    pub max_duration: Duration,
    /// The live progress line's counters (each try counted when first sent and when answered).
    pub progress: Arc<Progress>,
    /// Where every attempt is recorded (`--history`), when it is.
    pub history: Option<Recorder>,
    /// Variants of the campaign: each try's body names one ([`super::variants::body`]); 0:
    /// none, the body is `{}`.
    pub variants: u32,
}

/// Backoff before retry number `retry` (1-based): the server's `Retry-After` when it gave one,
/// else 50 ms doubling; capped at `max`, then scaled by `jitter` (0.5..=1.0).
pub fn backoff(retry: u32, retry_after: Option<Duration>, max: Duration, jitter: f64) -> Duration {
    let base = Duration::from_millis(50).saturating_mul(1u32 << retry.saturating_sub(1).min(16));
    let wait = retry_after.map_or(base, |ra| ra.max(Duration::from_millis(50)));
    wait.min(max).mul_f64(jitter.clamp(0.5, 1.0))
}

/// Parses a `Retry-After` given in seconds (the form flashgate sends).
pub fn parse_retry_after(v: Option<&str>) -> Option<Duration> {
    v?.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// `result`, and the claim id and customer, from an answer body.
pub fn parse_body(status: u16, body: &[u8]) -> (String, Option<(String, String)>) {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
    let result = v
        .get("result")
        .and_then(|r| r.as_str())
        .map_or_else(|| format!("http_{status}"), str::to_string);
    let text = |x: &serde_json::Value| match x {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let claim = v.get("claim").and_then(|c| {
        Some((
            text(c.get("id")?)?,
            c.get("customer").and_then(text).unwrap_or_default(),
        ))
    });
    (result, claim)
}

pub(super) fn us_since(t0: Instant) -> u64 {
    t0.elapsed().as_micros() as u64
}

/// Sends one try (and its retries) and returns its outcome. `extra`: more headers (name,
/// value), e.g. the waiting room's admission token.
pub(super) async fn one_try(
    client: reqwest::Client,
    cfg: Arc<SendConfig>,
    t: PlannedTry,
    auth: Arc<Vec<String>>,
    extra: Vec<(&'static str, String)>,
    (t0, deadline): (Instant, Instant),
) -> TryOutcome {
    let key = format!("{}-{}", cfg.key_prefix, t.key);
    let mut o = not_sent(&t);
    o.variant = super::variants::pick(cfg.variants, t.key);
    cfg.progress.sent();
    loop {
        o.attempts += 1;
        let start = Instant::now();
        o.sent_us.get_or_insert_with(|| us_since(t0));
        o.last_sent_us = Some(us_since(t0));
        let mut req = client
            .post(&cfg.claims_url)
            .header(AUTHORIZATION, &auth[t.customer as usize])
            .header(flashgate_shared::IDEMPOTENCY_KEY_HEADER, &key)
            .header(CONTENT_TYPE, "application/json");
        for (name, value) in &extra {
            req = req.header(*name, value);
        }
        let sent_at = chrono::Utc::now();
        let sent = req
            .body(super::variants::body(cfg.variants, t.key))
            .send()
            .await;
        let mut retry_after = None;
        let mut answer = None;
        match sent {
            Ok(resp) => {
                if cfg.history.is_some() {
                    answer = Some(Answer::from_headers(&resp));
                }
                let status = resp.status().as_u16();
                let who = Answerer::from_header(
                    resp.headers()
                        .get(flashgate_shared::ANSWERED_BY_HEADER)
                        .and_then(|v| v.to_str().ok()),
                );
                retry_after = parse_retry_after(
                    resp.headers()
                        .get(RETRY_AFTER)
                        .and_then(|v| v.to_str().ok()),
                );
                match resp.bytes().await {
                    Ok(body) => {
                        if let Some(a) = &mut answer {
                            a.body = body.to_vec();
                        }
                        let (result, claim) = parse_body(status, &body);
                        o.status = status;
                        o.result = result;
                        o.claim = claim;
                        o.answered_by = who;
                        o.answered_us = Some(us_since(t0));
                        o.latencies.push((who, start.elapsed().as_micros() as u64));
                        o.unexpected =
                            (status >= 500 || o.result.starts_with("http_")).then(|| {
                                String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned()
                            });
                    }
                    Err(e) => {
                        answer = answer.map(|_| Answer::failed(format!("reading the body: {e}")));
                        o.status = 0;
                        o.result = TRANSPORT_ERROR.to_string();
                        o.answered_by = Answerer::Unknown;
                    }
                }
            }
            Err(e) => {
                if cfg.history.is_some() {
                    answer = Some(Answer::failed(&e));
                }
                o.status = 0;
                o.result = TRANSPORT_ERROR.to_string();
                o.answered_by = Answerer::Unknown;
                o.unexpected = Some(format!("{e}"));
            }
        }
        if let (Some(h), Some(a)) = (&cfg.history, answer) {
            let op = match (o.attempts, t.kind) {
                (1, TapKind::DoubleSameKey) => OpKind::Replay,
                (1, _) => OpKind::Claim,
                _ => OpKind::Retry,
            };
            h.record(op, &super::customer_id(t.customer), Some(&key), sent_at, a);
        }
        // An admitted claim refused 429 `queued` was paced (the edge's or the origin's pace of
        // admitted claims, docs/WAITING-ROOM.md): its turn comes after `Retry-After`, like
        // a claim still in progress, and is counted with those retries.
        let paced = o.status == 429
            && o.result == "queued"
            && extra.iter().any(|(n, _)| *n == ADMISSION_HEADER);
        let in_progress = (o.status == 409 && o.result == "in_progress") || paced;
        let unavailable = o.status == 0 || o.status == 502 || o.status == 503 || o.status == 504;
        // A paced claim waits its turn until the deadline, however many times it is paced: the
        // pace lets one through at the admit rate, and its admission token stays valid.
        if !(in_progress || unavailable) || (o.attempts >= cfg.max_attempts && !paced) {
            break;
        }
        let wait = backoff(
            o.attempts,
            retry_after,
            cfg.max_backoff,
            rand::rng().random_range(0.5..=1.0),
        );
        if Instant::now() + wait >= deadline {
            break;
        }
        if in_progress {
            o.retries_in_progress += 1;
        } else {
            o.retries_unavailable += 1;
        }
        sleep(wait).await;
    }
    cfg.progress
        .answered(t.customer, o.answered_by == Answerer::Edge, o.status == 201);
    o
}

pub(super) fn not_sent(t: &PlannedTry) -> TryOutcome {
    TryOutcome {
        customer: t.customer,
        kind: t.kind,
        variant: None,
        due_us: t.at_us,
        sent_us: None,
        last_sent_us: None,
        answered_us: None,
        status: 0,
        result: NOT_SENT.to_string(),
        answered_by: Answerer::Unknown,
        attempts: 0,
        retries_unavailable: 0,
        retries_in_progress: 0,
        claim: None,
        latencies: Vec::new(),
        unexpected: None,
    }
}

/// The HTTP client of the crowd: loopback, no proxy, `concurrency` idle connections kept.
pub(super) fn client(cfg: &SendConfig) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(cfg.concurrency)
        .timeout(cfg.request_timeout)
        .tcp_nodelay(true)
        .build()
}

/// Sends every try of `plan` and returns their outcomes in plan order. `auth[c]` is the
/// `Authorization` header value of customer `c`. Returns with the start instant.
pub async fn send_all(
    cfg: SendConfig,
    plan: &Plan,
    auth: Vec<String>,
) -> anyhow::Result<Vec<TryOutcome>> {
    let client = client(&cfg)?;
    let cfg = Arc::new(cfg);
    let auth = Arc::new(auth);
    let sem = Arc::new(Semaphore::new(cfg.concurrency.max(1)));
    let t0 = Instant::now();
    let deadline = t0 + cfg.max_duration;
    let mut handles = Vec::with_capacity(plan.tries.len());
    for t in &plan.tries {
        let due = t0 + Duration::from_micros(t.at_us);
        if due >= deadline {
            break;
        }
        sleep_until(due).await;
        if sem.available_permits() == 0 {
            cfg.held_by_cap.fetch_add(1, Ordering::Relaxed);
        }
        let permit = tokio::select! {
            p = sem.clone().acquire_owned() => p?,
            _ = sleep_until(deadline) => break,
        };
        let (client, cfg, auth, t) = (client.clone(), cfg.clone(), auth.clone(), *t);
        handles.push(tokio::spawn(async move {
            let _permit = permit;
            one_try(client, cfg, t, auth, Vec::new(), (t0, deadline)).await
        }));
    }
    let mut outcomes = Vec::with_capacity(plan.tries.len());
    for h in handles {
        outcomes.push(h.await?);
    }
    for t in &plan.tries[outcomes.len()..] {
        outcomes.push(not_sent(t));
    }
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_honours_retry_after_and_is_capped() {
        let max = Duration::from_secs(2);
        assert_eq!(backoff(1, None, max, 1.0), Duration::from_millis(50));
        assert_eq!(backoff(3, None, max, 1.0), Duration::from_millis(200));
        assert_eq!(backoff(30, None, max, 1.0), max);
        assert_eq!(
            backoff(1, Some(Duration::from_secs(1)), max, 1.0),
            Duration::from_secs(1)
        );
        assert_eq!(backoff(1, Some(Duration::from_secs(60)), max, 1.0), max);
        assert_eq!(
            backoff(1, Some(Duration::ZERO), max, 1.0),
            Duration::from_millis(50)
        );
        assert_eq!(backoff(2, None, max, 0.5), Duration::from_millis(50));
        assert_eq!(backoff(2, None, max, 0.0), Duration::from_millis(50));
    }

    #[test]
    fn retry_after_and_bodies() {
        assert_eq!(parse_retry_after(Some("1")), Some(Duration::from_secs(1)));
        assert_eq!(parse_retry_after(Some(" 3 ")), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(Some("soon")), None);
        assert_eq!(parse_retry_after(None), None);

        let (r, c) = parse_body(
            201,
            br#"{"result":"claimed","claim":{"id":"01J","campaign":"x","customer":"c1","status":"held"}}"#,
        );
        assert_eq!(r, "claimed");
        assert_eq!(c, Some(("01J".to_string(), "c1".to_string())));
        assert_eq!(parse_body(409, br#"{"result":"sold_out"}"#).0, "sold_out");
        assert_eq!(parse_body(502, b"<html>").0, "http_502");
        assert_eq!(parse_body(409, br#"{"result":"sold_out"}"#).1, None);
    }
}
