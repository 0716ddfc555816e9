//! The webhook test receiver (scripts/webhook-receiver: Python, the reference
//! `standardwebhooks` library from PyPI, pinned) run from the integration tests, and the admin
//! calls on endpoints.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::support::TestOrigin;

/// A running receiver; killed when dropped.
pub struct Receiver {
    _child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    http: reqwest::Client,
}

/// One delivery as the receiver recorded it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Received {
    /// The `webhook-id` header.
    pub id: String,
    /// The `webhook-signature` header.
    pub signature: String,
    /// The body.
    pub event: Value,
    /// Indices of the receiver's secrets whose verification by the library passed.
    pub verified: Vec<usize>,
    /// The status it answered.
    pub answered: u16,
}

impl Receiver {
    /// Starts a receiver (making its virtualenv on first use) and waits until it listens.
    pub async fn start() -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/webhook-receiver");
        let mut child = Command::new(script)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("scripts/webhook-receiver starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let port = tokio::time::timeout(Duration::from_secs(300), async {
            while let Some(line) = lines.next_line().await.expect("receiver output") {
                if let Some(p) = line.strip_prefix("listening on ") {
                    return p.trim().to_string();
                }
            }
            panic!("the receiver ended before it listened")
        })
        .await
        .expect("the receiver listens");
        Receiver {
            _child: child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        }
    }

    /// The URL endpoints are registered with.
    pub fn url(&self) -> String {
        format!("{}/hook", self.base)
    }

    /// The secrets the receiver verifies with, each on its own.
    pub async fn secrets(&self, secrets: &[&str]) {
        let r = self
            .http
            .post(format!("{}/_control/secrets", self.base))
            .json(&json!({ "secrets": secrets }))
            .send()
            .await
            .expect("set secrets");
        assert_eq!(r.status().as_u16(), 204);
    }

    /// The next answers (`[{"status": 500}, {"status": 429, "retry_after": 1}]`), then `then`.
    pub async fn plan(&self, answers: Value, then: u16) {
        let r = self
            .http
            .post(format!("{}/_control/plan", self.base))
            .json(&json!({ "answers": answers, "then": then }))
            .send()
            .await
            .expect("set plan");
        assert_eq!(r.status().as_u16(), 204);
    }

    /// Every delivery so far, of campaign `c` only (other tests' origins share the database).
    pub async fn received(&self, c: &str) -> Vec<Received> {
        self.received_where(|e| e["campaign"] == c).await
    }

    /// Every delivery so far whose body passes `keep` (`code_use.*` events have no campaign:
    /// tests keep their own by the code in `data`).
    pub async fn received_where(&self, keep: impl Fn(&Value) -> bool) -> Vec<Received> {
        let all: Vec<Received> = self
            .http
            .get(format!("{}/_control/events", self.base))
            .send()
            .await
            .expect("events")
            .json()
            .await
            .expect("events JSON");
        all.into_iter().filter(|r| keep(&r.event)).collect()
    }
}

/// Registers an endpoint for `url` and `types` with the manager token; returns its id and
/// secret.
pub async fn register(o: &TestOrigin, url: &str, types: &[&str]) -> (String, String) {
    let (s, body) = o
        .admin(
            reqwest::Method::POST,
            "/admin/v1/webhooks/endpoints",
            Some(o.manager_token()),
            Some(json!({ "url": url, "event_types": types, "description": "test receiver" })),
        )
        .await;
    assert_eq!(s, 201, "{body}");
    (
        body["id"].as_str().expect("id").to_string(),
        body["secret"].as_str().expect("secret").to_string(),
    )
}

/// Deletes endpoint `id` (so that later tests' events are not queued for a receiver gone).
pub async fn unregister(o: &TestOrigin, id: &str) {
    let (s, body) = o
        .admin(
            reqwest::Method::DELETE,
            &format!("/admin/v1/webhooks/endpoints/{id}"),
            Some(o.manager_token()),
            None,
        )
        .await;
    assert_eq!(s, 204, "{body}");
}

/// Every event type.
pub const ALL_TYPES: &[&str] = &[
    "claim.held",
    "claim.paid",
    "claim.released",
    "claim.expired",
    "coupon.issued",
    "coupon.redeemed",
    "code_use.held",
    "code_use.used",
    "code_use.released",
    "gift.granted",
    "gift.delivered",
    "gift.failed",
    "campaign.sold_out",
    "campaign.restocked",
    "campaign.paused",
    "campaign.resumed",
    "campaign.closed",
];
