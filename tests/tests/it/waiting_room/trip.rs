//! The waiting room end to end: a real origin (PostgreSQL, Redis) behind the built worker in
//! workerd. Customers join through the edge, poll at the edge, claim once admitted; claims
//! reach the origin at the admit rate plus at most one second's burst (paced claims are sent
//! again after `Retry-After`), polls cost the origin
//! one status fetch per TTL, bad admission tokens are refused at the edge, and after the
//! sell-out every poll answers `sold_out` from the edge within the staleness bound.
//!
//! Parameters (environment): `WR_EDGE_CUSTOMERS` (default 200), `WR_EDGE_STOCK` (120),
//! `WR_EDGE_RATE` (admit per second, 50), `WR_EDGE_TTL_MS` (the edge's status TTL, 300),
//! `WR_EDGE_POLL_MS` (longest wait between two polls of a customer, whatever `Retry-After`
//! says, 250) and `WR_EDGE_INFLIGHT` (polls in flight at once, and joins, 256 each). The 10,000-customer
//! run: `WR_EDGE_CUSTOMERS=10000 WR_EDGE_STOCK=1000 WR_EDGE_RATE=100 WR_EDGE_TTL_MS=1000
//! WR_EDGE_POLL_MS=30000` (figures in docs/BENCHMARKS.md).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use flashgate_shared::admission::{check_admission, mint_admission, open_ticket};
use flashgate_shared::api::ChangeAction;
use flashgate_shared::queue::{WaitingRoom, ADMISSION_HEADER, TICKET_HEADER};
use flashgate_shared::ANSWERED_BY_HEADER;
use flashgate_tests::support::room::{admission, campaign, room, room_edge, size};
use flashgate_tests::support::{queue_config, unique, TestEdge, TestOrigin, TEST_EDGE_SECRET};
use futures::future::join_all;
use serde_json::Value;
use tokio::sync::Semaphore;

const K: &[u8] = TEST_EDGE_SECRET.as_bytes();

/// What one queued customer saw through the edge.
#[derive(Default)]
struct Seen {
    /// Her claims answered 429 `queued` by the pace of admitted claims (sent again after
    /// `Retry-After`).
    paced: u32,
    /// When her claim was last sent (the one answered other than 429) and its HTTP status.
    claim: Option<(Instant, u16)>,
    /// When her claim's answer came back.
    claim_answered: Option<Instant>,
    /// When the last poll that did not answer `sold_out` was sent.
    last_not_sold_out_sent: Option<Instant>,
    /// When the first `sold_out` answer came back.
    sold_out_at: Option<Instant>,
}

/// The crowd's shared client: one HTTP client, caps on polls and on joins in flight, the edge.
struct Crowd {
    http: reqwest::Client,
    inflight: Semaphore,
    /// Joins in flight at once (a join may wait its turn at the origin for seconds, and must
    /// not hold the polls back).
    joining: Semaphore,
    edge: String,
    id: String,
    max_wait: Duration,
    deadline: Instant,
}

impl Crowd {
    /// Joins through the edge (forwarded, signed by the edge), retrying a 503 after its
    /// `Retry-After` (the origin's join turn, see docs/WAITING-ROOM.md); the ticket.
    async fn join(&self, token: &str) -> String {
        for _ in 0..60 {
            let r = {
                let _p = self.joining.acquire().await.unwrap();
                self.http
                    .post(format!("{}/api/v1/campaigns/{}/queue", self.edge, self.id))
                    .bearer_auth(token)
                    .send()
                    .await
            };
            // A pooled connection the runtime had just closed: send again.
            let Ok(r) = r else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            if r.status() == 503 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            assert!(
                matches!(r.status().as_u16(), 200 | 201),
                "join {}",
                r.status()
            );
            let body: Value = r.json().await.unwrap();
            return body["ticket"].as_str().unwrap().to_string();
        }
        panic!("a join never got its place");
    }

