//! Joins grouped at the edge: the built worker in workerd in front of a real origin
//! (PostgreSQL, Redis). Joins whose customer token verifies at the edge reach the origin in
//! groups (`POST /edge/v1/campaigns/{id}/joins`), never one by one, and every customer gets
//! the place her own join would have given: one place each, a double tap the same ticket,
//! arrival numbers unique and contiguous. The group route refuses bad input whole and changes
//! nothing.

use std::collections::{BTreeSet, HashMap};

use flashgate_shared::admission::open_ticket;
use flashgate_shared::api::ChangeAction;
use flashgate_shared::queue::joins::joins_path;
use flashgate_shared::queue::RANDOM_BLOCK;
use flashgate_shared::signature::{sign, Signed};
use flashgate_shared::{ANSWERED_BY_HEADER, EDGE_SIGNATURE_HEADER};
use flashgate_tests::support::room::{admission, campaign, room};
use flashgate_tests::support::scrape::Scrape;
use flashgate_tests::support::{
    queue_config, test_config, token_for, unique, TestEdge, TestOrigin, TEST_EDGE_SECRET,
};
use futures::future::join_all;
use serde_json::{json, Value};

const K: &[u8] = TEST_EDGE_SECRET.as_bytes();

/// The origin's join counters: (join steps run, joins placed).
async fn join_counts(o: &TestOrigin) -> (u64, u64) {
    let s = Scrape::of(&o.http, &o.url).await;
    (
        s.count("flashgate_queue_join_requests_total", &[]),
        s.count("flashgate_queue_joins_total", &[]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn joins_through_the_edge_reach_the_origin_in_groups_with_one_place_each() {
    let o = TestOrigin::start_with(queue_config()).await;
    let id = campaign(&o, 50, chrono::Duration::minutes(-1), None, room(1)).await;
    // Nobody is admitted during the test: positions and states stay those of the join.
    admission(&o, &id, ChangeAction::PauseAdmission).await;
    let edge = TestEdge::start(
        &o.url,
        &[
            ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.to_string()),
            ("FLASHGATE_LIMIT_IP_PER_S", "0".to_string()),
            ("FLASHGATE_LIMIT_JOINS_PER_S", "0".to_string()),
        ],
    );
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .build()
        .unwrap();
    let config = test_config();
    let run = unique("g");
    let customers: Vec<String> = (0..600).map(|i| format!("{run}-{i}")).collect();
    let before = join_counts(&o).await;
    // Every customer taps twice, all at once.
    let sent = customers.iter().chain(customers.iter()).map(|c| {
        let req = http
            .post(format!("{}/api/v1/campaigns/{id}/queue", edge.url))
            .bearer_auth(token_for(&config, c));
        async move {
            let res = req.send().await.unwrap();
            let st = res.status().as_u16();
            let by = res.headers()[ANSWERED_BY_HEADER]
                .to_str()
                .unwrap()
                .to_string();
            let body: Value = res.json().await.unwrap();
            (c.clone(), st, by, body)
        }
    });
    let answers = join_all(sent).await;
    let after = join_counts(&o).await;

    let mut tickets: HashMap<String, String> = HashMap::new();
    let mut created = 0;
    for (c, st, by, body) in &answers {
        assert!(matches!(st, 200 | 201), "{c}: {st} {body}");
        assert_eq!(by, "origin", "{c}: the origin gave the place");
        created += usize::from(*st == 201);
        let t = body["ticket"].as_str().unwrap().to_string();
        assert_eq!(body["state"], "paused", "{c}: {body}");
        let had = tickets.insert(c.clone(), t.clone());
        assert!(had.is_none_or(|h| h == t), "{c}: two tickets");
    }
    assert_eq!(created, customers.len(), "one new place per customer");
    let seqs: BTreeSet<u64> = tickets
        .iter()
        .map(|(c, t)| {
            let ticket = open_ticket(K, t, &id).unwrap();
            assert_eq!(&ticket.place.customer, c);
            ticket.place.sequence
        })
        .collect();
    let n = customers.len() as u64;
    assert_eq!(
        seqs,
        (RANDOM_BLOCK + 1..=RANDOM_BLOCK + n).collect::<BTreeSet<_>>(),
        "arrival numbers unique and contiguous"
    );
    let (groups, placed) = (after.0 - before.0, after.1 - before.1);
    println!(
        "{} joins through the edge: {groups} requests to the origin ({:.1} joins each)",
        answers.len(),
        answers.len() as f64 / groups as f64
    );
    assert_eq!(placed, answers.len() as u64, "every join placed once");
    assert!(
        groups * 2 <= answers.len() as u64,
        "{groups} origin requests for {} joins",
        answers.len()
    );
    let own = Scrape::of(&o.http, &o.url).await.count(
        "flashgate_http_request_duration_seconds_count",
        &[("route", "/api/v1/campaigns/{id}/queue")],
    );
    assert_eq!(own, 0, "no join reached the origin on its own");
}

/// Posts `body` to campaign `id`'s group route, signed at `t` with `secret` (unsigned when
/// `None`). Returns status and JSON body.
async fn group(
    o: &TestOrigin,
    id: &str,
    body: &[u8],
    secret: Option<&[u8]>,
    t: i64,
) -> (u16, Value) {
    let path = joins_path(id);
    let mut req = o
        .http
        .post(format!("{}{path}", o.url))
        .header("content-type", "application/json")
        .body(body.to_vec());
    if let Some(secret) = secret {
        let signed = Signed {
            method: "POST",
            path: &path,
            body,
            ..Signed::default()
        };
        req = req.header(EDGE_SIGNATURE_HEADER, sign(secret, t, &signed));
    }
    let res = req.send().await.unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_group_is_refused_whole_and_changes_nothing() {
    let o = TestOrigin::start_with(queue_config()).await;
    let id = campaign(&o, 5, chrono::Duration::minutes(-1), None, room(1)).await;
    let now = chrono::Utc::now().timestamp();
    let ok = serde_json::to_vec(&json!({"customers": ["ann", "bob"]})).unwrap();
    let many: Vec<String> = (0..501).map(|i| format!("c{i}")).collect();
    // (what, body, signing key, signed at, status, error code)
    type Case<'a> = (&'a str, Vec<u8>, Option<&'a [u8]>, i64, u16, &'a str);
    let cases: Vec<Case<'_>> = vec![
        ("unsigned", ok.clone(), None, now, 403, "forbidden"),
        (
            "another key",
            ok.clone(),
            Some(b"wrong-secret"),
            now,
            403,
            "forbidden",
        ),
        (
            "replayed after the skew",
            ok.clone(),
            Some(K),
            now - 120,
            403,
            "forbidden",
        ),
        ("not JSON", b"{".to_vec(), Some(K), now, 400, "invalid_json"),
        (
            "no customers",
            br#"{"customers":[]}"#.to_vec(),
            Some(K),
            now,
            400,
            "invalid_request",
        ),
        (
            "past the bound",
            serde_json::to_vec(&json!({ "customers": many })).unwrap(),
            Some(K),
            now,
            400,
            "invalid_request",
        ),
        (
            "not a customer id",
            br#"{"customers":["ann","b b"]}"#.to_vec(),
            Some(K),
            now,
            400,
            "invalid_request",
        ),
        (
            "an unknown field",
            br#"{"customers":["ann"],"x":1}"#.to_vec(),
            Some(K),
            now,
            422,
            "validation_failed",
        ),
    ];
    for (what, body, secret, t, want, code) in cases {
        let (st, reply) = group(&o, &id, &body, secret, t).await;
        assert_eq!(
            (st, reply["result"].as_str()),
            (want, Some(code)),
            "{what}: {reply}"
        );
    }
    let (st, reply) = group(&o, "no-such-campaign", &ok, Some(K), now).await;
    assert_eq!(
        (st, reply["result"].as_str()),
        (404, Some("not_found")),
        "{reply}"
    );
    assert_eq!(join_counts(&o).await, (0, 0), "nothing was placed");
    assert_eq!(o.status(&id).await["queue"]["now_serving"], 0);

    // A good group places both, in order; sent again it gives the same places (200).
    let (st, first) = group(&o, &id, &ok, Some(K), now).await;
    assert_eq!(st, 200, "{first}");
    let (st, again) = group(&o, &id, &ok, Some(K), now).await;
    assert_eq!(st, 200, "{again}");
    for (i, who) in ["ann", "bob"].iter().enumerate() {
        let (a, b) = (&first["joins"][i], &again["joins"][i]);
        assert_eq!(
            (a["status"].as_u64(), b["status"].as_u64()),
            (Some(201), Some(200))
        );
        assert_eq!(a["reply"]["ticket"], b["reply"]["ticket"], "{who}");
        let t = open_ticket(K, a["reply"]["ticket"].as_str().unwrap(), &id).unwrap();
        assert_eq!(
            (t.place.customer.as_str(), t.place.sequence),
            (*who, RANDOM_BLOCK + 1 + i as u64)
        );
    }
}
