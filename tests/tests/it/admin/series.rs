//! `GET /admin/v1/campaigns/{id}/series` (docs/ADMIN.md "Per-second series") against a real
//! origin, PostgreSQL and Redis: after truly concurrent claims past the stock, released holds
//! and a restock, the series counts every claim and sold-out answer, and its remaining is the
//! campaign's own at every second (0 before the create, then each second's changes). Bad
//! queries are 422 with the documented body; no token 401; an unknown campaign 404.
//!
//! The edge's answers in it (`POST /edge/v1/campaigns/{id}/answers`, docs/EDGE.md "Answer
//! reports"): a report signed as the edge signs it counts once, however often it is sent; an
//! unsigned, badly signed, stale or malformed one is refused and changes nothing; and through
//! the built worker in workerd, the sold-out answers the edge gave a crowd are the series'
//! edge sold-out answers, exactly.

use std::time::Duration;

use flashgate_shared::answers::{answers_path, CLAIM_RESULTS};
use flashgate_shared::api::admin::CampaignSeries;
use flashgate_shared::api::{ChangeRequest, ReleaseRequest};
use flashgate_tests::support::scrape::Scrape;
use flashgate_tests::support::{
    claims_at_once, count_replies, customers, edge_claim, eventually, post_edge_report as report,
    sale_behind_edge, unique, EdgeSettings, TestOrigin, TEST_EDGE_SECRET,
};
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_series_counts_claims_sold_out_answers_and_remaining_per_second() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 10).await;
    let crowd = customers(25);
    let replies = o.stampede(&c, &crowd).await;
    assert_eq!(count_replies(&replies, 201, "claimed"), 10, "{replies:?}");
    assert_eq!(count_replies(&replies, 409, "sold_out"), 15, "{replies:?}");
    // The series has one bucket a second: the releases and the restock go into a later second
    // than the create, so the create's second below holds only the create and its claims (on
    // a fast machine all of it fits in one second otherwise).
    let into_second = chrono::Utc::now().timestamp_subsec_millis();
    tokio::time::sleep(Duration::from_millis(u64::from(
        1_050 - into_second.min(1_000),
    )))
    .await;
    // Two holds back, then a restock of 3: 5 remaining.
    let service = o.config.service_token.expose().to_string();
    let held: Vec<&str> = replies
        .iter()
        .filter(|(s, _)| *s == 201)
        .map(|(_, b)| b["claim"]["id"].as_str().expect("claim id"))
        .take(2)
        .collect();
    for id in held {
        let reason = ReleaseRequest {
            reason: Some("customer_cancelled".into()),
        };
        let (s, b) = o.claim_action(id, "release", &service, &reason).await;
        assert_eq!(s, 200, "{b}");
    }
    let (s, b) = o.change(&c, ChangeRequest::restock(3)).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(o.remaining(&c).await, 5);

    let path = format!("/admin/v1/campaigns/{c}/series?seconds=120");
    let (s, body) = o
        .admin(Method::GET, &path, Some(o.viewer_token()), None)
        .await;
    assert_eq!(s, 200, "{body}");
    let series: CampaignSeries = serde_json::from_value(body.clone()).expect("series body");
    assert_eq!(series.campaign, c);
    assert_eq!(series.seconds, 120);
    for values in [&series.claims, &series.sold_out, &series.remaining] {
        assert_eq!(values.len(), 120, "{body}");
    }
    assert_eq!(series.claims.iter().sum::<i64>(), 10, "{body}");
    assert_eq!(series.sold_out.iter().sum::<i64>(), 15, "{body}");
    assert_eq!(*series.remaining.last().unwrap(), 5, "{body}");
    // The create's second is the first with anything: 0 remaining before it, 10 less its own
    // claims at its end; afterwards no second ends above the stock plus the restock.
    let first = (0..120)
        .find(|&i| series.remaining[i] + series.claims[i] > 0)
        .expect("the create is in the last two minutes");
    assert!(series.remaining[..first].iter().all(|&r| r == 0), "{body}");
    assert!(series.remaining[first..].iter().all(|&r| r <= 13), "{body}");
    assert_eq!(series.remaining[first] + series.claims[first], 10, "{body}");
    assert!(series.from <= chrono::Utc::now());
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_series_queries_are_refused() {
    let o = TestOrigin::start().await;
    let c = o.campaign("giveaway", 3).await;
    let viewer = Some(o.viewer_token());
    for q in [
        "seconds=0",
        "seconds=3601",
        "from=yesterday",
        "seconds=5&from=2026-01-01T00:00:00Z",
        "seconds=abc",
        "seconds=-5",
        "minutes=3",
    ] {
        let (s, b) = o
            .admin(
                Method::GET,
                &format!("/admin/v1/campaigns/{c}/series?{q}"),
                viewer,
                None,
            )
            .await;
        assert_eq!(
            (s, b["result"].as_str()),
            (422, Some("validation_failed")),
            "{q}: {b}"
        );
        assert!(b["message"].as_str().unwrap().contains("1 to 3600"), "{b}");
    }
    let (s, b) = o
        .admin(
            Method::GET,
            &format!("/admin/v1/campaigns/{c}/series"),
            None,
            None,
        )
        .await;
    assert_eq!(s, 401, "{b}");
    let (s, b) = o
        .admin(
            Method::GET,
            "/admin/v1/campaigns/no-such-one/series",
            viewer,
            None,
        )
        .await;
    assert_eq!((s, b["result"].as_str()), (404, Some("not_found")), "{b}");
    // The default is five minutes.
    let (s, b) = o
        .admin(
            Method::GET,
            &format!("/admin/v1/campaigns/{c}/series"),
            viewer,
            None,
        )
        .await;
    assert_eq!((s, b["seconds"].as_i64()), (200, Some(300)), "{b}");
    assert_eq!(b["remaining"].as_array().unwrap().last().unwrap(), 3, "{b}");
    o.stop().await;
}

