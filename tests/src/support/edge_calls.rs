//! Requests to the edge worker (and, signed as the edge would, straight to the origin) as raw
//! parts, so that bad ones can be built too, and their whole answers.

use flashgate_shared::ANSWERED_BY_HEADER;
use serde_json::Value;

use super::{edge_headers, unique, EdgeRuntime, TestEdge, TestOrigin, TEST_EDGE_SECRET};

/// Settings of one edge (milliseconds).
pub struct EdgeSettings {
    /// `FLASHGATE_STATUS_TTL_MS`.
    pub ttl_ms: u64,
    /// `FLASHGATE_STATUS_MAX_STALE_MS`.
    pub max_stale_ms: u64,
    /// `FLASHGATE_ORIGIN_TIMEOUT_MS`.
    pub timeout_ms: u64,
    /// The runtime (default: Miniflare).
    pub runtime: EdgeRuntime,
}

impl Default for EdgeSettings {
    fn default() -> Self {
        EdgeSettings {
            ttl_ms: 1_000,
            max_stale_ms: 30_000,
            timeout_ms: 3_000,
            runtime: EdgeRuntime::Miniflare,
        }
    }
}

/// The built worker in workerd in front of `origin_url`, signing with [`TEST_EDGE_SECRET`]
/// (not-started skew 2 s).
pub fn edge_with(origin_url: &str, s: EdgeSettings) -> TestEdge {
    TestEdge::start_in(
        s.runtime,
        origin_url,
        &[
            ("FLASHGATE_STATUS_TTL_MS", s.ttl_ms.to_string()),
            ("FLASHGATE_STATUS_MAX_STALE_MS", s.max_stale_ms.to_string()),
            ("FLASHGATE_ORIGIN_TIMEOUT_MS", s.timeout_ms.to_string()),
            ("FLASHGATE_NOT_STARTED_SKEW_MS", "2000".into()),
            ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.into()),
        ],
    )
}

/// The setup of an edge test: a signed origin ([`TestOrigin::start_signed`]), a new sale
/// campaign of `stock` units on it (its id), and an edge worker in front with `s`.
pub async fn sale_behind_edge(stock: i64, s: EdgeSettings) -> (TestOrigin, String, TestEdge) {
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", stock).await;
    let e = edge_with(&o.url, s);
    (o, c, e)
}

/// A good claim of `customer` with `key` on campaign `c`, sent unsigned to `base` (the edge).
pub async fn edge_claim(o: &TestOrigin, base: &str, c: &str, customer: &str, key: &str) -> Reply {
    send_claim(&o.http, base, c, &ClaimReq::good(o, customer, key), false).await
}

/// Good claims of `n` new customers (`{prefix}-0` …), each with key `k`, sent to `base` on
/// campaign `c` all at once (one task each); the replies in customer order.
pub async fn claims_at_once(
    o: &TestOrigin,
    base: &str,
    c: &str,
    prefix: &str,
    n: usize,
) -> Vec<Reply> {
    let tasks = (0..n).map(|i| {
        let req = ClaimReq::good(o, &format!("{prefix}-{i}"), "k");
        let (http, url, c) = (o.http.clone(), base.to_string(), c.to_string());
        tokio::spawn(async move { send_claim(&http, &url, &c, &req, false).await })
    });
    futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.expect("claim task"))
        .collect()
}

/// One HTTP answer: status, who answered, body bytes, and all headers.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// `Flashgate-Answered-By` (`edge` / `origin`; empty when absent).
    pub by: String,
    /// The body as sent.
    pub body: Vec<u8>,
    /// Every header.
    pub headers: reqwest::header::HeaderMap,
}

