//! Host unit tests of [`crate::status`].

use super::*;
use chrono::{DateTime, Utc};
use flashgate_shared::api::CampaignKind;

pub(crate) fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

pub(crate) fn status(state: CampaignState) -> CampaignStatus {
    CampaignStatus {
        id: "spring".into(),
        name: "Spring".into(),
        kind: CampaignKind::Sale,
        state,
        stock: 10,
        remaining: 3,
        starts_at: t("2026-03-01T10:00:00Z"),
        ends_at: t("2026-03-01T12:00:00Z"),
    }
}

pub(crate) fn entry(state: CampaignState, at: i64) -> StatusEntry {
    let s = status(state);
    StatusEntry {
        known: Known::Found {
            body: serde_json::to_string(&s).unwrap(),
            status: s,
            queue: None,
            variants: Vec::new(),
        },
        fetched_at_ms: at,
        reveal: None,
    }
}

#[test]
fn freshness_and_stale_bounds() {
    let e = entry(CampaignState::Active, 10_000);
    assert_eq!(e.freshness(10_999, 1_000), Freshness::Fresh);
    assert_eq!(e.freshness(11_000, 1_000), Freshness::Refresh);
    // A clock that went backwards is age 0, not negative.
    assert_eq!(e.age_ms(9_000), 0);
    assert!(e.servable_stale(40_000, 30_000));
    assert!(!e.servable_stale(40_001, 30_000));
    assert_eq!(freshness(None, 0, 1_000), Freshness::Refresh);
}

#[test]
fn refresh_steps() {
    let fresh = entry(CampaignState::Active, 10_000);
    let idle = RefreshState::default();
    let step = |e: Option<&StatusEntry>, r: &RefreshState, now| next_step(e, r, now, 1_000, 6_000);
    assert_eq!(step(Some(&fresh), &idle, 10_500), Step::Serve);
    assert_eq!(step(Some(&fresh), &idle, 11_000), Step::Lead);
    assert_eq!(step(None, &idle, 0), Step::Lead);
    let busy = RefreshState {
        refreshing_since: Some(11_000),
        ..idle
    };
    assert_eq!(step(Some(&fresh), &busy, 11_100), Step::Wait);
    // A leader gone for the whole timeout is replaced.
    assert_eq!(step(Some(&fresh), &busy, 17_000), Step::Lead);
    let failed = RefreshState {
        failed_at: Some(11_000),
        ..idle
    };
    assert_eq!(step(Some(&fresh), &failed, 11_999), Step::BackOff);
    assert_eq!(step(Some(&fresh), &failed, 12_000), Step::Lead);
    assert_eq!(step(None, &failed, 11_500), Step::BackOff);
}

#[test]
fn waiters_back_off() {
    let polls: Vec<u64> = (0..7).map(wait_poll_ms).collect();
    assert_eq!(polls, [2, 4, 8, 16, 25, 25, 25]);
    assert_eq!(wait_poll_ms(u32::MAX), 25);
}

#[test]
fn parses_origin_answers() {
    let body = serde_json::to_vec(&status(CampaignState::Active)).unwrap();
    let e = from_origin("spring", 200, &body, 5).unwrap();
    assert_eq!(e.state(), Some(CampaignState::Active));
    assert_eq!(e.body().as_bytes(), &body[..]);
    assert_eq!((e.http_status(), e.fetched_at_ms), (200, 5));
    // The body of another campaign, or junk, is refused.
    assert_eq!(
        from_origin("other", 200, &body, 5),
        Err(OriginStatusError::BadBody)
    );
    assert_eq!(
        from_origin("spring", 200, b"<html>", 5),
        Err(OriginStatusError::BadBody)
    );
    let nf = from_origin("spring", 404, br#"{"result":"not_found"}"#, 5).unwrap();
    assert_eq!((nf.http_status(), nf.state()), (404, None));
    assert_eq!(
        from_origin("spring", 503, b"", 5),
        Err(OriginStatusError::Status(503))
    );
}

#[test]
fn cache_copies_never_extend_freshness() {
    let body = serde_json::to_vec(&status(CampaignState::SoldOut)).unwrap();
    let e = from_cache("spring", Some("200"), Some("1000"), &body, 1_999, 1_000).unwrap();
    assert_eq!(
        (e.state(), e.fetched_at_ms),
        (Some(CampaignState::SoldOut), 1_000)
    );
    assert_eq!(
        from_cache("spring", Some("200"), Some("1000"), &body, 2_000, 1_000),
        None
    );
    assert_eq!(
        from_cache("spring", None, Some("1000"), &body, 1_001, 1_000),
        None
    );
    assert_eq!(
        from_cache("spring", Some("200"), Some("x"), &body, 1_001, 1_000),
        None
    );
    assert_eq!(
        from_cache("other", Some("200"), Some("1000"), &body, 1_001, 1_000),
        None
    );
}

#[test]
fn sold_out_answer_flips_the_state() {
    let e = entry(CampaignState::Active, 0);
    let flipped = learn_from_claim(
        Some(&e),
        Decided::Now,
        409,
        br#"{"result":"sold_out"}"#,
        700,
    )
    .unwrap();
    assert_eq!(flipped.state(), Some(CampaignState::SoldOut));
    assert_eq!(flipped.fetched_at_ms, 700);
    let Known::Found { status, body, .. } = &flipped.known else {
        panic!("not found")
    };
    assert_eq!(status.remaining, 0);
    assert_eq!(
        serde_json::from_str::<CampaignStatus>(body).unwrap(),
        *status
    );
    // Nothing to learn from these.
    assert_eq!(
        learn_from_claim(
            Some(&flipped),
            Decided::Now,
            409,
            br#"{"result":"sold_out"}"#,
            800
        ),
        None
    );
    assert_eq!(
        learn_from_claim(Some(&e), Decided::Now, 201, b"{}", 1),
        None
    );
    assert_eq!(
        learn_from_claim(
            Some(&e),
            Decided::Now,
            409,
            br#"{"result":"in_progress"}"#,
            1
        ),
        None
    );
    assert_eq!(
        learn_from_claim(Some(&e), Decided::Now, 409, b"junk", 1),
        None
    );
    assert_eq!(
        learn_from_claim(None, Decided::Now, 409, br#"{"result":"sold_out"}"#, 1),
        None
    );
    let paused =
        learn_from_claim(Some(&e), Decided::Now, 409, br#"{"result":"paused"}"#, 1).unwrap();
    assert_eq!(paused.state(), Some(CampaignState::Paused));
}

#[test]
fn replayed_sold_out_does_not_close_the_edge() {
    let e = entry(CampaignState::Active, 0);
    // The kept reply of an earlier request says how the campaign stood then: every state
    // answer replayed teaches nothing.
    for body in [
        &br#"{"result":"sold_out"}"#[..],
        br#"{"result":"ended"}"#,
        br#"{"result":"paused"}"#,
    ] {
        assert_eq!(
            learn_from_claim(Some(&e), Decided::Earlier, 409, body, 700),
            None
        );
    }
    assert_eq!(Decided::from_header(Some("true")), Decided::Earlier);
    assert_eq!(Decided::from_header(Some(" TRUE ")), Decided::Earlier);
    assert_eq!(Decided::from_header(None), Decided::Now);
    assert_eq!(Decided::from_header(Some("false")), Decided::Now);
    // The same answer decided now still closes it at once.
    let fresh = learn_from_claim(
        Some(&e),
        Decided::Now,
        409,
        br#"{"result":"sold_out"}"#,
        700,
    );
    assert_eq!(fresh.unwrap().state(), Some(CampaignState::SoldOut));
}
