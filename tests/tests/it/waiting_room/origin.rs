//! The waiting room, origin side, against a real origin, PostgreSQL and Redis: joins (5,000
//! truly concurrent), FIFO admission, the shuffled prequeue, stock-aware admission, and the
//! origin's admission check on claims and its pace of admitted claims. The whole trip through the built worker in workerd is
//! `waiting_room_trip.rs`.
//!
//! Sizes are parameters: `WR_JOINS` (default 5,000) and `WR_PREQUEUE` (default 1,000).

use std::time::{Duration, Instant};

use chrono::Utc;
use flashgate_bench::stampede::report::queue::kendall_tau_b;
use flashgate_shared::admission::{mint_admission, open_ticket, sign_ticket, Place, Ticket};
use flashgate_shared::api::ChangeAction;
use flashgate_shared::queue::RANDOM_BLOCK;
use flashgate_tests::support::room::{admission, campaign, room, size};
use flashgate_tests::support::{
    edge_headers, eventually, own_services, queue_config, send_raw, unique, TestOrigin,
    TEST_EDGE_SECRET,
};
use futures::future::join_all;
use serde_json::Value;

const K: &[u8] = TEST_EDGE_SECRET.as_bytes();

fn ticket_of(body: &Value, id: &str) -> Ticket {
    open_ticket(K, body["ticket"].as_str().expect("ticket"), id).expect("a valid ticket")
}

/// The `queue` object of the public status.
async fn queue(o: &TestOrigin, id: &str) -> Value {
    o.status(id).await["queue"].clone()
}