    /// A customer's loop: poll (waiting at most `max_wait` of each `Retry-After`), claim once
    /// admitted, stop at `sold_out` or after her claim.
    async fn customer(&self, ticket: &str, token: &str) -> Seen {
        let mut seen = Seen::default();
        let url = format!("{}/api/v1/campaigns/{}/queue", self.edge, self.id);
        while Instant::now() < self.deadline {
            let (sent, res) = {
                let _p = self.inflight.acquire().await.unwrap();
                let sent = Instant::now();
                let res = self.http.get(&url).header(TICKET_HEADER, ticket).send();
                (sent, res.await)
            };
            // A pooled connection the runtime had just closed: poll again.
            let Ok(res) = res else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            assert_eq!(res.headers()[ANSWERED_BY_HEADER], "edge");
            let retry = retry_after_s(&res);
            let body: Value = res.json().await.expect("poll json");
            if body["state"] == "sold_out" {
                seen.sold_out_at = Some(Instant::now());
                return seen;
            }
            seen.last_not_sold_out_sent = Some(sent);
            if body["state"] == "admitted" {
                // Not behind the polls waiting for their turn: one claim per customer, sent
                // again (same key) after `Retry-After` while it is paced (429 `queued`).
                let key = unique("k");
                let mut tries = 0;
                let (sent, res) = loop {
                    let sent = Instant::now();
                    let res = self
                        .http
                        .post(format!("{}/api/v1/campaigns/{}/claims", self.edge, self.id))
                        .bearer_auth(token)
                        .header("idempotency-key", &key)
                        .header("content-type", "application/json")
                        .header(ADMISSION_HEADER, body["admission_token"].as_str().unwrap())
                        .body("{}")
                        .send()
                        .await;
                    // A pooled connection the runtime had just closed: the same claim again
                    // (same key, so it is decided once).
                    match res {
                        Ok(r) if r.status() == 429 => {
                            seen.paced += 1;
                            let retry = retry_after_s(&r);
                            let b: Value = r.json().await.expect("paced json");
                            assert_eq!(b["result"], "queued", "a paced claim is queued");
                            tokio::time::sleep(Duration::from_secs(retry)).await;
                        }
                        Ok(r) => break (sent, r),
                        Err(_) if tries < 5 => tries += 1,
                        Err(e) => panic!("claim: {e}"),
                    }
                };
                seen.claim = Some((sent, res.status().as_u16()));
                seen.claim_answered = Some(Instant::now());
                return seen;
            }
            tokio::time::sleep(Duration::from_secs(retry).min(self.max_wait)).await;
        }
        seen
    }
}

/// The answer's `Retry-After`, seconds (1 when absent).
fn retry_after_s(res: &reqwest::Response) -> u64 {
    res.headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or(1)
}

/// The most instants in any one-second window (`at` sorted).
fn peak_per_second(at: &[Instant]) -> usize {
    let mut end = 0;
    let mut best = 0;
    for (start, t0) in at.iter().enumerate() {
        while end < at.len() && at[end] < *t0 + Duration::from_secs(1) {
            end += 1;
        }
        best = best.max(end - start);
    }
    best
}

