//! One waiting room for a campaign with variants, end to end: a real origin (PostgreSQL,
//! Redis) behind the built worker in workerd. Customers join through the edge and poll there;
//! the poll answer lists each variant's availability (a sold-out one says so within the
//! status's staleness bound), the waiting page offers the variants and marks the sold-out
//! ones, and one admission token lets its holder claim any variant: a sold-out variant is
//! refused, another one of the same campaign claimed with the same token.

use std::time::{Duration, Instant};

use flashgate_shared::queue::{WaitingRoom, ADMISSION_HEADER, TICKET_HEADER};
use flashgate_tests::support::room::{room, room_edge};
use flashgate_tests::support::variants::{variant_remaining, variant_sale};
use flashgate_tests::support::{assert_reconciled, queue_config, unique, TestOrigin};
use serde_json::{json, Value};

/// How long a poll may take to show what the origin knows (TTL 300 ms, generously).
const WITHIN: Duration = Duration::from_secs(10);

/// Joins `c` through `edge` with customer token `token`; the ticket.
async fn join(http: &reqwest::Client, edge: &str, c: &str, token: &str) -> String {
    let r = http
        .post(format!("{edge}/api/v1/campaigns/{c}/queue"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert!(
        matches!(r.status().as_u16(), 200 | 201),
        "join {}",
        r.status()
    );
    r.json::<Value>().await.unwrap()["ticket"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Polls the room of `c` with `ticket` until `done` holds of the answer (at most [`WITHIN`]);
/// that answer.
async fn poll_until(
    http: &reqwest::Client,
    edge: &str,
    c: &str,
    ticket: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + WITHIN;
    loop {
        let r = http
            .get(format!("{edge}/api/v1/campaigns/{c}/queue"))
            .header(TICKET_HEADER, ticket)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let body: Value = r.json().await.unwrap();
        if done(&body) {
            return body;
        }
        assert!(Instant::now() < deadline, "last poll answer: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A claim of `variant` through `edge` with admission token `admission`: status and body.
async fn claim(
    http: &reqwest::Client,
    edge: &str,
    c: &str,
    token: &str,
    admission: &str,
    variant: &str,
) -> (u16, Value) {
    let r = http
        .post(format!("{edge}/api/v1/campaigns/{c}/claims"))
        .bearer_auth(token)
        .header("idempotency-key", unique("k"))
        .header(ADMISSION_HEADER, admission)
        .json(&json!({ "variant": variant }))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// The (id, remaining, state) of each variant in a poll answer.
fn availability(poll: &Value) -> Vec<(String, i64, String)> {
    poll["variants"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .map(|v| {
                    (
                        v["id"].as_str().unwrap().to_string(),
                        v["remaining"].as_i64().unwrap(),
                        v["state"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_room_serves_every_variant_and_the_poll_says_which_are_sold_out() {
    let o = TestOrigin::start_with(queue_config()).await;
    let mut body = variant_sale(&[("41", 1), ("42", 2)], 600, 1);
    body.stock = 0;
    body.waiting_room = Some(WaitingRoom {
        admission_ttl_seconds: 60,
        ..room(100)
    });
    o.create(&body).await;
    let c = body.id;
    let edge = room_edge(&o);
    let http = reqwest::Client::new();
    let who: Vec<(String, String)> = (0..3)
        .map(|_| {
            let p = unique("p");
            let t = o.token(&p);
            (p, t)
        })
        .collect();
    let mut admitted = Vec::new();
    for (_, token) in &who {
        let ticket = join(&http, &edge.url, &c, token).await;
        let a = poll_until(&http, &edge.url, &c, &ticket, |b| b["state"] == "admitted").await;
        admitted.push((ticket, a["admission_token"].as_str().unwrap().to_string()));
    }
    let first = poll_until(&http, &edge.url, &c, &admitted[0].0, |_| true).await;
    assert_eq!(
        availability(&first),
        [
            ("41".to_string(), 1, "active".to_string()),
            ("42".to_string(), 2, "active".to_string())
        ],
        "{first}"
    );

    // The first customer takes the last 41; the others' polls then say 41 is sold out.
    let (s, b) = claim(&http, &edge.url, &c, &who[0].1, &admitted[0].1, "41").await;
    assert_eq!(
        (s, b["claim"]["variant"].as_str()),
        (201, Some("41")),
        "{b}"
    );
    let later = poll_until(&http, &edge.url, &c, &admitted[2].0, |b| {
        availability(b).first().map(|v| v.2.as_str()) == Some("sold_out")
    })
    .await;
    assert_eq!(
        availability(&later),
        [
            ("41".to_string(), 0, "sold_out".to_string()),
            ("42".to_string(), 2, "active".to_string())
        ]
    );
    assert_eq!(
        later["state"], "admitted",
        "the campaign still sells: {later}"
    );

    // The page offers 42 and marks 41 sold out.
    let page = http
        .get(format!(
            "{}/api/v1/campaigns/{c}/queue?ticket={}",
            edge.url, admitted[2].0
        ))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(r#"value="41" disabled"#), "{page}");
    assert!(page.contains(r#"data-left="41">sold out<"#));
    assert!(page.contains(r#"value="42">"#));

    // The third customer's token: refused 41 (sold out), then claims 42 with the same token.
    let (s, b) = claim(&http, &edge.url, &c, &who[2].1, &admitted[2].1, "41").await;
    assert_eq!(
        (s, b),
        (409, json!({"result": "sold_out", "variant": "41"}))
    );
    let (s, b) = claim(&http, &edge.url, &c, &who[2].1, &admitted[2].1, "42").await;
    assert_eq!(
        (s, b["claim"]["variant"].as_str()),
        (201, Some("42")),
        "{b}"
    );
    let (s, b) = claim(&http, &edge.url, &c, &who[1].1, &admitted[1].1, "42").await;
    assert_eq!(
        (s, b["claim"]["variant"].as_str()),
        (201, Some("42")),
        "{b}"
    );
    // Her second claim, on the other variant, shows her first.
    let (s, b) = claim(&http, &edge.url, &c, &who[1].1, &admitted[1].1, "41").await;
    assert_eq!(s, 409, "{b}");
    assert_ne!(b["result"], "claimed", "{b}");
    for v in ["41", "42"] {
        assert_eq!(variant_remaining(&o, &c, v).await, 0, "{v}");
    }
    let sold = poll_until(&http, &edge.url, &c, &admitted[0].0, |b| {
        b["state"] == "sold_out"
    })
    .await;
    assert!(
        availability(&sold)
            .iter()
            .all(|v| v.1 == 0 && v.2 == "sold_out"),
        "{sold}"
    );
    let rep = assert_reconciled(&o, &c).await;
    assert_eq!(rep.variants.len(), 2);
    o.stop().await;
}
