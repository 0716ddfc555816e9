//! Frequency caps on the movable campaign clock (`gift_test_clock`): the one-per-day boundary,
//! segment 2 of the demo (one per 3 days and two per 7 days) over a 14-day walk against a
//! hand-computed table, a cap changed mid-flight, the eligibility preview, and the windows
//! over a daylight-saving change in a session whose `TimeZone` is not UTC.

use chrono::Duration;
use flashgate_tests::gifts::{
    self, campaign, eligibility, fulfil, key, members, msisdn, row_counts, set_caps, set_clock, t0,
};
use serde_json::json;

#[tokio::test]
async fn one_per_day_is_denied_at_23h59m_and_allowed_at_24h() {
    let (o, c, m) = gifts::one_member_one_a_day().await;
    assert_eq!(fulfil(&o, &c, &key(), &m).await.status, 201);
    set_clock(&o, &c, t0() + Duration::hours(23) + Duration::minutes(59)).await;
    let r = fulfil(&o, &c, &key(), &m).await;
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json(),
        json!({"result": "cap_reached", "next_eligible_at": "2026-06-12T12:00:00Z"})
    );
    set_clock(&o, &c, t0() + Duration::hours(24)).await;
    let r = fulfil(&o, &c, &key(), &m).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["fulfilment"]["created_at"], "2026-06-12T12:00:00Z");
    o.stop().await;
}

#[tokio::test]
async fn a_refused_key_replays_its_refusal_after_the_subscriber_becomes_eligible() {
    // One key, one outcome: the retry of a refused request gets the refusal again, byte for
    // byte, even once the window has passed; a new key gets a new decision.
    let (o, c, m) = gifts::one_member_one_a_day().await;
    assert_eq!(fulfil(&o, &c, &key(), &m).await.status, 201);
    set_clock(&o, &c, t0() + Duration::hours(1)).await;
    let refused_key = key();
    let first = fulfil(&o, &c, &refused_key, &m).await;
    assert_eq!(first.status, 409);
    assert_eq!(first.json()["result"], "cap_reached");
    set_clock(&o, &c, t0() + Duration::hours(25)).await;
    let again = fulfil(&o, &c, &refused_key, &m).await;
    assert_eq!((again.status, &again.body), (first.status, &first.body));
    let counts = row_counts(&o, &c).await;
    assert_eq!(
        (counts[0], counts[1]),
        (1, 2),
        "one grant; a grant and a refusal recorded"
    );
    let fresh = fulfil(&o, &c, &key(), &m).await;
    assert_eq!(
        fresh.status,
        201,
        "{}",
        String::from_utf8_lossy(&fresh.body)
    );
    o.stop().await;
}

/// Segment 2: at most one per 3 days and at most two per 7 days, a request every day at the
/// same hour. Worked by hand (windows are `(now − N days, now]`):
///
/// | day | 3-day window holds | 7-day window holds | answer |
/// |---|---|---|---|
/// | 0 | – | – | granted |
/// | 1, 2 | 0 | 0 | cap, free at day 3 (0 + 3) |
/// | 3 | – | 0 | granted |
/// | 4, 5 | 3 | 0, 3 | cap at day 7 (3-day frees at 6, 7-day at 0 + 7) |
/// | 6 | – | 0, 3 | cap at day 7 |
/// | 7 | – | 3 | granted |
/// | 8, 9 | 7 | 3, 7 | cap at day 10 (both) |
/// | 10 | – | 7 | granted |
/// | 11, 12 | 10 | 7, 10 | cap at day 14 (3-day frees at 13, 7-day at 7 + 7) |
/// | 13 | – | 7, 10 | cap at day 14 |
const WALK: [Option<i64>; 14] = [
    None,
    Some(3),
    Some(3),
    None,
    Some(7),
    Some(7),
    Some(7),
    None,
    Some(10),
    Some(10),
    None,
    Some(14),
    Some(14),
    Some(14),
];

