//! `POST /api/v1/campaigns/{id}/queue`: join a campaign's waiting room (the poll,
//! `GET …/queue`, is answered by the edge).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::ErrorBody;
use flashgate_shared::queue::{JoinReply, NO_WAITING_ROOM};

use super::extract;
use crate::error::ApiResult;
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
