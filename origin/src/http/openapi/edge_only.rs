//! Operations the edge answers itself, never forwarded to the origin, so that no origin
//! handler carries them: they are documented here, with `x-flashgate-answered-by: edge`
//! ([`EDGE_ONLY`]); the origin answers them 405 (another method of the path is its own) or 404.

#![allow(dead_code)]

use super::errors;
use flashgate_shared::api::ErrorBody;
use flashgate_shared::queue::access::ChallengeReply;
use flashgate_shared::queue::StatusReply;

/// `(method, path)` of every operation only the edge answers.
pub const EDGE_ONLY: &[(&str, &str)] = &[
    ("get", "/api/v1/campaigns/{id}/queue"),
    ("get", "/api/v1/campaigns/{id}/queue/challenge"),
];

/// `Flashgate-Ticket` of a waiting-room poll (or `?ticket=`): the ticket the join gave.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct Ticket {
    /// The ticket, as the join gave it.
    #[serde(rename = "Flashgate-Ticket")]
    pub ticket: Option<String>,
}

/// A waiting-room poll, answered by the edge from the queue's figures it caches
/// (docs/WAITING-ROOM.md). With `Accept: text/html` the edge answers the waiting page instead;
/// without a ticket, the join page, whose script joins (solving a proof of work first when the
/// campaign asks for one: docs/ACCESS.md).
#[utoipa::path(
    get,
    path = "/api/v1/campaigns/{id}/queue",
    tag = "waiting room",
    params(
        ("id" = String, Path, description = "Campaign id."),
        Ticket,
        ("ticket" = Option<String>, Query, description = "The ticket, when not in the header."),
    ),
    responses(
        (status = 200, description = "Her place; poll again after `Retry-After` (1–30 s). \
            `admission_token` once admitted: claim with it in `Flashgate-Admission`. Its `exp` \
            is fixed when the admission is granted (every poll returns it unchanged); once it \
            has passed without a claim the state is `lapsed` (final, no token). A ticket \
            passed while away (not seen within `presence_window_seconds`) is `waiting` at \
            position 1 until she is admitted again. `sold_out` carries `outlook`: \
            `may_return` (with `held_until`, the latest outstanding hold; `Retry-After: 15`, \
            keep polling) while holds are outstanding, else `final` (stop polling).",
            body = StatusReply, headers(("Retry-After" = u32))),
        (status = 400, description = "invalid_request: no ticket, or a malformed one.",
            body = ErrorBody),
        (status = 403, description = "forbidden: a forged ticket, or another campaign's.",
            body = ErrorBody),
        errors::NoCampaign,
        errors::NoWaitingRoom,
        (status = 429, description = "rate_limited: too many polls from this address.",
            body = ErrorBody, headers(("Retry-After" = u32))),
    ),
)]
pub fn queue_poll() {}

/// A proof-of-work challenge for the customer of a waiting room with `challenge: "pow"`,
/// answered by the edge (docs/ACCESS.md).
#[utoipa::path(
    get,
    path = "/api/v1/campaigns/{id}/queue/challenge",
    tag = "waiting room",
    security(("customer_token" = [])),
    params(("id" = String, Path, description = "Campaign id.")),
    responses(
        (status = 200, description = "A challenge bound to this campaign and customer, valid \
            for a few minutes: find a decimal `solution` such that SHA-256 of \
            `challenge + \":\" + solution` starts with `difficulty` zero bits, then join \
            with both.", body = ChallengeReply),
        (status = 401, description = "unauthorized: no valid customer token.", body = ErrorBody),
        (status = 404, description = "not_found: no such campaign.", body = ErrorBody),
        (status = 409, description = "no_waiting_room: the campaign has none; conflict: its \
            waiting room has no `pow` challenge.", body = ErrorBody),
        (status = 429, description = "rate_limited: too many requests from this customer or \
            address.", body = ErrorBody, headers(("Retry-After" = u32))),
    ),
)]
pub fn queue_challenge() {}