/// Polls the status until `done(queue)`; panics with the last `queue` after `within`.
async fn wait_queue(o: &TestOrigin, id: &str, within: Duration, done: impl Fn(&Value) -> bool) {
    eventually("the queue to get there", within, || async {
        let q = queue(o, id).await;
        if done(&q) {
            Ok(())
        } else {
            Err(q.to_string())
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_joins_get_each_position_once_and_rejoins_keep_their_ticket() {
    let o = TestOrigin::start_with(queue_config()).await;
    let id = campaign(&o, 10, chrono::Duration::minutes(-1), None, room(100)).await;
    // Nobody has joined yet, so pausing now admits nobody meanwhile.
    admission(&o, &id, ChangeAction::PauseAdmission).await;
    let n = size("WR_JOINS", 5_000);
    let run = unique("c");
    let people: Vec<String> = (0..n).map(|i| format!("{run}-{i}")).collect();
    let started = Instant::now();
    let mut replies = join_all(people.iter().map(|p| o.join(&id, p))).await;
    eprintln!("{n} concurrent joins in {:?}", started.elapsed());
    // On this shared machine a join may meet the origin's Redis response timeout (503 +
    // Retry-After); the client retries, and gets her place once: 201, or 200 when the step
    // ran before the timeout.
    let mut retried = vec![false; n];
    for _ in 0..5 {
        for (i, p) in people.iter().enumerate() {
            if replies[i].0 == 503 {
                retried[i] = true;
                replies[i] = o.join(&id, p).await;
            }
        }
    }
    eprintln!(
        "{} joins retried after a 503",
        retried.iter().filter(|r| **r).count()
    );
    let mut positions: Vec<u64> = Vec::new();
    for ((status, body), retried) in replies.iter().zip(&retried) {
        assert!(
            *status == 201 || (*retried && *status == 200),
            "{status} {body}"
        );
        assert_eq!(body["state"], "paused", "{body}");
        positions.push(body["position"].as_u64().unwrap());
    }
    positions.sort_unstable();
    assert_eq!(positions, (1..=n as u64).collect::<Vec<_>>());
    // The tickets carry the arrival numbers RANDOM_BLOCK + 1..=n, bound to their customer.
    let mut seqs: Vec<u64> = replies
        .iter()
        .zip(&people)
        .map(|((_, b), p)| {
            let t = ticket_of(b, &id);
            assert_eq!(&t.place.customer, p);
            t.place.sequence - RANDOM_BLOCK
        })
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=n as u64).collect::<Vec<_>>());
    // Re-joins: 200 with the same ticket and position.
    let again = join_all(people.iter().take(50).map(|p| o.join(&id, p))).await;
    for ((st, b), (_, first)) in again.iter().zip(&replies) {
        assert_eq!(*st, 200, "{b}");
        assert_eq!(
            (&b["ticket"], &b["position"]),
            (&first["ticket"], &first["position"])
        );
    }
    // The manager's view.
    let path = format!("/admin/v1/campaigns/{id}");
    let (st, view) = o
        .admin(reqwest::Method::GET, &path, Some(o.viewer_token()), None)
        .await;
    assert_eq!(st, 200);
    assert_eq!(
        view["queue"],
        serde_json::json!({"length": n, "now_serving": 0, "admitted": 0,
            "admitted_unclaimed": 0, "admit_per_second": 100, "paused": true})
    );
    assert_eq!(view["waiting_room"]["admit_per_second"], 100);
    // Refusals change nothing: unknown campaign, no waiting room, bad token.
    assert_eq!(o.join("no-such-campaign", "ana").await.0, 404);
    let plain = o.campaign("sale", 5).await;
    let (st, body) = o.join(&plain, "ana").await;
    assert_eq!(
        (st, body["result"].as_str()),
        (409, Some("no_waiting_room"))
    );
    let path_q = format!("/api/v1/campaigns/{id}/queue");
    let junk = "Bearer junk".to_string();
    let mut headers = edge_headers(
        TEST_EDGE_SECRET,
        "POST",
        &path_q,
        b"",
        Some(&junk),
        None,
        None,
    );
    headers.push(("authorization", junk.clone()));
    let url = format!("{}{path_q}", o.url);
    let r = send_raw(&o.http, reqwest::Method::POST, &url, None, &headers, "").await;
    assert_eq!(
        (r.status, r.body["result"].as_str()),
        (401, Some("unauthorized"))
    );
    assert_eq!(queue(&o, &id).await["admitted"], 0);
    let (_, view) = o
        .admin(reqwest::Method::GET, &path, Some(o.viewer_token()), None)
        .await;
    assert_eq!(view["queue"]["length"], n);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifo_admission_follows_join_order_at_the_rate() {
    let o = TestOrigin::start_with(queue_config()).await;
    let id = campaign(&o, 100, chrono::Duration::minutes(-1), None, room(20)).await;
    admission(&o, &id, ChangeAction::PauseAdmission).await;
    let run = unique("f");
    let mut seqs = Vec::new();
    for i in 0..40 {
        let (st, body) = o.join(&id, &format!("{run}-{i}")).await;
        assert_eq!(st, 201, "{body}");
        seqs.push(ticket_of(&body, &id).place.sequence);
    }
    admission(&o, &id, ChangeAction::ResumeAdmission).await;
    let resumed = Instant::now();
    // At every look, the admitted customers are exactly the first ones to join, and their
    // number stays within the rate plus one second's burst.
    let deadline = resumed + Duration::from_secs(10);
    loop {
        let q = queue(&o, &id).await;
        let serving = q["now_serving"].as_u64().unwrap();
        let admitted = seqs.iter().filter(|s| **s <= serving).count();
        assert!(
            seqs[..admitted].iter().all(|s| *s <= serving),
            "admission skipped someone: {q}"
        );
        assert_eq!(q["admitted"].as_u64().unwrap() as usize, admitted, "{q}");
        let bound = 20.0 * resumed.elapsed().as_secs_f64() + 20.0 + 1.0;
        assert!((admitted as f64) <= bound, "{admitted} admitted > {bound}");
        if admitted == seqs.len() {
            break;
        }
        assert!(Instant::now() < deadline, "not all admitted in 10 s: {q}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // 40 at 20/s with at most one second's burst up front: at least one second.
    assert!(resumed.elapsed() >= Duration::from_millis(900));
    o.stop().await;
}

/// Kendall's τ-a between two rankings of the same items (tied pairs count 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_prequeue_is_shuffled_and_later_joins_come_after_it() {
    let o = TestOrigin::start_with(queue_config()).await;
    let n = size("WR_PREQUEUE", 1_000);
    let id = campaign(&o, 10, chrono::Duration::seconds(10), None, room(1)).await;
    let run = unique("p");
    // Joins in waves of 20 at once: the join order of a customer is her wave.
    let mut early = Vec::new();
    let mut order = Vec::new();
    let people: Vec<String> = (0..n).map(|i| format!("{run}-{i}")).collect();
    for (wave, chunk) in people.chunks(20).enumerate() {
        for (st, body) in join_all(chunk.iter().map(|p| o.join(&id, p))).await {
            assert_eq!(st, 201, "{body}");
            assert_eq!(body["state"], "waiting");
            early.push(ticket_of(&body, &id).place.sequence);
            order.push(wave as u64);
        }
    }
    assert!(
        early.iter().all(|s| *s < RANDOM_BLOCK),
        "every prequeue join came before the start"
    );
    let pairs: Vec<(u64, u64)> = order.into_iter().zip(early.iter().copied()).collect();
    let tau = kendall_tau_b(&pairs).expect("two or more joins, in several waves");
    eprintln!("prequeue of {n}: Kendall tau-b of join order vs sequence = {tau:.4}");
    assert!(tau.abs() < 0.1, "tau {tau}");
    // After the start: arrival order, after every prequeue number.
    eventually("the campaign to start", Duration::from_secs(15), || async {
        let st = o.status(&id).await;
        if st["state"] == "active" {
            Ok(())
        } else {
            Err(st.to_string())
        }
    })
    .await;
    let max_early = *early.iter().max().unwrap();
    let mut later = Vec::new();
    for i in 0..20 {
        let (st, body) = o.join(&id, &format!("{run}-late-{i}")).await;
        assert_eq!(st, 201, "{body}");
        // Everyone of the prequeue not yet admitted is ahead.
        assert!(body["position"].as_u64().unwrap() >= (n as u64).saturating_sub(10));
        later.push(ticket_of(&body, &id).place.sequence);
    }
    assert!(later.iter().all(|s| *s > max_early));
    assert!(later.windows(2).all(|w| w[0] < w[1]));
    // Admission walks the prequeue in its shuffled order: the first admitted is the lowest
    // number drawn.
    wait_queue(&o, &id, Duration::from_secs(5), |q| {
        q["admitted"].as_u64() >= Some(1)
    })
    .await;
    let q = queue(&o, &id).await;
    let mut sorted = early.clone();
    sorted.sort_unstable();
    let k = q["admitted"].as_u64().unwrap() as usize;
    assert_eq!(q["now_serving"].as_u64(), Some(sorted[k - 1]), "{q}");
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admission_never_outruns_the_stock_and_an_expired_hold_admits_the_next() {
    let o = TestOrigin::start_with(queue_config()).await;
    let id = campaign(&o, 2, chrono::Duration::minutes(-1), Some(1), room(100)).await;
    admission(&o, &id, ChangeAction::PauseAdmission).await;
    let run = unique("s");
    let mut tickets = Vec::new();
    for i in 0..4 {
        let (st, body) = o.join(&id, &format!("{run}-{i}")).await;
        assert_eq!(st, 201, "{body}");
        tickets.push(ticket_of(&body, &id));
    }
    admission(&o, &id, ChangeAction::ResumeAdmission).await;
    // Two units: two admitted, and no more while both are spoken for.
    wait_queue(&o, &id, Duration::from_secs(5), |q| q["admitted"] == 2).await;
    let held_still = Instant::now() + Duration::from_millis(500);
    while Instant::now() < held_still {
        assert_eq!(queue(&o, &id).await["admitted"], 2);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let token = |t: &Ticket| mint_admission(K, t, Utc::now().timestamp(), 10);
    // The first claims (a hold of 1 s), the second does not (yet).
    let r = o
        .signed_claim(&id, &tickets[0].place.customer, Some(&token(&tickets[0])))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    // Her hold expires: the unit goes to the next in line (the third), not the fourth.
    wait_queue(&o, &id, Duration::from_secs(10), |q| q["admitted"] == 3).await;
    let q = queue(&o, &id).await;
    assert_eq!(q["now_serving"].as_u64(), Some(tickets[2].place.sequence));
    let path = format!("/admin/v1/campaigns/{id}");
    let (_, view) = o
        .admin(reqwest::Method::GET, &path, Some(o.viewer_token()), None)
        .await;
    assert_eq!(view["queue"]["admitted_unclaimed"], 2, "{view}");
    assert_eq!(view["queue"]["length"], 1, "{view}");
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_origin_checks_admission_tokens_on_claims() {
    let o = TestOrigin::start_with(queue_config()).await;
    let id = campaign(&o, 5, chrono::Duration::minutes(-1), None, room(100)).await;
    let run = unique("t");
    let (ana, bob) = (format!("{run}-ana"), format!("{run}-bob"));
    let (_, body) = o.join(&id, &ana).await;
    let t = ticket_of(&body, &id);
    let now = Utc::now().timestamp();
    let refused = |r: &flashgate_tests::support::RawReply| (r.status, r.body["result"].clone());
    // No token: 429 queued + Retry-After.
    let r = o.signed_claim(&id, &ana, None).await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.body, serde_json::json!({"result": "queued"}));
    assert_eq!(r.header("retry-after"), Some("5"));
    // Forged, expired, another customer's, another campaign's: 403.
    let forged = mint_admission(b"not-the-edge-secret-0123456789abc", &t, now, 60);
    let expired = mint_admission(K, &t, now - 120, 60);
    let mut other_campaign = t.clone();
    other_campaign.place.campaign = "elsewhere".into();
    for tok in [
        forged,
        expired.clone(),
        mint_admission(K, &other_campaign, now, 60),
        sign_ticket(K, &t),
    ] {
        let r = o.signed_claim(&id, &ana, Some(&tok)).await;
        assert_eq!(refused(&r), (403, "forbidden".into()), "{}", r.body);
    }
    let r = o
        .signed_claim(&id, &bob, Some(&mint_admission(K, &t, now, 60)))
        .await;
    assert_eq!(refused(&r), (403, "forbidden".into()));
    assert_eq!(o.signed_claim(&id, &ana, Some("junk")).await.status, 400);
    assert_eq!(o.claim_rows(&id, &[]).await, 0);
    assert_eq!(o.remaining(&id).await, 5);
    // Her own token: claimed, and her admission is marked used.
    let key = unique("k");
    let r = o
        .signed_claim_with_key(&id, &ana, Some(&mint_admission(K, &t, now, 60)), &key)
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(o.claim_rows(&id, &["held"]).await, 1);

    // Her token has expired since: a retry with the same key replays the recorded answer
    // byte for byte; a new key gets her claim as `already_claimed`; nothing more is taken.
    let replayed = o
        .signed_claim_with_key(&id, &ana, Some(&expired), &key)
        .await;
    assert_eq!((replayed.status, &replayed.body), (201, &r.body));
    let r2 = o.signed_claim(&id, &ana, Some(&expired)).await;
    assert_eq!(refused(&r2), (409, "already_claimed".into()), "{}", r2.body);
    assert_eq!(r2.body["claim"]["id"], r.body["claim"]["id"]);
    // Another customer cannot ride on her key with her expired token.
    let r3 = o
        .signed_claim_with_key(&id, &bob, Some(&expired), &key)
        .await;
    assert_eq!(refused(&r3), (403, "forbidden".into()), "{}", r3.body);
    // Redis lost the record: her claim row (same key and body) still answers the retry.
    let mut redis = o.origin.state.redis.clone();
    let _: i64 = redis::cmd("DEL")
        .arg(flashgate_tests::support::idempotency_record_key(&ana, &key))
        .query_async(&mut redis)
        .await
        .unwrap();
    let rebuilt = o
        .signed_claim_with_key(&id, &ana, Some(&expired), &key)
        .await;
    assert_eq!(rebuilt.status, 201, "{}", rebuilt.body);
    assert_eq!(rebuilt.body["claim"]["id"], r.body["claim"]["id"]);
    assert_eq!(o.claim_rows(&id, &[]).await, 1);
    assert_eq!(o.remaining(&id).await, 4);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_origin_paces_admitted_claims_at_the_admit_rate() {
    // 5 admissions per second; 30 admitted customers claim at once, straight at the origin
    // (as several isolates, or a stalled machine catching up, could send them): 5 (one
    // second's burst) + 5 per second go on to the gate, the rest are 429 queued.
    let o = TestOrigin::start_with(queue_config()).await;
    let id = campaign(&o, 100, chrono::Duration::minutes(-1), None, room(5)).await;
    admission(&o, &id, ChangeAction::PauseAdmission).await;
    let run = unique("p");
    let now = Utc::now().timestamp();
    let who: Vec<(String, String)> = (1..=30u64)
        .map(|n| {
            let customer = format!("{run}-{n}");
            let t = Ticket {
                place: Place {
                    campaign: id.clone(),
                    customer: customer.clone(),
                    sequence: RANDOM_BLOCK + n,
                },
                issued_at_s: now,
                drawn_waiting_at_issue: 0,
            };
            (customer, mint_admission(K, &t, now, 60))
        })
        .collect();
    let started = Instant::now();
    let replies = join_all(who.iter().map(|(c, tok)| {
        let key = format!("{c}-k");
        let o = &o;
        let id = &id;
        async move { o.signed_claim_with_key(id, c, Some(tok), &key).await }
    }))
    .await;
    let whole_seconds = started.elapsed().as_secs() as usize;
    let won = replies.iter().filter(|r| r.status == 201).count();
    let paced: Vec<_> = replies.iter().filter(|r| r.status == 429).collect();
    assert_eq!(won + paced.len(), 30);
    assert!(
        (5..=5 + 5 * (whole_seconds + 1)).contains(&won),
        "{won} claims went on in {whole_seconds} s"
    );
    for r in &paced {
        assert_eq!(r.body, serde_json::json!({"result": "queued"}));
        assert_eq!(r.header("retry-after"), Some("1"), "{}", r.body);
    }
    assert_eq!(o.claim_rows(&id, &[]).await as usize, won);
    // A paced customer claims again after `Retry-After` with the same key: she wins.
    let i = replies
        .iter()
        .position(|r| r.status == 429)
        .expect("one paced");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (c, tok) = &who[i];
    let r = o
        .signed_claim_with_key(&id, c, Some(tok), &format!("{c}-k"))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    o.stop().await;
}

/// Joins `n` customers `{run}-0`, `{run}-1`, ... to campaign `id` one after another (each 201);
/// their tickets' sequence numbers, in join order.
async fn join_each(o: &TestOrigin, id: &str, run: &str, n: usize) -> Vec<u64> {
    let mut seqs = Vec::with_capacity(n);
    for i in 0..n {
        let (st, body) = o.join(id, &format!("{run}-{i}")).await;
        assert_eq!(st, 201, "{body}");
        seqs.push(ticket_of(&body, id).place.sequence);
    }
    seqs
}

/// Makes Redis lose campaign `id`'s waiting room (and, off a cluster, everything else in the
/// test's own Redis database): its gate and every queue key.
async fn lose_queue(config: &flashgate_origin::config::Config, id: &str) {
    let k = flashgate_origin::queue::store::Keys::of(id);
    let queue_keys = vec![
        k.open,
        k.seq,
        k.drawn,
        k.arrivals,
        k.serving,
        k.admitted,
        k.unclaimed,
        k.lease,
        k.pace,
    ];
    flashgate_tests::support::lose_redis_state(config, &[id], &queue_keys).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiting_room_resumes_by_itself_after_redis_loses_its_queue() {
    // A Redis database of its own, as this test empties it, and so a database of its own.
    let own = own_services(queue_config(), "wr_lost").await;
    let config = own.config.clone();
    let o = TestOrigin::start_with(config.clone()).await;
    let id = campaign(&o, 100, chrono::Duration::minutes(-1), None, room(2)).await;
    admission(&o, &id, ChangeAction::PauseAdmission).await;
    let run = unique("l");
    let seqs = join_each(&o, &id, &run, 10).await;
    admission(&o, &id, ChangeAction::ResumeAdmission).await;
    // Some admitted, the others still waiting; a checkpoint interval passes.
    wait_queue(&o, &id, Duration::from_secs(10), |q| {
        q["admitted"].as_u64().unwrap_or(0) >= 3
    })
    .await;
    // (Waited for, not slept on: under load the next checkpoint may come later than 1 s.)
    let kept = std::sync::Mutex::new((0i64, 0i64));
    eventually(
        "a checkpoint of at least 3 admitted",
        Duration::from_secs(30),
        || async {
            let row: Option<(i64, i64)> = sqlx::query_as(
                "SELECT now_serving, admitted FROM queue_checkpoints WHERE campaign_id = $1",
            )
            .bind(&id)
            .fetch_optional(&o.db)
            .await
            .map_err(|e| e.to_string())?;
            *kept.lock().unwrap() = row.unwrap_or_default();
            row.filter(|r| r.1 >= 3)
                .map(|_| ())
                .ok_or_else(|| format!("checkpoint: {row:?}"))
        },
    )
    .await;
    let kept = kept.into_inner().unwrap();
    let before = queue(&o, &id).await;
    assert!(kept.1 >= 3 && kept.1 <= 10, "{kept:?} {before}");
    lose_queue(&config, &id).await;
    // No manager acts. A join right after the loss is placed, behind every ticket issued
    // before it.
    let (st, body) = o.join(&id, &format!("{run}-late")).await;
    assert_eq!(st, 201, "{body}");
    let late = ticket_of(&body, &id).place.sequence;
    assert!(late > *seqs.iter().max().unwrap(), "{late} {seqs:?}");
    // Admission resumes where the checkpoint left it (never back to 0), in ticket order, and
    // reaches every ticket issued before the loss and the late one.
    let last = std::sync::atomic::AtomicU64::new(kept.0 as u64);
    eventually(
        "the queue to admit everyone again",
        Duration::from_secs(20),
        || async {
            let q = queue(&o, &id).await;
            let serving = q["now_serving"].as_u64().unwrap_or(0);
            let prev = last.swap(serving, std::sync::atomic::Ordering::Relaxed);
            assert!(serving >= prev, "now_serving went back: {serving} < {prev}");
            if serving >= late {
                Ok(())
            } else {
                Err(q.to_string())
            }
        },
    )
    .await;
    // The restore is counted, and the campaign is not marked stalled any more.
    let text = o
        .http
        .get(format!("{}/metrics", o.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let restores = text
        .lines()
        .find(|l| l.starts_with("flashgate_queue_restores_total"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok());
    assert!(restores.unwrap_or(0.0) >= 1.0, "{restores:?}");
    let stalled = format!("flashgate_queue_stalled{{campaign=\"{id}\"}} 0");
    assert!(
        text.lines().any(|l| l == stalled),
        "no `{stalled}` in /metrics"
    );
    o.stop().await;
    own.release().await;
}

/// A waiting room of drawn numbers (`queueing: random`) that Redis loses while customers wait:
/// reopened from PostgreSQL, admission walks placeholders up to the highest number a draw can
/// give, so every drawn ticket is admitted with no later join to carry `now_serving` past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_drawn_ticket_is_admitted_after_redis_loses_the_queue_with_no_new_join() {
    // A Redis database of its own, as this test empties it, and so a database of its own.
    let own = own_services(queue_config(), "wr_drawn").await;
    let config = own.config.clone();
    let o = TestOrigin::start_with(config.clone()).await;
    let mut w = room(50);
    w.queueing = flashgate_shared::queue::Queueing::Random;
    let id = campaign(&o, 100, chrono::Duration::minutes(-1), None, w).await;
    admission(&o, &id, ChangeAction::PauseAdmission).await;
    let seqs = join_each(&o, &id, &unique("d"), 12).await;
    let highest = *seqs.iter().max().expect("tickets");
    assert!(highest < RANDOM_BLOCK, "drawn numbers: {seqs:?}");
    // Every draw is checkpointed in PostgreSQL (a loss within the last checkpoint interval
    // loses what came after it, as documented), then Redis loses the queue.
    eventually(
        "a checkpoint of every drawn ticket",
        Duration::from_secs(30),
        || async {
            let drawn: Option<i64> =
                sqlx::query_scalar("SELECT drawn FROM queue_checkpoints WHERE campaign_id = $1")
                    .bind(&id)
                    .fetch_optional(&o.db)
                    .await
                    .map_err(|e| e.to_string())?;
            (drawn == Some(seqs.len() as i64))
                .then_some(())
                .ok_or_else(|| format!("checkpointed drawn: {drawn:?}"))
        },
    )
    .await;
    lose_queue(&config, &id).await;
    admission(&o, &id, ChangeAction::ResumeAdmission).await;
    // Nobody joins any more: admission alone reaches the highest drawn ticket.
    wait_queue(&o, &id, Duration::from_secs(20), |q| {
        q["now_serving"].as_u64().unwrap_or(0) >= highest
    })
    .await;
    o.stop().await;
    own.release().await;
}