/// The `q`-quantile (0..=1) of `xs` (sorted), ms.
fn quantile_ms(xs: &[Duration], q: f64) -> u128 {
    xs.get(((xs.len().saturating_sub(1)) as f64 * q).round() as usize)
        .map_or(0, Duration::as_millis)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn through_the_edge_claims_keep_to_the_rate_and_sold_out_reaches_every_poll() {
    let o = TestOrigin::start_with(queue_config()).await;
    let customers = size("WR_EDGE_CUSTOMERS", 200);
    let stock = size("WR_EDGE_STOCK", 120) as i64;
    let rate = size("WR_EDGE_RATE", 50) as u32;
    let ttl_ms = size("WR_EDGE_TTL_MS", 300) as u64;
    // Admissions live 60 s: under a heavy crowd a poll may wait its turn at the edge for
    // seconds, and an admission that lapsed unclaimed would let the next customer in.
    let w = WaitingRoom {
        admission_ttl_seconds: 60,
        ..room(rate)
    };
    let id = campaign(&o, stock, chrono::Duration::minutes(-1), None, w).await;
    admission(&o, &id, ChangeAction::PauseAdmission).await;
    let edge = TestEdge::start(
        &o.url,
        &[
            ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.to_string()),
            ("FLASHGATE_STATUS_TTL_MS", ttl_ms.to_string()),
            ("FLASHGATE_LIMIT_IP_PER_S", "0".to_string()),
            ("FLASHGATE_LIMIT_JOINS_PER_S", "0".to_string()),
            ("FLASHGATE_LIMIT_POLLS_PER_S", "0".to_string()),
        ],
    );
    let crowd = Arc::new(Crowd {
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(1024)
            .build()
            .unwrap(),
        inflight: Semaphore::new(size("WR_EDGE_INFLIGHT", 256)),
        joining: Semaphore::new(size("WR_EDGE_INFLIGHT", 256)),
        edge: edge.url.clone(),
        id: id.clone(),
        max_wait: Duration::from_millis(size("WR_EDGE_POLL_MS", 250) as u64),
        deadline: Instant::now() + Duration::from_secs(600),
    });
    let run = unique("e");
    let people: Vec<(String, String)> = (0..customers)
        .map(|i| {
            let who = format!("{run}-{i}");
            let token = o.token(&who);
            (who, token)
        })
        .collect();
    // The first customer joins while admission is paused, to try bad admission tokens.
    let first_ticket = crowd.join(&people[0].1).await;
    // Bad admission tokens are refused at the edge; the origin sees none of them.
    let t = open_ticket(K, &first_ticket, &id).unwrap();
    let now = Utc::now().timestamp();
    let claims_before = o.origin_count(|m| &m.claim_requests);
    for (who, tok) in [
        (
            &people[0].1,
            mint_admission(b"forged-secret-0123456789abcdefghij", &t, now, 60),
        ),
        // Expired past the edge's replay grace (a recent one would be passed on, for the
        // origin to answer from its record).
        (&people[0].1, mint_admission(K, &t, now - 1_000, 60)),
        (&people[1].1, mint_admission(K, &t, now, 60)),
    ] {
        let res = crowd
            .http
            .post(format!("{}/api/v1/campaigns/{id}/claims", edge.url))
            .bearer_auth(who)
            .header("idempotency-key", unique("k"))
            .header("content-type", "application/json")
            .header(ADMISSION_HEADER, tok)
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 403);
        assert_eq!(res.headers()[ANSWERED_BY_HEADER], "edge");
    }
    let statuses_before = o.origin_count(|m| &m.status_requests);
    assert_eq!(o.origin_count(|m| &m.claim_requests), claims_before);
    // The crowd: each customer joins through the edge (forwarded, signed by the edge), then
    // polls at the edge and claims once admitted, while admission runs, as a crowd arriving
    // at a live sale does. One task per customer, so that the client's own work is spread
    // over its threads and does not hold claims back into bunches.
    admission(&o, &id, ChangeAction::ResumeAdmission).await;
    let started = Instant::now();
    let seen: Vec<Seen> = join_all(people.iter().enumerate().map(|(i, (_, token))| {
        let (crowd, token) = (crowd.clone(), token.clone());
        let first = (i == 0).then(|| first_ticket.clone());
        tokio::spawn(async move {
            let ticket = match first {
                Some(t) => t,
                None => crowd.join(&token).await,
            };
            crowd.customer(&ticket, &token).await
        })
    }))
    .await
    .into_iter()
    .map(|r| r.expect("customer task"))
    .collect();
    let elapsed = started.elapsed();
    let statuses = o.origin_count(|m| &m.status_requests) - statuses_before;
    let claims_at_origin = o.origin_count(|m| &m.claim_requests) - claims_before;
    // Claims as the origin recorded them (PostgreSQL's commit time): every claim that reached
    // it here is an admitted customer's, and each of them wins.
    let recorded: Vec<chrono::DateTime<Utc>> =
        sqlx::query_scalar("SELECT created_at FROM claims WHERE campaign_id = $1 ORDER BY 1")
            .bind(&id)
            .fetch_all(&o.db)
            .await
            .unwrap();
    let origin_peak = recorded
        .iter()
        .enumerate()
        .map(|(i, t0)| {
            recorded[i..]
                .iter()
                .take_while(|t| **t < *t0 + chrono::Duration::seconds(1))
                .count()
        })
        .max()
        .unwrap_or(0);
    let mut at: Vec<Instant> = seen.iter().filter_map(|s| s.claim.map(|c| c.0)).collect();
    at.sort();
    let peak = peak_per_second(&at);
    let paced: u64 = seen.iter().map(|s| u64::from(s.paced)).sum();
    let won = seen
        .iter()
        .filter(|s| matches!(s.claim, Some((_, 201))))
        .count();
    // The sell-out: the last winner's answer (the origin sold out before it answered).
    let sold_out = seen
        .iter()
        .filter(|s| matches!(s.claim, Some((_, 201))))
        .filter_map(|s| s.claim_answered)
        .max()
        .expect("somebody won");
    let losers: Vec<&Seen> = seen.iter().filter(|s| s.claim.is_none()).collect();
    let mut heard: Vec<Duration> = losers
        .iter()
        .filter_map(|s| Some(s.sold_out_at?.saturating_duration_since(sold_out)))
        .collect();
    heard.sort();
    let last_waiting = losers
        .iter()
        .filter_map(|s| s.last_not_sold_out_sent)
        .max()
        .map(|t| t.saturating_duration_since(sold_out));
    eprintln!(
        "edge run: {customers} queued, {won} won, {claims_at_origin} claims reached the origin, \
         peak {origin_peak} claims/s recorded by the origin, {peak} claims/s sent \
         (rate {rate}, bound {}), {paced} claims paced (429 queued, sent again), {statuses} status fetches at the origin in {elapsed:?} \
         (TTL {ttl_ms} ms, bound {}); sold_out heard after the sell-out: p50 {} ms, p99 {} ms, \
         max {} ms; the last poll answered other than sold_out was sent {last_waiting:?} after it",
        2 * rate,
        elapsed.as_millis() as u64 / ttl_ms + 2,
        quantile_ms(&heard, 0.5),
        quantile_ms(&heard, 0.99),
        quantile_ms(&heard, 1.0),
    );
    assert_eq!(won as i64, stock, "every unit went to an admitted customer");
    // The claims that reached the origin: every winner's, plus at most the ones the origin's
    // own pace refused (those the edge paced never left it).
    assert!(
        (won as u64..=won as u64 + paced).contains(&claims_at_origin),
        "{claims_at_origin} claims at the origin, {won} won, {paced} paced"
    );
    // The origin admits at most the rate + one second's burst, the edge reveals what it learns
    // at the admit rate (edge-worker/src/reveal.rs), and the edge and the origin pace admitted
    // claims at the rate with one second's burst, whatever the crowd's timing (a stalled
    // second catching up included): claims keep to 2 × rate where they are decided. The send
    // times are the client's (a claim sent during a stall is decided after it) and shown only.
    assert!(
        origin_peak <= 2 * rate as usize,
        "peak {origin_peak} claims/s at the origin > 2 × {rate}"
    );
    // One refresh per TTL per isolate (one isolate here), plus one in flight.
    let bound = elapsed.as_millis() as u64 / ttl_ms + 2;
    assert!(statuses <= bound, "{statuses} status fetches > {bound}");
    // After the sell-out, every waiting customer heard `sold_out` from the edge, and no poll
    // sent later than the staleness bound (TTL + a round trip, 1 s allowed) said otherwise.
    assert_eq!(losers.len(), customers - stock as usize);
    assert_eq!(
        heard.len(),
        losers.len(),
        "a waiting customer heard sold_out"
    );
    let staleness = Duration::from_millis(ttl_ms + 1_000);
    assert!(
        last_waiting.is_none_or(|d| d < staleness),
        "a poll sent {last_waiting:?} after the sell-out did not answer sold_out"
    );
    o.stop().await;
}

