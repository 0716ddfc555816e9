//! The webhook test receiver (scripts/webhook-receiver: Python, the reference
//! `standardwebhooks` library from PyPI, pinned) run from the integration tests, an endpoint
//! that never answers, and the admin calls on endpoints.

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
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
    /// When it arrived (unix seconds).
    #[serde(default)]
    pub at: f64,
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

    /// The next answers (`[{"status": 500}, {"status": 429, "retry_after": 1}]`), then `then`
    /// (a status, or an answer such as `{"status": 200, "delay": 2.0}`: seconds before it).
    pub async fn plan(&self, answers: Value, then: impl Into<Value>) {
        let r = self
            .http
            .post(format!("{}/_control/plan", self.base))
            .json(&json!({ "answers": answers, "then": then.into() }))
            .send()
            .await
            .expect("set plan");
        assert_eq!(r.status().as_u16(), 204);
    }

    /// Every delivery so far, of campaign `c` only (other tests' origins share the database).
    pub async fn received(&self, c: &str) -> Vec<Received> {
        self.received_where(|e| e["campaign"] == c).await
    }

    /// Waits (at most 60 s) until it answered 2xx to `n` distinct events of campaign `c`;
    /// returns them by id (the first 2xx delivery of each).
    pub async fn delivered(
        &self,
        c: &str,
        n: usize,
    ) -> std::collections::BTreeMap<String, Received> {
        crate::support::eventually(
            "the events to reach the receiver",
            Duration::from_secs(60),
            || async {
                let mut ok = std::collections::BTreeMap::new();
                for e in self.received(c).await {
                    if (200..300).contains(&e.answered) {
                        ok.entry(e.id.clone()).or_insert(e);
                    }
                }
                if ok.len() >= n {
                    Ok(ok)
                } else {
                    Err(format!("{} of {n}", ok.len()))
                }
            },
        )
        .await
    }

    /// Every delivery so far whose body passes `keep` (`code_use.*` events have no campaign:
    /// tests keep their own by the code in `data`).
    pub async fn received_where(&self, keep: impl Fn(&Value) -> bool) -> Vec<Received> {
        let all = self.all().await;
        all.into_iter().filter(|r| keep(&r.event)).collect()
    }

    /// `GET /_control/<what>` as JSON.
    async fn control<T: serde::de::DeserializeOwned>(&self, what: &str) -> T {
        self.http
            .get(format!("{}/_control/{what}", self.base))
            .send()
            .await
            .expect(what)
            .json()
            .await
            .expect("control JSON")
    }
}

impl Receiver {
    /// Deliveries it has not answered yet (held by a planned `delay`).
    pub async fn open(&self) -> u64 {
        let v: Value = self.control("open").await;
        v["open"].as_u64().expect("open count")
    }

    /// Every delivery so far, of every campaign, in arrival order.
    pub async fn all(&self) -> Vec<Received> {
        self.control("events").await
    }
}

/// An endpoint that accepts connections and never answers (a receiver hung for good): each
/// call stays open until the caller gives up. Counts connections accepted and closed by the
/// caller.
pub struct DeadEndpoint {
    /// `http://127.0.0.1:<port>/hook`.
    pub url: String,
    accepted: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl DeadEndpoint {
    /// Listens on an ephemeral port of 127.0.0.1.
    pub async fn start() -> Self {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let (accepted, closed) = (Arc::default(), Arc::default());
        let (a, c): (Arc<AtomicUsize>, Arc<AtomicUsize>) =
            (Arc::clone(&accepted), Arc::clone(&closed));
        let task = tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                let c = Arc::clone(&c);
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while matches!(sock.read(&mut buf).await, Ok(n) if n > 0) {}
                    c.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        DeadEndpoint {
            url,
            accepted,
            closed,
            task,
        }
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Connections the caller closed so far (its timeout).
    pub fn closed(&self) -> usize {
        self.closed.load(Ordering::SeqCst)
    }
}

impl Drop for DeadEndpoint {
    fn drop(&mut self) {
        self.task.abort();
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

/// `POST /api/v1/claims/{id}/extend` with the service token and a new Idempotency-Key: status
/// and body.
pub async fn extend(o: &TestOrigin, id: &str) -> (u16, Value) {
    let res = o
        .http
        .post(format!("{}/api/v1/claims/{id}/extend", o.url))
        .bearer_auth(o.config.service_token.expose())
        .header("idempotency-key", crate::support::unique("extend"))
        .json(&json!({}))
        .send()
        .await
        .expect("extend");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
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
