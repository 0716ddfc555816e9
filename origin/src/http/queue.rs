//! `POST /api/v1/campaigns/{id}/queue`: join a campaign's waiting room (the poll,
//! `GET …/queue`, is answered by the edge), and `POST /edge/v1/campaigns/{id}/presence`: the
//! edge's batched report of the tickets that polled, and `POST /edge/v1/campaigns/{id}/joins`:
//! the tickets an isolate issued (or, from older edges, the joins it grouped).

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::{codes, ErrorBody};
use flashgate_shared::queue::access::JoinBody;
use flashgate_shared::queue::joins::{GroupedJoin, JoinGroupReply, JoinsBody};
use flashgate_shared::queue::presence::{PresenceReceipt, PresenceReport};
use flashgate_shared::queue::{JoinReply, NO_WAITING_ROOM};

use super::extract::{self, Path};
use crate::error::{ApiError, ApiResult};
use crate::http::openapi::errors;
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
/// (404), a waiting room (409 `no_waiting_room`), a waiting room without a challenge or
/// invites (403 `forbidden`: those joins are answered by the edge only, which checks them),
/// then [`crate::queue::join::join`]: 201 with
/// [`flashgate_shared::queue::JoinReply`] the first time, 200 with the same ticket after; 409
/// `conflict` before the prequeue opens; 503 without the edge secret or when Redis fails.
/// Nothing changes on a refusal.
#[utoipa::path(
    post,
    path = "/api/v1/campaigns/{id}/queue",
    tag = "waiting room",
    security(("customer_token" = [])),
    params(("id" = String, Path, description = "Campaign id.")),
    request_body(content = JoinBody, description = "Only for a waiting room with a \
        `challenge` or `invite_only` (docs/ACCESS.md): the `pow` challenge and its solution, \
        the Turnstile widget's token, the shop's invite. Checked by the edge."),
    responses(
        (status = 201, description = "Joined: her ticket and place. A join that failed its \
            challenge on a campaign with `challenge_failure: infinite_queue` gets a ticket \
            too, which is never admitted.", body = JoinReply),
        (status = 200, description = "Joined before: the same ticket again (also for an \
            invite used again at the same edge).", body = JoinReply),
        (status = 400, description = "invalid_json: a body that is not the JSON object.",
            body = ErrorBody),
        (status = 403, description = "forbidden: no valid edge signature on an origin with an \
            edge secret; a failed challenge with `challenge_failure: forbidden`; a missing, \
            forged, expired or another customer's or campaign's invite; at the origin, any \
            join of a campaign with a challenge or invites.", body = ErrorBody),
        errors::NoCampaign,
        (status = 409, description = "no_waiting_room: the campaign has none; conflict: the \
            prequeue has not opened yet.", body = ErrorBody),
        errors::PayloadPast4KiB,
        (status = 429, description = "rate_limited, at the edge: too many joins from this \
            customer or address; retry after `Retry-After`.", body = ErrorBody,
            headers(("Retry-After" = u32))),
    ),
)]
pub async fn join(
    State(state): State<AppState>,
    post: extract::ForwardedPost,
) -> ApiResult<Response> {
    let (campaign, customer) = post.signed_customer(&state).await?;
    let row = extract::campaign(&state, &campaign).await?;
    let Some(w) = row.waiting_room() else {
        return Ok(no_waiting_room(&campaign));
    };
    if !w.access().is_open() {
        return Err(ApiError::Forbidden(format!(
            "joins of campaign {campaign} are answered by the edge only (challenge or invites)"
        )));
    }
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

/// Largest body of a report of issued tickets, bytes: room for
/// [`MAX_ISSUED_TICKETS`](flashgate_shared::queue::joins::MAX_ISSUED_TICKETS) tickets of
/// customers with the longest ids (128 characters), which a test sends.
pub const MAX_JOINS_REPORT_BODY_BYTES: usize = 4 << 20;

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
        errors::EdgeReport,
        errors::NoCampaign,
        errors::NoWaitingRoom,
        errors::PayloadPast1MiB,
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
    let body = edge_body(
        &state,
        &uri,
        &headers,
        body,
        MAX_REPORT_BODY_BYTES,
        "a presence report",
    )
    .await?;
    let row = extract::campaign(&state, &id).await?;
    if row.waiting_room.is_none() {
        return Ok(no_waiting_room(&id));
    }
    let report: PresenceReport = extract::parse_json(&body)?;
    let now_ms = chrono::Utc::now().timestamp_millis();
    let receipt = crate::queue::presence::record(&state, &id, &report, now_ms).await?;
    Ok((StatusCode::OK, axum::Json(receipt)).into_response())
}

