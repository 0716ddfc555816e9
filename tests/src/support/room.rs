//! Waiting-room fixtures shared by the waiting-room tests: sizes from the environment, the
//! option, a sale with a waiting room, and the manager's pause / resume of admission.

use chrono::Utc;
use flashgate_shared::api::{CampaignKind, ChangeAction, ChangeRequest, NewCampaign};
use flashgate_shared::queue::{Queueing, WaitingRoom};

use super::{unique, TestEdge, TestOrigin, TEST_EDGE_SECRET};

/// The number in environment variable `var`, else `default`.
pub fn size(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A FIFO waiting room admitting `admit_per_second`, a 600 s prequeue and 10 s admissions.
pub fn room(admit_per_second: u32) -> WaitingRoom {
    WaitingRoom {
        admit_per_second,
        queueing: Queueing::Fifo,
        prequeue_seconds: 600,
        admission_ttl_seconds: 10,
        presence_window_seconds: flashgate_shared::queue::DEFAULT_PRESENCE_WINDOW_SECONDS,
        second_wave_admission_ttl_seconds: flashgate_shared::queue::DEFAULT_SECOND_WAVE_TTL_SECONDS,
        challenge: Default::default(),
        pow_difficulty: flashgate_shared::pow::DEFAULT_DIFFICULTY,
        challenge_fail_open: false,
        challenge_failure: Default::default(),
        invite_only: false,
    }
}

/// Creates a sale of `stock` units with waiting room `w`, starting `start_in` from now
/// (negative: started), ending in an hour; returns its id.
pub async fn campaign(
    o: &TestOrigin,
    stock: i64,
    start_in: chrono::Duration,
    hold_seconds: Option<i64>,
    w: WaitingRoom,
) -> String {
    let id = unique("wr");
    let now = Utc::now();
    o.create(&NewCampaign {
        id: id.clone(),
        name: "Drop".into(),
        kind: CampaignKind::Sale,
        stock,
        starts_at: now + start_in,
        ends_at: now + chrono::Duration::hours(1),
        hold_seconds,
        hold_extension_seconds: None,
        gate_shards: None,
        waiting_room: Some(w),
        access: None,
        draw: None,
        variants: None,
    })
    .await;
    id
}

/// Pauses or resumes admission (or any other action) as a manager; panics unless 200.
pub async fn admission(o: &TestOrigin, id: &str, action: ChangeAction) {
    let (st, body) = o.change(id, ChangeRequest::action(action)).await;
    assert_eq!(st, 200, "{body}");
}

/// The edge in front of origin `o`, as the waiting-room tests run it: the test edge secret, a
/// status TTL of 300 ms, and the per-IP, join and poll limits off (every test request comes
/// from one address).
pub fn room_edge(o: &TestOrigin) -> TestEdge {
    TestEdge::start(
        &o.url,
        &[
            ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.to_string()),
            ("FLASHGATE_STATUS_TTL_MS", "300".to_string()),
            ("FLASHGATE_LIMIT_IP_PER_S", "0".to_string()),
            ("FLASHGATE_LIMIT_JOINS_PER_S", "0".to_string()),
            ("FLASHGATE_LIMIT_POLLS_PER_S", "0".to_string()),
        ],
    )
}

/// A poll of `ticket` on campaign `id` at `edge`: its JSON answer (panics unless 200).
pub async fn poll_ticket(
    http: &reqwest::Client,
    edge: &TestEdge,
    id: &str,
    ticket: &str,
) -> serde_json::Value {
    let res = http
        .get(format!("{}/api/v1/campaigns/{id}/queue", edge.url))
        .header(flashgate_shared::queue::TICKET_HEADER, ticket)
        .send()
        .await
        .expect("poll");
    assert_eq!(res.status().as_u16(), 200);
    res.json().await.expect("a poll's JSON")
}

/// A join of `customer` to campaign `id` at `edge` with `body` sent as `content_type`: (status,
/// who answered, JSON body or `Null`).
pub async fn join_with_body(
    http: &reqwest::Client,
    edge: &TestEdge,
    id: &str,
    customer: &str,
    content_type: &str,
    body: &str,
) -> (u16, String, serde_json::Value) {
    let res = http
        .post(format!("{}/api/v1/campaigns/{id}/queue", edge.url))
        .bearer_auth(super::token_for(&super::queue_config(), customer))
        .header("content-type", content_type)
        .body(body.to_string())
        .send()
        .await
        .expect("join");
    let r = super::reply(res).await;
    let json = r.json();
    (r.status, r.by, json)
}

/// Waits (at most 30 s) until the origin's `queue` of `id` satisfies `done`; returns it.
pub async fn queue_until(
    o: &TestOrigin,
    id: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let q = o.status(id).await["queue"].clone();
        if done(&q) || std::time::Instant::now() > deadline {
            return q;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
