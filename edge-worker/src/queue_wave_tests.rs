//! Host tests of the waiting-room poll after presence and in the second wave (`super` is
//! [`crate::queue`]).

use super::tests::{now, ticket};
use super::*;
use crate::status::from_origin;
use crate::status::tests::{status, t};
use flashgate_shared::api::CampaignState;

const K: &[u8] = b"edge-secret";

fn entry(state: CampaignState, remaining: i64, queue: serde_json::Value) -> StatusEntry {
    let mut v = serde_json::to_value(status(state)).unwrap();
    v["remaining"] = remaining.into();
    v["queue"] = queue;
    from_origin("spring", 200, v.to_string().as_bytes(), 0).unwrap()
}

#[test]
fn a_skipped_ticket_waits_next_in_line_and_a_returned_one_is_admitted_from_its_return() {
    let e = entry(
        CampaignState::Active,
        5,
        serde_json::json!({"now_serving": 100, "admit_per_second": 10,
            "admission_ttl_seconds": 60, "skipped": [40, 95],
            "returned": [{"n": 30, "at_ms": now() - 1_000}],
            "grants": [{"n": 100, "at_ms": now() - 100_000}]}),
    );
    let skipped = poll(&e, &ticket(95), K, now(), &[]).unwrap();
    assert_eq!(
        (
            skipped.reply.state,
            skipped.reply.position,
            skipped.reply.admitted
        ),
        (QueueState::Waiting, 1, false)
    );
    assert_eq!(skipped.reply.admission_token, None);
    // Admitted again after she came back: her expiry counts from that admission.
    let back = poll(&e, &ticket(30), K, now(), &[]).unwrap();
    assert_eq!(back.reply.state, QueueState::Admitted);
    let token = back.reply.admission_token.unwrap();
    let a = admission::check_admission(K, &token, "spring", "ana", now() / 1000).unwrap();
    assert_eq!(a.expires_at_s, (now() - 1_000) / 1000 + 60);
    // Neither: admitted at the grant timeline's time (long lapsed here).
    let other = poll(&e, &ticket(50), K, now(), &[]).unwrap();
    assert_eq!(other.reply.state, QueueState::Lapsed);
}

#[test]
fn sold_out_may_return_while_holds_are_outstanding_then_final() {
    let held = entry(
        CampaignState::SoldOut,
        0,
        serde_json::json!({"now_serving": 100, "admit_per_second": 10,
            "admission_ttl_seconds": 60, "held_until": "2026-03-01T11:00:02Z"}),
    );
    let p = poll(&held, &ticket(150), K, now(), &[]).unwrap();
    assert_eq!(
        (p.reply.state, p.reply.outlook),
        (QueueState::SoldOut, Some(Outlook::MayReturn))
    );
    assert_eq!(p.reply.held_until, Some(t("2026-03-01T11:00:02Z")));
    assert_eq!(p.retry_after_s, SECOND_WAVE_RETRY_AFTER_S);
    let json = serde_json::to_string(&p.reply).unwrap();
    assert!(json.contains(r#""outlook":"may_return","held_until":"2026-03-01T11:00:02Z""#));
    let done = entry(
        CampaignState::SoldOut,
        0,
        serde_json::json!({"now_serving": 100, "admit_per_second": 10,
            "admission_ttl_seconds": 60}),
    );
    let p = poll(&done, &ticket(150), K, now(), &[]).unwrap();
    assert_eq!(
        (p.reply.outlook, p.reply.held_until, p.retry_after_s),
        (Some(Outlook::Final), None, MAX_RETRY_AFTER_S)
    );
}

#[test]
fn an_edge_clock_off_by_seconds_never_lengthens_an_admission_past_its_grant() {
    // The origin granted sequence 100 at `granted` on its clock; the edge polls half a second
    // later on a clock up to 4 s off either way (the chaos clock-skew fault: edge and origin 2
    // two seconds off in opposite directions).
    let granted = now() - 10_000;
    let e = entry(
        CampaignState::Active,
        5,
        serde_json::json!({"now_serving": 100, "admit_per_second": 10,
            "admission_ttl_seconds": 60, "grants": [{"n": 100, "at_ms": granted}]}),
    );
    let origin_expiry_s = granted / 1000 + 60;
    for offset_ms in [-4_000, -2_000, 0, 2_000, 4_000] {
        let edge_now = granted + 500 + offset_ms;
        let p = poll(&e, &ticket(100), K, edge_now, &[]).unwrap();
        assert_eq!(p.reply.state, QueueState::Admitted, "{offset_ms}");
        let token = p.reply.admission_token.unwrap();
        let a = admission::check_admission(K, &token, "spring", "ana", edge_now / 1000).unwrap();
        // Never later than the origin's grant + TTL; earlier by at most the edge's lag.
        let lag_s = ((-offset_ms).max(0) + 999) / 1000;
        assert!(
            (origin_expiry_s - lag_s..=origin_expiry_s).contains(&a.expires_at_s),
            "{offset_ms}: {} vs {origin_expiry_s}",
            a.expires_at_s
        );
    }
    // Polls lapse it at the grant's expiry on the edge's clock: an edge ahead lapses it early
    // by its lead, never late.
    let before = poll(&e, &ticket(100), K, origin_expiry_s * 1000 - 1, &[]).unwrap();
    assert_eq!(before.reply.state, QueueState::Admitted);
    let at_expiry = poll(&e, &ticket(100), K, origin_expiry_s * 1000, &[]).unwrap();
    assert_eq!(at_expiry.reply.state, QueueState::Lapsed);
}
