use super::*;

#[test]
fn option_defaults_and_bounds() {
    let w: WaitingRoom = serde_json::from_str(r#"{"admit_per_second":200}"#).unwrap();
    assert_eq!(
        w,
        WaitingRoom {
            admit_per_second: 200,
            queueing: Queueing::Fifo,
            prequeue_seconds: 600,
            admission_ttl_seconds: 120,
            presence_window_seconds: DEFAULT_PRESENCE_WINDOW_SECONDS,
            second_wave_admission_ttl_seconds: DEFAULT_SECOND_WAVE_TTL_SECONDS,
            challenge: access::ChallengeKind::None,
            pow_difficulty: crate::pow::DEFAULT_DIFFICULTY,
            challenge_fail_open: false,
            challenge_failure: access::ChallengeFailure::InfiniteQueue,
            invite_only: false,
        }
    );
    assert_eq!(w.validate(), Ok(()));
    let bad = WaitingRoom {
        admit_per_second: 0,
        ..w
    };
    assert_eq!(
        bad.validate().unwrap_err(),
        "waiting_room.admit_per_second must be between 1 and 100000"
    );
    let bad = WaitingRoom {
        admission_ttl_seconds: 5,
        ..w
    };
    assert!(bad.validate().is_err());
    assert!(
        serde_json::from_str::<WaitingRoom>(r#"{"admit_per_second":1,"queueing":"lifo"}"#).is_err()
    );
    assert!(serde_json::from_str::<WaitingRoom>(r#"{"admit_per_second":1,"x":1}"#).is_err());
}

#[test]
fn positions_over_both_blocks() {
    let q = |now_serving, admitted, drawn| QueueStatus {
        now_serving,
        admit_per_second: 10,
        admission_ttl_seconds: 60,
        paused: false,
        admitted,
        drawn,
        ..Default::default()
    };
    // Arrival order only.
    assert_eq!(q(100, 100, 0).position(150), 50);
    assert_eq!(q(100, 100, 0).position(100), 0);
    assert_eq!(q(RANDOM_BLOCK + 3, 3, 0).position(RANDOM_BLOCK + 10), 7);
    assert_eq!(q(0, 0, 0).position(RANDOM_BLOCK + 5), 5);
    // 10 drawn, 4 of them admitted: the 6 others come before the first arrival.
    let s = q(RANDOM_BLOCK / 4, 4, 10);
    assert_eq!(s.position(RANDOM_BLOCK + 1), 7);
    assert_eq!(s.position(RANDOM_BLOCK / 8), 0);
    // Halfway through the drawn numbers still waiting: about half of the 6.
    assert_eq!(s.position(RANDOM_BLOCK / 4 + (RANDOM_BLOCK / 4) * 3 / 2), 3);
    assert_eq!(s.position(RANDOM_BLOCK / 4 + 1), 1);
    // Past the drawn block: arrival order again.
    assert_eq!(q(RANDOM_BLOCK + 2, 12, 10).position(RANDOM_BLOCK + 5), 3);
    assert_eq!(s.eta_seconds(QueueState::Waiting, 11, 100, 1_500, 0), 4);
    // A status older than the ticket's draw (no drawn customer waiting as far as it
    // knows): the ticket's count at issue stands in, never seq − now_serving.
    let before = q(0, 0, 0);
    let mid = RANDOM_BLOCK / 2;
    assert_eq!(before.position(mid), mid);
    assert_eq!(before.position_of(mid, 800), 400);
    assert_eq!(before.position_of(mid, 1), 1);
    assert_eq!(q(RANDOM_BLOCK / 4, 4, 4).position_of(mid, 3), 1);
    // Without the count (an arrival number, or a ticket from before it): the status alone.
    assert_eq!(before.position_of(mid, 0), mid);
    // A status that knows the draw, or an arrival number: the status alone decides.
    assert_eq!(s.position_of(RANDOM_BLOCK / 4 + 1, 5_000), 1);
    assert_eq!(s.position_of(RANDOM_BLOCK + 1, 5_000), 7);
    assert_eq!(s.position_of(RANDOM_BLOCK / 8, 5_000), 0);
    assert_eq!(s.eta_seconds(QueueState::Admitted, 0, 100, 0, 0), 0);
}

#[test]
fn eta_counts_the_admitted_but_unclaimed_line() {
    // Stock 3, admit 50/s, admissions of 10 s: three admitted at t = 0 have not claimed.
    let q = QueueStatus {
        now_serving: 3,
        admit_per_second: 50,
        admission_ttl_seconds: 10,
        admitted: 3,
        unclaimed: 3,
        first_lapse_ms: 10_000,
        last_lapse_ms: 10_000,
        ..Default::default()
    };
    let eta = |position, now_ms| q.eta_seconds(QueueState::Waiting, position, 3, 0, now_ms);
    // The next one waits for the first lapse, not one second.
    assert_eq!(eta(1, 0), 10);
    assert_eq!(eta(1, 1_000), 9);
    assert_eq!(eta(1, 9_001), 1);
    assert_eq!(eta(1, 10_000), 1);
    // Admissions spread over time: the first in line waits for the oldest lapse, later
    // ones for the newest.
    let spread = QueueStatus {
        unclaimed: 2,
        first_lapse_ms: 4_000,
        last_lapse_ms: 9_500,
        ..q.clone()
    };
    let eta = |p| spread.eta_seconds(QueueState::Waiting, p, 3, 0, 0);
    assert_eq!((eta(1), eta(2), eta(3)), (1, 4, 10));
    // Units to spare (nobody unclaimed, or fewer than remain): the rate alone.
    let free = QueueStatus {
        unclaimed: 0,
        ..q.clone()
    };
    assert_eq!(free.eta_seconds(QueueState::Waiting, 100, 3, 0, 0), 2);
    assert_eq!(spread.eta_seconds(QueueState::Waiting, 1, 10, 0, 0), 1);
    // Past a lapse (a status older than it): never negative.
    assert_eq!(q.eta_seconds(QueueState::Waiting, 1, 3, 0, 60_000), 1);
}

#[test]
fn status_fields_are_optional() {
    let none: StatusQueueFields = serde_json::from_str(r#"{"id":"a","state":"active"}"#).unwrap();
    assert_eq!(none.queue, None);
    let some: StatusQueueFields = serde_json::from_str(
        r#"{"id":"a","queue":{"now_serving":7,"admit_per_second":2,"admission_ttl_seconds":60}}"#,
    )
    .unwrap();
    assert_eq!(
        some.queue,
        Some(QueueStatus {
            now_serving: 7,
            admit_per_second: 2,
            admission_ttl_seconds: 60,
            paused: false,
            admitted: 0,
            drawn: 0,
            unclaimed: 0,
            first_lapse_ms: 0,
            last_lapse_ms: 0,
            grants: None,
            ..QueueStatus::default()
        })
    );
    let reply = StatusReply {
        position: 3,
        eta_seconds: 2,
        state: QueueState::Waiting,
        admitted: false,
        admission_token: None,
        outlook: Some(Outlook::Likely),
        held_until: None,
        variants: Vec::new(),
    };
    assert_eq!(
        serde_json::to_string(&reply).unwrap(),
        r#"{"position":3,"eta_seconds":2,"state":"waiting","admitted":false,"outlook":"likely"}"#
    );
}