#[tokio::test]
async fn segment_two_over_fourteen_days_matches_the_hand_computed_table() {
    let o = gifts::gift_origin().await;
    let c = campaign(&o, &[("segment-2", 5_000, &[(1, 3), (2, 7)])]).await;
    let m = msisdn();
    members(&o, &c, "segment-2", std::slice::from_ref(&m)).await;
    let mut seen = Vec::new();
    for day in 0..14 {
        set_clock(&o, &c, t0() + Duration::days(day)).await;
        let (s, cc, preview) = eligibility(&o, &c, &m).await;
        assert_eq!((s, cc.as_str()), (200, "private, no-store"));
        let r = fulfil(&o, &c, &key(), &m).await;
        let b = r.json();
        let got = match r.status {
            201 => None,
            409 => {
                assert_eq!(b["result"], "cap_reached");
                let at: chrono::DateTime<chrono::Utc> =
                    b["next_eligible_at"].as_str().unwrap().parse().unwrap();
                Some((at - t0()).num_days())
            }
            other => panic!("day {day}: {other} {b}"),
        };
        // The preview said the same, before.
        assert_eq!(preview["eligible"], got.is_none(), "day {day}: {preview}");
        seen.push(got);
    }
    assert_eq!(seen, WALK);
    assert_eq!(row_counts(&o, &c).await[0], 4);
    o.stop().await;
}

#[tokio::test]
async fn a_cap_changed_mid_flight_applies_to_the_next_request() {
    let (o, c, m) = gifts::one_member_one_a_day().await;
    assert_eq!(fulfil(&o, &c, &key(), &m).await.status, 201);
    assert_eq!(fulfil(&o, &c, &key(), &m).await.status, 409);
    // Two per day now: the next request is granted, the one after refused.
    let (s, b) = set_caps(&o, &c, "s1", json!([{"max": 2, "per_days": 1}])).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["caps"], json!([{"max": 2, "per_days": 1}]));
    assert_eq!(fulfil(&o, &c, &key(), &m).await.status, 201);
    assert_eq!(fulfil(&o, &c, &key(), &m).await.status, 409);
    // One per 30 days: refused until the most recent grant is 30 days old.
    let (s, _) = set_caps(&o, &c, "s1", json!([{"max": 1, "per_days": 30}])).await;
    assert_eq!(s, 200);
    set_clock(&o, &c, t0() + Duration::days(2)).await;
    let r = fulfil(&o, &c, &key(), &m).await;
    assert_eq!(r.json()["next_eligible_at"], "2026-07-11T12:00:00Z");
    // The audit trail has both changes with before and after.
    let audited: Vec<serde_json::Value> = sqlx::query_scalar(
        "SELECT params FROM gift_audit WHERE campaign_id = $1 AND action = 'set_caps' ORDER BY seq",
    )
    .bind(&c)
    .fetch_all(&o.db)
    .await
    .unwrap();
    assert_eq!(audited.len(), 2);
    assert_eq!(audited[0]["before"], json!([{"max": 1, "per_days": 1}]));
    assert_eq!(audited[1]["after"], json!([{"max": 1, "per_days": 30}]));
    o.stop().await;
}

