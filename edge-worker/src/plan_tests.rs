//! Host unit tests of [`crate::plan`]: the plan driven with every outcome, each step it asks
//! checked in order.

use super::*;
use crate::status::from_origin;
use crate::status::tests::status;

/// A fresh entry of a campaign in `state` (remaining as given), read from an origin body as
/// the edge reads it, with `extra` fields (a `queue`, `variants`).
fn entry(state: CampaignState, remaining: i64, extra: serde_json::Value) -> StatusEntry {
    let mut body = serde_json::to_value(status(state)).unwrap();
    body["remaining"] = remaining.into();
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    from_origin("spring", 200, body.to_string().as_bytes(), 0).unwrap()
}

fn queue() -> serde_json::Value {
    serde_json::json!({"queue": {"now_serving": 100, "admit_per_second": 7,
        "admission_ttl_seconds": 60}})
}

fn variants() -> serde_json::Value {
    serde_json::json!({"variants": [
        {"id": "41", "name": "Size 41", "stock": 5, "remaining": 1, "state": "active"},
        {"id": "42", "name": "Size 42", "stock": 5, "remaining": 0, "state": "sold_out"},
    ]})
}

fn refused(status: u16) -> Answer {
    Answer::error(status, "refused", "by the test")
}

/// Drives a plan of `body` on `entry` (fresh, at the start time) with `answers` given in turn
/// for each question; returns the steps it asked and where it ended.
fn drive(entry: &StatusEntry, body: &[u8], answers: Vec<Got>) -> (Vec<Do>, Do) {
    let now = status(CampaignState::Active).starts_at.timestamp_millis();
    let mut plan = ClaimPlan::new(Some(entry), true, now, 0, body);
    let (mut asked, mut answers) = (Vec::new(), answers.into_iter());
    let mut got = Got::Start;
    loop {
        match plan.next(got) {
            end @ (Do::Answer(_) | Do::Forward) => {
                assert!(answers.next().is_none(), "answers left over");
                return (asked, end);
            }
            step => {
                asked.push(step);
                got = answers.next().expect("an answer for each step asked");
            }
        }
    }
}

fn claim_limit() -> Do {
    Do::Limit {
        action: Action::Claim,
        with_address: true,
    }
}

fn sold_out() -> Answer {
    Answer::reply(&flashgate_shared::api::ClaimReply::SoldOut)
}

#[test]
fn a_live_campaign_without_a_waiting_room_is_forwarded_without_asking() {
    let e = entry(CampaignState::Active, 3, serde_json::json!({}));
    assert_eq!(drive(&e, b"{}", vec![]), (vec![], Do::Forward));
    // A stale or missing entry: the origin decides.
    let mut plan = ClaimPlan::new(Some(&e), false, 0, 0, b"{}");
    assert_eq!(plan.next(Got::Start), Do::Forward);
    let mut plan = ClaimPlan::new(None, true, 0, 0, b"{}");
    assert_eq!(plan.next(Got::Start), Do::Forward);
}

#[test]
fn ended_and_paused_are_answered_without_the_winners_filter() {
    for state in [CampaignState::Ended, CampaignState::Paused] {
        let e = entry(state, 3, serde_json::json!({}));
        let (asked, end) = drive(&e, b"{}", vec![]);
        assert_eq!(asked, vec![]);
        let Do::Answer(a) = end else {
            panic!("{state:?} answered at the edge")
        };
        assert_eq!(a.status, 409, "{state:?}");
    }
}

#[test]
fn sold_out_is_answered_to_losers_only() {
    let e = entry(CampaignState::SoldOut, 0, serde_json::json!({}));
    let loser = drive(&e, b"{}", vec![Got::Verdict(Verdict::Loser)]);
    assert_eq!(loser, (vec![Do::AskWinners], Do::Answer(sold_out())));
    let winner = drive(&e, b"{}", vec![Got::Verdict(Verdict::Winner)]);
    assert_eq!(winner, (vec![Do::AskWinners], Do::Forward));
    let unknown = drive(&e, b"{}", vec![Got::Verdict(Verdict::Unknown)]);
    assert_eq!(
        unknown,
        (vec![Do::AskWinners], Do::Answer(Answer::unavailable()))
    );
}

