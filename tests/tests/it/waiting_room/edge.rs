//! The waiting room at the edge: the built worker in workerd (Miniflare) in front of a small
//! fake origin (`flashgate_tests::support::fake_room`), which serves a campaign status with the
//! `queue` fields, signs join tickets and counts every request it gets, so that these tests pin
//! down what the edge alone does with the fields and tokens. The real origin's side of the room
//! is tested in `waiting_room.rs`, the two together in `waiting_room_trip.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flashgate_shared::admission::{mint_admission, sign_ticket};
use flashgate_shared::queue::{ADMISSION_HEADER, TICKET_HEADER};
use flashgate_shared::ANSWERED_BY_HEADER;
use flashgate_tests::support::fake_room::{queue_fields, start_fake, status_body, ticket, Shared};
use flashgate_tests::support::{eventually, reply, Reply};
use flashgate_tests::support::{test_config, token_for, unique, TestEdge};
use futures::future::join_all;
use serde_json::{json, Value};

const K: &[u8] = flashgate_tests::support::TEST_EDGE_SECRET.as_bytes();

/// A fake origin serving `statuses`, and the edge in front of it (status TTL 300 ms, the
/// per-IP limit off since every test request comes from one address, plus `extra`).
async fn stack(statuses: Vec<Value>, extra: &[(&str, &str)]) -> (Shared, TestEdge) {
    let fake: Shared = Arc::default();
    for s in statuses {
        let id = s["id"].as_str().unwrap().to_string();
        fake.lock().unwrap().statuses.insert(id, s);
    }
    let origin = start_fake(fake.clone()).await;
    let mut env = vec![
        (
            "FLASHGATE_EDGE_SECRET",
            String::from_utf8(K.to_vec()).unwrap(),
        ),
        ("FLASHGATE_STATUS_TTL_MS", "300".to_string()),
        ("FLASHGATE_LIMIT_IP_PER_S", "0".to_string()),
        ("FLASHGATE_LIMIT_POLLS_PER_S", "0".to_string()),
    ];
    for (k, v) in extra {
        env.retain(|(name, _)| name != k);
        env.push((k, v.to_string()));
    }
    (fake, TestEdge::start(&origin, &env))
}

/// A poll of the room through the edge, with a ticket or without.
async fn poll(http: &reqwest::Client, edge: &str, id: &str, ticket: Option<&str>) -> Reply {
    let mut req = http.get(format!("{edge}/api/v1/campaigns/{id}/queue"));
    if let Some(t) = ticket {
        req = req.header(TICKET_HEADER, t);
    }
    reply(req.send().await.expect("poll")).await
}

/// Warms the edge's status of campaign `drop` (one poll), so that all the claims that follow
/// meet the same fresh entry.
async fn warm(http: &reqwest::Client, edge: &str) {
    poll(
        http,
        edge,
        "drop",
        Some(&sign_ticket(K, &ticket("drop", "zed", 1))),
    )
    .await;
}

