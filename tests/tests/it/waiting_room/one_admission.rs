//! One admission per customer, through the edge (the built worker in workerd in front of a real
//! origin, PostgreSQL and Redis): a customer who joins many times with one solved challenge
//! gets many tickets, but admission passes every ticket of hers while she holds an admission,
//! and the units go to the distinct customers behind her in order.

use std::time::{Duration, Instant};

use flashgate_shared::admission::open_ticket;
use flashgate_shared::api::ChangeAction;
use flashgate_shared::pow;
use flashgate_shared::queue::access::ChallengeKind;
use flashgate_shared::queue::WaitingRoom;
use flashgate_tests::support::room::{
    admission, campaign, join_with_body, poll_ticket, queue_until, room, room_edge,
};
use flashgate_tests::support::{
    queue_config, token_for, unique, TestEdge, TestOrigin, TEST_EDGE_SECRET,
};
use serde_json::{json, Value};

const K: &[u8] = TEST_EDGE_SECRET.as_bytes();

/// A solved challenge's join body for `customer`.
async fn solved(http: &reqwest::Client, edge: &TestEdge, id: &str, customer: &str) -> String {
    let res = http
        .get(format!(
            "{}/api/v1/campaigns/{id}/queue/challenge",
            edge.url
        ))
        .bearer_auth(token_for(&queue_config(), customer))
        .send()
        .await
        .expect("challenge");
    assert_eq!(res.status().as_u16(), 200);
    let c: Value = res.json().await.unwrap();
    let s = c["challenge"].as_str().unwrap().to_string();
    let n = pow::solve(&s, c["difficulty"].as_u64().unwrap() as u8, 1 << 24).expect("solved");
    json!({"challenge": s, "solution": n.to_string()}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_customer_who_joins_many_times_holds_one_admission() {
    let o = TestOrigin::start_with(queue_config()).await;
    let w = WaitingRoom {
        challenge: ChallengeKind::Pow,
        pow_difficulty: 4,
        admission_ttl_seconds: 120,
        ..room(100)
    };
    let id = campaign(&o, 4, chrono::Duration::minutes(-1), None, w).await;
    admission(&o, &id, ChangeAction::PauseAdmission).await;
    let edge = room_edge(&o);
    let http = reqwest::Client::new();
    let run = unique("one");
    let hog = format!("{run}-hog");
    let others: Vec<String> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| format!("{run}-{n}"))
        .collect();
    // She solves one challenge and joins with it again and again, between the others.
    let hers = solved(&http, &edge, &id, &hog).await;
    let order = [
        &hog, &hog, &others[0], &hog, &others[1], &hog, &others[2], &others[3],
    ];
    let mut tickets = Vec::new();
    for c in order {
        let body = if *c == hog {
            hers.clone()
        } else {
            solved(&http, &edge, &id, c).await
        };
        let (st, by, j) = join_with_body(&http, &edge, &id, c, "application/json", &body).await;
        assert_eq!((st, by.as_str()), (201, "edge"), "{c}: {j}");
        let t = j["ticket"].as_str().unwrap().to_string();
        tickets.push((
            c.clone(),
            open_ticket(K, &t, &id).unwrap().place.sequence,
            t,
        ));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let seqs: Vec<u64> = tickets.iter().map(|(_, s, _)| *s).collect();
    assert!(
        seqs.windows(2).all(|p| p[0] < p[1]),
        "in join order: {seqs:?}"
    );
    let q = queue_until(&o, &id, |q| q["line"] == 8).await;
    assert_eq!(q["line"], 8, "every ticket reported: {q}");

    // Stock 4 for 8 tickets: her first, then a, b and c; d waits.
    admission(&o, &id, ChangeAction::ResumeAdmission).await;
    let q = queue_until(&o, &id, |q| q["unclaimed"] == 4).await;
    assert_eq!(q["unclaimed"], 4, "{q}");
    // A few more admission steps: nothing else is admitted (the stock is all promised).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let q = o.status(&id).await["queue"].clone();
    assert_eq!(
        (q["unclaimed"].clone(), q["admitted"].clone()),
        (json!(4), json!(7)),
        "{q}"
    );
    let skipped: Vec<u64> = serde_json::from_value(q["skipped"].clone()).unwrap();
    assert_eq!(
        skipped,
        vec![seqs[1], seqs[3], seqs[5]],
        "her other tickets passed: {q}"
    );
    let (_, view) = o
        .admin(
            reqwest::Method::GET,
            &format!("/admin/v1/campaigns/{id}"),
            Some(o.viewer_token()),
            None,
        )
        .await;
    let v = &view["queue"];
    assert_eq!(
        (v["admitted"].clone(), v["admitted_unclaimed"].clone()),
        (json!(7), json!(4)),
        "{view}"
    );

    // At the edge: exactly her first ticket and the next three customers' are admitted.
    let want = [true, false, true, false, true, false, true, false];
    let deadline = Instant::now() + Duration::from_secs(30);
    let states = loop {
        let mut states = Vec::new();
        for (_, _, t) in &tickets {
            let p = poll_ticket(&http, &edge, &id, t).await;
            states.push((p["admitted"] == json!(true), p));
        }
        let got: Vec<bool> = states.iter().map(|(a, _)| *a).collect();
        if got == want || Instant::now() > deadline {
            break states;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for ((c, seq, _), ((admitted, p), want)) in tickets.iter().zip(states.iter().zip(want)) {
        assert_eq!(*admitted, want, "{c} ({seq}): {p}");
        if !want {
            assert_eq!(p["state"], "waiting", "{c} ({seq}): {p}");
        }
    }
    let hers_admitted = tickets
        .iter()
        .zip(&states)
        .filter(|((c, _, _), (a, _))| *c == hog && *a)
        .count();
    assert_eq!(hers_admitted, 1, "one admission for her four tickets");

    // She wins a claim with it, and the shop releases it: a unit comes back. Her admission won
    // a claim, so her passed tickets stay passed, and the unit goes to d.
    let token = states[0].1["admission_token"]
        .as_str()
        .expect("her token")
        .to_string();
    let won = o
        .signed_claim_with_key(&id, &hog, Some(&token), &unique("k"))
        .await;
    assert_eq!(won.status, 201, "{}", won.body);
    let claim = won.body["claim"]["id"].as_str().unwrap().to_string();
    let service = o.config.service_token.expose().to_string();
    let release = flashgate_shared::api::ReleaseRequest { reason: None };
    let (st, b) = o.claim_action(&claim, "release", &service, &release).await;
    assert_eq!(st, 200, "{b}");
    // (Her first ticket is left out: its admission is spent, whatever the poll shows.)
    let want = [false, true, false, true, false, true, true];
    let deadline = Instant::now() + Duration::from_secs(30);
    let got = loop {
        let mut got = Vec::new();
        for (_, _, t) in &tickets[1..] {
            got.push(poll_ticket(&http, &edge, &id, t).await["admitted"] == json!(true));
        }
        if got == want || Instant::now() > deadline {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(got, want, "after her win and its release: d, none of hers");
    o.stop().await;
}