/// The tickets one isolate issued for campaign `id` ([`JoinsBody::Issued`]: `{"report_id",
/// "tickets"}`): each edge-signed ticket is checked again and joins the line in order of its
/// sequence number (its order key), in one Redis step ([`crate::queue::issued::record`]); a
/// report id counted before is answered 200 `duplicate: true` and changes nothing. Or, from
/// older edges, a group of joins to place ([`JoinsBody::Group`]: `{"customers"}`,
/// [`crate::queue::join::join_group`]): 200 with each customer's answer in order, 201 and her
/// new ticket or 200 and the one she had. Needs a valid edge signature over `POST`, the path
/// and the body (403 without one, with a stale one, or when this origin has no
/// `FLASHGATE_EDGE_SECRET`). Errors are the whole body's and change nothing: 400 for a bad
/// shape, a malformed ticket or a customer id that is not one, 403 for a forged ticket or
/// another campaign's, 404, 409 `no_waiting_room`, 409 `conflict` (a group before the prequeue
/// opens), 503 as for a join.
#[utoipa::path(
    post,
    path = "/edge/v1/campaigns/{id}/joins",
    tag = "edge",
    params(("id" = String, Path, description = "Campaign id.")),
    request_body(content = JoinsBody, description = "Tickets issued at one isolate, or joins \
        verified there."),
    responses(
        (status = 200, description = "A report: counted (or counted before: `duplicate`). A \
            group: each customer's place, in order.", body = PresenceReceipt),
        (status = 400, description = "invalid_json, invalid_request: a bad shape, a malformed \
            ticket, or a customer id that is not one.", body = ErrorBody),
        errors::EdgeReport,
        errors::NoCampaign,
        (status = 409, description = "no_waiting_room: the campaign has none; conflict: the \
            prequeue has not opened yet (a group).", body = ErrorBody),
        errors::PayloadPast4MiB,
        (status = 422, description = "validation_failed: the body is neither a report nor a \
            group.", body = ErrorBody),
        (status = 503, description = "unavailable: Redis failed, the queue is being reopened, \
            or no join turn came in time; retry after `Retry-After`.", body = ErrorBody,
            headers(("Retry-After" = u32))),
    ),
)]
pub async fn joins(
    State(state): State<AppState>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let body = edge_body(
        &state,
        &uri,
        &headers,
        body,
        MAX_JOINS_REPORT_BODY_BYTES,
        "a report of joins",
    )
    .await?;
    let row = extract::campaign(&state, &id).await?;
    let Some(w) = row.waiting_room() else {
        return Ok(no_waiting_room(&id));
    };
    let group = match extract::parse_json::<JoinsBody>(&body)? {
        JoinsBody::Issued(report) => {
            let receipt = crate::queue::issued::record(&state, &id, &report).await?;
            return Ok((StatusCode::OK, axum::Json(receipt)).into_response());
        }
        JoinsBody::Group(group) => group,
    };
    group
        .validate()
        .map_err(|m| ApiError::BadRequest(codes::INVALID_REQUEST, m))?;
    let customers: Vec<&str> = group.customers.iter().map(String::as_str).collect();
    let placed = crate::queue::join::join_group(&state, &row, &w, &customers).await?;
    let joins = placed
        .into_iter()
        .map(|(reply, created)| GroupedJoin {
            status: if created { 201 } else { 200 },
            reply,
        })
        .collect();
    Ok((StatusCode::OK, axum::Json(JoinGroupReply { joins })).into_response())
}

/// The body (at most `max` bytes) of an edge-only `POST` (`what`, for the message), which must
/// carry a valid edge signature over method, path and body: 403 without one, with a stale one,
/// or when this origin has no edge secret to check it with (the caller's error, not an outage
/// of this origin).
pub(super) async fn edge_body(
    state: &AppState,
    uri: &Uri,
    headers: &HeaderMap,
    body: Body,
    max: usize,
    what: &str,
) -> ApiResult<axum::body::Bytes> {
    let body = extract::read_body(headers, body, max).await?;
    let secret = state.config.edge_secret.as_ref();
    let proof = extract::edge_proof(headers, secret, "POST", uri.path(), &body)?;
    if !matches!(proof, extract::EdgeProof::Signed) {
        return Err(ApiError::Forbidden(format!(
            "{what} needs the edge signature"
        )));
    }
    Ok(body)
}
