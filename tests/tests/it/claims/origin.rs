//! The claim path against a real origin over HTTP, real PostgreSQL and real Redis, with truly
//! concurrent requests. Every test checks the database afterwards.

use std::collections::HashSet;
use std::time::Duration;

use flashgate_origin::gate::Keys;
use flashgate_tests::support::idempotency_record_key;
use flashgate_tests::support::{
    claim_at, count_replies, customers, eventually, lose_redis_state, own_services, redis_conn,
    test_config, unique, TestOrigin,
};
use futures::future::join_all;
use redis::AsyncCommands;
use serde_json::Value;

/// Deadline of the polls in these tests.
const WAIT: Duration = Duration::from_secs(10);

/// Fires one claim per customer, all at once; returns (status, body) in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_10_and_100_customers_at_once_three_times() {
    let o = TestOrigin::start().await;
    for _ in 0..3 {
        let c = o.campaign("sale", 10).await;
        let replies = o.stampede(&c, &customers(100)).await;
        assert_eq!(count_replies(&replies, 201, "claimed"), 10, "{replies:?}");
        assert_eq!(count_replies(&replies, 409, "sold_out"), 90);
        assert_eq!(o.remaining(&c).await, 0);
        assert_eq!(o.claim_rows(&c, &[]).await, 10);
        // Every 201 names a claim row of that customer.
        for (s, b) in replies.iter().filter(|(s, _)| *s == 201) {
            assert_eq!(*s, 201);
            let owner: String = sqlx::query_scalar("SELECT customer_id FROM claims WHERE id = $1")
                .bind(b["claim"]["id"].as_str().unwrap())
                .fetch_one(&o.db)
                .await
                .unwrap();
            assert_eq!(owner, b["claim"]["customer"].as_str().unwrap());
            assert_eq!(b["claim"]["status"], "held");
            assert!(b["claim"]["held_until"].is_string());
        }
    }
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_1_and_50_at_once_has_exactly_one_winner() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 1).await;
    let replies = o.stampede(&c, &customers(50)).await;
    assert_eq!(count_replies(&replies, 201, "claimed"), 1);
    assert_eq!(count_replies(&replies, 409, "sold_out"), 49);
    assert_eq!(o.remaining(&c).await, 0);
    assert_eq!(o.claim_rows(&c, &[]).await, 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stock_n_and_n_plus_1_in_turn_the_last_is_sold_out() {
    let o = TestOrigin::start().await;
    let c = o.campaign("giveaway", 5).await;
    let people = customers(6);
    for (i, p) in people.iter().enumerate() {
        let (s, b) = o.claim(&c, p, "k").await;
        if i < 5 {
            assert_eq!(s, 201, "{b}");
            let code = b["claim"]["code"].as_str().unwrap();
            assert!(flashgate_shared::code::is_generated_shape(code), "{code}");
            assert_eq!(b["claim"]["status"], "issued");
        } else {
            assert_eq!((s, b["result"].as_str()), (409, Some("sold_out")));
        }
    }
    assert_eq!(o.remaining(&c).await, 0);
    assert_eq!(o.claim_rows(&c, &["issued"]).await, 5);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_customer_in_two_tabs_gets_one_claim() {
    let o = TestOrigin::start().await;
    for _ in 0..5 {
        let c = o.campaign("sale", 10).await;
        let ana = unique("ana");
        let (a, b) = tokio::join!(o.claim(&c, &ana, "tab-1"), o.claim(&c, &ana, "tab-2"));
        let mut replies = [a, b];
        replies.sort_by_key(|r| r.0);
        assert_eq!(replies[0].0, 201, "{replies:?}");
        assert_eq!(replies[1].0, 409);
        assert_eq!(replies[1].1["result"], "already_claimed");
        assert_eq!(
            replies[1].1["claim"], replies[0].1["claim"],
            "the other tab carries the same claim"
        );
        assert_eq!(o.claim_rows(&c, &[]).await, 1);
        assert_eq!(o.remaining(&c).await, 9);
    }
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_requests_with_one_key_make_one_claim() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 10).await;
    let ana = unique("ana");
    let token = o.token(&ana);
    let replies: Vec<(u16, Value)> = join_all((0..20).map(|_| {
        let (http, url, token, c) = (o.http.clone(), o.url.clone(), token.clone(), c.clone());
        tokio::spawn(async move { claim_at(&http, &url, &token, &c, "same-key").await })
    }))
    .await
    .into_iter()
    .map(|r| r.unwrap())
    .collect();
    let winners: Vec<&Value> = replies
        .iter()
        .filter(|r| r.0 == 201)
        .map(|r| &r.1)
        .collect();
    assert!(!winners.is_empty());
    assert!(
        winners.iter().all(|w| *w == winners[0]),
        "identical replies"
    );
    for (s, b) in &replies {
        assert!(
            *s == 201 || (*s == 409 && b["result"] == "in_progress"),
            "{s} {b}"
        );
    }
    assert_eq!(o.claim_rows(&c, &[]).await, 1);
    // Once done, the key replays the first reply.
    let (s, b) = o.claim(&c, &ana, "same-key").await;
    assert_eq!((s, &b), (201, winners[0]));
    // The key on another campaign is a reuse.
    let other = o.campaign("sale", 10).await;
    let (s, b) = o.claim(&other, &ana, "same-key").await;
    assert_eq!(
        (s, b["result"].as_str()),
        (422, Some("idempotency_key_reused"))
    );
    assert_eq!(o.claim_rows(&other, &[]).await, 0);
    // The same key string from another customer is her own request.
    let bea = unique("bea");
    let (s, b) = o.claim(&c, &bea, "same-key").await;
    assert_eq!(s, 201);
    assert_eq!(b["claim"]["customer"], bea.as_str());
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_an_origin_restart_gets_the_same_claim() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 3).await;
    let ana = unique("ana");
    let (s, first) = o.claim(&c, &ana, "k1").await;
    assert_eq!(s, 201);
    let config = o.config.clone();
    o.stop().await;
    let o = TestOrigin::start_with(config).await;
    let (s, again) = o.claim(&c, &ana, "k1").await;
    assert_eq!((s, &again), (201, &first));
    // Even when Redis lost the idempotency record, the claim row recognises the retry.
    let mut r = redis_conn().await;
    let deleted: i64 = redis::cmd("DEL")
        .arg(idempotency_record_key(&ana, "k1"))
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(deleted, 1, "her idempotency record was in Redis");
    let (s, again) = o.claim(&c, &ana, "k1").await;
    assert_eq!((s, &again), (201, &first));
    assert_eq!(o.claim_rows(&c, &[]).await, 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_flushed_mid_run_never_oversells_and_recovers() {
    // A Redis database of its own, as this test empties it, and so a database of its own.
    let own = own_services(test_config(), "redis_flushed").await;
    let config = own.config.clone();
    let o = TestOrigin::start_with(config.clone()).await;
    let c = o.campaign("sale", 30).await;
    let people = customers(200);
    let first = o.stampede(&c, &people[..60]).await;
    let records: Vec<String> = people[..60]
        .iter()
        .map(|p| idempotency_record_key(p, &format!("k-{p}")))
        .collect();
    lose_redis_state(&config, &[&c], &records).await;
    let second = o.stampede(&c, &people[60..]).await;
    // Retries the 503s until the gate is back: the origin recovers by itself.
    let replies: Vec<(u16, Value)> = first.into_iter().chain(second).collect();
    let replies = std::sync::Mutex::new(replies);
    eventually(
        "the origin to answer every retry without 503",
        WAIT,
        || async {
            let retry: Vec<usize> = {
                let replies = replies.lock().unwrap();
                (0..replies.len())
                    .filter(|i| replies[*i].0 == 503)
                    .collect()
            };
            if retry.is_empty() {
                return Ok(());
            }
            for &i in &retry {
                let reply = o.claim(&c, &people[i], &format!("k-{}", people[i])).await;
                replies.lock().unwrap()[i] = reply;
            }
            Err(format!("{} claims answered 503", retry.len()))
        },
    )
    .await;
    let replies = replies.into_inner().unwrap();
    let wins = count_replies(&replies, 201, "claimed");
    assert_eq!(wins, 30, "all units sold, none twice");
    assert_eq!(o.claim_rows(&c, &[]).await, 30);
    assert_eq!(o.remaining(&c).await, 0);
    let distinct: HashSet<&str> = replies
        .iter()
        .filter(|r| r.0 == 201)
        .map(|r| r.1["claim"]["customer"].as_str().unwrap())
        .collect();
    assert_eq!(distinct.len(), 30);
    o.stop().await;
    own.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clients_that_disconnect_leave_no_unit_without_a_claim() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 20).await;
    let people = customers(60);
    // Client timeouts spread over 1..=30 ms, so that the cuts land at every step of the claim
    // path (before the handler, during the take, during the commit, after it).
    let answered: Vec<bool> = join_all(people.iter().enumerate().map(|(i, p)| {
        let impatient = reqwest::Client::builder()
            .timeout(Duration::from_millis(1 + (i as u64 % 30)))
            .build()
            .unwrap();
        let (url, token, c) = (o.url.clone(), o.token(p), c.clone());
        tokio::spawn(async move {
            impatient
                .post(format!("{url}/api/v1/campaigns/{c}/claims"))
                .bearer_auth(token)
                .header("idempotency-key", "k")
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .is_ok()
        })
    }))
    .await
    .into_iter()
    .map(|r| r.expect("task"))
    .collect();
    let answered = answered.iter().filter(|a| **a).count();
    assert!(answered < people.len(), "no client was cut off");
    // Proof that cut-off claims reached the handler (every answered one did): otherwise the
    // checks below would hold with nothing tried.
    let reached = eventually("a cut-off claim to reach the handler", WAIT, || async {
        let reached = o.claim_requests() as usize;
        if reached > answered {
            Ok(reached)
        } else {
            Err(format!(
                "{reached} claims reached the handler, {answered} were answered"
            ))
        }
    })
    .await;
    let keys = Keys::of(&c);
    let mut r = redis_conn().await;
    // The claims cut off mid-way finish (or are settled) on the origin's side.
    let (rows, remaining) = eventually(
        "every unit remaining or claimed, gate = PostgreSQL",
        WAIT,
        || {
            let (o, c, keys, mut r) = (&o, &c, &keys, r.clone());
            async move {
                let rows = o.claim_rows(c, &[]).await;
                let remaining = o.remaining(c).await;
                let gate: i64 = r.get(&keys.remaining).await.expect("gate remaining");
                let pending: i64 = r.zcard(&keys.pending).await.expect("pending takes");
                if rows + remaining == 20 && gate == remaining && pending == 0 {
                    Ok((rows, remaining))
                } else {
                    Err(format!(
                        "rows {rows}, remaining {remaining}, gate {gate}, pending {pending}"
                    ))
                }
            }
        },
    )
    .await;
    assert!(
        rows > 0,
        "units were taken ({reached} claims reached the handler, {remaining} remaining)"
    );
    let holders: i64 = r.hlen(&keys.holders).await.unwrap();
    assert_eq!(holders, rows, "one gate holder per claim row");
    // A pooled connection left inside a transaction would sit "idle in transaction" for good.
    // Other tests' transactions (the database is shared) pass through that state, and on a
    // busy machine a dropped transaction's rollback, which the pool sends as the connection
    // goes back to it, can take over a second: so none may stay there, polled until WAIT.
    eventually(
        "no connection idle in a transaction for over 1 s",
        WAIT,
        || async {
            let idle_in_tx: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                AND state = 'idle in transaction' AND state_change < now() - interval '1 second'",
            )
            .fetch_one(&o.db)
            .await
            .unwrap();
            if idle_in_tx == 0 {
                Ok(())
            } else {
                Err(format!("{idle_in_tx} connections idle in a transaction"))
            }
        },
    )
    .await;
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_customer_whose_gate_give_back_was_lost_can_claim_again() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 1).await;
    let ana = unique("ana");
    let (s, first) = o.claim(&c, &ana, "k1").await;
    assert_eq!(s, 201);
    let claim_id = first["claim"]["id"].as_str().unwrap().to_string();
    let r = o
        .http
        .post(format!("{}/api/v1/claims/{claim_id}/release", o.url))
        .bearer_auth(o.config.service_token.expose())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Undo the give-back in Redis as if it had been lost (and drop its durable retry), so the
    // gate still names her released claim and has no unit.
    let _: u64 = sqlx::query("DELETE FROM gate_returns WHERE claim_id = $1")
        .bind(&claim_id)
        .execute(&o.db)
        .await
        .unwrap()
        .rows_affected();
    let mut r = redis_conn().await;
    let _: () = redis::pipe()
        .hset(Keys::of(&c).holders, &ana, &claim_id)
        .decr(Keys::of(&c).remaining, 1)
        .query_async(&mut r)
        .await
        .unwrap();
    let (s, again) = o.claim(&c, &ana, "k2").await;
    assert_eq!(s, 201, "{again}");
    assert_ne!(again["claim"]["id"], first["claim"]["id"]);
    assert_eq!(o.claim_rows(&c, &["held"]).await, 1);
    assert_eq!(o.remaining(&c).await, 0);
    o.stop().await;
}