#[test]
fn a_sold_out_variant_is_answered_to_losers_only() {
    let e = entry(CampaignState::Active, 3, variants());
    let gone = br#"{"variant":"42"}"#;
    let (asked, end) = drive(&e, gone, vec![Got::Verdict(Verdict::Loser)]);
    assert_eq!(asked, vec![Do::AskWinners]);
    let Do::Answer(a) = end else {
        panic!("answered at the edge")
    };
    assert_eq!(
        (a.status, a.body.as_str()),
        (409, r#"{"result":"sold_out","variant":"42"}"#)
    );
    for maybe in [Verdict::Winner, Verdict::Unknown] {
        assert_eq!(
            drive(&e, gone, vec![Got::Verdict(maybe)]),
            (vec![Do::AskWinners], Do::Forward)
        );
    }
    // A variant with units, or none named: nothing to ask.
    assert_eq!(
        drive(&e, br#"{"variant":"41"}"#, vec![]),
        (vec![], Do::Forward)
    );
    assert_eq!(drive(&e, b"{}", vec![]), (vec![], Do::Forward));
}

#[test]
fn a_waiting_room_limits_then_gates_then_checks_admission_then_paces() {
    let e = entry(CampaignState::Active, 3, queue());
    let admitted = drive(
        &e,
        b"{}",
        vec![
            Got::Limited(Ok(())),
            Got::Admission(Ok(Admitted::Now)),
            Got::Paced(Ok(())),
        ],
    );
    assert_eq!(
        admitted,
        (
            vec![claim_limit(), Do::CheckAdmission, Do::Pace(7)],
            Do::Forward
        )
    );
    // Over the claim limit: answered before anything else.
    assert_eq!(
        drive(&e, b"{}", vec![Got::Limited(Err(refused(429)))]),
        (vec![claim_limit()], Do::Answer(refused(429)))
    );
    // No admission: its refusal; past the pace: the pace's.
    assert_eq!(
        drive(
            &e,
            b"{}",
            vec![Got::Limited(Ok(())), Got::Admission(Err(refused(403)))]
        ),
        (
            vec![claim_limit(), Do::CheckAdmission],
            Do::Answer(refused(403))
        )
    );
    let paced = drive(
        &e,
        b"{}",
        vec![
            Got::Limited(Ok(())),
            Got::Admission(Ok(Admitted::Now)),
            Got::Paced(Err(refused(429))),
        ],
    );
    assert_eq!(paced.1, Do::Answer(refused(429)));
}

#[test]
fn an_expired_admission_is_forwarded_within_the_replay_limit() {
    let e = entry(CampaignState::Active, 3, queue());
    let replay = Do::Limit {
        action: Action::Replay,
        with_address: false,
    };
    let within = drive(
        &e,
        b"{}",
        vec![
            Got::Limited(Ok(())),
            Got::Admission(Ok(Admitted::ReplayOnly)),
            Got::Limited(Ok(())),
            Got::Paced(Ok(())),
        ],
    );
    assert_eq!(
        within,
        (
            vec![
                claim_limit(),
                Do::CheckAdmission,
                replay.clone(),
                Do::Pace(7)
            ],
            Do::Forward
        )
    );
    let past = drive(
        &e,
        b"{}",
        vec![
            Got::Limited(Ok(())),
            Got::Admission(Ok(Admitted::ReplayOnly)),
            Got::Limited(Err(refused(429))),
        ],
    );
    assert_eq!(
        past,
        (
            vec![claim_limit(), Do::CheckAdmission, replay],
            Do::Answer(refused(429))
        )
    );
}

#[test]
fn a_possible_winner_of_a_sold_out_waiting_room_refused_admission_is_told_sold_out() {
    let e = entry(CampaignState::SoldOut, 0, queue());
    let (asked, end) = drive(
        &e,
        b"{}",
        vec![
            Got::Limited(Ok(())),
            Got::Verdict(Verdict::Winner),
            Got::Admission(Err(refused(429))),
        ],
    );
    assert_eq!(
        asked,
        vec![claim_limit(), Do::AskWinners, Do::CheckAdmission]
    );
    assert_eq!(end, Do::Answer(sold_out()));
    // Admitted: forwarded, so the origin gives her her first reply.
    let admitted = drive(
        &e,
        b"{}",
        vec![
            Got::Limited(Ok(())),
            Got::Verdict(Verdict::Winner),
            Got::Admission(Ok(Admitted::Now)),
            Got::Paced(Ok(())),
        ],
    );
    assert_eq!(admitted.1, Do::Forward);
}
