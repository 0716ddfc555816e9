//! Promo-code helpers of the tests: shoppers with their own client IP, signed check and use
//! calls, the payment service's confirm and release, and the admin's code rules, all over
//! HTTP against a [`TestOrigin`]; and what PostgreSQL holds about a code.

use chrono::{Duration, Utc};
use flashgate_shared::api::promo::{CheckRequest, NewCode, NewCodeBatch, Offer, UseRequest};
use flashgate_shared::CLIENT_IP_HEADER;
use serde::Serialize;
use serde_json::Value;

use super::{edge_headers, send_raw, unique, RawReply, TestOrigin, TEST_EDGE_SECRET};

/// A fresh coupon-code name (letters and digits, 24 characters).
pub fn fresh_code_name(prefix: &str) -> String {
    let mut code = format!(
        "{prefix}{}",
        uuid::Uuid::new_v4().simple().to_string().to_uppercase()
    );
    code.truncate(24);
    code
}

/// A fresh client IP, so per-IP buckets of different tests and runs never meet.
pub fn fresh_ip() -> String {
    let n: u32 = rand::random();
    format!("10.{}.{}.{}", (n >> 16) & 255, (n >> 8) & 255, n & 255)
}

/// Percent-encodes a path segment (everything but ASCII letters and digits).
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// POSTs `body` (raw, as JSON) to `url` with a bearer token and extra headers. A request
/// with a `Flashgate-Client-Ip` header is sent as the edge forwards it: signed under
/// [`TEST_EDGE_SECRET`] (the origin must be started with it, e.g.
/// [`signed_test_config`](super::signed_test_config)).
pub async fn post_raw(
    http: &reqwest::Client,
    url: &str,
    bearer: Option<&str>,
    headers: &[(&str, String)],
    body: &str,
) -> RawReply {
    let mut all = vec![("content-type", "application/json".to_string())];
    all.extend(headers.iter().cloned());
    if let Some((_, ip)) = headers.iter().find(|(k, _)| *k == CLIENT_IP_HEADER) {
        let path = reqwest::Url::parse(url).expect("url").path().to_string();
        let auth = bearer.map(|t| format!("Bearer {t}"));
        let key = headers
            .iter()
            .find(|(k, _)| *k == "idempotency-key")
            .map(|(_, v)| v.as_str());
        for (name, value) in edge_headers(
            TEST_EDGE_SECRET,
            "POST",
            &path,
            body.as_bytes(),
            auth.as_deref(),
            key,
            Some(ip),
        ) {
            if name != CLIENT_IP_HEADER {
                all.push((name, value));
            }
        }
    }
    let method = reqwest::Method::POST;
    send_raw(http, method, url, bearer, &all, body.to_string()).await
}

/// A customer of one test: her id, token and client IP.
#[derive(Clone)]
pub struct Shopper {
    /// Her token (customer id [`Shopper::id`]).
    pub token: String,
    /// The client IP the edge signs for her requests.
    pub ip: String,
    /// Her customer id.
    pub id: String,
}

/// `POST {base}/api/v1/codes/{code}/check` for `s` (signed, with her IP).
pub async fn check_at(
    http: &reqwest::Client,
    base: &str,
    s: &Shopper,
    code: &str,
    cart_total: i64,
) -> RawReply {
    let body = CheckRequest {
        cart_total,
        currency: None,
    };
    post_raw(
        http,
        &format!("{base}/api/v1/codes/{}/check", enc(code)),
        Some(&s.token),
        &[(CLIENT_IP_HEADER, s.ip.clone())],
        &serde_json::to_string(&body).expect("check body"),
    )
    .await
}

/// `POST {base}/api/v1/codes/{code}/use` for `s` (signed, with her IP) with `key`; her order
/// is `o-{her id}-{key}` (one use per (code, order) is a rule of its own).
pub async fn use_at(
    http: &reqwest::Client,
    base: &str,
    s: &Shopper,
    code: &str,
    cart_total: i64,
    key: &str,
) -> RawReply {
    post_raw(
        http,
        &format!("{base}/api/v1/codes/{}/use", enc(code)),
        Some(&s.token),
        &[
            (CLIENT_IP_HEADER, s.ip.clone()),
            ("idempotency-key", key.to_string()),
        ],
        &use_body(s, cart_total, key),
    )
    .await
}

/// The body [`use_at`] sends for `s` with `key`, as sent (the idempotency fingerprint covers
/// these bytes).
pub fn use_body(s: &Shopper, cart_total: i64, key: &str) -> String {
    let body = UseRequest {
        order: format!("o-{}-{key}", s.id),
        cart_total,
        currency: None,
    };
    serde_json::to_string(&body).expect("use body")
}

/// A code body of the tests: `code`, 10 % off, USD, `limit` uses, once per customer, active
/// for an hour.
pub fn new_code(code: &str, limit: i64) -> NewCode {
    NewCode {
        code: code.into(),
        offer: Offer {
            percent_off: Some(1000),
            amount_off: None,
            currency: "USD".into(),
            min_order: 0,
            starts_at: None,
            ends_at: (Utc::now() + Duration::hours(1)).to_rfc3339(),
        },
        limit,
        once_per_customer: true,
    }
}

/// A one-time batch body of the tests: `count` codes of `amount_off` minor units off in USD,
/// active for 30 days.
pub fn new_batch(count: i64, amount_off: i64) -> NewCodeBatch {
    NewCodeBatch {
        count,
        offer: Offer {
            percent_off: None,
            amount_off: Some(amount_off),
            currency: "USD".into(),
            min_order: 0,
            starts_at: None,
            ends_at: (Utc::now() + Duration::days(30)).to_rfc3339(),
        },
    }
}