impl Reply {
    /// The body as JSON (`Value::Null` when not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    /// The value of header `name`, when present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Reads a whole answer.
pub async fn reply(res: reqwest::Response) -> Reply {
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let by = headers
        .get(ANSWERED_BY_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = res.bytes().await.expect("body").to_vec();
    Reply {
        status,
        by,
        body,
        headers,
    }
}

/// A claim request as raw parts, so bad ones can be built too.
#[derive(Clone)]
pub struct ClaimReq {
    /// Customer token (bearer), if any.
    pub token: Option<String>,
    /// `Idempotency-Key`, if any.
    pub key: Option<String>,
    /// `Content-Type`, if any.
    pub content_type: Option<&'static str>,
    /// Raw body.
    pub body: Vec<u8>,
}

impl ClaimReq {
    /// A well-formed claim of `customer` with key `key` and body `{}`.
    pub fn good(o: &TestOrigin, customer: &str, key: &str) -> Self {
        Self::with_token(&o.token(customer), key)
    }

    /// A well-formed claim carrying customer token `token`, with key `key` and body `{}`.
    pub fn with_token(token: &str, key: &str) -> Self {
        ClaimReq {
            token: Some(token.into()),
            key: Some(key.into()),
            content_type: Some("application/json"),
            body: b"{}".to_vec(),
        }
    }
}

/// Sends a claim to `base`; `sign` adds a valid edge signature (to talk to the origin directly).
pub async fn send_claim(
    http: &reqwest::Client,
    base: &str,
    campaign: &str,
    r: &ClaimReq,
    sign: bool,
) -> Reply {
    let path = format!("/api/v1/campaigns/{campaign}/claims");
    let mut req = http.post(format!("{base}{path}")).body(r.body.clone());
    if let Some(t) = &r.token {
        req = req.bearer_auth(t);
    }
    if let Some(k) = &r.key {
        req = req.header("idempotency-key", k);
    }
    if let Some(ct) = r.content_type {
        req = req.header("content-type", ct);
    }
    if sign {
        let auth = r.token.as_ref().map(|t| format!("Bearer {t}"));
        let headers = edge_headers(
            TEST_EDGE_SECRET,
            "POST",
            &path,
            &r.body,
            auth.as_deref(),
            r.key.as_deref(),
            None,
        );
        for (name, value) in headers {
            req = req.header(name, value);
        }
    }
    reply(req.send().await.expect("claim request")).await
}

/// `GET url`, whole answer.
pub async fn get(http: &reqwest::Client, url: &str) -> Reply {
    reply(http.get(url).send().await.expect("GET")).await
}

/// The status URL of `campaign` under `base`.
pub fn status_url(base: &str, campaign: &str) -> String {
    format!("{base}/api/v1/campaigns/{campaign}")
}

/// Sells out `campaign` by claiming its units straight at the origin (signed).
pub async fn sell_out_at_origin(o: &TestOrigin, campaign: &str, stock: usize) {
    for i in 0..stock {
        let c = unique("direct");
        let r = send_claim(
            &o.http,
            &o.url,
            campaign,
            &ClaimReq::good(o, &c, &format!("k{i}")),
            true,
        )
        .await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
}

/// The winners filter of `c` as the origin builds it now, from its customers with a claim in
/// PostgreSQL (after a sell-out: the gate's holders): after the sell-out the edge forwards the
/// claims of customers this filter may contain (its winners, and about 1 in 256 others), and
/// answers the rest `sold_out` itself.
pub async fn winners_filter_of(
    o: &TestOrigin,
    c: &str,
) -> flashgate_shared::winners_filter::WinnersFilter {
    let winners: Vec<String> = sqlx::query_scalar(
        "SELECT customer_id FROM claims WHERE campaign_id = $1 \
         AND status IN ('held', 'paid', 'issued', 'redeemed')",
    )
    .bind(c)
    .fetch_all(&o.db)
    .await
    .expect("winners of the campaign");
    flashgate_shared::winners_filter::WinnersFilter::build(
        winners.iter().map(String::as_str),
        flashgate_shared::winners_filter::MAX_WINNERS,
    )
}

/// Posts `body` to the origin's edge-only `path` (a report route) as the edge does, signed with
/// `secret` at Unix time `t` (unsigned when `secret` is `None`). Returns status and JSON body
/// (`Value::Null` when not JSON).
pub async fn post_edge_report(
    o: &TestOrigin,
    path: &str,
    body: &[u8],
    secret: Option<&[u8]>,
    t: i64,
) -> (u16, Value) {
    use flashgate_shared::signature::{sign, Signed};
    let mut req = o
        .http
        .post(format!("{}{path}", o.url))
        .header("content-type", "application/json")
        .body(body.to_vec());
    if let Some(secret) = secret {
        let signed = Signed {
            method: "POST",
            path,
            body,
            ..Signed::default()
        };
        req = req.header(
            flashgate_shared::EDGE_SIGNATURE_HEADER,
            sign(secret, t, &signed),
        );
    }
    let res = req.send().await.expect("send the report");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}
