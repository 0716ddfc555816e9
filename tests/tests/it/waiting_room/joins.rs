//! Joins answered at the edge: the built worker in workerd in front of a real origin
//! (PostgreSQL, Redis). The edge issues every ticket itself and reports the tickets it issued
//! to the origin in batches (`POST /edge/v1/campaigns/{id}/joins`, at most one per isolate,
//! campaign and second), so no join reaches the origin on its own; every ticket verifies, a
//! re-join with the ticket gets it back, admission follows the order keys. The report route
//! refuses forged, replayed and bad reports and changes nothing; it still places a group of
//! joins from an older edge.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use flashgate_shared::admission::open_ticket;
use flashgate_shared::api::ChangeAction;
use flashgate_shared::queue::joins::joins_path;
use flashgate_shared::queue::keys::EDGE_BLOCK;
use flashgate_shared::queue::RANDOM_BLOCK;
use flashgate_shared::queue::TICKET_HEADER;
use flashgate_shared::signature::{sign, Signed};
use flashgate_shared::{ANSWERED_BY_HEADER, EDGE_SIGNATURE_HEADER};
use flashgate_tests::support::room::{admission, campaign, room};
use flashgate_tests::support::scrape::Scrape;
use flashgate_tests::support::{
    post_edge_report, queue_config, test_config, token_for, unique, TestEdge, TestOrigin,
    TEST_EDGE_SECRET,
};
use futures::stream::{self, StreamExt};
use serde_json::{json, Value};

const K: &[u8] = TEST_EDGE_SECRET.as_bytes();

/// The origin's join counters: (join steps run: reports and groups, joins placed).
async fn join_counts(o: &TestOrigin) -> (u64, u64) {
    let s = Scrape::of(&o.http, &o.url).await;
    (
        s.count("flashgate_queue_join_requests_total", &[]),
        s.count("flashgate_queue_joins_total", &[]),
    )
}

