//! Who may join, checked at the edge (the built worker in front of a real origin, PostgreSQL
//! and Redis): a `pow` challenge solved gets a ticket, a bad answer an infinite-queue ticket
//! that is never admitted while stock remains (or 403); Turnstile against a local fake
//! siteverify (success, failure, timeout, malformed, failing open and closed); invites signed
//! with the campaign's key (replayed: the same ticket; forged or foreign: 403; only the
//! invited reach the line). The origin never sees a failed join.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::routing::post;
use flashgate_shared::admission::open_ticket;
use flashgate_shared::invite::{self, Invite};
use flashgate_shared::pow;
use flashgate_shared::queue::access::{ChallengeFailure, ChallengeKind};
use flashgate_shared::queue::{WaitingRoom, TICKET_HEADER};
use flashgate_tests::support::room::{campaign, poll_ticket as poll, room, size};
use flashgate_tests::support::scrape::Scrape;
use flashgate_tests::support::{
    queue_config, token_for, unique, TestEdge, TestOrigin, TEST_EDGE_SECRET,
};
use futures::stream::{self, StreamExt};
use serde_json::{json, Value};

const K: &[u8] = TEST_EDGE_SECRET.as_bytes();
const TURNSTILE_SECRET: &str = "test-turnstile-secret";
const METRICS_TOKEN: &str = "join-access-metrics";

fn edge(o: &TestOrigin, siteverify: Option<&str>) -> TestEdge {
    let mut env = vec![
        ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.to_string()),
        ("FLASHGATE_LIMIT_IP_PER_S", "0".to_string()),
        ("FLASHGATE_LIMIT_JOINS_PER_S", "0".to_string()),
        ("FLASHGATE_LIMIT_POLLS_PER_S", "0".to_string()),
        ("FLASHGATE_EDGE_METRICS_TOKEN", METRICS_TOKEN.to_string()),
    ];
    if let Some(url) = siteverify {
        env.push(("FLASHGATE_TURNSTILE_SECRET", TURNSTILE_SECRET.to_string()));
        env.push(("FLASHGATE_TURNSTILE_SITEVERIFY_URL", url.to_string()));
        env.push(("FLASHGATE_TURNSTILE_TIMEOUT_MS", "700".to_string()));
    }
    TestEdge::start(&o.url, &env)
}

/// A started sale of `stock` with waiting room `w`.
async fn sale(o: &TestOrigin, stock: i64, w: WaitingRoom) -> String {
    campaign(o, stock, chrono::Duration::minutes(-1), None, w).await
}

/// Joins at the edge with `body` (and `ticket` when given): (status, JSON).
async fn join(
    http: &reqwest::Client,
    edge: &TestEdge,
    id: &str,
    customer: &str,
    body: Option<Value>,
    ticket: Option<&str>,
) -> (u16, Value) {
    let mut req = http
        .post(format!("{}/api/v1/campaigns/{id}/queue", edge.url))
        .bearer_auth(token_for(&queue_config(), customer));
    if let Some(b) = body {
        req = req.json(&b);
    }
    if let Some(t) = ticket {
        req = req.header(TICKET_HEADER, t);
    }
    let res = req.send().await.expect("join");
    let st = res.status().as_u16();
    (st, res.json().await.unwrap_or(Value::Null))
}

async fn get_challenge(
    http: &reqwest::Client,
    edge: &TestEdge,
    id: &str,
    customer: Option<&str>,
) -> (u16, Value) {
    let mut req = http.get(format!(
        "{}/api/v1/campaigns/{id}/queue/challenge",
        edge.url
    ));
    if let Some(c) = customer {
        req = req.bearer_auth(token_for(&queue_config(), c));
    }
    let res = req.send().await.expect("challenge");
    let st = res.status().as_u16();
    (st, res.json().await.unwrap_or(Value::Null))
}

/// The origin's count of joins placed (reported by the edge).
async fn joins_at_origin(o: &TestOrigin) -> u64 {
    Scrape::of(&o.http, &o.url)
        .await
        .count("flashgate_queue_joins_total", &[])
}

