//! A stand-in identity provider for the customer-token tests: its own RS256 / ES256 keys
//! (generated per run), a JWKS served over HTTP that the test can change or take down, and a
//! count of the fetches it answered.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use axum::http::StatusCode;
use flashgate_shared::token::SigningKey;
use futures::StreamExt;
use serde_json::{json, Value};

use crate::support::{send_claim, ClaimReq};

/// A fresh 2048-bit RSA key named `kid`.
pub fn rsa_key(kid: &str) -> SigningKey {
    let key = rsa::RsaPrivateKey::new(&mut rand_core::OsRng, 2048).expect("RSA key");
    SigningKey::rs256(Some(kid.into()), key)
}

/// A fresh P-256 key named `kid`.
pub fn ec_key(kid: &str) -> SigningKey {
    SigningKey::es256(
        Some(kid.into()),
        p256::ecdsa::SigningKey::random(&mut rand_core::OsRng),
    )
}

/// The JWKS publishing the public halves of `keys`.
pub fn jwks(keys: &[&SigningKey]) -> Value {
    json!({ "keys": keys.iter().filter_map(|k| k.public_jwk()).collect::<Vec<_>>() })
}

/// Claims of a token for `sub` issued by `iss` for `aud`, valid from now for an hour.
pub fn claims(sub: &str, iss: &str, aud: &str) -> Value {
    let now = chrono::Utc::now().timestamp();
    json!({ "sub": sub, "iss": iss, "aud": aud, "iat": now, "exp": now + 3_600 })
}

/// The JWKS endpoint, serving `GET /jwks.json` on 127.0.0.1.
pub struct Idp {
    /// The JWKS URL.
    pub url: String,
    doc: Arc<RwLock<Value>>,
    down: Arc<AtomicBool>,
    delay_ms: Arc<AtomicU64>,
    fetches: Arc<AtomicU64>,
    server: tokio::task::JoinHandle<()>,
}

impl Idp {
    /// Serves the JWKS of `keys` on an ephemeral port.
    pub async fn start(keys: &[&SigningKey]) -> Idp {
        let doc = Arc::new(RwLock::new(jwks(keys)));
        let down = Arc::new(AtomicBool::new(false));
        let fetches = Arc::new(AtomicU64::new(0));
        let delay_ms = Arc::new(AtomicU64::new(0));
        let (d, f, o, w) = (doc.clone(), fetches.clone(), down.clone(), delay_ms.clone());
        let app = axum::Router::new().route(
            "/jwks.json",
            axum::routing::get(move || {
                let (d, f, o, w) = (d.clone(), f.clone(), o.clone(), w.clone());
                async move {
                    f.fetch_add(1, Ordering::SeqCst);
                    let wait = w.load(Ordering::SeqCst);
                    if wait > 0 {
                        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
                    }
                    if o.load(Ordering::SeqCst) {
                        return (StatusCode::SERVICE_UNAVAILABLE, "down".to_string());
                    }
                    (StatusCode::OK, d.read().expect("doc").to_string())
                }
            }),
        );
        let (url, server) = serve_jwks(app).await;
        Idp {
            url,
            doc,
            down,
            delay_ms,
            fetches,
            server,
        }
    }

    /// Publishes the JWKS of `keys` instead.
    pub fn publish(&self, keys: &[&SigningKey]) {
        *self.doc.write().expect("doc") = jwks(keys);
    }

    /// Answers 503 to every fetch while `down`.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Answers every fetch `delay_ms` milliseconds late (0: at once), so requests can arrive
    /// while a fetch is under way.
    pub fn set_delay_ms(&self, delay_ms: u64) {
        self.delay_ms.store(delay_ms, Ordering::SeqCst);
    }

    /// Fetches answered so far (down or not).
    pub fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::SeqCst)
    }
}

