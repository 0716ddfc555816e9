//! Draw campaigns: `POST /api/v1/campaigns/{id}/draw/entries` (enter),
//! `GET /api/v1/campaigns/{id}/draw/entries/mine` (her entry and outcome),
//! `GET /api/v1/campaigns/{id}/draw` (the draw's public status: the commitment, then the
//! reveal) and `POST /admin/v1/campaigns/{id}/draw/run` (a manager closes the entries now and
//! draws), `GET /admin/v1/campaigns/{id}/draw` (a manager's counts). The rules: docs/DRAWS.md and [`flashgate_shared::draw`].

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::{
    check_end_after_entries, DrawProgress, DrawState, DrawStatus, EntryOutcome, EntryReceipt,
    ErrorBody, MyEntry, NO_WAITING_ROOM,
};

use super::extract::{self, Path, Role};
use crate::access::admit;
use crate::access::run::{self, Ran};
use crate::access::store::{self, DrawRow, Entered};
use crate::admin::toggles::Change;
use crate::error::{ApiError, ApiResult};
use crate::http::openapi::errors;
use crate::state::AppState;

/// The draw of campaign `id`: 404 when the id is not a slug or no campaign has it; 409
/// `conflict` when the campaign is not a draw.
async fn draw_of(state: &AppState, id: &str) -> ApiResult<DrawRow> {
    extract::campaign(state, id).await?;
    store::find(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::Conflict(format!("campaign {id} is not a draw")))
}

/// The rules of a draw's creation that a manager's change of campaign `id` must keep too
/// (`PATCH /admin/v1/campaigns/{id}`): a draw takes no waiting room, and its `ends_at` stays
/// after `draw.entries_close_at`. 422 `validation_failed` naming the field, before anything is
/// written; other campaigns and changes pass. (A draw's `entries_close_at` only ever moves
/// earlier, when a manager draws early, so a change checked here stays valid.)
pub async fn check_change(state: &AppState, id: &str, change: &Change) -> ApiResult<()> {
    match change {
        Change::SetWaitingRoom { .. } => {
            match admit::is_draw(&state.draw_kinds, &state.db, id).await? {
                true => Err(ApiError::validation(NO_WAITING_ROOM)),
                false => Ok(()),
            }
        }
        Change::SetEndsAt { ends_at } => match store::find(&state.db, id).await? {
            Some(d) => {
                check_end_after_entries(d.entries_close_at, *ends_at).map_err(ApiError::validation)
            }
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Enters the customer of the token into the campaign's draw; no body needed (up to 4 KiB is
/// read and ignored). Checks in order: edge signature when configured (403), customer token
/// (401), campaign id (404), a draw campaign (409 `conflict`), then the entry: 201 with the
/// receipt the first time, 200 with the same receipt after (one entry per customer, however
/// often she enters, even after the window closed); without an entry, 409 `conflict` before
/// `entries_open_at`, from `entries_close_at` on, or once the campaign has ended (its `ends_at`
/// passed, or a manager closed it). Nothing changes on a refusal.
#[utoipa::path(
    post,
    path = "/api/v1/campaigns/{id}/draw/entries",
    tag = "draw",
    security(("customer_token" = [])),
    params(("id" = String, Path, description = "Campaign id.")),
    responses(
        (status = 201, description = "Entered: her receipt.", body = EntryReceipt),
        (status = 200, description = "Entered before: the same receipt.", body = EntryReceipt),
        errors::CustomerToken,
        errors::EdgeSignature,
        errors::NoCampaign,
        (status = 409, description = "conflict: the campaign is not a draw, its entry \
            window is not open (not yet, or closed), or the campaign has ended.", body = ErrorBody),
        errors::PayloadPast4KiB,
    ),
)]
pub async fn enter(
    State(state): State<AppState>,
    post: extract::ForwardedPost,
) -> ApiResult<Response> {
    let (campaign, customer) = post.signed_customer(&state).await?;
    let d = draw_of(&state, &campaign).await?;
    match store::enter(&state.db, &d, &customer).await? {
        Entered::New(r) => Ok((StatusCode::CREATED, axum::Json(r)).into_response()),
        Entered::Again(r) => Ok((StatusCode::OK, axum::Json(r)).into_response()),
        Entered::Closed { draw: now, ends_at } if ends_at < now.entries_close_at => {
            Err(ApiError::Conflict(format!(
                "entries to {campaign} closed at {}: the campaign ended",
                ends_at.to_rfc3339()
            )))
        }
        Entered::Closed { draw: now, .. } => {
            Err(ApiError::Conflict(match now.state_at(chrono::Utc::now()) {
                DrawState::Scheduled => format!(
                    "entries to {campaign} open at {}",
                    now.entries_open_at.to_rfc3339()
                ),
                _ => format!(
                    "entries to {campaign} closed at {}",
                    now.entries_close_at.to_rfc3339()
                ),
            }))
        }
    }
}

/// Her entry in the campaign's draw (customer token, 401): 200 with the receipt and, once
/// drawn, her place and `outcome`: `won` (admitted: with her admission token and the end of her
/// buying window), `waitlisted` or `lapsed`; 404 when she has not entered (or no such
/// campaign); 409 `conflict` when the campaign is not a draw.
#[utoipa::path(
    get,
    path = "/api/v1/campaigns/{id}/draw/entries/mine",
    tag = "draw",
    security(("customer_token" = [])),
    params(("id" = String, Path, description = "Campaign id.")),
    responses(
        (status = 200, description = "Her entry and outcome.", body = MyEntry),
        errors::CustomerToken,
        (status = 404, description = "not_found: she has not entered, or no such campaign.",
            body = ErrorBody),
        errors::NotADraw,
    ),
)]
pub async fn mine(
    State(state): State<AppState>,
    Path(campaign): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let customer = extract::customer(&headers, &state).await?;
    let d = draw_of(&state, &campaign).await?;
    let e = store::entry_of(&state.db, &campaign, &customer)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no entry of yours in {campaign}")))?;
    let place = e.place.map(i64::from);
    let (outcome, buying_until, admission) = match (e.place, e.admitted_at, e.lapsed_at) {
        (None, _, _) => (EntryOutcome::Entered, None, None),
        (Some(_), _, Some(_)) => (EntryOutcome::Lapsed, None, None),
        (Some(_), None, None) => (EntryOutcome::Waitlisted, None, None),
        (Some(p), Some(at), None) => {
            let until = admit::window_end(at, d.buying_window_seconds);
            let secret = crate::queue::secret(&state)?;
            let token = admit::token(secret, &campaign, &customer, p, until);
            (EntryOutcome::Won, Some(until), Some(token))
        }
    };
    let receipt = EntryReceipt {
        entry_id: e.entry_id,
        campaign: campaign.clone(),
        customer,
        entered_at: e.entered_at,
        commitment: d.commitment,
        entries_close_at: d.entries_close_at,
    };
    Ok(axum::Json(MyEntry {
        receipt,
        outcome,
        place,
        buying_until,
        admission,
    })
    .into_response())
}