/// One-time code rules of the tests and benchmarks, as the batch generator takes them:
/// `amount_off` minor units off in USD, valid from now for 30 days.
pub fn one_time_rules(amount_off: i64) -> flashgate_origin::promo::rules::NewRules {
    flashgate_origin::promo::rules::NewRules {
        kind: flashgate_shared::api::promo::CodeKind::OneTime,
        percent_off_bp: None,
        amount_off: Some(amount_off),
        currency: "USD".into(),
        min_order: 0,
        starts_at: Utc::now(),
        ends_at: Utc::now() + Duration::days(30),
        use_limit: 1,
        once_per_customer: true,
    }
}

impl TestOrigin {
    /// A new shopper of this origin: a unique customer id, her token and a fresh IP.
    pub fn shopper(&self) -> Shopper {
        let id = unique("shopper");
        Shopper {
            token: self.token(&id),
            ip: fresh_ip(),
            id,
        }
    }

    /// [`check_at`] this origin.
    pub async fn check(&self, s: &Shopper, code: &str, cart_total: i64) -> RawReply {
        check_at(&self.http, &self.url, s, code, cart_total).await
    }

    /// [`use_at`] this origin.
    pub async fn use_as(&self, s: &Shopper, code: &str, cart_total: i64, key: &str) -> RawReply {
        use_at(&self.http, &self.url, s, code, cart_total, key).await
    }

    /// `POST /api/v1/uses/{id}/{what}` (`confirm` or `release`) with the service token.
    pub async fn use_call(&self, id: &str, what: &str) -> RawReply {
        let url = format!("{}/api/v1/uses/{id}/{what}", self.url);
        let token = self.config.service_token.expose();
        post_raw(&self.http, &url, Some(token), &[], "").await
    }

    /// `POST /admin/v1/codes` with the manager token; `body` is a [`NewCode`], or a JSON
    /// value for a deliberately malformed body.
    pub async fn create_code(&self, body: &impl Serialize) -> RawReply {
        let url = format!("{}/admin/v1/codes", self.url);
        let body = serde_json::to_string(body).expect("code body");
        post_raw(&self.http, &url, Some(self.manager_token()), &[], &body).await
    }

    /// Creates a shared code of `limit` uses ([`new_code`] as `edit` changes it) and returns
    /// its name; panics unless 201.
    pub async fn shared_code_with(&self, limit: i64, edit: impl FnOnce(&mut NewCode)) -> String {
        let mut body = new_code(&fresh_code_name("T"), limit);
        edit(&mut body);
        let r = self.create_code(&body).await;
        assert_eq!(r.status, 201, "create code: {}", r.body);
        body.code
    }

    /// Creates a shared coupon code through the admin API (10 % off, currency USD, active for
    /// an hour, `limit` uses, `once_per_customer` as given) and returns its name; panics
    /// unless 201.
    pub async fn shared_code(&self, limit: i64, once_per_customer: bool) -> String {
        self.shared_code_with(limit, |c| c.once_per_customer = once_per_customer)
            .await
    }

    /// `GET /admin/v1/codes/{code}` with the manager token: status and JSON body.
    pub async fn admin_code(&self, code: &str) -> (u16, Value) {
        let res = self
            .http
            .get(format!("{}/admin/v1/codes/{}", self.url, enc(code)))
            .bearer_auth(self.manager_token())
            .send()
            .await
            .expect("admin code request");
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// `coupon_codes.uses_left` of `code` in PostgreSQL.
    pub async fn uses_left(&self, code: &str) -> i64 {
        sqlx::query_scalar("SELECT uses_left FROM coupon_codes WHERE code = $1")
            .bind(code)
            .fetch_one(&self.db)
            .await
            .expect("uses_left")
    }

    /// Number of `coupon_uses` rows of `code` with `status` in PostgreSQL.
    pub async fn use_rows(&self, code: &str, status: &str) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM coupon_uses WHERE code = $1 AND status = $2")
            .bind(code)
            .bind(status)
            .fetch_one(&self.db)
            .await
            .expect("count uses")
    }

    /// `POST /api/v1/codes/{code}/use` for `customer` on `order` with `key`, cart total 6000,
    /// unsigned; returns status and JSON body.
    pub async fn use_code(
        &self,
        code: &str,
        customer: &str,
        order: &str,
        key: &str,
    ) -> (u16, Value) {
        let body = UseRequest {
            order: order.into(),
            cart_total: 6000,
            currency: None,
        };
        self.shop(code, "use", customer, Some(key), body).await
    }

    /// `POST /api/v1/codes/{code}/check` for `customer`, cart total 6000, unsigned; returns
    /// status and JSON body.
    pub async fn check_code(&self, code: &str, customer: &str) -> (u16, Value) {
        let body = CheckRequest {
            cart_total: 6000,
            currency: None,
        };
        self.shop(code, "check", customer, None, body).await
    }

    async fn shop(
        &self,
        code: &str,
        what: &str,
        customer: &str,
        key: Option<&str>,
        body: impl Serialize,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .post(format!("{}/api/v1/codes/{code}/{what}", self.url))
            .bearer_auth(self.token(customer))
            .json(&body);
        if let Some(k) = key {
            req = req.header("idempotency-key", k);
        }
        let res = req.send().await.expect("code request");
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }
}