/// A claim through the edge by `customer` with an optional admission token: status, who
/// answered, body, `Retry-After`.
async fn claim(
    http: &reqwest::Client,
    edge: &str,
    id: &str,
    customer: &str,
    admission: Option<&str>,
) -> (u16, String, Value, String) {
    let mut req = http
        .post(format!("{edge}/api/v1/campaigns/{id}/claims"))
        .bearer_auth(token_for(&test_config(), customer))
        .header("idempotency-key", unique("k"))
        .header("content-type", "application/json")
        .body("{}");
    if let Some(a) = admission {
        req = req.header(ADMISSION_HEADER, a);
    }
    let res = req.send().await.expect("claim");
    let status = res.status().as_u16();
    let h = |n: &str| {
        res.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let (by, retry) = (h(ANSWERED_BY_HEADER), h("retry-after"));
    (status, by, res.json().await.unwrap_or(Value::Null), retry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn polls_are_answered_at_the_edge_and_admission_reaches_the_origin() {
    // A long TTL, so that "one status fetch" below does not depend on the machine's speed.
    let (fake, edge) = stack(
        vec![status_body("drop", "active", 100, Some(queue_fields(10)))],
        &[("FLASHGATE_STATUS_TTL_MS", "30000")],
    )
    .await;
    let http = reqwest::Client::new();
    let waiting = sign_ticket(K, &ticket("drop", "bob", 50));
    // 40 truly concurrent polls: all answered by the edge, one status fetch at most.
    let answers = join_all((0..40).map(|_| poll(&http, &edge.url, "drop", Some(&waiting)))).await;
    for a in &answers {
        assert_eq!(
            (a.status, a.by.as_str()),
            (200, "edge"),
            "{}",
            String::from_utf8_lossy(&a.body)
        );
        assert_eq!(
            a.json(),
            json!({"position": 40, "eta_seconds": 4, "state": "waiting", "admitted": false,
                "outlook": "likely"})
        );
        assert_eq!(a.header("retry-after"), Some("2"));
        assert_eq!(a.header("cache-control"), Some("private, no-store"));
    }
    {
        let f = fake.lock().unwrap();
        assert_eq!((f.status_gets, f.other, f.claims.len()), (1, 0, 0));
    }

    // Admitted (sequence <= now_serving): a token, which a claim carries to the origin.
    let admitted = sign_ticket(K, &ticket("drop", "ana", 10));
    let a = poll(&http, &edge.url, "drop", Some(&admitted)).await;
    let body = a.json();
    assert_eq!(
        (body["state"].as_str(), body["admitted"].as_bool()),
        (Some("admitted"), Some(true))
    );
    assert_eq!(body["position"], 0);
    let token = body["admission_token"]
        .as_str()
        .expect("admission token")
        .to_string();
    let (st, by, _, _) = claim(&http, &edge.url, "drop", "ana", Some(&token)).await;
    assert_eq!((st, by.as_str()), (201, "origin"));
    assert_eq!(fake.lock().unwrap().claims, vec![token.clone()]);

    // No token: 429 queued at the edge; the origin sees nothing.
    let (st, by, body, retry) = claim(&http, &edge.url, "drop", "cy", None).await;
    assert_eq!(
        (st, by.as_str(), body),
        (429, "edge", json!({"result": "queued"}))
    );
    assert_eq!(retry, "5");
    assert_eq!(fake.lock().unwrap().claims.len(), 1);

    // A join is answered at the edge with a ticket it then honours; the origin learns of it
    // from the edge's report, sent after the answer.
    let res = http
        .post(format!("{}/api/v1/campaigns/drop/queue", edge.url))
        .bearer_auth(token_for(&test_config(), "joiner"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 201);
    let joined: Value = res.json().await.unwrap();
    let p = poll(&http, &edge.url, "drop", joined["ticket"].as_str()).await;
    assert_eq!(
        (p.status, p.json()["state"].clone()),
        (200, json!("waiting"))
    );
    reported(&fake, 1).await;
    let f = fake.lock().unwrap();
    assert_eq!((f.joins, f.issued_reports, f.groups), (1, 1, 0));
}

/// Waits (at most 10 s) until the fake origin has counted `joins` joins.
async fn reported(fake: &Shared, joins: usize) {
    for _ in 0..100 {
        if fake.lock().unwrap().joins >= joins {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_tokens_and_tickets_are_refused_at_the_edge() {
    let (fake, edge) = stack(
        vec![
            status_body("drop", "active", 100, Some(queue_fields(10))),
            status_body("plain", "active", 100, None),
        ],
        &[],
    )
    .await;
    let http = reqwest::Client::new();
    let now = chrono::Utc::now().timestamp();
    let ana = ticket("drop", "ana", 3);
    let cases = [
        (
            mint_admission(b"guessed", &ana, now, 120),
            "admission token signature is invalid",
        ),
        (
            mint_admission(K, &ana, now - 1_000, 120),
            "admission token has expired",
        ),
        (
            mint_admission(K, &ticket("drop", "bob", 3), now, 120),
            "admission token belongs to another customer",
        ),
        (
            mint_admission(K, &ticket("other", "ana", 3), now, 120),
            "admission token belongs to another campaign",
        ),
    ];
    for (token, message) in cases {
        let (st, by, body, _) = claim(&http, &edge.url, "drop", "ana", Some(&token)).await;
        assert_eq!(
            (st, by.as_str(), body),
            (
                403,
                "edge",
                json!({"result": "forbidden", "message": message})
            )
        );
    }
    let (st, by, body, _) = claim(&http, &edge.url, "drop", "ana", Some("not a token")).await;
    assert_eq!(
        (st, by.as_str(), body["result"].clone()),
        (400, "edge", json!("invalid_request"))
    );
    assert!(
        fake.lock().unwrap().claims.is_empty(),
        "a refused claim reached the origin"
    );

    // Tickets: missing or malformed 400, forged or another campaign's 403.
    let forged = sign_ticket(b"guessed", &ana);
    let elsewhere = sign_ticket(K, &ticket("other", "ana", 3));
    for (t, status, code) in [
        (None, 400, "invalid_request"),
        (Some("x.y"), 400, "invalid_request"),
        (Some(forged.as_str()), 403, "forbidden"),
        (Some(elsewhere.as_str()), 403, "forbidden"),
    ] {
        let a = poll(&http, &edge.url, "drop", t).await;
        assert_eq!(
            (a.status, a.json()["result"].clone()),
            (status, json!(code)),
            "{t:?}"
        );
        assert_eq!(a.by, "edge");
    }
    // No waiting room: 409 for a poll, and claims go to the origin as today, no token needed.
    let good = sign_ticket(K, &ticket("plain", "ana", 1));
    let a = poll(&http, &edge.url, "plain", Some(&good)).await;
    assert_eq!(
        (a.status, a.json()["result"].clone()),
        (409, json!("no_waiting_room"))
    );
    let a = poll(&http, &edge.url, "ghost", Some(&good)).await;
    assert_eq!(a.status, 404);
    let (st, by, _, _) = claim(&http, &edge.url, "plain", "ana", None).await;
    assert_eq!((st, by.as_str()), (201, "origin"));
    assert_eq!(fake.lock().unwrap().other, 0);
}

/// A genuine admission token that expired less than the grace ago carries a claim to the
/// origin (which answers a retried key from its record and refuses a new one), at most one per
/// customer per second; past the grace it is refused at the edge.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_expired_token_carries_only_a_bounded_retry_to_the_origin() {
    let (fake, edge) = stack(
        vec![status_body("drop", "active", 100, Some(queue_fields(10)))],
        &[("FLASHGATE_LIMIT_CLAIMS_PER_S", "100")],
    )
    .await;
    let http = reqwest::Client::new();
    let now = chrono::Utc::now().timestamp();
    let cara = ticket("drop", "cara", 3);
    // Expired 10 s ago (issued 130 s ago with a 120 s TTL).
    let recent = mint_admission(K, &cara, now - 130, 120);
    let started = Instant::now();
    let (st, by, _, _) = claim(&http, &edge.url, "drop", "cara", Some(&recent)).await;
    assert_eq!((st, by.as_str()), (201, "origin"));
    // Four more at once: the replay bucket (1 per second, spent by the first) lets at most
    // one more through per whole second since; the others are 429 at the edge.
    let burst =
        join_all((0..4).map(|_| claim(&http, &edge.url, "drop", "cara", Some(&recent)))).await;
    let elapsed_s = started.elapsed().as_secs() as usize;
    let forwarded = burst.iter().filter(|(_, by, _, _)| by == "origin").count();
    assert!(
        forwarded <= elapsed_s,
        "{forwarded} forwarded in {elapsed_s} s"
    );
    for (st, by, body, retry) in burst.iter().filter(|(_, by, _, _)| by != "origin") {
        assert_eq!(
            (*st, by.as_str(), body["result"].as_str(), retry.as_str()),
            (429, "edge", Some("rate_limited"), "1")
        );
    }
    // Expired past the grace: 403 at the edge, like a forged one.
    let old = mint_admission(K, &cara, now - 120 - 600 - 5, 120);
    let (st, by, body, _) = claim(&http, &edge.url, "drop", "cara", Some(&old)).await;
    assert_eq!(
        (st, by.as_str(), body),
        (
            403,
            "edge",
            json!({"result": "forbidden", "message": "admission token has expired"})
        )
    );
    let claims = fake.lock().unwrap().claims.clone();
    assert_eq!(claims.len(), 1 + forwarded);
    assert!(
        claims.iter().all(|c| *c == recent),
        "the token is passed on"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sold_out_status_answers_sold_out_to_every_ticket() {
    let (fake, edge) = stack(
        vec![status_body("drop", "active", 3, Some(queue_fields(10)))],
        &[],
    )
    .await;
    let http = reqwest::Client::new();
    let near = sign_ticket(K, &ticket("drop", "ana", 15));
    let far = sign_ticket(K, &ticket("drop", "bob", 17));
    // 5 ahead of 3 units: likely; 7 ahead: more than twice the remaining stock, unlikely.
    assert_eq!(
        poll(&http, &edge.url, "drop", Some(&near)).await.json()["outlook"],
        "likely"
    );
    assert_eq!(
        poll(&http, &edge.url, "drop", Some(&far)).await.json()["outlook"],
        "unlikely"
    );
    fake.lock().unwrap().statuses.insert(
        "drop".into(),
        status_body("drop", "sold_out", 0, Some(queue_fields(10))),
    );
    let flipped = Instant::now();
    let a = eventually(
        "the room to show sold_out",
        Duration::from_secs(5),
        || async {
            let a = poll(&http, &edge.url, "drop", Some(&near)).await;
            if a.json()["state"] == "sold_out" {
                Ok(a)
            } else {
                Err(String::from_utf8_lossy(&a.body).into_owned())
            }
        },
    )
    .await;
    assert_eq!(
        a.json(),
        json!({"position": 5, "eta_seconds": 0, "state": "sold_out", "admitted": false,
            "outlook": "final"})
    );
    assert_eq!(a.header("retry-after"), Some("30"));
    // Within the staleness bound (TTL 300 ms + a loopback round trip).
    assert!(
        flipped.elapsed() < Duration::from_millis(1_000),
        "{:?}",
        flipped.elapsed()
    );
    let a = poll(&http, &edge.url, "drop", Some(&far)).await;
    assert_eq!(a.json()["state"], "sold_out");
    let (st, by, body, _) = claim(&http, &edge.url, "drop", "ana", None).await;
    assert_eq!(
        (st, by.as_str(), body),
        (409, "edge", json!({"result": "sold_out"}))
    );
    // The edge asked the winners filter (she is not in it) before its sold_out.
    let f = fake.lock().unwrap();
    assert!(f.claims.is_empty());
    assert!(f.winners_fetches >= 1, "{}", f.winners_fetches);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn customers_faster_than_a_person_get_429_at_the_edge() {
    // Default limits: 5 claims/s and 2 joins/s per customer.
    let (fake, edge) = stack(
        vec![status_body("drop", "active", 100, Some(queue_fields(10)))],
        &[("FLASHGATE_LIMIT_POLLS_PER_S", "2")],
    )
    .await;
    let http = reqwest::Client::new();
    let now = chrono::Utc::now().timestamp();
    let token = mint_admission(K, &ticket("drop", "ana", 1), now, 120);
    warm(&http, &edge.url).await;
    let claims =
        join_all((0..12).map(|_| claim(&http, &edge.url, "drop", "ana", Some(&token)))).await;
    let limited: Vec<_> = claims.iter().filter(|c| c.0 == 429).collect();
    let passed = claims.iter().filter(|c| c.0 == 201).count();
    assert!(
        passed <= 6 && limited.len() >= 6,
        "{passed} passed, {} limited",
        limited.len()
    );
    for c in &limited {
        assert_eq!(
            (c.1.as_str(), c.2["result"].as_str()),
            ("edge", Some("rate_limited"))
        );
        assert!(
            matches!(c.3.parse::<u32>(), Ok(1..=30)),
            "Retry-After {}",
            c.3
        );
    }
    assert_eq!(fake.lock().unwrap().claims.len(), passed);
    // Another customer is not affected.
    let bob = mint_admission(K, &ticket("drop", "bob", 2), now, 120);
    assert_eq!(
        claim(&http, &edge.url, "drop", "bob", Some(&bob)).await.0,
        201
    );

    let joins = join_all((0..6).map(|_| {
        http.post(format!("{}/api/v1/campaigns/drop/queue", edge.url))
            .bearer_auth(token_for(&test_config(), "cy"))
            .send()
    }))
    .await;
    let joined = joins
        .iter()
        .filter(|r| r.as_ref().unwrap().status() == 201)
        .count();
    assert!(joined <= 3, "{joined} joins passed");
    reported(&fake, joined).await;
    assert_eq!(fake.lock().unwrap().joins, joined);

    let t = sign_ticket(K, &ticket("drop", "dee", 9));
    let polls = join_all((0..6).map(|_| poll(&http, &edge.url, "drop", Some(&t)))).await;
    assert!(polls.iter().filter(|p| p.status == 429).count() >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn browsers_get_a_self_contained_waiting_page() {
    let (_fake, edge) = stack(
        vec![status_body("drop", "active", 100, Some(queue_fields(10)))],
        &[],
    )
    .await;
    let t = sign_ticket(K, &ticket("drop", "ana", 42));
    let res = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/campaigns/drop/queue?ticket={t}",
            edge.url
        ))
        .header("accept", "text/html,application/xhtml+xml")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let ct = res.headers()["content-type"].to_str().unwrap().to_string();
    assert_eq!(ct, "text/html; charset=utf-8");
    let html = res.text().await.unwrap();
    assert!(html.contains(r#"id="position">32<"#), "{html}");
    assert!(html.contains(
        r#"<meta http-equiv="refresh" content="2;url=/api/v1/campaigns/drop/queue?ticket="#
    ));
    assert!(
        !html.contains("src=") && !html.contains("href="),
        "external asset in {html}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admitted_claims_are_forwarded_at_the_admit_rate_and_the_rest_are_queued() {
    // 10 admissions per second: 60 admitted customers claiming in the same instant (a stalled
    // second catching up) reach the origin at most 10 (one second's burst) + 10 per second.
    let (fake, edge) = stack(
        vec![status_body("drop", "active", 100, Some(queue_fields(60)))],
        &[],
    )
    .await;
    let http = reqwest::Client::new();
    let now = chrono::Utc::now().timestamp();
    warm(&http, &edge.url).await;
    let started = Instant::now();
    let claims = join_all((1..=60).map(|n| {
        let who = format!("c{n}");
        let token = mint_admission(K, &ticket("drop", &who, n), now, 120);
        let http = http.clone();
        let url = edge.url.clone();
        async move { claim(&http, &url, "drop", &who, Some(&token)).await }
    }))
    .await;
    let whole_seconds = started.elapsed().as_secs();
    let passed = claims.iter().filter(|c| c.0 == 201).count();
    let paced: Vec<_> = claims.iter().filter(|c| c.0 == 429).collect();
    assert_eq!(passed + paced.len(), 60);
    assert!(
        (10..=10 + 10 * (whole_seconds as usize + 1)).contains(&passed),
        "{passed} forwarded in {whole_seconds} s"
    );
    for c in &paced {
        assert_eq!(
            (c.1.as_str(), c.2.clone(), c.3.as_str()),
            ("edge", json!({"result": "queued"}), "1")
        );
    }
    assert_eq!(fake.lock().unwrap().claims.len(), passed);
}
