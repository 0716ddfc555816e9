//! `GET /admin/v1/campaigns/{id}/series` (docs/ADMIN.md "Per-second series") against a real
//! origin, PostgreSQL and Redis: after truly concurrent claims past the stock, released holds
//! and a restock, the series counts every claim and sold-out answer, and its remaining is the
//! campaign's own at every second (0 before the create, then each second's changes). Bad
//! queries are 422 with the documented body; no token 401; an unknown campaign 404.

use flashgate_shared::api::admin::CampaignSeries;
use flashgate_shared::api::{ChangeRequest, ReleaseRequest};
use flashgate_tests::support::{count_replies, customers, TestOrigin};
use reqwest::Method;

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
    tokio::time::sleep(std::time::Duration::from_millis(u64::from(
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
        "seconds=601",
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
        assert!(b["message"].as_str().unwrap().contains("1 to 600"), "{b}");
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