/// The draw's public status: the windows and the commitment from creation on; once drawn,
/// `result` with the seed, the entry list's digest, the winners and the waitlist in order
/// (what `flashgate draw verify` checks). `Cache-Control: public, max-age=1`. 404 when no such
/// campaign; 409 `conflict` when it is not a draw. Through the edge, a request with `Accept:
/// text/html` gets the draw's page instead (docs/DRAWS.md).
#[utoipa::path(
    get,
    path = "/api/v1/campaigns/{id}/draw",
    tag = "draw",
    params(("id" = String, Path, description = "Campaign id.")),
    responses(
        (status = 200, description = "The draw's status; `result` once drawn.", body = DrawStatus),
        errors::NoCampaign,
        errors::NotADraw,
    ),
)]
pub async fn status(
    State(state): State<AppState>,
    Path(campaign): Path<String>,
) -> ApiResult<Response> {
    let d = draw_of(&state, &campaign).await?;
    let body = store::status(&state.db, &d).await?;
    Ok(super::public_status(body))
}

/// Draws now (manager token): closes an open entry window at once and draws, with its
/// `draw_run` audit row; a draw that ran already is answered with its status, unchanged (and
/// unaudited). 200 with the draw's status (with its
/// result); 404 no such campaign; 409 `conflict` when the campaign is not a draw or its
/// entries have not opened; 401/403 without / with a wrong token.
#[utoipa::path(
    post,
    path = "/admin/v1/campaigns/{id}/draw/run",
    tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Campaign id.")),
    responses(
        (status = 200, description = "Drawn (now or before): the status with the result.",
            body = DrawStatus),
        errors::NoCampaign,
        (status = 409, description = "conflict: not a draw, or its entries have not opened.",
            body = ErrorBody),
    ),
)]
pub async fn run(
    State(state): State<AppState>,
    Path(campaign): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let who = extract::admin(&headers, &state, Role::Manager)?;
    draw_of(&state, &campaign).await?;
    match run::draw(&state.db, &campaign, Some(&who.name)).await? {
        Ran::Drawn(_) | Ran::AlreadyDrawn => {}
        Ran::NotOpen | Ran::NotClosed => {
            return Err(ApiError::Conflict(format!(
                "entries to {campaign} have not opened; nothing to draw"
            )))
        }
        Ran::NoDraw => {
            return Err(ApiError::Conflict(format!(
                "campaign {campaign} is not a draw"
            )))
        }
    }
    let d = draw_of(&state, &campaign).await?;
    let body: DrawStatus = store::status(&state.db, &d).await?;
    Ok(axum::Json(body).into_response())
}

/// A manager's view of the draw (a viewer's token is enough): its status without the result
/// (state, windows, commitment) and the counts of its entries: winners, waitlist, admitted
/// (and how many from the waitlist), claimed, lapsed. 404 no such campaign; 409 `conflict`
/// when it is not a draw; 401/403 without / with a wrong token.
#[utoipa::path(
    get,
    path = "/admin/v1/campaigns/{id}/draw",
    tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Campaign id.")),
    responses(
        (status = 200, description = "The draw and its counts.", body = DrawProgress),
        errors::NoCampaign,
        errors::NotADraw,
    ),
)]
pub async fn progress(
    State(state): State<AppState>,
    Path(campaign): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    extract::admin(&headers, &state, Role::Viewer)?;
    let d = draw_of(&state, &campaign).await?;
    let body: DrawProgress = store::progress(&state.db, &d).await?;
    Ok(axum::Json(body).into_response())
}
