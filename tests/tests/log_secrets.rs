//! What an origin's JSON logs (`FLASHGATE_LOG_FORMAT=json`) hold, read back from a real origin
//! (PostgreSQL, Redis, HTTP) after requests that carried coupon codes and tokens in their
//! paths, bodies and headers: one access line per request with its route template, result,
//! latency and, from the `request` span, its trace id and campaign; and nowhere a coupon code,
//! a token or a secret.
//!
//! A test binary of its own, not a module of `it`: it asserts on every log line the process
//! writes (one access line per request, no 404 but its own), and a process has one log
//! subscriber, installed once with one filter (tracing caches each call site's interest, so a
//! per-test subscriber loses lines of tasks on other threads).

use std::collections::HashSet;

use flashgate_shared::api::RedeemRequest;
use flashgate_tests::support::logs::{json_logs, request_span};
use flashgate_tests::support::{customer_secret, unique, TestOrigin, TEST_EDGE_SECRET};
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_have_one_line_per_request_and_no_coupon_code_or_secret() {
    // Everything the origin logs at info (the default level) and the access lines.
    let logs = json_logs(&format!(
        "info,{}=info",
        flashgate_origin::metrics::ACCESS_LOG_TARGET
    ));
    let o = TestOrigin::start_signed().await;

    // A promo code: created, checked, used, mistyped, then disabled by a manager.
    let code = o.shared_code(10, true).await;
    let s = o.shopper();
    assert_eq!(o.check(&s, &code, 6000).await.status, 200);
    assert_eq!(o.use_as(&s, &code, 6000, &unique("k")).await.status, 201);
    let typo = format!("{}Z", &code[..code.len() - 1]);
    assert_eq!(o.check(&s, &typo, 6000).await.status, 404);
    let (status, body) = o
        .admin(
            Method::PATCH,
            &format!("/admin/v1/codes/{code}"),
            Some(o.manager_token()),
            Some(json!({"action": "disable"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    // A giveaway coupon: won, shown, redeemed, and sent to a path that is no route.
    let g = o.campaign("giveaway", 1).await;
    let won = o.signed_claim(&g, &unique("winner"), None).await;
    assert_eq!(won.status, 201, "{}", won.body);
    let coupon = won.body["claim"]["code"]
        .as_str()
        .expect("coupon code")
        .to_string();
    let service = o.config.service_token.expose().to_string();
    let shown = o
        .http
        .get(format!("{}/api/v1/coupons/{coupon}", o.url))
        .bearer_auth(&service)
        .send()
        .await
        .unwrap();
    assert_eq!(shown.status(), 200);
    let redeemed = o
        .http
        .post(format!("{}/api/v1/coupons/{coupon}/redeem", o.url))
        .bearer_auth(&service)
        .header("idempotency-key", unique("pos"))
        .json(&RedeemRequest {
            store: Some("store-1".into()),
        })
        .send()
        .await
        .unwrap();
    assert_eq!(redeemed.status(), 200);
    let lost = o
        .http
        .get(format!("{}/no/such/route/{coupon}", o.url))
        .bearer_auth(&s.token)
        .send()
        .await
        .unwrap();
    assert_eq!(lost.status(), 404);

    // One access line per request: each names its route template, result and latency, and
    // its request span a request id (unique: no request logged twice) and a trace id.
    let access = logs.access_lines();
    let mut ids = HashSet::new();
    for line in &access {
        let f = &line["fields"];
        assert!(f["route"].as_str().is_some_and(|r| !r.is_empty()), "{line}");
        assert!(
            f["result"].as_str().is_some_and(|r| !r.is_empty()),
            "{line}"
        );
        assert!(f["latency_ms"].as_f64().is_some_and(|l| l >= 0.0), "{line}");
        let span = request_span(line).expect("request span");
        assert_eq!(span["trace_id"].as_str().map(str::len), Some(32), "{line}");
        assert!(ids.insert(span["request_id"].to_string()), "twice: {line}");
    }
    let routed = |route: &str| {
        access
            .iter()
            .filter(|l| l["fields"]["route"] == route)
            .map(|l| {
                l["fields"]["result"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        routed("/api/v1/codes/{code}/check"),
        ["code_checked", "code_refused"]
    );
    assert_eq!(routed("/api/v1/coupons/{code}/redeem"), ["redeem"]);
    assert_eq!(routed("unmatched"), ["not_found"]);
    // The giveaway claim's line names its campaign (from the span).
    let claim = access
        .iter()
        .find(|l| l["fields"]["route"] == "/api/v1/campaigns/{id}/claims")
        .expect("the claim's access line");
    assert_eq!(request_span(claim).unwrap()["campaign"], g.as_str());

    // Nowhere a coupon code, a token or a secret, in any case.
    let text = logs.text().to_lowercase();
    let customer_token = s.token.clone();
    for (what, secret) in [
        ("the promo code", code.as_str()),
        ("the mistyped code", typo.as_str()),
        ("the giveaway coupon code", coupon.as_str()),
        ("the customer token", customer_token.as_str()),
        ("the manager token", o.manager_token()),
        ("the service token", service.as_str()),
        ("the edge secret", TEST_EDGE_SECRET),
        ("the customer token secret", customer_secret(&o.config)),
    ] {
        assert!(
            !text.contains(&secret.to_lowercase()),
            "{what} ({secret}) is in the logs"
        );
    }
    // The check really ran over the lines of these requests.
    assert!(access.len() >= 9, "{}", access.len());
    o.stop().await;
}
