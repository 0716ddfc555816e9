//! `POST /api/v1/campaigns/{id}/queue`: join a campaign's waiting room (the poll,
//! `GET …/queue`, is answered by the edge), and `POST /edge/v1/campaigns/{id}/presence`: the
//! edge's batched report of the tickets that polled.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::ErrorBody;
use flashgate_shared::queue::presence::{PresenceReceipt, PresenceReport};
use flashgate_shared::queue::{JoinReply, NO_WAITING_ROOM};

use super::extract::{self, Path};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// 409 `{"result":"no_waiting_room","message":…}`.
fn no_waiting_room(id: &str) -> Response {
    let body = ErrorBody::new(
        NO_WAITING_ROOM,
        format!("campaign {id} has no waiting room"),
    );
    (
        StatusCode::CONFLICT,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_json(),
    )
        .into_response()
}

/// Joins the queue with the customer token; no body needed (up to 4 KiB is read and ignored).
/// Checks in order: edge signature when configured (403), customer token (401), campaign id
/// (404), a waiting room (409 `no_waiting_room`), then [`crate::queue::join::join`]: 201 with
/// [`flashgate_shared::queue::JoinReply`] the first time, 200 with the same ticket after; 409
/// `conflict` before the prequeue opens; 503 without the edge secret or when Redis fails.
/// Nothing changes on a refusal.
#[utoipa::path(
    post,
    path = "/api/v1/campaigns/{id}/queue",
    tag = "waiting room",
    security(("customer_token" = [])),
    params(("id" = String, Path, description = "Campaign id.")),
    responses(
        (status = 201, description = "Joined: her ticket and place.", body = JoinReply),
        (status = 200, description = "Joined before: the same ticket again.", body = JoinReply),
        (status = 403, description = "forbidden: no valid edge signature on an origin with an \
            edge secret.", body = ErrorBody),
        (status = 404, description = "not_found: no such campaign.", body = ErrorBody),
        (status = 409, description = "no_waiting_room: the campaign has none; conflict: the \
            prequeue has not opened yet.", body = ErrorBody),
        (status = 413, description = "payload_too_large: a body past 4 KiB.", body = ErrorBody),
        (status = 429, description = "rate_limited, at the edge: too many joins from this \
            customer or address; retry after `Retry-After`.", body = ErrorBody,
            headers(("Retry-After" = u32))),
    ),
)]
pub async fn join(
    State(state): State<AppState>,
    mut post: extract::ForwardedPost,
) -> ApiResult<Response> {
    post.signed_body(&state).await?;
    let (campaign, headers) = (post.campaign, post.headers);
    let customer = extract::customer(&headers, &state).await?;
    let row = extract::campaign(&state, &campaign).await?;
    let Some(w) = row.waiting_room() else {
        return Ok(no_waiting_room(&campaign));
    };
    let (reply, created) = crate::queue::join::join(&state, &row, &w, &customer).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(reply)).into_response())
}

/// Largest presence report body, bytes (2,000 tickets of about 200 bytes each, with room).
pub const MAX_REPORT_BODY_BYTES: usize = 1 << 20;

/// The edge's presence report for campaign `id`: the tickets that polled at one isolate since
/// its last report ([`PresenceReport`]). Needs a valid edge signature over `POST`, the path and
/// the body (403 without one, with a stale one: a report replayed more than 60 s later, or
/// when this origin has no `FLASHGATE_EDGE_SECRET` to check it with).
/// Every ticket is checked again: one malformed is 400 `invalid_request`, one forged or of
/// another campaign 403 `forbidden`, and the whole report is refused. A report id counted
/// before is answered 200 `duplicate: true` and changes nothing. Nothing changes on a refusal.
#[utoipa::path(
    post,
    path = "/edge/v1/campaigns/{id}/presence",
    tag = "edge",
    params(("id" = String, Path, description = "Campaign id.")),
    request_body(content = PresenceReport, description = "Tickets seen at one isolate."),
    responses(
        (status = 200, description = "Counted (or counted before: `duplicate`).",
            body = PresenceReceipt),
        (status = 400, description = "invalid_json, invalid_request: a bad shape or a \
            malformed ticket.", body = ErrorBody),
        (status = 403, description = "forbidden: no valid edge signature (or no edge secret \
            on this origin to check one), or a forged ticket or another campaign's.",
            body = ErrorBody),
        (status = 404, description = "not_found: no such campaign.", body = ErrorBody),
        (status = 409, description = "no_waiting_room: the campaign has none.", body = ErrorBody),
        (status = 413, description = "payload_too_large: a body past 1 MiB.", body = ErrorBody),
        (status = 422, description = "validation_failed: the body is not a report.",
            body = ErrorBody),
    ),
)]
pub async fn presence(
    State(state): State<AppState>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let body = extract::read_body(&headers, body, MAX_REPORT_BODY_BYTES).await?;
    // Without an edge secret no report can be verified: refused like an unsigned one (403),
    // the caller's error, not an outage of this origin.
    let secret = state.config.edge_secret.as_ref();
    let proof = extract::edge_proof(&headers, secret, "POST", uri.path(), &body)?;
    if !matches!(proof, extract::EdgeProof::Signed) {
        return Err(ApiError::Forbidden(
            "a presence report needs the edge signature".into(),
        ));
    }
    let row = extract::campaign(&state, &id).await?;
    if row.waiting_room.is_none() {
        return Ok(no_waiting_room(&id));
    }
    let report: PresenceReport = extract::parse_json(&body)?;
    let now_ms = chrono::Utc::now().timestamp_millis();
    let receipt = crate::queue::presence::record(&state, &id, &report, now_ms).await?;
    Ok((StatusCode::OK, axum::Json(receipt)).into_response())
}
