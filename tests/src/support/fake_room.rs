//! A small fake origin for the waiting room's edge tests (axum): it serves campaign statuses
//! with the `queue` fields, signs join tickets (one by one, or in the edge's groups), takes the
//! edge's reports of the tickets it issued and counts
//! every request it gets, so that a test pins down what the edge alone does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use flashgate_shared::admission::{sign_ticket, Place, Ticket};
use flashgate_shared::queue::ADMISSION_HEADER;
use serde_json::{json, Value};

const K: &[u8] = super::TEST_EDGE_SECRET.as_bytes();

/// What the fake origin serves and what it saw.
#[derive(Default)]
pub struct Fake {
    /// Campaign id -> status body.
    pub statuses: HashMap<String, Value>,
    pub status_gets: usize,
    /// Admission header of every claim it got (`""` when absent).
    pub claims: Vec<String>,
    /// Joins, passed through one by one or in the edge's groups.
    pub joins: usize,
    /// The edge's groups of joins.
    pub groups: usize,
    /// The edge's reports of the tickets it issued (each ticket counted in `joins`).
    pub issued_reports: usize,
    pub next_sequence: u64,
    /// Campaign-index fetches: answered 404 like an origin without the route, so the edge
    /// lets every id through to the status (the fake's statuses change during a test).
    pub index_fetches: usize,
    /// Presence reports (the edge's batches of the tickets that polled), answered 200.
    pub reports: usize,
    /// Customers the winners filter lists (none unless a test adds them), and its fetches.
    pub winners: Vec<String>,
    pub winners_fetches: usize,
    pub other: usize,
}

pub type Shared = Arc<Mutex<Fake>>;

pub fn status_body(id: &str, state: &str, remaining: i64, queue: Option<Value>) -> Value {
    let mut v = json!({
        "id": id, "name": "Drop", "kind": "sale", "state": state, "stock": 100,
        "remaining": remaining, "starts_at": "2026-01-01T00:00:00Z",
        "ends_at": "2099-01-01T00:00:00Z"
    });
    if let Some(q) = queue {
        v["queue"] = q;
    }
    v
}

pub fn queue_fields(now_serving: u64) -> Value {
    json!({"now_serving": now_serving, "admit_per_second": 10, "admission_ttl_seconds": 120})
}

pub async fn start_fake(fake: Shared) -> String {
    async fn status(State(f): State<Shared>, Path(id): Path<String>) -> (StatusCode, Json<Value>) {
        let mut f = f.lock().unwrap();
        f.status_gets += 1;
        match f.statuses.get(&id) {
            Some(v) => (StatusCode::OK, Json(v.clone())),
            None => (
                StatusCode::NOT_FOUND,
                Json(json!({"result": "not_found", "message": format!("no campaign {id}")})),
            ),
        }
    }
    async fn claim(State(f): State<Shared>, headers: HeaderMap) -> (StatusCode, Json<Value>) {
        let adm = headers
            .get(ADMISSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        f.lock().unwrap().claims.push(adm);
        (StatusCode::CREATED, Json(json!({"result": "claimed"})))
    }
    async fn join(State(f): State<Shared>, Path(id): Path<String>) -> (StatusCode, Json<Value>) {
        let mut f = f.lock().unwrap();
        f.joins += 1;
        f.next_sequence += 1;
        let t = ticket(&id, "joiner", f.next_sequence);
        let body = json!({"ticket": sign_ticket(K, &t), "position": f.next_sequence,
            "eta_seconds": 0, "state": "waiting"});
        (StatusCode::CREATED, Json(body))
    }
    // The edge's report of the tickets it issued (counted), or its grouped joins: one ticket
    // per customer, as the join above.
    async fn group(State(f): State<Shared>, Path(id): Path<String>, body: String) -> Json<Value> {
        let body: Value = serde_json::from_str(&body).unwrap();
        if let Some(tickets) = body["tickets"].as_array() {
            let mut f = f.lock().unwrap();
            f.issued_reports += 1;
            f.joins += tickets.len();
            return Json(json!({"counted": tickets.len(), "duplicate": false}));
        }
        let customers: Vec<String> = body["customers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        let mut f = f.lock().unwrap();
        f.groups += 1;
        let joins: Vec<Value> = customers
            .iter()
            .map(|c| {
                f.joins += 1;
                f.next_sequence += 1;
                let t = ticket(&id, c, f.next_sequence);
                json!({"status": 201, "reply": {"ticket": sign_ticket(K, &t),
                "position": f.next_sequence, "eta_seconds": 0, "state": "waiting"}})
            })
            .collect();
        Json(json!({ "joins": joins }))
    }
    async fn other(State(f): State<Shared>) -> StatusCode {
        f.lock().unwrap().other += 1;
        StatusCode::IM_A_TEAPOT
    }
    async fn index(State(f): State<Shared>) -> StatusCode {
        f.lock().unwrap().index_fetches += 1;
        StatusCode::NOT_FOUND
    }
    async fn presence(State(f): State<Shared>) -> Json<Value> {
        f.lock().unwrap().reports += 1;
        Json(json!({"counted": 0, "duplicate": false}))
    }
    // The edge fetches it for the claims a sold-out status would answer: without one it
    // cannot tell a winner's retry from a loser's and answers 503.
    async fn winners(State(f): State<Shared>) -> ([(header::HeaderName, String); 2], Vec<u8>) {
        use flashgate_shared::winners_filter::{WinnersFilter, CONTENT_TYPE, MAX_WINNERS};
        let mut f = f.lock().unwrap();
        f.winners_fetches += 1;
        let filter = WinnersFilter::build(f.winners.iter().map(String::as_str), MAX_WINNERS);
        let etag = format!("\"w{}\"", f.winners.len());
        let headers = [
            (header::CONTENT_TYPE, CONTENT_TYPE.to_string()),
            (header::ETAG, etag),
        ];
        (headers, filter.encode())
    }
    let app = Router::new()
        .route(flashgate_shared::campaign_index::INDEX_PATH, get(index))
        .route("/api/v1/campaigns/{id}", get(status))
        .route("/api/v1/campaigns/{id}/claims", post(claim))
        .route("/api/v1/campaigns/{id}/queue", post(join))
        .route("/edge/v1/campaigns/{id}/presence", post(presence))
        .route("/edge/v1/campaigns/{id}/joins", post(group))
        .route(
            flashgate_shared::winners_filter::PATH_TEMPLATE,
            get(winners),
        )
        .fallback(other)
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

pub fn ticket(campaign: &str, customer: &str, sequence: u64) -> Ticket {
    Ticket {
        place: Place {
            campaign: campaign.into(),
            customer: customer.into(),
            sequence,
        },
        issued_at_s: chrono::Utc::now().timestamp(),
        drawn_waiting_at_issue: 0,
    }
}