/// Waits (at most 30 s) until the origin has counted `n` joins; returns the count.
async fn joins_reach(o: &TestOrigin, n: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = joins_at_origin(o).await;
        if got >= n || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A solved challenge's join body for `customer` (difficulty as the campaign says).
async fn solved(http: &reqwest::Client, edge: &TestEdge, id: &str, customer: &str) -> Value {
    let (st, c) = get_challenge(http, edge, id, Some(customer)).await;
    assert_eq!(st, 200, "{c}");
    let s = c["challenge"].as_str().unwrap().to_string();
    let d = c["difficulty"].as_u64().unwrap() as u8;
    let n = pow::solve(&s, d, 1 << 24).expect("a solution");
    json!({"challenge": s, "solution": n.to_string()})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pow_solved_joins_are_admitted_and_failed_ones_wait_forever() {
    let o = TestOrigin::start_with(queue_config()).await;
    let w = WaitingRoom {
        challenge: ChallengeKind::Pow,
        pow_difficulty: 10,
        ..room(5)
    };
    let id = sale(&o, 20, w).await;
    let forbidding = sale(
        &o,
        20,
        WaitingRoom {
            challenge_failure: ChallengeFailure::Forbidden,
            ..w
        },
    )
    .await;
    let plain = sale(&o, 20, room(5)).await;
    // The options are public in the status the edge caches; a bad one is 422 naming it.
    let status = o.status(&id).await;
    assert_eq!(
        status["queue"]["access"],
        json!({"challenge": "pow", "pow_difficulty": 10, "challenge_fail_open": false,
            "challenge_failure": "infinite_queue", "invite_only": false})
    );
    assert!(o.status(&plain).await["queue"].get("access").is_none());
    let mut bad = serde_json::to_value(w).unwrap();
    bad["pow_difficulty"] = 33.into();
    let (st, body) = o.change(&id, json!({"waiting_room": bad})).await;
    assert_eq!(st, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("waiting_room.pow_difficulty"),
        "{body}"
    );
    bad["pow_difficulty"] = 10.into();
    bad["challenge"] = "captcha".into();
    assert_eq!(o.change(&id, json!({"waiting_room": bad})).await.0, 422);
    assert_eq!(
        o.status(&id).await["queue"]["access"]["challenge"],
        "pow",
        "unchanged"
    );
    let edge = edge(&o, None);
    let http = reqwest::Client::new();
    let run = unique("pow");

    // The challenge route: a token needed; 409 without a `pow` challenge.
    assert_eq!(get_challenge(&http, &edge, &id, None).await.0, 401);
    let (st, body) = get_challenge(&http, &edge, &plain, Some("ana")).await;
    assert_eq!((st, body["result"].as_str()), (409, Some("conflict")));

    let mut good = Vec::new();
    for i in 0..3 {
        let who = format!("{run}-good{i}");
        let body = solved(&http, &edge, &id, &who).await;
        let (st, j) = join(&http, &edge, &id, &who, Some(body), None).await;
        assert_eq!(st, 201, "{j}");
        let t = j["ticket"].as_str().unwrap().to_string();
        assert!(open_ticket(K, &t, &id).is_ok(), "a normal ticket");
        good.push(t);
    }
    // Failures: none, forged, another customer's solution, unsolved, malformed.
    let other = solved(&http, &edge, &id, &format!("{run}-other")).await;
    let mine = solved(&http, &edge, &id, &format!("{run}-bad3")).await;
    let s = mine["challenge"].as_str().unwrap();
    let unsolved = (0u64..)
        .find(|&m| pow::leading_zero_bits(&pow::work_hash(s, m)) < 10)
        .unwrap();
    let forged = pow::issue(
        b"not the edge secret, but 32 bytes long",
        &pow::new_challenge(&id, &format!("{run}-bad1"), [7; 16], 1, 0, i64::MAX / 2),
    );
    let bad = [
        None,
        Some(json!({"challenge": forged, "solution": "0"})),
        Some(other),
        Some(json!({"challenge": s, "solution": unsolved.to_string()})),
        Some(json!({"challenge": "x", "solution": "1"})),
    ];
    let mut shadows = Vec::new();
    for (i, body) in bad.into_iter().enumerate() {
        let who = format!("{run}-bad{i}");
        let (st, j) = join(&http, &edge, &id, &who, body.clone(), None).await;
        assert_eq!(st, 201, "an infinite-queue ticket looks normal: {j}");
        assert_eq!(j["state"], "waiting");
        let t = j["ticket"].as_str().unwrap().to_string();
        assert!(
            open_ticket(K, &t, &id).is_err(),
            "not a ticket the origin opens"
        );
        // Joining again with it gives it back, as for anyone.
        let (st, again) = join(&http, &edge, &id, &who, None, Some(&t)).await;
        assert_eq!((st, again["ticket"].as_str()), (200, Some(t.as_str())));
        shadows.push(t);
        // `forbidden`: the same answer is a 403 there.
        let (st, j) = join(&http, &edge, &forbidding, &who, body, None).await;
        assert_eq!((st, j["result"].as_str()), (403, Some("forbidden")), "{j}");
    }
    let body = solved(&http, &edge, &forbidding, &format!("{run}-good0")).await;
    let (st, _) = join(
        &http,
        &edge,
        &forbidding,
        &format!("{run}-good0"),
        Some(body),
        None,
    )
    .await;
    assert_eq!(st, 201);
    // The edge counts the failures by outcome and reason.
    let metrics = http
        .get(format!("{}/__flashgate/metrics", edge.url))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // On the forbidding campaign the challenges of the other one are foreign, unsolved or not.
    let expected = [
        ("infinite_queue", "missing", 1),
        ("infinite_queue", "forged", 1),
        ("infinite_queue", "foreign", 1),
        ("infinite_queue", "unsolved", 1),
        ("infinite_queue", "malformed", 1),
        ("forbidden", "missing", 1),
        ("forbidden", "forged", 1),
        ("forbidden", "foreign", 2),
        ("forbidden", "malformed", 1),
    ];
    for (outcome, reason, n) in expected {
        let line = format!(
            "flashgate_edge_join_challenge_failures_total{{outcome=\"{outcome}\",reason=\"{reason}\"}} {n}\n"
        );
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
    assert_eq!(
        metrics.matches("failures_total{").count(),
        expected.len(),
        "{metrics}"
    );
    // A body that is not the JSON object: 400, nothing issued.
    let (st, j) = join(&http, &edge, &id, "x", Some(json!({"nonce": 1})), None).await;
    assert_eq!((st, j["result"].as_str()), (400, Some("invalid_json")));
    // The origin refuses a join of this campaign on its own (it cannot check the challenge).
    let res = http
        .post(format!("{}/api/v1/campaigns/{id}/queue", o.url))
        .bearer_auth(token_for(&queue_config(), "direct"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 403);

    // Only the solved joins reach the origin (3 here, 1 on the forbidding campaign).
    assert_eq!(joins_reach(&o, 4).await, 4);
    // The good ones are admitted; the infinite queue never is, while 17 units remain.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut admitted = 0;
    while admitted < good.len() && Instant::now() < deadline {
        admitted = 0;
        for t in &good {
            if poll(&http, &edge, &id, t).await["admitted"] == json!(true) {
                admitted += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(admitted, good.len(), "the solved joins are admitted");
    let until = Instant::now() + Duration::from_secs(4);
    let mut polls = 0;
    while Instant::now() < until {
        for t in &shadows {
            let p = poll(&http, &edge, &id, t).await;
            assert_eq!(
                (p["state"].as_str(), p["admitted"].as_bool()),
                (Some("waiting"), Some(false)),
                "{p}"
            );
            assert!(p.get("admission_token").is_none());
            polls += 1;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let status = o.status(&id).await;
    assert_eq!(status["remaining"], 20, "stock remains");
    assert!(status["queue"]["now_serving"].as_u64().unwrap() > 0);
    println!("pow: 3 solved admitted; 5 failed joins polled {polls} times, never admitted");
    assert_eq!(
        joins_at_origin(&o).await,
        4,
        "the origin never saw a failed join"
    );
}

/// What the fake siteverify was asked: (secret, response) per call.
type Calls = Arc<Mutex<Vec<(String, String)>>>;

/// A local siteverify answering as Cloudflare documents, by widget token: `pass` (success),
/// `fail` (`success: false`), `slow` (success after 3 s: a timeout), `junk` (an HTML page).
async fn fake_siteverify() -> (String, Calls) {
    let calls: Calls = Arc::default();
    let seen = calls.clone();
    let app = axum::Router::new().route(
        "/siteverify",
        post(move |body: axum::body::Bytes| {
            let seen = seen.clone();
            async move {
                let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                let secret = v["secret"].as_str().unwrap_or_default().to_string();
                let token = v["response"].as_str().unwrap_or_default().to_string();
                seen.lock().unwrap().push((secret.clone(), token.clone()));
                let ok = json!({"success": true, "challenge_ts": "2026-01-01T00:00:00.000Z",
                    "hostname": "localhost", "error-codes": [], "action": "", "cdata": ""});
                let no = json!({"success": false, "error-codes": ["invalid-input-response"]});
                let json = |v: Value| ([("content-type", "application/json")], v.to_string());
                if secret != TURNSTILE_SECRET {
                    return json(
                        json!({"success": false, "error-codes": ["invalid-input-secret"]}),
                    );
                }
                match token.as_str() {
                    "pass" => json(ok),
                    "slow" => {
                        tokio::time::sleep(Duration::from_secs(3)).await;
                        json(ok)
                    }
                    "junk" => ([("content-type", "text/html")], "<html>oops</html>".into()),
                    _ => json(no),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/siteverify"), calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn turnstile_is_checked_with_siteverify_and_fails_open_or_closed() {
    let o = TestOrigin::start_with(queue_config()).await;
    let (url, calls) = fake_siteverify().await;
    let closed = WaitingRoom {
        challenge: ChallengeKind::Turnstile,
        ..room(5)
    };
    let closed_id = sale(&o, 10, closed).await;
    let open_id = sale(
        &o,
        10,
        WaitingRoom {
            challenge_fail_open: true,
            challenge_failure: ChallengeFailure::Forbidden,
            ..closed
        },
    )
    .await;
    let edge = edge(&o, Some(&url));
    let http = reqwest::Client::new();
    let run = unique("ts");
    // (token, fail closed + infinite queue: normal ticket?, fail open + forbidden: status).
    let cases = [
        (Some("pass"), true, 201),
        (Some("fail"), false, 403),
        (Some("slow"), false, 201),
        (Some("junk"), false, 201),
        (None, false, 403),
    ];
    let mut normal = 0;
    for (i, (token, passes, open_status)) in cases.into_iter().enumerate() {
        let who = format!("{run}-{i}");
        let body = token.map(|t| json!({"turnstile_token": t}));
        let started = Instant::now();
        let (st, j) = join(&http, &edge, &closed_id, &who, body.clone(), None).await;
        let took = started.elapsed();
        assert_eq!(st, 201, "{token:?}: {j}");
        let t = j["ticket"].as_str().unwrap();
        assert_eq!(open_ticket(K, t, &closed_id).is_ok(), passes, "{token:?}");
        if token == Some("slow") {
            assert!(
                took < Duration::from_millis(2_900),
                "bounded by the timeout: {took:?}"
            );
            println!("turnstile timeout answered in {} ms", took.as_millis());
        }
        let (st, j) = join(&http, &edge, &open_id, &who, body, None).await;
        assert_eq!(st, open_status, "fail open, {token:?}: {j}");
        normal += u64::from(passes) + u64::from(open_status == 201);
    }
    let seen = calls.lock().unwrap().clone();
    assert!(seen.iter().all(|(s, _)| s == TURNSTILE_SECRET));
    assert_eq!(seen.len(), 8, "no call without a token: {seen:?}");
    // Only the tickets issued normally reach the origin: 1 passed + 3 failing open.
    assert_eq!(normal, 4);
    assert_eq!(joins_reach(&o, normal).await, normal);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(joins_at_origin(&o).await, normal);
}

/// The shop's invite example of docs/ACCESS.md (the first `python` block), run with
/// `python3 - KEY CAMPAIGN CUSTOMER`: the invite it prints.
fn python_invite(key: &str, campaign: &str, customer: &str) -> Option<String> {
    let doc = std::fs::read_to_string(flashgate_tests::support::repo_root().join("docs/ACCESS.md"))
        .expect("docs/ACCESS.md");
    let code = doc
        .split("```python\n")
        .nth(1)?
        .split("```")
        .next()?
        .to_string();
    let mut child = std::process::Command::new("python3")
        .args(["-", key, campaign, customer])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    use std::io::Write;
    child.stdin.take()?.write_all(code.as_bytes()).ok()?;
    let out = child.wait_with_output().ok()?;
    assert!(out.status.success(), "the python example failed");
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_invited_customers_join_and_a_replayed_invite_gets_its_ticket() {
    let o = TestOrigin::start_with(queue_config()).await;
    let n = size("ACCESS_INVITES", 200);
    let w = WaitingRoom {
        invite_only: true,
        admission_ttl_seconds: 300,
        ..room(100)
    };
    let id = sale(&o, n as i64 + 50, w).await;
    let other = sale(&o, 10, w).await;
    // The shop's key, from the admin API (a manager's; a viewer or nobody gets none).
    let path = format!("/admin/v1/campaigns/{id}/invite-key");
    let (st, _) = o.admin(reqwest::Method::GET, &path, None, None).await;
    assert_eq!(st, 401);
    let token = o.manager_token().to_string();
    let (st, k) = o
        .admin(reqwest::Method::GET, &path, Some(&token), None)
        .await;
    assert_eq!(st, 200, "{k}");
    assert_eq!(
        (k["algorithm"].as_str(), k["invite_only"].as_bool()),
        (Some("HS256"), Some(true))
    );
    let key_hex = k["invite_key"].as_str().unwrap().to_string();
    let key: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&key_hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let edge = edge(&o, None);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    let run = unique("inv");
    let exp = chrono::Utc::now().timestamp() + 3_600;
    let invite_of = |c: &str, who: &str, key: &[u8]| {
        invite::sign(
            key,
            &Invite {
                campaign: c.into(),
                customer: who.into(),
                expires_at_s: exp,
                jti: format!("j-{who}"),
            },
        )
    };
    let invited: Vec<String> = (0..n).map(|i| format!("{run}-{i}")).collect();
    let started = Instant::now();
    let tickets: Vec<(String, String, String)> = stream::iter(invited.iter())
        .map(|who| {
            let (http, edge, id) = (&http, &edge, &id);
            let inv = invite_of(id, who, &key);
            async move {
                let (st, j) = join(http, edge, id, who, Some(json!({"invite": inv})), None).await;
                assert_eq!(st, 201, "{who}: {j}");
                (who.clone(), inv, j["ticket"].as_str().unwrap().to_string())
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    println!("{n} invited joins in {} ms", started.elapsed().as_millis());
    // 10 replays: the first ticket again.
    for (who, inv, ticket) in tickets.iter().take(10) {
        let (st, j) = join(&http, &edge, &id, who, Some(json!({"invite": inv})), None).await;
        assert_eq!(
            (st, j["ticket"].as_str()),
            (200, Some(ticket.as_str())),
            "{who}"
        );
    }
    // 10 forged or foreign: 403, nothing issued.
    let stranger = format!("{run}-stranger");
    let mut refused = Vec::new();
    for (i, (_, theirs, _)) in tickets.iter().enumerate().take(10) {
        let inv = match i % 4 {
            0 => invite_of(&id, &stranger, b"a key the shop does not have!!!"),
            1 => theirs.clone(),
            2 => invite_of(&other, &stranger, &invite::invite_key(K, &other)),
            _ => format!("{}x", invite_of(&id, &stranger, &key)),
        };
        let (st, j) = join(
            &http,
            &edge,
            &id,
            &stranger,
            Some(json!({"invite": inv})),
            None,
        )
        .await;
        refused.push((st, j["result"].as_str().unwrap_or_default().to_string()));
    }
    let (st, _) = join(&http, &edge, &id, &stranger, None, None).await;
    refused.push((st, "forbidden".into()));
    assert!(
        refused.iter().all(|(st, r)| *st == 403 && r == "forbidden"),
        "{refused:?}"
    );
    // The shop's Python example makes an invite the edge takes.
    let who = format!("{run}-py");
    if let Some(inv) = python_invite(&key_hex, &id, &who) {
        let (st, j) = join(&http, &edge, &id, &who, Some(json!({"invite": inv})), None).await;
        assert_eq!(st, 201, "the documented example's invite: {j}");
    } else {
        panic!("python3 is needed for the documented example");
    }
    // Only the invited are in line and admitted: n + the example's.
    let want = n as u64 + 1;
    assert_eq!(joins_reach(&o, want).await, want);
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut admitted = 0;
    while Instant::now() < deadline {
        admitted = o.status(&id).await["queue"]["admitted"]
            .as_u64()
            .unwrap_or(0);
        if admitted >= want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(admitted, want, "every invited customer admitted");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        o.status(&id).await["queue"]["admitted"].as_u64(),
        Some(want),
        "nobody else"
    );
    // And the edge admits them (its cached status may lag the origin's by a few seconds).
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut p = Value::Null;
    while Instant::now() < deadline {
        p = poll(&http, &edge, &id, &tickets[0].2).await;
        if p["admitted"] == json!(true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(p["admitted"], true, "{p}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_without_the_edge_secret_has_no_invite_key() {
    let o = TestOrigin::start_with(flashgate_tests::support::test_config()).await;
    let id = o.campaign("sale", 5).await;
    let token = o.manager_token().to_string();
    let path = format!("/admin/v1/campaigns/{id}/invite-key");
    let (st, body) = o
        .admin(reqwest::Method::GET, &path, Some(&token), None)
        .await;
    assert_eq!(st, 409, "{body}");
    assert_eq!(body["result"], "conflict");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("FLASHGATE_EDGE_SECRET"),
        "{body}"
    );
    // An unknown campaign is still 404.
    let (st, _) = o
        .admin(
            reqwest::Method::GET,
            "/admin/v1/campaigns/no-such-campaign/invite-key",
            Some(&token),
            None,
        )
        .await;
    assert_eq!(st, 404);
}
