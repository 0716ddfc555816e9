//! Bad input to the origin: each gets the documented 4xx with `{"result", "message"}`, never a
//! 500 or internal text, and changes nothing.

use base64::Engine;
use chrono::{Duration, Utc};
use flashgate_shared::idempotency;
use flashgate_shared::token::{mint, CustomerClaims};
use flashgate_tests::support::{edge_headers, test_config, unique, TestOrigin, TEST_EDGE_SECRET};
use serde_json::{json, Value};

struct Req {
    name: &'static str,
    token: Option<String>,
    key: Option<String>,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    campaign: Option<String>,
    want: (u16, &'static str),
}

async fn send(o: &TestOrigin, c: &str, r: &Req) -> (u16, Value) {
    let mut b = o
        .http
        .post(format!(
            "{}/api/v1/campaigns/{}/claims",
            o.url,
            r.campaign.as_deref().unwrap_or(c)
        ))
        .body(r.body.clone());
    if let Some(t) = &r.token {
        b = b.bearer_auth(t);
    }
    if let Some(k) = &r.key {
        b = b.header("idempotency-key", k);
    }
    if let Some(ct) = r.content_type {
        b = b.header("content-type", ct);
    }
    let res = b.send().await.expect("request");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_claims_get_the_documented_4xx_and_change_nothing() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 3).await;
    let secret = o.customer_secret();
    let good = o.token(&unique("ana"));
    let expired = mint(
        &CustomerClaims {
            sub: "ana".into(),
            // Past the 30 s clock-skew leeway.
            exp: (Utc::now().timestamp() - 120).into(),
            nbf: None,
        },
        &secret,
    );
    let forged = mint(
        &CustomerClaims {
            sub: "ana".into(),
            exp: (Utc::now().timestamp() + 600).into(),
            nbf: None,
        },
        b"not-the-secret",
    );
    let alg_none = format!(
        "{}.{}.",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"sub":"ana","exp":99999999999}"#)
    );
    let base = |name, want| Req {
        name,
        token: Some(good.clone()),
        key: Some("k1".into()),
        content_type: Some("application/json"),
        body: b"{}".to_vec(),
        campaign: None,
        want,
    };
    let cases = vec![
        Req {
            token: None,
            ..base("missing token", (401, "unauthorized"))
        },
        Req {
            token: Some(expired),
            ..base("expired token", (401, "unauthorized"))
        },
        Req {
            token: Some(forged),
            ..base("forged token", (401, "unauthorized"))
        },
        Req {
            token: Some(alg_none),
            ..base("alg none", (401, "unauthorized"))
        },
        Req {
            token: Some("garbage".into()),
            ..base("garbage token", (401, "unauthorized"))
        },
        Req {
            key: None,
            ..base("missing key", (400, "invalid_idempotency_key"))
        },
        Req {
            key: Some("k".repeat(256)),
            ..base("256-char key", (400, "invalid_idempotency_key"))
        },
        Req {
            body: b"{".to_vec(),
            ..base("invalid JSON", (400, "invalid_json"))
        },
        Req {
            body: br#"{"a":1,"a":1}"#.to_vec(),
            ..base("duplicate keys", (400, "invalid_json"))
        },
        Req {
            body: br#"{"quantity":2}"#.to_vec(),
            ..base("unknown field", (400, "invalid_json"))
        },
        Req {
            body: b"[]".to_vec(),
            ..base("array body", (400, "invalid_json"))
        },
        Req {
            body: vec![b' '; 2 * 1024 * 1024],
            ..base("2 MB body", (413, "payload_too_large"))
        },
        Req {
            content_type: Some("text/plain"),
            ..base("wrong content type", (415, "unsupported_media_type"))
        },
        Req {
            content_type: None,
            ..base("no content type", (415, "unsupported_media_type"))
        },
        Req {
            campaign: Some("no-such-campaign".into()),
            ..base("unknown campaign", (404, "not_found"))
        },
        Req {
            campaign: Some("BAD%20ID".into()),
            ..base("malformed campaign id", (404, "not_found"))
        },
    ];
    for r in &cases {
        let (status, body) = send(&o, &c, r).await;
        assert_eq!(
            (status, body["result"].as_str().unwrap_or("")),
            (r.want.0, r.want.1),
            "{}: {body}",
            r.name
        );
        let message = body["message"].as_str().unwrap_or("");
        assert!(!message.is_empty(), "{}: a message for humans", r.name);
        match r.name {
            "missing key" => assert_eq!(message, idempotency::MISSING_KEY),
            "256-char key" => assert_eq!(message, idempotency::MALFORMED_KEY),
            _ => {}
        }
        for leak in ["sqlx", "redis", "panicked", "Error {"] {
            assert!(
                !message.contains(leak),
                "{}: internal text in {message}",
                r.name
            );
        }
    }
    assert_eq!(o.claim_rows(&c, &[]).await, 0, "nothing changed");
    assert_eq!(o.remaining(&c).await, 3);
    // The key used by every bad request is still fresh: a good request with it wins.
    let (s, _) = flashgate_tests::support::claim_at(&o.http, &o.url, &good, &c, "k1").await;
    assert_eq!(s, 201);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_campaigns_are_refused_by_the_admin_api() {
    let o = TestOrigin::start().await;
    let url = format!("{}/admin/v1/campaigns", o.url);
    let now = Utc::now();
    let ok = json!({"id": unique("c"), "name": "N", "kind": "sale", "stock": 5,
                    "starts_at": now, "ends_at": now + Duration::hours(1)});
    let admin = o.manager_token().to_string();
    let post = |body: Value, token: Option<&str>| {
        let mut b = o.http.post(&url).json(&body);
        if let Some(t) = token {
            b = b.bearer_auth(t);
        }
        b.send()
    };
    let r = post(ok.clone(), None).await.unwrap();
    assert_eq!(r.status(), 401);
    let r = post(ok.clone(), Some("wrong")).await.unwrap();
    assert_eq!(r.status(), 403);
    let with = |k: &str, v: Value| {
        let mut b = ok.clone();
        b[k] = v;
        b
    };
    for (name, body) in [
        ("stock 0", with("stock", json!(0))),
        ("stock too big", with("stock", json!(10_000_001))),
        ("negative stock", with("stock", json!(-5))),
        ("huge stock", with("stock", json!(1e300))),
        ("bad slug", with("id", json!("Not A Slug"))),
        (
            "ends before starts",
            with("ends_at", json!(now - Duration::hours(1))),
        ),
        ("bad time", with("starts_at", json!("tomorrow"))),
        (
            "far past",
            with("starts_at", json!("-200000-01-01T00:00:00Z")),
        ),
        (
            "far future",
            with("ends_at", json!("+200000-01-01T00:00:00Z")),
        ),
        ("unknown kind", with("kind", json!("lottery"))),
        (
            "hold on giveaway",
            with("kind", json!("giveaway"))
                .as_object()
                .map(|o| {
                    let mut o = o.clone();
                    o.insert("hold_seconds".into(), json!(60));
                    Value::Object(o)
                })
                .unwrap(),
        ),
        ("unknown field", with("color", json!("red"))),
    ] {
        let r = post(body, Some(&admin)).await.unwrap();
        let status = r.status().as_u16();
        let b: Value = r.json().await.unwrap();
        assert!(status == 422 || status == 400, "{name}: {status} {b}");
        assert!(b["message"].is_string(), "{name}: {b}");
    }
    // A value of the wrong type or variant is 422 naming its field.
    for (field, value) in [
        ("stock", json!(1e3)),
        ("kind", json!("lottery")),
        ("name", json!(5)),
    ] {
        let r = post(with(field, value), Some(&admin)).await.unwrap();
        assert_eq!(r.status(), 422, "{field}");
        let b: Value = r.json().await.unwrap();
        let message = b["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("`{field}`")), "{field}: {b}");
    }
    // A shape error names JSON, not the code's types.
    for body in [with("waiting_room", json!([])), json!([])] {
        let r = post(body.clone(), Some(&admin)).await.unwrap();
        assert_eq!(r.status(), 422, "{body}");
        let b: Value = r.json().await.unwrap();
        let message = b["message"].as_str().unwrap_or_default();
        assert!(message.contains("a JSON object"), "{body}: {b}");
        assert!(!message.contains("struct"), "{body}: {b}");
    }
    let r = post(ok.clone(), Some(&admin)).await.unwrap();
    assert_eq!(r.status(), 201);
    let r = post(ok.clone(), Some(&admin)).await.unwrap();
    assert_eq!(r.status(), 409);
    let r = o
        .http
        .get(format!("{}/api/v1/campaigns/nope", o.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    o.stop().await;
}

/// A claim on `path` (as sent) with customer token `token` and idempotency key `key`,
/// carrying the headers of `edge` (e.g. [`edge_headers`]) as they are; returns status and
/// body.
async fn claim_with(
    o: &TestOrigin,
    path: &str,
    token: &str,
    key: &str,
    edge: Vec<(&'static str, String)>,
) -> (u16, Value) {
    let mut req = o
        .http
        .post(format!("{}{path}", o.url))
        .bearer_auth(token)
        .header("idempotency-key", key)
        .header("content-type", "application/json")
        .body("{}");
    for (name, value) in edge {
        req = req.header(name, value);
    }
    let res = req.send().await.unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

/// A claim on `path` (as sent) signed as the edge signs it; returns the status.
async fn signed_claim(o: &TestOrigin, path: &str, customer: &str) -> u16 {
    let token = o.token(customer);
    let auth = format!("Bearer {token}");
    let edge = edge_headers(
        TEST_EDGE_SECRET,
        "POST",
        path,
        b"{}",
        Some(&auth),
        Some("k"),
        Some("203.0.113.7"),
    );
    claim_with(o, path, &token, "k", edge).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_signature_is_refused_with_another_token_key_or_client_ip() {
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", 3).await;
    let path = format!("/api/v1/campaigns/{c}/claims");
    let ana = o.token(&unique("ana"));
    let bea = o.token(&unique("bea"));
    let signed = edge_headers(
        TEST_EDGE_SECRET,
        "POST",
        &path,
        b"{}",
        Some(&format!("Bearer {ana}")),
        Some("k-ana"),
        Some("203.0.113.7"),
    );
    let with_ip = |ip: &str| {
        let mut h = signed.clone();
        for (name, value) in h.iter_mut() {
            if *name == flashgate_shared::CLIENT_IP_HEADER {
                *value = ip.to_string();
            }
        }
        h
    };
    let swaps = [
        (
            "another token",
            bea.as_str(),
            "k-ana",
            with_ip("203.0.113.7"),
        ),
        (
            "another key",
            ana.as_str(),
            "k-other",
            with_ip("203.0.113.7"),
        ),
        (
            "another client IP",
            ana.as_str(),
            "k-ana",
            with_ip("198.51.100.9"),
        ),
    ];
    for (what, token, key, headers) in swaps {
        let (status, body) = claim_with(&o, &path, token, key, headers).await;
        assert_eq!(
            (status, body["result"].as_str()),
            (403, Some("forbidden")),
            "{what}"
        );
        assert!(body["message"].is_string(), "{what}");
    }
    assert_eq!(
        o.claim_rows(&c, &[]).await,
        0,
        "a refused claim changed nothing"
    );
    // Left as signed, the very same request wins.
    let (status, _) = claim_with(&o, &path, &ana, "k-ana", signed.clone()).await;
    assert_eq!(status, 201);
    assert_eq!(o.claim_rows(&c, &[]).await, 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_with_a_fractional_exp_is_accepted_by_the_origin() {
    use flashgate_shared::token::NumericDate;
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 3).await;
    let secret = o.customer_secret();
    let now_ms = Utc::now().timestamp() * 1_000;
    let fractional = |sub: &str, offset_ms: i64| {
        let claims = CustomerClaims {
            sub: sub.into(),
            exp: NumericDate::from_unix_ms(now_ms + offset_ms),
            nbf: Some(NumericDate::from_unix_ms(now_ms - 1_500)),
        };
        mint(&claims, &secret)
    };
    let live = fractional(&unique("ana"), 3_600_500);
    assert!(
        String::from_utf8(
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(live.split('.').nth(1).unwrap())
                .unwrap()
        )
        .unwrap()
        .contains(".5,"),
        "the token's exp has a fractional part"
    );
    let (status, body) = claim_with(
        &o,
        &format!("/api/v1/campaigns/{c}/claims"),
        &live,
        "k",
        vec![],
    )
    .await;
    assert_eq!(
        (status, body["result"].as_str()),
        (201, Some("claimed")),
        "{body}"
    );
    // A fractional exp already past (beyond the 30 s leeway) is expired, not malformed.
    let gone = fractional(&unique("bea"), -60_500);
    let (status, body) = claim_with(
        &o,
        &format!("/api/v1/campaigns/{c}/claims"),
        &gone,
        "k",
        vec![],
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(body["message"], "customer token has expired");
    assert_eq!(o.claim_rows(&c, &[]).await, 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_edge_secret_unsigned_claims_are_forbidden() {
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", 3).await;
    let (s, b) = o.claim(&c, &unique("ana"), "k").await;
    assert_eq!((s, b["result"].as_str()), (403, Some("forbidden")));
    // A valid signature from the edge's code is accepted.
    let path = format!("/api/v1/campaigns/{c}/claims");
    assert_eq!(signed_claim(&o, &path, &unique("bea")).await, 201);
    assert_eq!(o.claim_rows(&c, &[]).await, 1);
    // The signature covers the path as sent: a percent-encoded campaign id still verifies.
    let encoded = format!(
        "/api/v1/campaigns/%{:02X}{}/claims",
        c.as_bytes()[0],
        &c[1..]
    );
    assert_eq!(signed_claim(&o, &encoded, &unique("cy")).await, 201);
    assert_eq!(o.claim_rows(&c, &[]).await, 2);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_that_do_not_decode_get_the_documented_404() {
    let o = TestOrigin::start().await;
    for path in [
        "/api/v1/campaigns/%FF",
        "/admin/v1/campaigns/%FF",
        "/api/v1/campaigns/%FF/claims/mine",
    ] {
        let r = o
            .http
            .get(format!("{}{path}", o.url))
            .bearer_auth(o.manager_token())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path}");
        let b: Value = r.json().await.expect("a JSON body");
        assert_eq!(b["result"], "not_found", "{path}");
        assert!(b["message"].is_string());
    }
    o.stop().await;
}

/// An id in the path that breaks its rule (docs/API.md, "Shared rules") is 404 `not_found` on
/// every route that takes one, as docs/API.md says next to the rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_id_in_the_path_is_the_documented_404() {
    let doc = std::fs::read_to_string(flashgate_tests::support::repo_root().join("docs/API.md"))
        .expect("docs/API.md");
    let rule = doc
        .split("\n\n")
        .find(|p| p.contains("claim id `[A-Za-z0-9_]{1,64}`"))
        .expect("the paragraph of the text rules");
    assert!(
        rule.contains("in the path") && rule.contains("404 `not_found`"),
        "docs/API.md names the answer to a malformed id in the path: {rule}"
    );
    let o = TestOrigin::start().await;
    let service = o.config.service_token.expose().to_string();
    let customer = o.token(&unique("ana"));
    let bad_claim = "c-not-a-claim";
    let cases = [
        ("GET", format!("/api/v1/claims/{bad_claim}"), &service),
        ("POST", format!("/api/v1/claims/{bad_claim}/pay"), &service),
        (
            "POST",
            format!("/api/v1/claims/{bad_claim}/release"),
            &service,
        ),
        (
            "POST",
            format!("/api/v1/claims/{bad_claim}/extend"),
            &service,
        ),
        ("GET", "/api/v1/coupons/not-a-code".to_string(), &service),
        (
            "POST",
            "/api/v1/uses/not-a-use/confirm".to_string(),
            &service,
        ),
        ("GET", "/api/v1/campaigns/Not_A_Slug".to_string(), &service),
        (
            "GET",
            "/api/v1/campaigns/Not_A_Slug/claims/mine".to_string(),
            &customer,
        ),
    ];
    for (method, path, token) in cases {
        let body = match path.as_str() {
            p if p.ends_with("/pay") => json!({"payment_ref": "psp-1"}),
            _ => json!({}),
        };
        let mut req = o
            .http
            .request(method.parse().unwrap(), format!("{}{path}", o.url))
            .bearer_auth(token)
            .header("idempotency-key", "k1");
        if method == "POST" {
            req = req.json(&body);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 404, "{method} {path}");
        let b: Value = r.json().await.expect("a JSON body");
        assert_eq!(b["result"], "not_found", "{method} {path}");
        assert!(b["message"].is_string());
    }
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_answers_the_documented_503_and_every_response_carries_a_request_id() {
    use flashgate_tests::support::{send_raw, RawReply};
    use reqwest::Method;

    async fn get(o: &TestOrigin, path: &str, headers: &[(&str, String)]) -> RawReply {
        let url = format!("{}{path}", o.url);
        send_raw(&o.http, Method::GET, &url, None, headers, "").await
    }
    async fn claim_raw(
        o: &TestOrigin,
        c: &str,
        bearer: Option<&str>,
        headers: &[(&str, String)],
    ) -> RawReply {
        let url = format!("{}/api/v1/campaigns/{c}/claims", o.url);
        send_raw(&o.http, Method::POST, &url, bearer, headers, "{}").await
    }

    let mut config = test_config();
    config.debug_panic_route = true;
    let o = TestOrigin::start_with(config).await;
    let panicked = get(&o, "/debug/panic", &[]).await;
    assert_eq!(panicked.status, 503, "{:?}", panicked.body);
    assert_eq!(panicked.body["result"], "unavailable");
    let message = panicked.body["message"].as_str().expect("message");
    assert!(!message.contains("internal detail"), "{message}");
    assert!(!message.contains("panic"), "{message}");
    assert_eq!(panicked.header("retry-after"), Some("1"));
    assert_eq!(panicked.header("content-type"), Some("application/json"));
    assert!(panicked
        .header("x-request-id")
        .is_some_and(|id| !id.is_empty()));
    // The origin still serves after the panic.
    let health = get(&o, "/healthz", &[]).await;
    assert_eq!(health.status, 200);

    // Ids are made per request, and a caller's id is kept and sent back.
    let a = health.header("x-request-id").expect("id").to_string();
    let again = get(&o, "/healthz", &[]).await;
    let b = again.header("x-request-id").expect("id").to_string();
    assert_ne!(a, b);
    let given = get(
        &o,
        "/healthz",
        &[("x-request-id", "edge-ray-0123".to_string())],
    )
    .await;
    assert_eq!(given.header("x-request-id"), Some("edge-ray-0123"));
    // An id past 128 characters, or with a byte outside visible ASCII, is replaced by a new
    // UUID (36 characters) rather than logged and echoed.
    for odd in ["r".repeat(129), "two words".to_string(), "r".repeat(128)] {
        let reply = get(&o, "/healthz", &[("x-request-id", odd.clone())]).await;
        let id = reply.header("x-request-id").expect("id");
        if odd.len() == 128 {
            assert_eq!(id, odd, "128 visible characters are kept");
        } else {
            assert_eq!(id.len(), 36, "{odd:?} got {id:?}");
            assert_ne!(id, odd);
        }
    }
    // A business answer and a 4xx carry it too.
    let c = o.campaign("sale", 1).await;
    let claim = claim_raw(
        &o,
        &c,
        Some(&o.token(&unique("rid"))),
        &[
            ("idempotency-key", unique("k")),
            ("content-type", "application/json".to_string()),
        ],
    )
    .await;
    assert_eq!(claim.status, 201, "{:?}", claim.body);
    assert!(claim.header("x-request-id").is_some());
    let bad = claim_raw(&o, &c, None, &[]).await;
    assert_eq!(bad.status, 415, "no Content-Type");
    assert!(bad.header("x-request-id").is_some());
    o.stop().await;

    // Off by default: no such route.
    let o = TestOrigin::start().await;
    let none = get(&o, "/debug/panic", &[]).await;
    assert_eq!(none.status, 404);
    assert_eq!(none.body["result"], "not_found");
    o.stop().await;
}