/// The series of campaign `c` over the last `query` (`seconds=N` or `from=…`).
async fn series(o: &TestOrigin, c: &str, query: &str) -> CampaignSeries {
    let path = format!("/admin/v1/campaigns/{c}/series?{query}");
    let (s, body) = o
        .admin(Method::GET, &path, Some(o.viewer_token()), None)
        .await;
    assert_eq!(s, 200, "{body}");
    serde_json::from_value(body).expect("series body")
}

/// The edge's answers with `result` in series `s`, all seconds summed (0 when none).
fn edge_total(s: &CampaignSeries, result: &str) -> i64 {
    s.edge.get(result).map_or(0, |v| v.iter().sum())
}

/// A report the origin refuses: what it is, its body, the secret it is signed with (none:
/// unsigned) and when, and the status and result of the answer.
type Refusal<'a> = (&'a str, Vec<u8>, Option<&'a [u8]>, i64, u16, &'a str);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_report_counts_once_and_a_bad_one_changes_nothing() {
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", 3).await;
    let k = TEST_EDGE_SECRET.as_bytes();
    let now = chrono::Utc::now().timestamp();
    let good = json!({"report_id": unique("iso-a"), "counts": [
        {"second": now, "result": "sold_out", "count": 5},
        {"second": now - 1, "result": "sold_out", "count": 2},
        {"second": now, "result": "challenge_forged", "count": 3},
    ]});
    let bytes = serde_json::to_vec(&good).unwrap();
    let (s, b) = report(&o, &answers_path(&c), &bytes, Some(k), now).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b, json!({"counted": 10, "duplicate": false}));
    // Sent again (a retry after a lost answer): counted before, nothing changes.
    let (s, b) = report(&o, &answers_path(&c), &bytes, Some(k), now).await;
    assert_eq!((s, b), (200, json!({"counted": 0, "duplicate": true})));

    let refused: Vec<Refusal<'_>> = vec![
        ("unsigned", bytes.clone(), None, now, 403, "forbidden"),
        (
            "another secret",
            bytes.clone(),
            Some(b"not-the-edge-secret-0123456789ab"),
            now,
            403,
            "forbidden",
        ),
        (
            "stale (replayed 2 minutes later)",
            bytes.clone(),
            Some(k),
            now - 120,
            403,
            "forbidden",
        ),
        (
            "not JSON",
            b"{\"report_id\":".to_vec(),
            Some(k),
            now,
            400,
            "invalid_json",
        ),
        (
            "another shape",
            br#"{"report_id":"r-1","counts":[],"extra":1}"#.to_vec(),
            Some(k),
            now,
            422,
            "validation_failed",
        ),
    ];
    let bad_rows = [
        json!([{"second": now, "result": "Sold Out", "count": 1}]),
        json!([{"second": now, "result": "sold_out", "count": 0}]),
        json!([{"second": now + 3_600, "result": "sold_out", "count": 1}]),
        json!([{"second": now, "result": "queued", "count": 1}, {"second": now, "result": "queued", "count": 1}]),
        json!([]),
    ];
    let mut cases = refused;
    for rows in &bad_rows {
        let body =
            serde_json::to_vec(&json!({"report_id": unique("iso-bad"), "counts": rows})).unwrap();
        cases.push(("a broken rule", body, Some(k), now, 400, "invalid_request"));
    }
    for (what, body, secret, t, status, result) in cases {
        let (s, b) = report(&o, &answers_path(&c), &body, secret, t).await;
        assert_eq!(
            (s, b["result"].as_str()),
            (status, Some(result)),
            "{what}: {b}"
        );
        assert!(
            b["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}: {b}"
        );
    }
    let (s, b) = report(&o, &answers_path("no-such-campaign"), &bytes, Some(k), now).await;
    assert_eq!((s, b["result"].as_str()), (404, Some("not_found")), "{b}");

    // Counted once, per second and result; nothing of the refused reports.
    let sr = series(&o, &c, "seconds=60").await;
    assert_eq!(edge_total(&sr, "sold_out"), 7, "{sr:?}");
    assert_eq!(edge_total(&sr, "challenge_forged"), 3, "{sr:?}");
    assert_eq!(sr.edge.len(), 2, "{sr:?}");
    let last = sr.edge["sold_out"].len() - 1;
    assert_eq!(sr.edge["sold_out"].len(), 60);
    // The report's seconds, by the edge's clock: `now` is the last second or the one before.
    let at = sr.from.timestamp();
    let i = usize::try_from(now - at).unwrap();
    assert!(i == last || i + 1 == last, "{sr:?}");
    assert_eq!((sr.edge["sold_out"][i], sr.edge["sold_out"][i - 1]), (5, 2));
    // `from=`: the series runs from that second to now.
    let from = chrono::DateTime::from_timestamp(now - 30, 0).unwrap();
    let since = series(
        &o,
        &c,
        &format!("from={}", from.format("%Y-%m-%dT%H:%M:%SZ")),
    )
    .await;
    assert!((31..=33).contains(&since.seconds), "{since:?}");
    assert_eq!(edge_total(&since, "sold_out"), 7, "{since:?}");
    let hour = series(&o, &c, "from=2001-01-01T00:00:00Z").await;
    assert_eq!(hour.seconds, 3_600, "an hour at most");
    // The same counts as a Prometheus counter, once each (the duplicate and the refusals add
    // nothing).
    let scrape = Scrape::of(&o.http, &o.url).await;
    let reported = "flashgate_edge_reported_answers_total";
    assert_eq!(scrape.count(reported, &[("result", "sold_out")]), 7);
    assert_eq!(scrape.count(reported, &[("result", "challenge_forged")]), 3);
    assert_eq!(scrape.count(reported, &[]), 10);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_edges_sold_out_answers_are_the_series_edge_sold_out_answers() {
    let (o, c, e) = sale_behind_edge(5, EdgeSettings::default()).await;
    // A crowd past the stock: the first claims go to the origin, the rest are answered sold
    // out by the origin until the edge learns it, then by the edge (some rate limited).
    let mut replies = claims_at_once(&o, &e.url, &c, &unique("crowd"), 60).await;
    // Probes until the edge has the sold-out status (one status TTL); their answers count too.
    for n in 0.. {
        let r = edge_claim(&o, &e.url, &c, &unique("probe"), "k").await;
        let done = r.by == "edge" && r.json()["result"] == "sold_out";
        replies.push(r);
        if done {
            break;
        }
        assert!(
            n < 75,
            "the edge never answered sold out: {:?}",
            replies.last()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The next crowd is answered at the edge: sold out, or rate limited per address.
    replies.extend(claims_at_once(&o, &e.url, &c, &unique("late"), 200).await);
    // The kinds the edge reports (docs/EDGE.md, "Answer reports"); not, e.g., a 503 it gave
    // when the origin was slow to answer a forwarded claim.
    let mut at_edge = std::collections::BTreeMap::<String, i64>::new();
    for r in replies.iter().filter(|r| r.by == "edge") {
        let result = r.json()["result"].as_str().unwrap_or_default().to_string();
        if CLAIM_RESULTS.contains(&result.as_str()) {
            *at_edge.entry(result).or_default() += 1;
        }
    }
    let claimed = replies.iter().filter(|r| r.status == 201).count();
    assert_eq!(claimed, 5);
    assert!(
        at_edge.get("sold_out").is_some_and(|&n| n >= 100),
        "{at_edge:?}"
    );
    // Every kind the edge answered is on the series, once a report of each second came.
    let reported = |sr: &CampaignSeries| -> std::collections::BTreeMap<String, i64> {
        at_edge
            .keys()
            .map(|k| (k.clone(), edge_total(sr, k)))
            .collect()
    };
    let sr = eventually("the edge's reports", Duration::from_secs(20), || {
        let (o, c, at_edge, reported) = (&o, c.clone(), &at_edge, &reported);
        async move {
            let sr = series(o, &c, "seconds=300").await;
            let seen = reported(&sr);
            let all = at_edge.iter().all(|(k, n)| seen[k] >= *n);
            all.then_some(sr)
                .ok_or(format!("{seen:?} of {at_edge:?} reported"))
        }
    })
    .await;
    println!(
        "answers at the edge: {at_edge:?}; on the series: {:?}",
        reported(&sr)
    );
    assert_eq!(reported(&sr), at_edge, "each counted once: {sr:?}");
    assert_eq!(sr.edge.len(), at_edge.len(), "no other kind: {sr:?}");
    assert_eq!(sr.claims.iter().sum::<i64>(), 5);
    drop(e);
    o.stop().await;
}
