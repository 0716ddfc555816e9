//! W3C Trace Context from the edge to the origin, and the edge's claim counts: a real origin
//! (PostgreSQL, Redis, HTTP) whose JSON log lines are read back, alone and behind the built
//! worker in workerd. The access line of each request names its route, result and latency
//! and, from the `request` span, its campaign and trace id.
//!
//! A test binary of its own, not a module of `it`: its lines come from the process's one log
//! subscriber, installed with this file's filter; in a binary shared with other tests the
//! first filter installed would win (tracing caches each call site's interest, so a per-test
//! subscriber loses lines of tasks on other threads).

use flashgate_tests::support::logs::{json_logs, request_span, JsonLogs};
use flashgate_tests::support::{
    edge_claim, sale_behind_edge, unique, EdgeSettings, TestEdge, TestOrigin, TEST_EDGE_SECRET,
};
use serde_json::Value;

/// Every log line the origins of this test binary wrote (JSON, one object a line).
fn logs() -> &'static JsonLogs {
    // The `request` span is the origin's (flashgate_origin::http); the access line has a
    // target of its own.
    json_logs(&format!(
        "off,flashgate_origin::http=info,{}=info",
        flashgate_origin::metrics::ACCESS_LOG_TARGET
    ))
}

/// The `request` span fields of the access lines of campaign `c`'s claims, in order.
fn claim_lines(c: &str) -> Vec<Value> {
    logs()
        .access_lines()
        .into_iter()
        .filter(|v| v["fields"]["route"] == "/api/v1/campaigns/{id}/claims")
        .filter_map(|v| {
            let mut span = request_span(&v)?.clone();
            (span["campaign"] == c).then(|| {
                span["result"] = v["fields"]["result"].clone();
                span["latency_ms"] = v["fields"]["latency_ms"].clone();
                span
            })
        })
        .collect()
}

/// A new trace id (32 hex digits) and a `traceparent` of it.
fn caller_trace() -> (String, String) {
    let t = uuid::Uuid::new_v4().simple().to_string();
    let header = format!("00-{t}-00f067aa0ba902b7-01");
    (t, header)
}

async fn claim_with(
    o: &TestOrigin,
    base: &str,
    c: &str,
    customer: &str,
    traceparent: Option<&str>,
) -> u16 {
    let mut req = o
        .http
        .post(format!("{base}/api/v1/campaigns/{c}/claims"))
        .bearer_auth(o.token(customer))
        .header("idempotency-key", unique("k"))
        .header("content-type", "application/json")
        .body("{}");
    if let Some(t) = traceparent {
        req = req.header("traceparent", t);
    }
    req.send().await.expect("claim").status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_origin_continues_the_callers_trace_in_its_log_lines() {
    logs();
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 5).await;
    let (t, header) = caller_trace();
    assert_eq!(claim_with(&o, &o.url, &c, "ana", Some(&header)).await, 201);
    // Without a traceparent, or with a malformed one, the origin starts a trace of its own.
    assert_eq!(claim_with(&o, &o.url, &c, "bob", None).await, 201);
    let bad = format!("00-{}-00f067aa0ba902b7-01", "0".repeat(32));
    assert_eq!(claim_with(&o, &o.url, &c, "cy", Some(&bad)).await, 201);
    let lines = claim_lines(&c);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["trace_id"], t.as_str());
    assert_eq!(lines[0]["trace_continued"], true);
    assert_eq!(lines[0]["result"], "claimed");
    assert!(lines[0]["latency_ms"].as_f64().unwrap() >= 0.0);
    for l in &lines[1..] {
        let own = l["trace_id"].as_str().unwrap();
        assert_eq!(l["trace_continued"], false);
        assert!(
            flashgate_shared::trace::trace_id(&format!("00-{own}-00f067aa0ba902b7-01")).is_some(),
            "{own}"
        );
        assert_ne!(own, t);
    }
    assert_ne!(lines[1]["trace_id"], lines[2]["trace_id"]);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_writes_traceparent_on_every_claim_it_forwards_and_counts_its_answers() {
    logs();
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", 2).await;
    let token = unique("metrics-token");
    let e = TestEdge::start(
        &o.url,
        &[
            ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.into()),
            ("FLASHGATE_EDGE_METRICS_TOKEN", token.clone()),
            ("FLASHGATE_STATUS_TTL_MS", "60000".into()),
        ],
    );
    let (t, header) = caller_trace();
    let forwarded0 = o.claim_requests();
    assert_eq!(claim_with(&o, &e.url, &c, "ana", Some(&header)).await, 201);
    // No traceparent from the caller: the edge starts the trace.
    assert_eq!(claim_with(&o, &e.url, &c, "bob", None).await, 201);
    let lines = claim_lines(&c);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["trace_id"], t.as_str());
    assert_eq!(lines[0]["trace_continued"], true);
    assert_eq!(lines[1]["trace_continued"], true);
    assert_ne!(lines[1]["trace_id"], t.as_str());

    // Six late customers, one after the other: the first finds the stock gone at the origin,
    // which tells the edge; the edge answers the rest itself.
    let late = unique("late");
    for i in 0..6 {
        let r = edge_claim(&o, &e.url, &c, &format!("{late}-{i}"), "k1").await;
        assert_eq!(r.status, 409, "{r:?}");
    }
    let forwarded = o.claim_requests() - forwarded0;
    let scrape = |auth: Option<String>| {
        let mut req = o.http.get(format!("{}/__flashgate/metrics", e.url));
        if let Some(a) = auth {
            req = req.bearer_auth(a);
        }
        async move {
            let res = req.send().await.expect("edge metrics");
            let status = res.status().as_u16();
            (status, res.text().await.unwrap_or_default())
        }
    };
    assert_eq!(scrape(None).await.0, 401);
    assert_eq!(scrape(Some("wrong".into())).await.0, 401);
    let (status, text) = scrape(Some(token)).await;
    assert_eq!(status, 200, "{text}");
    let count = |result: &str, by: &str| -> u64 {
        let line =
            format!("flashgate_edge_claims_total{{result=\"{result}\",answered_by=\"{by}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&line))
            .map_or(0, |v| v.parse().unwrap())
    };
    assert_eq!(count("claimed", "origin"), 2, "{text}");
    let sold_out_origin = count("sold_out", "origin");
    assert!(sold_out_origin >= 1, "{text}");
    assert_eq!(sold_out_origin + count("sold_out", "edge"), 6, "{text}");
    // What the edge says it forwarded is what reached the origin.
    assert_eq!(2 + sold_out_origin, forwarded);
    drop(e);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_metrics_route_does_not_exist_without_a_token() {
    let (o, _c, e) = sale_behind_edge(1, EdgeSettings::default()).await;
    let res = o
        .http
        .get(format!("{}/__flashgate/metrics", e.url))
        .bearer_auth("anything")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    drop(e);
    o.stop().await;
}
