//! `GET /metrics` of a real origin (PostgreSQL, Redis, HTTP) after truly concurrent claims:
//! every count equals the number of requests answered with that result, the histograms count
//! every request, commit and gate step, and the per-campaign gauges read what PostgreSQL holds.

use flashgate_tests::support::scrape::{format_problems, text_of, Scrape};
use flashgate_tests::support::{count_replies, customers, unique, TestOrigin};

const CLAIMS: &str = "/api/v1/campaigns/{id}/claims";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_count_every_claim_by_result_and_answerer() {
    let o = TestOrigin::start().await;
    let before = Scrape::of(&o.http, &o.url).await;
    let c = o.campaign("sale", 10).await;
    let people = customers(60);
    // 60 at once for 10 units.
    let replies = o.stampede(&c, &people).await;
    let winners: Vec<&String> = people
        .iter()
        .zip(&replies)
        .filter(|(_, (s, _))| *s == 201)
        .map(|(p, _)| p)
        .collect();
    assert_eq!(winners.len(), 10, "{replies:?}");
    assert_eq!(count_replies(&replies, 409, "sold_out"), 50);
    // Five winners retry with the same key at once (replays), three tap again with a new key
    // (already_claimed, read from PostgreSQL), and one newcomer is too late (sold_out).
    let retries = futures::future::join_all(winners[..5].iter().map(|w| {
        let (o, c) = (&o, &c);
        async move { o.claim(c, w, &format!("k-{w}")).await }
    }))
    .await;
    assert!(retries.iter().all(|(s, _)| *s == 201), "{retries:?}");
    for w in &winners[5..8] {
        let (s, b) = o.claim(&c, w, &format!("again-{w}")).await;
        assert_eq!((s, b["result"].as_str()), (409, Some("already_claimed")));
    }
    let (s, _) = o.claim(&c, &unique("late"), "late-1").await;
    assert_eq!(s, 409);

    let m = Scrape::of(&o.http, &o.url).await;
    let delta =
        |name: &str, labels: &[(&str, &str)]| m.count(name, labels) - before.count(name, labels);
    let claims = |result| delta("flashgate_claims_total", &[("result", result)]);
    assert_eq!(claims("claimed"), 10);
    assert_eq!(
        delta(
            "flashgate_claims_total",
            &[("result", "claimed"), ("answered_from", "store")]
        ),
        10
    );
    assert_eq!(claims("sold_out"), 51);
    assert_eq!(claims("replay"), 5);
    assert_eq!(claims("already_claimed"), 3);
    assert_eq!(delta("flashgate_idempotency_replays_total", &[]), 5);
    assert_eq!(delta("flashgate_claim_requests_total", &[]), 60 + 5 + 3 + 1);

    // One request-time observation per request, labelled by its result.
    let http = |result| {
        delta(
            "flashgate_http_request_duration_seconds_count",
            &[("route", CLAIMS), ("result", result)],
        )
    };
    assert_eq!(http("claimed"), 10);
    assert_eq!(http("replay"), 5);
    assert_eq!(http("sold_out"), 51);
    assert_eq!(http("already_claimed"), 3);
    assert!(!m.has(
        "flashgate_http_request_duration_seconds_count",
        ("route", &format!("/api/v1/campaigns/{c}/claims"))
    ));

    // Every gate take answered: the sold-outs the gate gave, the ten wins, the three
    // already-claimed ones and the five replays (a claim's idempotency record is read in the
    // same script as the take, so a replay is found there; the memory answers never reach the
    // gate).
    let by_gate = delta(
        "flashgate_claims_total",
        &[("result", "sold_out"), ("answered_from", "gate")],
    );
    assert_eq!(
        delta(
            "flashgate_gate_op_duration_seconds_count",
            &[("op", "take")]
        ),
        by_gate + 10 + 3 + 5
    );
    assert_eq!(
        delta(
            "flashgate_gate_op_duration_seconds_count",
            &[("op", "confirm")]
        ),
        10
    );
    // The grouped commits wrote exactly the ten claims, in at least one batch.
    assert_eq!(delta("flashgate_commit_batch_size_sum", &[]), 10);
    let batches = delta("flashgate_commit_batch_size_count", &[]);
    assert!((1..=10).contains(&batches), "{batches}");
    assert_eq!(
        delta("flashgate_commit_duration_seconds_count", &[]),
        batches
    );
    assert_eq!(m.count("flashgate_pending_takes", &[]), 0);

    // This live campaign's gauges: nothing left, ten units held and not paid.
    assert_eq!(
        m.count("flashgate_campaign_remaining", &[("campaign", &c)]),
        0
    );
    assert_eq!(m.count("flashgate_campaign_held", &[("campaign", &c)]), 10);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_counted_by_code_and_unknown_paths_by_no_route() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 1).await;
    let before = Scrape::of(&o.http, &o.url).await;
    // A claim without a token (401 unauthorized) and two paths that match no route (404).
    let res = o
        .http
        .post(format!("{}/api/v1/campaigns/{c}/claims", o.url))
        .header("Idempotency-Key", "k-1")
        .header("Content-Type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    for p in ["/nope/1", "/nope/2"] {
        let res = o.http.get(format!("{}{p}", o.url)).send().await.unwrap();
        assert_eq!(res.status(), 404);
    }
    let m = Scrape::of(&o.http, &o.url).await;
    let delta = |labels: &[(&str, &str)]| {
        let n = "flashgate_http_request_duration_seconds_count";
        m.count(n, labels) - before.count(n, labels)
    };
    assert_eq!(delta(&[("route", CLAIMS), ("result", "unauthorized")]), 1);
    assert_eq!(delta(&[("route", "unmatched"), ("result", "not_found")]), 2);
    // Nothing was claimed.
    assert_eq!(
        m.count("flashgate_claims_total", &[]),
        before.count("flashgate_claims_total", &[])
    );
    assert_eq!(
        m.count("flashgate_campaign_remaining", &[("campaign", &c)]),
        1
    );
    o.stop().await;
}

/// The text format's naming rule on a real scrape (after claims, so the labelled families have
/// samples): every `# HELP` / `# TYPE` line names the family's samples, a counter's with
/// `_total`, and no help text ends in "..". When `promtool` is on the PATH (Debian's
/// `prometheus` package; scripts/test-prometheus installs it) it reads the same text and must
/// find nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_text_announces_every_family_by_its_sample_names() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 1).await;
    let replies = o.stampede(&c, &customers(3)).await;
    assert_eq!(count_replies(&replies, 201, "claimed"), 1, "{replies:?}");
    let text = text_of(&o.http, &o.url).await;
    assert!(
        text.contains("# TYPE flashgate_claims_total counter\n"),
        "{text}"
    );
    assert!(text.contains("# TYPE flashgate_gift_grants_total counter\n"));
    let problems = format_problems(&text);
    assert!(problems.is_empty(), "{problems:#?}\n{text}");
    if let Some(findings) = promtool_findings(&text) {
        assert_eq!(findings, "", "promtool check metrics:\n{findings}");
    }
    o.stop().await;
}

/// What `promtool check metrics` prints for `text` (stdout and stderr); `None` without promtool.
fn promtool_findings(text: &str) -> Option<String> {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Some(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}
