//! Host unit tests of [`crate::queue`].

use super::*;
use crate::status::from_origin;
use crate::status::tests::{status, t};
use flashgate_shared::admission::{sign_ticket, Place};
use flashgate_shared::api::CampaignState;

const K: &[u8] = b"edge-secret";

fn entry(state: CampaignState, remaining: i64, now_serving: u64, paused: bool) -> StatusEntry {
    let mut v = serde_json::to_value(status(state)).unwrap();
    v["remaining"] = remaining.into();
    v["queue"] = serde_json::json!({"now_serving": now_serving, "admit_per_second": 10,
        "admission_ttl_seconds": 120, "paused": paused});
    from_origin("spring", 200, v.to_string().as_bytes(), 0).unwrap()
}

pub(super) fn ticket(seq: u64) -> Ticket {
    Ticket {
        place: Place {
            campaign: "spring".into(),
            customer: "ana".into(),
            sequence: seq,
        },
        issued_at_s: 0,
        drawn_waiting_at_issue: 0,
    }
}

/// 2026-03-01T11:00:00Z: after the start (10:00), before the end (12:00).
pub(super) fn now() -> i64 {
    t("2026-03-01T11:00:00Z").timestamp_millis()
}

#[test]
fn waiting_position_eta_and_outlook() {
    let e = entry(CampaignState::Active, 50, 100, false);
    let p = poll(&e, &ticket(150), K, now(), &[]).unwrap();
    assert_eq!(
        (p.reply.position, p.reply.eta_seconds, p.reply.state),
        (50, 5, QueueState::Waiting)
    );
    assert_eq!((p.reply.admitted, p.reply.admission_token), (false, None));
    assert_eq!(p.reply.outlook, Some(Outlook::Likely));
    assert_eq!(p.retry_after_s, 2);
    // Far beyond the remaining stock (more than 2 x 50 ahead): unlikely.
    let far = poll(&e, &ticket(201), K, now(), &[]).unwrap();
    assert_eq!(far.reply.outlook, Some(Outlook::Unlikely));
    assert_eq!(far.reply.position, 101);
    let very_far = poll(&e, &ticket(100_000), K, now(), &[]).unwrap();
    assert_eq!(very_far.retry_after_s, MAX_RETRY_AFTER_S);
}

#[test]
fn polls_never_renew_an_admission() {
    let mut v = serde_json::to_value(status(CampaignState::Active)).unwrap();
    v["queue"] = serde_json::json!({"now_serving": 100, "admit_per_second": 10,
        "admission_ttl_seconds": 10,
        "grants": [{"n": 90, "at_ms": now() - 5_000}, {"n": 100, "at_ms": now() - 3_000}]});
    let e = from_origin("spring", 200, v.to_string().as_bytes(), 0).unwrap();
    let expiry = now() / 1000 - 3 + 10;
    for later_ms in [0, 2_000, 6_999] {
        let p = poll(&e, &ticket(95), K, now() + later_ms, &[]).unwrap();
        assert_eq!(p.reply.state, QueueState::Admitted, "+{later_ms} ms");
        let token = p.reply.admission_token.unwrap();
        let a = admission::check_admission(K, &token, "spring", "ana", now() / 1000).unwrap();
        assert_eq!(a.expires_at_s, expiry, "+{later_ms} ms");
    }
    // Past the expiry fixed at the grant: lapsed, no token, no refresh.
    let p = poll(&e, &ticket(95), K, now() + 7_000, &[]).unwrap();
    assert_eq!(
        (p.reply.state, p.reply.admitted, p.reply.admission_token),
        (QueueState::Lapsed, false, None)
    );
    assert_eq!((p.reply.position, p.retry_after_s), (0, MAX_RETRY_AFTER_S));
}

