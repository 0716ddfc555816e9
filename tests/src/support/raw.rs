//! Raw HTTP of the tests: a request with any headers and body and its whole answer, the
//! headers the edge adds to what it forwards (signed), customer tokens, and a bare claim.

use chrono::Utc;
use flashgate_origin::config::Config;
use flashgate_shared::token::{mint, CustomerClaims};
use serde_json::Value;

/// An HTTP answer: status, headers and JSON body (`Value::Null` when not JSON).
pub struct RawReply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl RawReply {
    /// The value of header `name`, when present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Sends `method url` with an optional bearer token, extra headers and a raw body (no
/// `Content-Type` unless `headers` gives one); returns the whole answer.
pub async fn send_raw(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    bearer: Option<&str>,
    headers: &[(&str, String)],
    body: impl Into<reqwest::Body>,
) -> RawReply {
    let mut req = http.request(method, url).body(body);
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let res = req.send().await.expect("request");
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let bytes = res.bytes().await.unwrap_or_default();
    RawReply {
        status,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

/// An edge secret for tests (32 bytes or more, as the origin and the edge require).
pub const TEST_EDGE_SECRET: &str = "test-edge-secret-0123456789abcdef";

/// The headers the edge adds to a request it forwards: `Flashgate-Client-Ip` (when
/// `client_ip` is given) and `Flashgate-Edge-Signature` under `secret`, signed now over the
/// method, `path` (as sent, without query), `body`, the `Authorization` value and the
/// `Idempotency-Key` the request carries, and the client IP.
pub fn edge_headers(
    secret: &str,
    method: &str,
    path: &str,
    body: &[u8],
    authorization: Option<&str>,
    idempotency_key: Option<&str>,
    client_ip: Option<&str>,
) -> Vec<(&'static str, String)> {
    let signed = flashgate_shared::signature::Signed {
        method,
        path,
        body,
        authorization: authorization.map(str::as_bytes),
        idempotency_key: idempotency_key.map(str::as_bytes),
        client_ip: client_ip.map(str::as_bytes),
    };
    let now = Utc::now().timestamp();
    let mut headers = vec![(
        flashgate_shared::EDGE_SIGNATURE_HEADER,
        flashgate_shared::signature::sign(secret.as_bytes(), now, &signed),
    )];
    if let Some(ip) = client_ip {
        headers.push((flashgate_shared::CLIENT_IP_HEADER, ip.to_string()));
    }
    headers
}

/// A customer token for `customer` under `config`'s secret, valid for an hour.
pub fn token_for(config: &Config, customer: &str) -> String {
    let exp = Utc::now().timestamp() + 3600;
    mint(
        &CustomerClaims {
            sub: customer.into(),
            exp: exp.into(),
            nbf: None,
        },
        customer_secret(config).as_bytes(),
    )
}

/// The HS256 secret of customer tokens in `config` (the test configurations always have one).
pub fn customer_secret(config: &Config) -> &str {
    config
        .customer_token_secret
        .as_ref()
        .expect("the test configuration has a customer token secret")
        .expose()
}

/// Sends a claim to `base_url`; returns status and JSON body (`Value::Null` when not JSON).
pub async fn claim_at(
    http: &reqwest::Client,
    base_url: &str,
    token: &str,
    campaign: &str,
    key: &str,
) -> (u16, Value) {
    let (status, _, body) = claim_via(http, base_url, token, campaign, key).await;
    (status, body)
}

/// Sends a claim to `base_url` (an origin or an edge); returns status, who answered (the
/// `Flashgate-Answered-By` header: `edge` / `origin`, empty when absent) and JSON body.
pub async fn claim_via(
    http: &reqwest::Client,
    base_url: &str,
    token: &str,
    campaign: &str,
    key: &str,
) -> (u16, String, Value) {
    let res = http
        .post(format!("{base_url}/api/v1/campaigns/{campaign}/claims"))
        .bearer_auth(token)
        .header("idempotency-key", key)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("claim request");
    let status = res.status().as_u16();
    let by = res
        .headers()
        .get(flashgate_shared::ANSWERED_BY_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, by, res.json().await.unwrap_or(Value::Null))
}
