//! Presence reports at the origin (real PostgreSQL and Redis, reports signed as the edge signs
//! them): refused whole, changing nothing, when unsigned, badly signed, stale, or carrying a
//! forged, foreign or malformed ticket; counted once per report id; and admission skips a
//! ticket not seen within the window, then admits her first when she is reported back.

use std::time::Duration;

use chrono::Utc;
use flashgate_shared::admission::{open_ticket, sign_ticket, Place, Ticket};
use flashgate_shared::api::ChangeAction;
use flashgate_shared::queue::presence::presence_path;
use flashgate_shared::queue::WaitingRoom;
use flashgate_shared::signature::{sign, Signed};
use flashgate_shared::EDGE_SIGNATURE_HEADER;
use flashgate_tests::support::room::{admission, campaign, room};
use flashgate_tests::support::{eventually, queue_config, unique, TestOrigin, TEST_EDGE_SECRET};
use serde_json::{json, Value};

const K: &[u8] = TEST_EDGE_SECRET.as_bytes();

/// Posts a presence report body for campaign `id`, signed with `secret` at time `t` (none when
/// `secret` is `None`). Returns status and JSON body.
async fn report(
    o: &(reqwest::Client, String),
    id: &str,
    body: &Value,
    secret: Option<&[u8]>,
    t: i64,
) -> (u16, Value) {
    let path = presence_path(id);
    let bytes = serde_json::to_vec(body).unwrap();
    let mut req =
        o.0.post(format!("{}{path}", o.1))
            .header("content-type", "application/json")
            .body(bytes.clone());
    if let Some(secret) = secret {
        let signed = Signed {
            method: "POST",
            path: &path,
            body: &bytes,
            ..Signed::default()
        };
        req = req.header(EDGE_SIGNATURE_HEADER, sign(secret, t, &signed));
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// Joins and returns the ticket.
async fn join(o: &TestOrigin, id: &str, who: &str) -> String {
    let (st, body) = o.join(id, who).await;
    assert!(st == 201 || st == 200, "{body}");
    body["ticket"].as_str().unwrap().to_string()
}

fn seq(t: &str, id: &str) -> u64 {
    open_ticket(K, t, id).unwrap().place.sequence
}

async fn queue(o: &TestOrigin, id: &str) -> Value {
    o.status(id).await["queue"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_reports_are_signed_checked_whole_and_counted_once() {
    let o = TestOrigin::start_with(queue_config()).await;
    let to = (o.http.clone(), o.url.clone());
    let id = campaign(&o, 5, chrono::Duration::minutes(-1), None, room(1)).await;
    let other = campaign(&o, 5, chrono::Duration::minutes(-1), None, room(1)).await;
    let run = unique("p");
    let t1 = join(&o, &id, &format!("{run}-1")).await;
    let foreign = join(&o, &other, &format!("{run}-1")).await;
    let forged = sign_ticket(
        b"another-secret-0123456789abcdefgh",
        &Ticket {
            place: Place {
                campaign: id.clone(),
                customer: "mallory".into(),
                sequence: 1,
            },
            issued_at_s: Utc::now().timestamp(),
            drawn_waiting_at_issue: 0,
        },
    );
    let now = Utc::now().timestamp();
    let body = |rid: &str, tickets: Vec<&str>| json!({"report_id": rid, "tickets": tickets});
    let refused = [
        ("unsigned", body("r-a", vec![&t1]), None, now, 403),
        (
            "another key",
            body("r-b", vec![&t1]),
            Some(&b"wrong-secret"[..]),
            now,
            403,
        ),
        (
            "replayed after the skew",
            body("r-c", vec![&t1]),
            Some(K),
            now - 120,
            403,
        ),
        (
            "forged ticket",
            body("r-d", vec![&t1, &forged]),
            Some(K),
            now,
            403,
        ),
        (
            "foreign ticket",
            body("r-e", vec![&t1, &foreign]),
            Some(K),
            now,
            403,
        ),
        (
            "malformed ticket",
            body("r-f", vec![&t1, "abc"]),
            Some(K),
            now,
            400,
        ),
        ("no tickets", body("r-g", vec![]), Some(K), now, 400),
        ("bad report id", body("r g", vec![&t1]), Some(K), now, 400),
        (
            "joins",
            json!({"report_id": "r-h", "tickets": [t1], "joins": [{"from_ms": 0, "count": 1}]}),
            Some(K),
            now,
            400,
        ),
    ];
    for (what, b, secret, t, want) in &refused {
        let (st, reply) = report(&to, &id, b, *secret, *t).await;
        assert_eq!(st, *want, "{what}: {reply}");
        assert!(
            reply["result"].is_string() && reply["message"].is_string(),
            "{reply}"
        );
    }
    // Nothing was kept of them: each report id is still new.
    for rid in ["r-a", "r-d", "r-e", "r-f"] {
        let (st, reply) = report(&to, &id, &body(rid, vec![&t1]), Some(K), now).await;
        assert_eq!(
            (st, reply["duplicate"].as_bool()),
            (200, Some(false)),
            "{reply}"
        );
    }
    // A retried report is counted once.
    let (st, first) = report(&to, &id, &body("r-once", vec![&t1]), Some(K), now).await;
    assert_eq!((st, first["counted"].as_u64()), (200, Some(1)), "{first}");
    let (st, again) = report(&to, &id, &body("r-once", vec![&t1]), Some(K), now).await;
    assert_eq!(st, 200);
    assert_eq!(again, json!({"counted": 0, "duplicate": true}));
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_away_is_skipped_and_admitted_first_when_reported_back() {
    let o = TestOrigin::start_with(queue_config()).await;
    let to = (o.http.clone(), o.url.clone());
    let w = WaitingRoom {
        presence_window_seconds: 5,
        ..room(1)
    };
    let id = campaign(&o, 10, chrono::Duration::minutes(-1), None, w).await;
    admission(&o, &id, ChangeAction::PauseAdmission).await;
    let run = unique("s");
    let mut tickets = Vec::new();
    for i in 0..4 {
        tickets.push(join(&o, &id, &format!("{run}-{i}")).await);
    }
    let (away, rest) = (tickets[0].clone(), tickets[1..].to_vec());
    // Everyone but the first keeps being reported, past one window after the joins.
    let now = || Utc::now().timestamp();
    let all = |n: usize| json!({"report_id": format!("{run}-{n}"), "tickets": rest});
    for n in 0..7 {
        let (st, reply) = report(&to, &id, &all(n), Some(K), now()).await;
        assert_eq!(st, 200, "{reply}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // ...and all along the rest of the test.
    let keep = {
        let (to, rest, id, run) = (to.clone(), rest.clone(), id.clone(), run.clone());
        tokio::spawn(async move {
            for n in 100.. {
                let body = json!({"report_id": format!("{run}-{n}"), "tickets": rest});
                report(&to, &id, &body, Some(K), Utc::now().timestamp()).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    admission(&o, &id, ChangeAction::ResumeAdmission).await;
    // The first step passes her and admits the second.
    eventually("the second admitted", Duration::from_secs(10), || async {
        let q = queue(&o, &id).await;
        if q["now_serving"].as_u64() >= Some(seq(&rest[0], &id)) {
            Ok(())
        } else {
            Err(q.to_string())
        }
    })
    .await;
    let q = queue(&o, &id).await;
    assert_eq!(q["skipped"], json!([seq(&away, &id)]), "{q}");
    // She comes back: admitted at the next step (1 per second), ahead of those behind her.
    let back = json!({"report_id": format!("{run}-back"), "tickets": [away]});
    assert_eq!(report(&to, &id, &back, Some(K), now()).await.0, 200);
    let serving_then = q["now_serving"].as_u64().unwrap();
    eventually("her return", Duration::from_secs(10), || async {
        let q = queue(&o, &id).await;
        if q["returned"][0]["n"].as_u64() == Some(seq(&away, &id)) {
            Ok(())
        } else {
            Err(q.to_string())
        }
    })
    .await;
    // Nobody behind her went first: the next one in line was admitted after her.
    let next = seq(&rest[1], &id);
    eventually("the next one admitted", Duration::from_secs(10), || async {
        let q = queue(&o, &id).await;
        if q["now_serving"].as_u64() >= Some(next) {
            Ok(())
        } else {
            Err(q.to_string())
        }
    })
    .await;
    let q = queue(&o, &id).await;
    assert!(q.get("skipped").is_none(), "{q}");
    let her_ms = q["returned"][0]["at_ms"].as_i64().unwrap();
    let next_ms = q["grants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["n"].as_u64() >= Some(next))
        .and_then(|g| g["at_ms"].as_i64())
        .unwrap();
    assert!(
        next > serving_then && next_ms >= her_ms,
        "admitted before her: {q}"
    );
    keep.abort();
    o.stop().await;
}