#[tokio::test]
async fn the_preview_changes_nothing_and_names_each_reason() {
    let o = gifts::gift_origin().await;
    let c = campaign(&o, &[("s1", 2_000, &[(1, 1)])]).await;
    let (m, outsider) = (msisdn(), msisdn());
    members(&o, &c, "s1", std::slice::from_ref(&m)).await;
    let before = row_counts(&o, &c).await;
    let (s, cc, b) = eligibility(&o, &c, &m).await;
    assert_eq!((s, cc.as_str()), (200, "private, no-store"));
    assert_eq!(
        b,
        json!({"eligible": true, "gift": {"amount": 2000, "currency": "EGP", "kind": "mobile_credit"}})
    );
    let (_, _, b) = eligibility(&o, &c, &outsider).await;
    assert_eq!(b, json!({"eligible": false, "reason": "not_in_segment"}));
    assert_eq!(
        row_counts(&o, &c).await,
        before,
        "the preview wrote nothing"
    );
    assert_eq!(fulfil(&o, &c, &key(), &m).await.status, 201);
    let (_, _, b) = eligibility(&o, &c, &m).await;
    assert_eq!(
        b,
        json!({"eligible": false, "reason": "cap_reached", "next_eligible_at": "2026-06-12T12:00:00Z"})
    );
    let r = fulfil(&o, &c, &key(), &outsider).await;
    assert_eq!(
        (r.status, r.json()),
        (409, json!({"result": "not_in_segment"}))
    );
    // After the end of the campaign.
    set_clock(&o, &c, "2028-01-01T00:00:00Z".parse().unwrap()).await;
    let (_, _, b) = eligibility(&o, &c, &m).await;
    assert_eq!(
        b,
        json!({"eligible": false, "reason": "campaign_not_active"})
    );
    let r = fulfil(&o, &c, &key(), &m).await;
    assert_eq!(
        (r.status, r.json()),
        (409, json!({"result": "campaign_not_active"}))
    );
    o.stop().await;
}

/// The cap decision (`flashgate_origin::gifts::verdict::decide`, the one statement of the
/// preview and the fulfilment) on connections whose session `TimeZone` is `America/New_York`
/// (set after connecting: sqlx sends `TimeZone=UTC` at start-up, over any `options`), over the
/// spring-forward night of 2026-03-08 (02:00 EST becomes 03:00 EDT). One per day means one per
/// 24 hours: a grant at 12:00 UTC on the 7th is refused at + 23 h 30 m, with
/// `next_eligible_at` 12:00 UTC on the 8th, and granted at + 24 h, as in a UTC session. Stepping
/// calendar days in New York would free her an hour early (a 23-hour day).
#[tokio::test]
async fn cap_windows_do_not_depend_on_the_session_time_zone_across_dst() {
    use flashgate_origin::gifts::verdict::{decide, Verdict};
    use sqlx::{postgres::PgPoolOptions, Executor};
    let (o, c, m) = gifts::one_member_one_a_day().await;
    let granted_at: chrono::DateTime<chrono::Utc> = "2026-03-07T12:00:00Z".parse().unwrap();
    set_clock(&o, &c, granted_at).await;
    assert_eq!(fulfil(&o, &c, &key(), &m).await.status, 201);
    let new_york = PgPoolOptions::new()
        .max_connections(1)
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute("SET TimeZone = 'America/New_York'").await?;
                Ok(())
            })
        })
        .connect(&flashgate_tests::support::direct_database_url())
        .await
        .expect("connect");
    let zone: String = sqlx::query_scalar("SHOW TimeZone")
        .fetch_one(&new_york)
        .await
        .unwrap();
    assert_eq!(zone, "America/New_York");
    let next = granted_at + Duration::hours(24);
    for (at, want) in [
        (
            granted_at + Duration::hours(23) + Duration::minutes(30),
            Verdict::CapReached {
                next_eligible_at: next,
            },
        ),
        (
            granted_at + Duration::hours(23) + Duration::minutes(59),
            Verdict::CapReached {
                next_eligible_at: next,
            },
        ),
    ] {
        set_clock(&o, &c, at).await;
        for pool in [&o.db, &new_york] {
            let d = decide(pool, &c, &m, true).await.expect("decide");
            assert_eq!((d.now, &d.verdict), (at, &want), "at {at}");
        }
    }
    set_clock(&o, &c, next).await;
    for pool in [&o.db, &new_york] {
        let d = decide(pool, &c, &m, true).await.expect("decide");
        assert!(
            matches!(d.verdict, Verdict::Eligible { .. }),
            "{:?}",
            d.verdict
        );
    }
    new_york.close().await;
    o.stop().await;
}
