//! The gift scenario of `scripts/demo`, against a running origin with the demo data
//! (`flashgate gifts seed-demo`) and the provider simulator: prints each check and exits 1
//! when one fails.
//!
//! 1. the preview of 201000000001 (segment 1, one per day);
//! 2. five simultaneous fulfilments for 201000000001 with one key: five identical answers
//!    (201 granted when the preview said eligible; else the same 409 `cap_reached`);
//! 3. five simultaneous fulfilments for 201000000002 (segment 2) with five keys: at most one
//!    201, the others 409 `cap_reached`;
//! 4. bad input: a `+` MSISDN → 422, an unknown campaign → 404;
//! 5. every grant of this run ends `delivered` by the provider (polled for up to 60 s).
//!
//! Reads `FLASHGATE_ORIGIN_URL` and `FLASHGATE_SERVICE_TOKEN`.

use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::{json, Value};

const CAMPAIGN: &str = "WORLDCUP_2026";

struct Demo {
    http: reqwest::Client,
    url: String,
    token: String,
    failed: bool,
}

impl Demo {
    fn check(&mut self, ok: bool, what: &str) {
        println!("{} {what}", if ok { "PASS" } else { "FAIL" });
        self.failed |= !ok;
    }

    async fn fulfil(&self, campaign: &str, key: &str, msisdn: &str) -> (u16, String) {
        let res = self
            .http
            .post(format!(
                "{}/api/v1/gift-campaigns/{campaign}/fulfilments",
                self.url
            ))
            .bearer_auth(&self.token)
            .header("idempotency-key", key)
            .json(&json!({ "msisdn": msisdn }))
            .send()
            .await
            .expect("origin answers");
        (res.status().as_u16(), res.text().await.unwrap_or_default())
    }

    async fn get(&self, path: &str) -> Value {
        self.http
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("origin answers")
            .json()
            .await
            .unwrap_or(Value::Null)
    }
}

fn id_of(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    v["fulfilment"]["id"].as_str().map(str::to_string)
}

#[tokio::main]
async fn main() {
    let mut d = Demo {
        http: reqwest::Client::new(),
        url: std::env::var("FLASHGATE_ORIGIN_URL").expect("FLASHGATE_ORIGIN_URL"),
        token: std::env::var("FLASHGATE_SERVICE_TOKEN").expect("FLASHGATE_SERVICE_TOKEN"),
        failed: false,
    };
    let run = uuid::Uuid::new_v4();
    let mut grants = Vec::new();

    let preview = d
        .get(&format!(
            "/api/v1/gift-campaigns/{CAMPAIGN}/eligibility?msisdn=201000000001"
        ))
        .await;
    println!("preview of 201000000001: {preview}");
    let eligible = preview["eligible"] == true;

    let key = format!("demo-{run}-a");
    let same = join_all((0..5).map(|_| d.fulfil(CAMPAIGN, &key, "201000000001"))).await;
    let identical = same.iter().all(|r| *r == same[0]);
    let want = if eligible { 201 } else { 409 };
    d.check(
        identical && same[0].0 == want,
        &format!(
            "5 simultaneous requests, one key: 5 identical answers {} ({})",
            same[0].0, same[0].1
        ),
    );
    grants.extend(id_of(&same[0].1));

    let five = join_all((0..5).map(|i| {
        let key = format!("demo-{run}-b{i}");
        let d = &d;
        async move { d.fulfil(CAMPAIGN, &key, "201000000002").await }
    }))
    .await;
    let granted = five.iter().filter(|r| r.0 == 201).count();
    let capped = five
        .iter()
        .filter(|r| r.0 == 409 && r.1.contains("\"cap_reached\""))
        .count();
    d.check(
        granted <= 1 && granted + capped == 5,
        &format!("5 simultaneous requests, five keys: {granted} granted, {capped} cap_reached"),
    );
    grants.extend(five.iter().filter_map(|r| id_of(&r.1)));

    let bad = d
        .fulfil(CAMPAIGN, &format!("demo-{run}-c"), "+201000000003")
        .await;
    d.check(bad.0 == 422, &format!("a '+' msisdn: {} {}", bad.0, bad.1));
    let unknown = d
        .fulfil("NO_SUCH_CAMPAIGN", &format!("demo-{run}-d"), "201000000003")
        .await;
    d.check(
        unknown.0 == 404,
        &format!("an unknown campaign: {}", unknown.0),
    );

    let started = Instant::now();
    for id in &grants {
        let status = loop {
            let f = d.get(&format!("/api/v1/fulfilments/{id}")).await;
            let s = f["status"].as_str().unwrap_or("?").to_string();
            if s != "pending" || started.elapsed() > Duration::from_secs(60) {
                break s;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        d.check(status == "delivered", &format!("fulfilment {id}: {status}"));
    }
    println!("{} grant(s) this run", grants.len());
    if d.failed {
        std::process::exit(1);
    }
}
