//! Orphaned takes are settled in seconds (origin/src/gate/takes.rs, repair/settle.rs): a pending
//! take whose origin's lease lapsed, or whose request ended without confirming or giving it
//! back, is decided by PostgreSQL at the next pass of any origin; a take of an origin whose
//! lease is alive is left alone. Against a real origin, PostgreSQL and Redis (one server or
//! the cluster `REDIS_URL` names). The times are printed, not asserted: the deadlines below
//! only tell a settlement in seconds from the 30 s one of a token nobody owns.

use std::time::{Duration, Instant};

use flashgate_origin::gate::{self, takes, Gate, Keys, Take};
use flashgate_tests::support::{eventually, gate_remaining, redis_conn, unique, TestOrigin};

/// Well under the 30 s after which any pending take is settled.
const SETTLED_WITHIN: Duration = Duration::from_secs(12);

/// A pending token of origin `origin` (the form the origin writes).
fn token_of(origin: &str) -> String {
    format!("p:{origin}-{:016x}", rand::random::<u64>())
}

async fn holder(r: &mut Gate, c: &str, customer: &str) -> Option<String> {
    gate::holder(r, c, customer).await.expect("holder")
}

/// Waits until `customer` holds nothing on `c` (her take was settled and its unit came back).
async fn settled(r: &Gate, c: &str, customer: &str) {
    eventually("the orphaned take settled", SETTLED_WITHIN, || {
        let (mut r, c, who) = (r.clone(), c.to_string(), customer.to_string());
        async move {
            match holder(&mut r, &c, &who).await {
                None => Ok(()),
                Some(h) => Err(format!("holder {h}")),
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_dead_origins_take_goes_back_and_a_live_origins_stays() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 3).await;
    let mut r = Gate::new(redis_conn().await);
    // Takes as origins write them: one of an origin whose lease is alive, one of an origin
    // that has none (it died), and one of the test's own origin (its lease alive) that no
    // request of it holds (the reply of its confirmation was lost, say).
    let live = unique("live").replace('-', "");
    let lease = takes::lease_key(&live);
    let _: () = redis::cmd("SET")
        .arg(&lease)
        .arg(1)
        .arg("PX")
        .arg(60_000)
        .query_async(&mut r)
        .await
        .unwrap();
    let (zoe, yan, xia) = (unique("zoe"), unique("yan"), unique("xia"));
    let (live_token, dead_token) = (token_of(&live), token_of("dead00000001"));
    let own_token = token_of(o.origin.state.takes.origin());
    assert_eq!(
        gate::take(&mut r, &c, &zoe, &live_token).await.unwrap(),
        Take::Taken
    );
    let started = Instant::now();
    for (who, token) in [(&yan, &dead_token), (&xia, &own_token)] {
        assert_eq!(
            gate::take(&mut r, &c, who, token).await.unwrap(),
            Take::Taken
        );
    }
    assert_eq!(gate_remaining(&o, &c).await.unwrap_or(-1), 0);

    // The dead origin's unit and the own one no request holds come back (no claim of theirs
    // in PostgreSQL)...
    for who in [&yan, &xia] {
        settled(&r, &c, who).await;
    }
    println!(
        "a dead origin's take and an own orphaned one settled after {} ms",
        started.elapsed().as_millis()
    );
    assert_eq!(gate_remaining(&o, &c).await.unwrap_or(-1), 2);
    // ... while the live origin's take is still pending after that pass.
    assert_eq!(
        holder(&mut r, &c, &zoe).await.as_deref(),
        Some(&*live_token)
    );

    // The unit that came back is sold to the next customer.
    for _ in 0..2 {
        let (status, body) = o.claim(&c, &unique("ana"), &unique("k")).await;
        assert_eq!((status, body["result"].as_str()), (201, Some("claimed")));
    }

    // Once the live origin's lease lapses, its take is settled too.
    let _: () = redis::cmd("DEL")
        .arg(&lease)
        .query_async(&mut r)
        .await
        .unwrap();
    settled(&r, &c, &zoe).await;
    assert_eq!(gate_remaining(&o, &c).await.unwrap_or(-1), 1);
    o.stop().await;
}

#[tokio::test]
async fn a_winner_whose_origin_died_after_the_commit_gets_her_201_in_seconds() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 3).await;
    let mut r = Gate::new(redis_conn().await);
    let (ana, key) = (unique("ana"), unique("key"));
    let (status, first) = o.claim(&c, &ana, &key).await;
    assert_eq!(status, 201, "{first}");
    let claim_id = first["claim"]["id"].as_str().unwrap().to_string();

    // Her origin committed the claim and died before the gate's confirmation: her holder is
    // still its pending token and no reply was recorded under her key.
    let dead = token_of("dead00000002");
    let k = Keys::shard(&c, gate::bucket(&ana, 1));
    let now_ms = chrono::Utc::now().timestamp_millis();
    let record = gate::record_key(&mut r, &c, &ana, &key)
        .await
        .unwrap()
        .expect("gate loaded");
    let _: () = redis::pipe()
        .hset(&k.holders, &ana, &dead)
        .zadd(&k.pending, &ana, now_ms)
        .del(&record)
        .query_async(&mut r)
        .await
        .unwrap();

    let started = Instant::now();
    let again = eventually("her retry answered 201", SETTLED_WITHIN, || {
        let (o, c, ana, key) = (&o, c.clone(), ana.clone(), key.clone());
        async move {
            let (status, body) = o.claim(&c, &ana, &key).await;
            if status == 201 {
                Ok(body)
            } else {
                Err(format!("{status} {body}"))
            }
        }
    })
    .await;
    println!(
        "her retry got 201 after {} ms",
        started.elapsed().as_millis()
    );
    assert_eq!(again["claim"]["id"].as_str(), Some(&*claim_id));
    assert_eq!(holder(&mut r, &c, &ana).await.as_deref(), Some(&*claim_id));
    // The unit stays hers: nothing came back to the gate.
    assert_eq!(gate_remaining(&o, &c).await.unwrap_or(-1), 2);
    o.stop().await;
}