/// One poll of `url` with `ticket` at the edge; its JSON body.
async fn poll_once(http: &reqwest::Client, url: &str, ticket: &str) -> reqwest::Result<Value> {
    http.get(url)
        .header(TICKET_HEADER, ticket)
        .send()
        .await?
        .json()
        .await
}

/// Polls `url` with `ticket` until the edge answers `state`, at most `within`; the body.
async fn poll_until(
    http: &reqwest::Client,
    url: &str,
    ticket: &str,
    state: &str,
    within: Duration,
) -> Value {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(body) = poll_once(http, url, ticket).await {
            if body["state"] == state {
                return body;
            }
        }
        assert!(Instant::now() < deadline, "never {state}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The expiry of an admission token (seconds), read without checking the clock.
fn expiry_of(token: &str, id: &str, who: &str) -> i64 {
    check_admission(K, token, id, who, 0)
        .expect("a genuine admission token")
        .expires_at_s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn polling_never_renews_an_admission() {
    let o = TestOrigin::start_with(queue_config()).await;
    let id = campaign(&o, 3, chrono::Duration::minutes(-1), None, room(50)).await;
    let edge = room_edge(&o);
    let http = reqwest::Client::new();
    let ana = unique("ana");
    let token = o.token(&ana);
    let joined = http
        .post(format!("{}/api/v1/campaigns/{id}/queue", edge.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert!(matches!(joined.status().as_u16(), 200 | 201));
    let ticket = joined.json::<Value>().await.unwrap()["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    let url = format!("{}/api/v1/campaigns/{id}/queue", edge.url);
    let first = poll_until(&http, &url, &ticket, "admitted", Duration::from_secs(20)).await;
    let admission_token = first["admission_token"].as_str().unwrap().to_string();
    let expiry = expiry_of(&admission_token, &id, &ana);
    assert!(expiry <= Utc::now().timestamp() + 10, "expiry {expiry}");
    // She polls every second for 12 s without claiming: the same expiry on every admitted
    // poll, and `lapsed` (no token) once it has passed.
    let mut states = Vec::new();
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let body = poll_once(&http, &url, &ticket).await.unwrap();
        match body["state"].as_str() {
            Some("admitted") => {
                let t = body["admission_token"].as_str().unwrap();
                assert_eq!(expiry_of(t, &id, &ana), expiry, "a poll renewed: {body}");
            }
            Some("lapsed") => assert_eq!(body["admission_token"], Value::Null, "{body}"),
            _ => panic!("unexpected poll answer {body}"),
        }
        states.push(body["state"].as_str().unwrap().to_string());
    }
    assert_eq!(
        states.last().map(String::as_str),
        Some("lapsed"),
        "{states:?}"
    );
    // Her claim 13 s after her admission: 403 at the edge, and straight at the origin.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let res = http
        .post(format!("{}/api/v1/campaigns/{id}/claims", edge.url))
        .bearer_auth(&token)
        .header("idempotency-key", unique("k"))
        .header("content-type", "application/json")
        .header(ADMISSION_HEADER, &admission_token)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["result"], "forbidden", "{body}");
    let direct = o.signed_claim(&id, &ana, Some(&admission_token)).await;
    assert_eq!(
        (direct.status, direct.body["result"].clone()),
        (403, "forbidden".into()),
        "{}",
        direct.body
    );
    assert_eq!(o.claim_rows(&id, &[]).await, 0);
    o.stop().await;
}