#[test]
fn admitted_gets_a_token_for_its_place() {
    let e = entry(CampaignState::Active, 50, 100, false);
    let p = poll(&e, &ticket(100), K, now(), &[]).unwrap();
    assert_eq!(
        (p.reply.state, p.reply.admitted, p.reply.position),
        (QueueState::Admitted, true, 0)
    );
    assert_eq!((p.reply.outlook, p.retry_after_s), (None, 30));
    let token = p.reply.admission_token.unwrap();
    let a = admission::check_admission(K, &token, "spring", "ana", now() / 1000).unwrap();
    assert_eq!(
        (a.place.sequence, a.expires_at_s),
        (100, now() / 1000 + 120)
    );
    assert_eq!(
        check_claim_admission(K, Some(&token), "spring", "ana", now()),
        Ok(Admitted::Now)
    );
    // Expired: within the grace only a retry the origin answers from its record.
    for after_s in [120, 120 + REPLAY_GRACE_S - 1] {
        assert_eq!(
            check_claim_admission(K, Some(&token), "spring", "ana", now() + after_s * 1000),
            Ok(Admitted::ReplayOnly)
        );
    }
    let refused = |tok: Option<&str>, id, who, at| {
        let a = check_claim_admission(K, tok, id, who, at).unwrap_err();
        (a.status, a.body)
    };
    assert_eq!(
        refused(None, "spring", "ana", now()),
        (429, r#"{"result":"queued"}"#.into())
    );
    let forbidden = |m: &str| (403, format!(r#"{{"result":"forbidden","message":"{m}"}}"#));
    assert_eq!(
        refused(Some(&token), "spring", "bob", now()),
        forbidden("admission token belongs to another customer")
    );
    assert_eq!(
        refused(Some(&token), "autumn", "ana", now()),
        forbidden("admission token belongs to another campaign")
    );
    assert_eq!(
        refused(
            Some(&token),
            "spring",
            "ana",
            now() + (120 + REPLAY_GRACE_S) * 1000
        ),
        forbidden("admission token has expired")
    );
    let forged = admission::mint_admission(b"guess", &ticket(100), now() / 1000, 120);
    assert_eq!(
        refused(Some(&forged), "spring", "ana", now()),
        forbidden("admission token signature is invalid")
    );
    assert_eq!(refused(Some("junk"), "spring", "ana", now()).0, 400);
}

#[test]
fn stock_and_campaign_states() {
    let state = |e: &StatusEntry, seq| poll(e, &ticket(seq), K, now(), &[]).unwrap();
    let sold = entry(CampaignState::SoldOut, 0, 100, false);
    let p = state(&sold, 5);
    assert_eq!(
        (p.reply.state, p.reply.admitted),
        (QueueState::SoldOut, false)
    );
    assert_eq!((p.reply.admission_token, p.retry_after_s), (None, 30));
    let active_empty = entry(CampaignState::Active, 0, 100, false);
    assert_eq!(
        state(&active_empty, 101).reply.outlook,
        Some(Outlook::Unlikely)
    );
    let paused = entry(CampaignState::Active, 5, 100, true);
    assert_eq!(state(&paused, 1).reply.state, QueueState::Paused);
    let ended = entry(CampaignState::Ended, 5, 100, false);
    assert_eq!(state(&ended, 1).reply.state, QueueState::Ended);
    // Before the start: waiting, the ETA counts the time to the start.
    let early = entry(CampaignState::Scheduled, 5, 0, false);
    let before = t("2026-03-01T09:59:00Z").timestamp_millis();
    let p = poll(&early, &ticket(20), K, before, &[]).unwrap();
    assert_eq!(
        (p.reply.state, p.reply.eta_seconds),
        (QueueState::Waiting, 62)
    );
}

#[test]
fn admissions_are_revealed_at_the_rate() {
    // 100 admitted (rate 10/s); a new isolate adopting it with TTL 1 s hides the last 10,
    // and reveals them at 10 per second.
    let mut v: serde_json::Value =
        serde_json::from_str(entry(CampaignState::Active, 50, 100, false).body()).unwrap();
    v["queue"]["admitted"] = 100.into();
    let fetched = from_origin("spring", 200, v.to_string().as_bytes(), now()).unwrap();
    let e = crate::status::adopt(None, fetched, now(), 1_000);
    let at = |seq, ms| poll(&e, &ticket(seq), K, now() + ms, &[]).unwrap().reply;
    assert_eq!(
        (at(90, 0).state, at(90, 0).position),
        (QueueState::Admitted, 0)
    );
    let early = at(95, 0);
    assert_eq!((early.state, early.position), (QueueState::Waiting, 5));
    assert_eq!(early.admission_token, None);
    assert_eq!(at(95, 499).state, QueueState::Waiting);
    assert_eq!(at(95, 500).state, QueueState::Admitted);
    assert_eq!(at(100, 1_000).state, QueueState::Admitted);
    // The sold-out learned from a claim keeps the reveal point; sold_out answers everyone.
    let sold = crate::status::learn_from_claim(
        Some(&e),
        crate::status::Decided::Now,
        409,
        br#"{"result":"sold_out"}"#,
        now(),
    )
    .unwrap();
    assert_eq!(sold.reveal, e.reveal);
    assert_eq!(
        poll(&sold, &ticket(95), K, now(), &[]).unwrap().reply.state,
        QueueState::SoldOut
    );
}

#[test]
fn a_drawn_ticket_polled_before_the_status_knows_its_draw() {
    use flashgate_shared::queue::RANDOM_BLOCK;
    // The cached status predates every draw (now_serving 0, drawn 0); her ticket was drawn
    // halfway through the block with 600 drawn customers waiting (her included).
    let e = entry(CampaignState::Scheduled, 5, 0, false);
    let mut drawn = ticket(RANDOM_BLOCK / 2);
    drawn.drawn_waiting_at_issue = 600;
    let before = t("2026-03-01T09:59:00Z").timestamp_millis();
    let p = poll(&e, &drawn, K, before, &[]).unwrap();
    assert_eq!(
        (p.reply.state, p.reply.position, p.reply.eta_seconds),
        (QueueState::Waiting, 300, 60 + 30)
    );
}

#[test]
fn no_waiting_room_and_unknown_campaign() {
    let plain = crate::status::tests::entry(CampaignState::Active, 0);
    assert!(!has_waiting_room(Some(&plain)));
    assert!(has_waiting_room(Some(&entry(
        CampaignState::Active,
        1,
        1,
        false
    ))));
    let a = poll(&plain, &ticket(1), K, now(), &[]).unwrap_err();
    assert_eq!(
        (a.status, a.body.as_str()),
        (
            409,
            r#"{"result":"no_waiting_room","message":"campaign spring has no waiting room"}"#
        )
    );
    let nf = from_origin("spring", 404, br#"{"result":"not_found"}"#, 0).unwrap();
    assert_eq!(
        poll(&nf, &ticket(1), K, now(), &[]).unwrap_err().status,
        404
    );
}

#[test]
fn cached_tickets_give_the_same_answers() {
    let good = sign_ticket(K, &ticket(3));
    let forged = sign_ticket(b"other", &ticket(3));
    let mut cache = TicketCache::new(2);
    for _ in 0..2 {
        for (raw, id) in [
            (Some(good.as_str()), "spring"),
            (Some(good.as_str()), "autumn"),
            (Some(forged.as_str()), "spring"),
            (None, "spring"),
            (Some("x.y"), "spring"),
        ] {
            assert_eq!(cache.check(K, raw, id), check_ticket(K, raw, id));
        }
    }
    let other = sign_ticket(K, &ticket(4));
    assert_eq!(cache.check(K, Some(&other), "spring"), Ok(ticket(4)));
    assert_eq!(cache.check(K, Some(&good), "spring"), Ok(ticket(3)));
    assert!(cache.checked.len() <= 2);
}

#[test]
fn tickets_are_checked() {
    let good = sign_ticket(K, &ticket(3));
    assert_eq!(check_ticket(K, Some(&good), "spring"), Ok(ticket(3)));
    assert_eq!(check_ticket(K, None, "spring").unwrap_err().status, 400);
    assert_eq!(
        check_ticket(K, Some("x.y"), "spring").unwrap_err().status,
        400
    );
    assert_eq!(
        check_ticket(b"other", Some(&good), "spring")
            .unwrap_err()
            .status,
        403
    );
    assert_eq!(
        check_ticket(K, Some(&good), "autumn").unwrap_err().status,
        403
    );
}

#[test]
fn queue_fields_survive_a_learned_state() {
    let e = entry(CampaignState::Active, 5, 7, false);
    let flipped = crate::status::learn_from_claim(
        Some(&e),
        crate::status::Decided::Now,
        409,
        br#"{"result":"sold_out"}"#,
        1,
    )
    .unwrap();
    let again = from_origin("spring", 200, flipped.body().as_bytes(), 1).unwrap();
    assert_eq!(again.found().unwrap().1.map(|q| q.now_serving), Some(7));
    assert_eq!(again.state(), Some(CampaignState::SoldOut));
}

#[test]
fn a_join_counts_the_arrivals_the_origin_has_not_counted_yet() {
    use flashgate_shared::queue::keys::{arrival_key, LineMark};
    let k = |ms| arrival_key(ms, 0);
    // The origin's line: 10 tickets by 1 s, 20 by 2 s (10 per second), read at 2.2 s.
    let q = QueueStatus {
        admit_per_second: 10,
        line: 20,
        line_marks: vec![
            LineMark {
                n: k(1_000),
                ahead: 10,
            },
            LineMark {
                n: k(2_000),
                ahead: 20,
            },
        ],
        ..Default::default()
    };
    // A key at 4 s: the line is known to 2 s, so about 20 arrivals at the rate ahead of it.
    assert_eq!(unseen_ahead(&q, k(4_000), 2_200, &[]), 20);
    // This isolate issued 30 keys between 2 s and 4 s: it knows those exactly.
    let own: Vec<u64> = (0..30).map(|i| k(2_001 + i * 60)).collect();
    assert_eq!(unseen_ahead(&q, k(4_000), 2_200, &own), 30);
    // Only those before her key count; a key the line holds has none unseen.
    assert_eq!(unseen_ahead(&q, own[5], 2_200, &own), 5);
    assert_eq!(unseen_ahead(&q, k(1_500), 2_200, &own), 0);
}