impl Drop for Idp {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Sends one claim with `token` to `base_url` (an origin or an edge) on `campaign`, under a
/// fresh idempotency key; returns the status and the `message` of an error body ("" else).
pub async fn claim_with(
    http: &reqwest::Client,
    base_url: &str,
    campaign: &str,
    token: &str,
) -> (u16, String) {
    let key = crate::support::unique("k");
    let (status, body) = crate::support::claim_at(http, base_url, token, campaign, &key).await;
    let message = body["message"].as_str().unwrap_or_default().to_string();
    (status, message)
}

/// The refusals every verifier (origin or edge) must make, for an issuer `iss`, audience
/// `aud` and leeway of 30 s, with `rs` and `es` published: each a case name, a token and the
/// expected 401 message. `hs_secret` is the configured single HS256 secret.
pub fn refusals(
    rs: &SigningKey,
    es: &SigningKey,
    iss: &str,
    aud: &str,
    hs_secret: &[u8],
) -> Vec<(&'static str, String, &'static str)> {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use base64::Engine;
    let now = chrono::Utc::now().timestamp();
    let with = |k: &SigningKey, change: &dyn Fn(&mut Value)| {
        let mut c = claims("mallory", iss, aud);
        change(&mut c);
        k.sign(&c)
    };
    // The RSA key's public JWK, as an attacker would "sign" HS256 with it.
    let public = rs.public_jwk().expect("RSA JWK").to_string();
    let rs_kid = rs.public_jwk().expect("JWK")["kid"]
        .as_str()
        .unwrap()
        .to_string();
    let confused = SigningKey::hs256(Some(rs_kid), public.as_bytes());
    let confused_no_kid = SigningKey::hs256(None, public.as_bytes());
    let none = format!(
        "{}.{}.",
        B64.encode(br#"{"alg":"none","typ":"JWT"}"#),
        B64.encode(claims("mallory", iss, aud).to_string())
    );
    let hs = SigningKey::hs256(None, hs_secret);
    vec![
        (
            "wrong iss",
            with(es, &|c| c["iss"] = "https://other.example/".into()),
            "customer token issuer is not accepted",
        ),
        (
            "no iss",
            with(rs, &|c| {
                c.as_object_mut().unwrap().remove("iss");
            }),
            "customer token issuer is not accepted",
        ),
        (
            "wrong aud",
            with(rs, &|c| c["aud"] = "another-app".into()),
            "customer token audience is not accepted",
        ),
        (
            "aud array without ours",
            with(es, &|c| c["aud"] = json!(["a", "b"])),
            "customer token audience is not accepted",
        ),
        (
            "HS256 under the RSA public key, kid of the RSA key",
            confused.sign(&claims("mallory", iss, aud)),
            "customer token algorithm is not accepted for its key",
        ),
        (
            "HS256 under the RSA public key, no kid",
            confused_no_kid.sign(&claims("mallory", iss, aud)),
            "customer token signature is invalid",
        ),
        (
            "alg none",
            none,
            "customer token algorithm is not accepted for its key",
        ),
        (
            "expired beyond the leeway",
            with(es, &|c| c["exp"] = (now - 60).into()),
            "customer token has expired",
        ),
        (
            "nbf beyond the leeway",
            with(es, &|c| c["nbf"] = (now + 60).into()),
            "customer token is not valid yet",
        ),
        (
            "iat beyond the leeway",
            with(rs, &|c| c["iat"] = (now + 60).into()),
            "customer token is not valid yet",
        ),
        (
            "exp practically never",
            with(es, &|c| c["exp"] = json!(1e30)),
            "customer token expires further ahead than the longest accepted lifetime",
        ),
        (
            "exp two days ahead",
            with(rs, &|c| c["exp"] = (now + 2 * 86_400).into()),
            "customer token expires further ahead than the longest accepted lifetime",
        ),
        (
            "crit header",
            {
                let crit = json!({"crit": ["x-ext"], "x-ext": true});
                let crit = crit.as_object().expect("an object").clone();
                es.sign_with_header(crit, &claims("mallory", iss, aud))
            },
            "customer token names critical header extensions that are not supported",
        ),
        (
            "HS256 without iss",
            hs.sign(&json!({"sub": "mallory", "exp": now + 600})),
            "customer token issuer is not accepted",
        ),
    ]
}

/// Tokens every verifier must accept (same settings as [`refusals`]): a case name and a token
/// for a fresh customer.
pub fn acceptances(
    rs: &SigningKey,
    es: &SigningKey,
    iss: &str,
    aud: &str,
    hs_secret: &[u8],
) -> Vec<(&'static str, String)> {
    let now = chrono::Utc::now().timestamp();
    let fresh = || crate::support::unique("cust");
    let with = |k: &SigningKey, change: &dyn Fn(&mut Value)| {
        let mut c = claims(&fresh(), iss, aud);
        change(&mut c);
        k.sign(&c)
    };
    vec![
        ("RS256", with(rs, &|_| {})),
        ("ES256", with(es, &|_| {})),
        (
            "aud array with ours",
            with(es, &|c| c["aud"] = json!(["x", aud])),
        ),
        (
            "expired within the leeway",
            with(rs, &|c| c["exp"] = (now - 10).into()),
        ),
        (
            "nbf within the leeway",
            with(es, &|c| c["nbf"] = (now + 10).into()),
        ),
        (
            "iat within the leeway",
            with(es, &|c| c["iat"] = (now + 10).into()),
        ),
        (
            "HS256 with iss and aud",
            SigningKey::hs256(None, hs_secret).sign(&claims(&fresh(), iss, aud)),
        ),
    ]
}

/// One claim's answer, as [`claim_answer`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimAnswer {
    /// HTTP status.
    pub status: u16,
    /// `Flashgate-Answered-By`: `edge` / `origin` (empty when absent).
    pub by: String,
    /// The `message` of an error body ("" else).
    pub message: String,
    /// The `Retry-After` header ("" when absent).
    pub retry_after: String,
}

/// Sends one claim with `token` to `base_url` (an origin or an edge) on `campaign`, under a
/// fresh idempotency key, and reads its answer, headers included.
pub async fn claim_answer(
    http: &reqwest::Client,
    base_url: &str,
    campaign: &str,
    token: &str,
) -> ClaimAnswer {
    let req = ClaimReq::with_token(token, &crate::support::unique("k"));
    let r = send_claim(http, base_url, campaign, &req, false).await;
    ClaimAnswer {
        status: r.status,
        message: r.json()["message"].as_str().unwrap_or_default().to_string(),
        retry_after: r.header("retry-after").unwrap_or_default().to_string(),
        by: r.by,
    }
}

/// A JWKS endpoint answering a chunked body (no `Content-Length`): the JWKS of its keys with a
/// `padding` member of `pad_bytes` bytes, produced 64 KiB at a time only as the client reads.
pub struct ChunkedJwks {
    /// The JWKS URL.
    pub url: String,
    served: Arc<AtomicU64>,
    server: tokio::task::JoinHandle<()>,
}

impl ChunkedJwks {
    /// Serves the JWKS of `keys` padded by `pad_bytes` bytes on an ephemeral port.
    pub async fn start(keys: &[&SigningKey], pad_bytes: usize) -> ChunkedJwks {
        const CHUNK: usize = 64 * 1024;
        let doc = jwks(keys).to_string();
        let head = format!("{},\"padding\":\"", &doc[..doc.len() - 1]);
        let served = Arc::new(AtomicU64::new(0));
        let counter = served.clone();
        let app = axum::Router::new().route(
            "/jwks.json",
            axum::routing::get(move || {
                let (head, counter) = (head.clone(), counter.clone());
                async move {
                    // Parts: the head, the padding in chunks, the closing `"}`.
                    let parts = 2 + pad_bytes.div_ceil(CHUNK);
                    let stream = futures::stream::iter(0..parts).map(move |i| {
                        let part = if i == 0 {
                            head.clone().into_bytes()
                        } else if i == parts - 1 {
                            b"\"}".to_vec()
                        } else {
                            vec![b'x'; CHUNK.min(pad_bytes - (i - 1) * CHUNK)]
                        };
                        counter.fetch_add(part.len() as u64, Ordering::SeqCst);
                        Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(part))
                    });
                    axum::body::Body::from_stream(stream)
                }
            }),
        );
        let (url, server) = serve_jwks(app).await;
        ChunkedJwks {
            url,
            served,
            server,
        }
    }

    /// Body bytes produced so far, over every fetch.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::SeqCst)
    }
}

impl Drop for ChunkedJwks {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Serves `app` on an ephemeral port of 127.0.0.1; returns the URL of its `/jwks.json` and the
/// server task.
async fn serve_jwks(app: axum::Router) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind JWKS server");
    let url = format!(
        "http://{}/jwks.json",
        listener.local_addr().expect("address")
    );
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, server)
}