/// Waits (at most 30 s) until the origin's status of `id` says `line` tickets in line.
async fn line_reaches(o: &TestOrigin, id: &str, line: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let q = o.status(id).await["queue"].clone();
        if q["line"].as_u64() == Some(line) || Instant::now() > deadline {
            return q;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn edge(o: &TestOrigin) -> TestEdge {
    TestEdge::start(
        &o.url,
        &[
            ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.to_string()),
            ("FLASHGATE_LIMIT_IP_PER_S", "0".to_string()),
            ("FLASHGATE_LIMIT_JOINS_PER_S", "0".to_string()),
        ],
    )
}

/// Joins `customer` at the edge, presenting `ticket` when given: (status, answered by, body).
async fn join_at(
    http: &reqwest::Client,
    edge: &TestEdge,
    id: &str,
    customer: &str,
    ticket: Option<&str>,
) -> (u16, String, Value) {
    try_join_at(http, edge, id, customer, ticket)
        .await
        .unwrap_or_else(|e| panic!("{customer}: the join got no answer: {e:?}"))
}

/// [`join_at`], with the transport error when no answer came.
async fn try_join_at(
    http: &reqwest::Client,
    edge: &TestEdge,
    id: &str,
    customer: &str,
    ticket: Option<&str>,
) -> Result<(u16, String, Value), reqwest::Error> {
    let config = test_config();
    let mut req = http
        .post(format!("{}/api/v1/campaigns/{id}/queue", edge.url))
        .bearer_auth(token_for(&config, customer));
    if let Some(t) = ticket {
        req = req.header(TICKET_HEADER, t);
    }
    let res = req.send().await?;
    let st = res.status().as_u16();
    let by = res
        .headers()
        .get(ANSWERED_BY_HEADER)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    Ok((st, by, res.json().await.unwrap_or(Value::Null)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn joins_are_answered_at_the_edge_and_reach_the_origin_in_reports() {
    let o = TestOrigin::start_with(queue_config()).await;
    // Nobody is admitted during the run: positions and states stay those of the join.
    let id = paused_room(&o, 50, 1).await;
    let edge = edge(&o);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .unwrap();
    let run = unique("e");
    let n = 20_000;
    let customers: Vec<String> = (0..n).map(|i| format!("{run}-{i}")).collect();
    let before = join_counts(&o).await;
    let started = Instant::now();
    // A join that got no answer (on a loaded machine the runtime may close a pooled
    // connection under a request) is sent again, as a customer would: if the edge had issued
    // its ticket, she has two, and the line counts both.
    let unanswered = std::sync::atomic::AtomicU64::new(0);
    let answers: Vec<(String, u16, String, Value)> = stream::iter(customers.iter())
        .map(|c| {
            let (http, edge, id, unanswered) = (&http, &edge, &id, &unanswered);
            async move {
                for _ in 0..3 {
                    match try_join_at(http, edge, id, c, None).await {
                        Ok((st, by, body)) => return (c.clone(), st, by, body),
                        Err(e) => {
                            unanswered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            eprintln!("{c}: the join got no answer, sent again: {e:?}");
                        }
                    }
                }
                let (st, by, body) = join_at(http, edge, id, c, None).await;
                (c.clone(), st, by, body)
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let joined_s = started.elapsed().as_secs_f64();
    let unanswered = unanswered.into_inner();
    let q = line_reaches(&o, &id, n as u64).await;
    let reported_s = started.elapsed().as_secs_f64();
    let after = join_counts(&o).await;

    let mut tickets: HashMap<String, String> = HashMap::new();
    for (c, st, by, body) in &answers {
        assert_eq!((*st, by.as_str()), (201, "edge"), "{c}: {body}");
        assert_eq!(body["state"], "paused", "{c}: {body}");
        tickets.insert(c.clone(), body["ticket"].as_str().unwrap().to_string());
    }
    let seqs: BTreeSet<u64> = tickets
        .iter()
        .map(|(c, t)| {
            let ticket = open_ticket(K, t, &id).unwrap();
            assert_eq!(&ticket.place.customer, c);
            assert!(ticket.place.sequence > EDGE_BLOCK, "an arrival key");
            ticket.place.sequence
        })
        .collect();
    assert_eq!(seqs.len(), n, "one order key per ticket");
    let line = q["line"].as_u64().unwrap_or(0);
    assert!(
        (n as u64..=n as u64 + unanswered).contains(&line),
        "every ticket reported ({unanswered} joins sent again): {q}"
    );
    let (reports, placed) = (after.0 - before.0, after.1 - before.1);
    println!(
        "{n} joins through the edge in {joined_s:.1} s ({:.0}/s); all reported after \
         {reported_s:.1} s in {reports} reports ({:.0} tickets each)",
        n as f64 / joined_s,
        n as f64 / reports as f64
    );
    // Exactly n when every join was answered the first time.
    assert!(
        (line..=n as u64 + unanswered).contains(&placed),
        "every ticket counted once: {placed} placed, line {line}"
    );
    // workerd runs the worker in one isolate: at most one report per second of the run.
    assert!(
        reports as f64 <= reported_s.ceil() + 1.0,
        "{reports} reports in {reported_s:.1} s"
    );
    let own = Scrape::of(&o.http, &o.url).await.count(
        "flashgate_http_request_duration_seconds_count",
        &[("route", "/api/v1/campaigns/{id}/queue")],
    );
    assert_eq!(own, 0, "no join reached the origin on its own");

    // Her ticket again when she presents it; a later place when she lost it. (A new client:
    // the runtime may have closed the pooled connections while the reports came in.)
    let http = reqwest::Client::new();
    let c = &customers[7];
    let (st, by, again) = join_at(&http, &edge, &id, c, Some(&tickets[c])).await;
    assert_eq!((st, by.as_str()), (200, "edge"), "{again}");
    assert_eq!(again["ticket"].as_str(), Some(tickets[c].as_str()));
    let (st, _, lost) = join_at(&http, &edge, &id, c, None).await;
    assert_eq!(st, 201, "{lost}");
    let later = open_ticket(K, lost["ticket"].as_str().unwrap(), &id).unwrap();
    assert!(
        later.place.sequence > *seqs.last().unwrap(),
        "a later place"
    );
    // Another customer's ticket is no ticket of hers.
    let (st, _, other) = join_at(&http, &edge, &id, c, Some(&tickets[&customers[8]])).await;
    assert_eq!(st, 201, "{st}: {other}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_follows_the_order_keys_of_the_reported_tickets() {
    let o = TestOrigin::start_with(queue_config()).await;
    let id = paused_room(&o, 50, 100).await;
    let edge = edge(&o);
    let http = reqwest::Client::new();
    let run = unique("k");
    let mut tickets = Vec::new();
    for i in 0..30 {
        let (st, _, body) = join_at(&http, &edge, &id, &format!("{run}-{i}"), None).await;
        assert_eq!(st, 201, "{body}");
        tickets.push(body["ticket"].as_str().unwrap().to_string());
    }
    let q = line_reaches(&o, &id, 30).await;
    assert_eq!(q["line"], 30, "{q}");
    assert!(
        q["line_marks"].as_array().is_some_and(|m| !m.is_empty()),
        "{q}"
    );
    admission(&o, &id, ChangeAction::ResumeAdmission).await;
    // Every one is admitted (once her key is older than the admitting lag), in key order.
    let deadline = Instant::now() + Duration::from_secs(30);
    let q = loop {
        let q = o.status(&id).await["queue"].clone();
        if q["admitted"] == 30 || Instant::now() > deadline {
            break q;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        (q["admitted"].as_u64(), q["line"].as_u64()),
        (Some(30), Some(0)),
        "{q}"
    );
    let last = open_ticket(K, tickets.last().unwrap(), &id).unwrap();
    assert_eq!(q["now_serving"].as_u64(), Some(last.place.sequence), "{q}");
}

/// Posts `body` to campaign `id`'s report route, signed at `t` with `secret` (unsigned when
/// `None`). Returns status and JSON body.
async fn group(
    o: &TestOrigin,
    id: &str,
    body: &[u8],
    secret: Option<&[u8]>,
    t: i64,
) -> (u16, Value) {
    post_edge_report(o, &joins_path(id), body, secret, t).await
}

/// Ticket of `who` on `campaign` as an isolate issues it at `at_ms` (its arrival key with
/// `salt`), signed with `key`.
fn issued_ticket(key: &[u8], campaign: &str, who: &str, at_ms: i64, salt: u32) -> String {
    let t = flashgate_shared::admission::Ticket {
        place: flashgate_shared::admission::Place {
            campaign: campaign.to_string(),
            customer: who.to_string(),
            sequence: flashgate_shared::queue::keys::arrival_key(at_ms, salt),
        },
        issued_at_s: at_ms.div_euclid(1000),
        drawn_waiting_at_issue: 0,
    };
    flashgate_shared::admission::sign_ticket(key, &t)
}

/// The body of report `rid` of issued `tickets`.
fn report_body(rid: &str, tickets: &[String]) -> Vec<u8> {
    serde_json::to_vec(&json!({"report_id": rid, "tickets": tickets})).unwrap()
}

/// A live campaign of `stock` units (no holds) with a waiting room admitting `rate` a second,
/// its admission paused: nobody is admitted, so positions and states stay those of the join.
async fn paused_room(o: &TestOrigin, stock: i64, rate: u32) -> String {
    let id = campaign(o, stock, chrono::Duration::minutes(-1), None, room(rate)).await;
    admission(o, &id, ChangeAction::PauseAdmission).await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_or_replayed_report_changes_nothing() {
    let o = TestOrigin::start_with(queue_config()).await;
    let id = paused_room(&o, 5, 1).await;
    let now = chrono::Utc::now();
    let ticket = |key: &[u8], campaign: &str, who: &str, salt: u32| {
        issued_ticket(key, campaign, who, now.timestamp_millis(), salt)
    };
    let report = |rid: &str, tickets: Vec<String>| report_body(rid, &tickets);
    let good = report(
        "iso-j1",
        vec![ticket(K, &id, "ann", 1), ticket(K, &id, "bob", 2)],
    );
    let t = now.timestamp();
    let arrival = flashgate_shared::admission::sign_ticket(
        K,
        &flashgate_shared::admission::Ticket {
            place: flashgate_shared::admission::Place {
                campaign: id.clone(),
                customer: "cy".into(),
                sequence: RANDOM_BLOCK + 1,
            },
            issued_at_s: t,
            drawn_waiting_at_issue: 0,
        },
    );
    type Case<'a> = (&'a str, Vec<u8>, Option<&'a [u8]>, i64, u16, &'a str);
    let cases: Vec<Case<'_>> = vec![
        ("unsigned", good.clone(), None, t, 403, "forbidden"),
        (
            "another key",
            good.clone(),
            Some(b"wrong-secret"),
            t,
            403,
            "forbidden",
        ),
        (
            "replayed after the skew",
            good.clone(),
            Some(K),
            t - 120,
            403,
            "forbidden",
        ),
        (
            "a forged ticket",
            report(
                "iso-j2",
                vec![ticket(K, &id, "ann", 1), ticket(b"x", &id, "eve", 3)],
            ),
            Some(K),
            t,
            403,
            "forbidden",
        ),
        (
            "another campaign's ticket",
            report("iso-j3", vec![ticket(K, "other", "eve", 3)]),
            Some(K),
            t,
            403,
            "forbidden",
        ),
        (
            "a malformed ticket",
            report("iso-j4", vec!["nope".into()]),
            Some(K),
            t,
            400,
            "invalid_request",
        ),
        (
            "a number the edge does not issue",
            report("iso-j5", vec![arrival]),
            Some(K),
            t,
            400,
            "invalid_request",
        ),
        (
            "no tickets",
            report("iso-j6", vec![]),
            Some(K),
            t,
            400,
            "invalid_request",
        ),
        (
            "a bad report id",
            report("a b", vec![ticket(K, &id, "ann", 1)]),
            Some(K),
            t,
            400,
            "invalid_request",
        ),
    ];
    for (what, body, secret, at, want, code) in cases {
        let (st, reply) = group(&o, &id, &body, secret, at).await;
        assert_eq!(
            (st, reply["result"].as_str()),
            (want, Some(code)),
            "{what}: {reply}"
        );
    }
    assert_eq!(join_counts(&o).await.1, 0, "nothing was counted");
    assert_eq!(o.status(&id).await["queue"]["line"], 0);
    // A good report counts both; the same report again (a retry) counts nothing more.
    let (st, first) = group(&o, &id, &good, Some(K), t).await;
    assert_eq!(
        (st, &first),
        (200, &json!({"counted": 2, "duplicate": false}))
    );
    let (st, again) = group(&o, &id, &good, Some(K), t).await;
    assert_eq!(
        (st, &again),
        (200, &json!({"counted": 0, "duplicate": true}))
    );
    assert_eq!(o.status(&id).await["queue"]["line"], 2);
    assert_eq!(join_counts(&o).await.1, 2);

    // An arrival key whose report of joins was lost joins the line when it is reported
    // present; one already in line is not counted twice.
    let lost = ticket(K, &id, "dee", 4);
    let presence = serde_json::to_vec(
        &json!({"report_id": "iso-p1", "tickets": [lost, ticket(K, &id, "ann", 1)]}),
    )
    .unwrap();
    let path = flashgate_shared::queue::presence::presence_path(&id);
    let signed = Signed {
        method: "POST",
        path: &path,
        body: &presence,
        ..Signed::default()
    };
    let res = o
        .http
        .post(format!("{}{path}", o.url))
        .header("content-type", "application/json")
        .header(EDGE_SIGNATURE_HEADER, sign(K, t, &signed))
        .body(presence.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let q = o.status(&id).await["queue"].clone();
    assert_eq!(q["line"], 3, "{q}");
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

/// The largest report an isolate sends: `MAX_ISSUED_TICKETS` tickets of customers with the
/// longest ids (128 characters) fit the route's body bound and all join the line; one ticket
/// more is refused whole (400 `invalid_request`) and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_report_is_taken_whole_and_one_ticket_more_is_refused() {
    use flashgate_shared::queue::joins::MAX_ISSUED_TICKETS;
    let o = TestOrigin::start_with(queue_config()).await;
    let id = paused_room(&o, 5, 1).await;
    let now = chrono::Utc::now();
    // Distinct arrival keys: 1,024 salts per millisecond.
    let tickets: Vec<String> = (0..=MAX_ISSUED_TICKETS)
        .map(|i| {
            let at_ms = now.timestamp_millis() + i64::try_from(i / 1024).unwrap();
            let salt = u32::try_from(i % 1024).unwrap();
            issued_ticket(K, &id, &format!("{i:x>128}"), at_ms, salt)
        })
        .collect();
    let t = now.timestamp();
    let over = report_body("iso-over", &tickets);
    let (st, reply) = group(&o, &id, &over, Some(K), t).await;
    assert_eq!(
        (st, reply["result"].as_str()),
        (400, Some("invalid_request"))
    );
    assert_eq!(o.status(&id).await["queue"]["line"], 0, "nothing stored");
    let full = report_body("iso-full", &tickets[..MAX_ISSUED_TICKETS]);
    let (st, reply) = group(&o, &id, &full, Some(K), t).await;
    assert_eq!(
        (st, &reply),
        (
            200,
            &json!({"counted": MAX_ISSUED_TICKETS, "duplicate": false})
        ),
        "a report of {} bytes",
        full.len()
    );
    assert_eq!(o.status(&id).await["queue"]["line"], MAX_ISSUED_TICKETS);
    // Past the route's bound: 413, read no further.
    let bound = flashgate_origin::http::queue::MAX_JOINS_REPORT_BODY_BYTES;
    let mut past = report_body("iso-past", &tickets[..1]);
    past.resize(bound + 1, b' ');
    let (st, reply) = group(&o, &id, &past, Some(K), t).await;
    assert_eq!(
        (st, reply["result"].as_str()),
        (413, Some("payload_too_large"))
    );
    assert_eq!(o.status(&id).await["queue"]["line"], MAX_ISSUED_TICKETS);
}
