//! `POST /edge/v1/campaigns/{id}/answers`: the edge's report of the answers it gave itself for
//! a campaign (claims answered at the edge, joins that failed their challenge), per second and
//! result ([`crate::admin::edge_answers`]), for the dashboard's whole-sale view.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use flashgate_shared::answers::{AnswerReceipt, AnswerReport};
use flashgate_shared::api::{codes, ErrorBody};

use super::extract::{self, Path};
use crate::error::{ApiError, ApiResult};
use crate::http::openapi::errors;
use crate::state::AppState;

/// Largest answer report body, bytes (1,000 rows of about 70 bytes each, with room).
pub const MAX_REPORT_BODY_BYTES: usize = 256 * 1024;

/// The answers one edge isolate gave itself for campaign `id` since its last report
/// ([`AnswerReport`]): added to the campaign's per-second answer counts, once per report id (a
/// report id counted before is answered 200 `duplicate: true` and changes nothing). Needs a
/// valid edge signature over `POST`, the path and the body (403 without one, with a stale one:
/// a report replayed more than 60 s later, or when this origin has no `FLASHGATE_EDGE_SECRET`
/// to check it with). 400 for a body that is not JSON or breaks a rule of the report (a result
/// that is no label, a count of 0, a second more than a minute ahead or a day behind the
/// origin's clock, a (second, result) twice, no rows or more than 1,000), 422 for another
/// shape. Nothing changes on a refusal.
#[utoipa::path(
    post,
    path = "/edge/v1/campaigns/{id}/answers",
    tag = "edge",
    params(("id" = String, Path, description = "Campaign id.")),
    request_body(content = AnswerReport, description = "Answers one isolate gave itself, per \
        second and result."),
    responses(
        (status = 200, description = "Counted (or counted before: `duplicate`).",
            body = AnswerReceipt),
        (status = 400, description = "invalid_json, invalid_request: not JSON, or a rule of \
            the report broken.", body = ErrorBody),
        (status = 403, description = "forbidden: no valid edge signature (or no edge secret \
            on this origin to check one).", body = ErrorBody),
        errors::NoCampaign,
        (status = 413, description = "payload_too_large: a body past 256 KiB.",
            body = ErrorBody),
        (status = 422, description = "validation_failed: the body is not a report.",
            body = ErrorBody),
    ),
)]
pub async fn answers(
    State(state): State<AppState>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let body = super::queue::edge_body(
        &state,
        &uri,
        &headers,
        body,
        MAX_REPORT_BODY_BYTES,
        "an answer report",
    )
    .await?;
    extract::campaign(&state, &id).await?;
    let report: AnswerReport = extract::parse_json(&body)?;
    report
        .validate(chrono::Utc::now().timestamp())
        .map_err(|m| ApiError::BadRequest(codes::INVALID_REQUEST, m))?;
    let receipt = crate::admin::edge_answers::record(&state.db, &id, &report).await?;
    if !receipt.duplicate {
        let rows = report.counts.iter().map(|c| (c.result.as_str(), c.count));
        state.metrics.edge_answers(rows);
    }
    Ok((StatusCode::OK, axum::Json(receipt)).into_response())
}
