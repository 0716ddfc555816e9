//! The error answers more than one operation documents, each written once: a handler's
//! `#[utoipa::path(responses(...))]` names them (`errors::NoCampaign`, `errors::JsonBody`)
//! beside the answers that are its own. Each is a [`utoipa::IntoResponses`]: its status, its
//! description and the body [`ErrorBody`] (`{"result": <code>, "message": <text>}`), inlined
//! into the operation as a hand-written entry would be, so the document is the same.
//!
//! A single answer is a struct; a set of answers that go together (the three of a JSON body)
//! is a [`set!`] of them. An answer worded for one operation only stays in its handler.

use std::collections::BTreeMap;

use flashgate_shared::api::ErrorBody;
use utoipa::openapi::{RefOr, Response};
use utoipa::IntoResponses;

/// 400 `invalid_json`: the body is not the JSON the operation takes.
#[derive(IntoResponses)]
#[response(status = 400, description = "invalid_json.")]
pub struct InvalidJson(pub ErrorBody);

/// 400 `invalid_json` or `invalid_idempotency_key`.
#[derive(IntoResponses)]
#[response(status = 400, description = "invalid_json, invalid_idempotency_key.")]
pub struct InvalidJsonOrKey(pub ErrorBody);

/// 401 `unauthorized`: no valid customer token.
#[derive(IntoResponses)]
#[response(status = 401, description = "unauthorized: no valid customer token.")]
pub struct CustomerToken(pub ErrorBody);

/// 403 `forbidden` of a customer call the edge forwards, on an origin with an edge secret.
#[derive(IntoResponses)]
#[response(
    status = 403,
    description = "forbidden: no valid edge signature on an origin with an edge secret."
)]
pub struct EdgeSignature(pub ErrorBody);

/// 403 `forbidden` of a promo code call with an edge signature that does not verify.
#[derive(IntoResponses)]
#[response(status = 403, description = "forbidden: an invalid edge signature.")]
pub struct InvalidEdgeSignature(pub ErrorBody);

/// 403 `forbidden` of an edge report: it must be edge-signed, and so must each of its tickets.
#[derive(IntoResponses)]
#[response(
    status = 403,
    description = "forbidden: no valid edge signature (or no edge secret on this origin to \
        check one), or a forged ticket or another campaign's."
)]
pub struct EdgeReport(pub ErrorBody);

/// 404 `not_found`.
#[derive(IntoResponses)]
#[response(status = 404, description = "not_found.")]
pub struct NotFound(pub ErrorBody);

/// 404 `not_found`: no campaign has the id of the path (or it is not a slug).
#[derive(IntoResponses)]
#[response(status = 404, description = "not_found: no such campaign.")]
pub struct NoCampaign(pub ErrorBody);

/// 404 `not_found`: no gift campaign has the id of the path.
#[derive(IntoResponses)]
#[response(status = 404, description = "not_found: no such gift campaign.")]
pub struct NoGiftCampaign(pub ErrorBody);

/// 404 `not_found`: no such campaign, or no such segment in it.
#[derive(IntoResponses)]
#[response(status = 404, description = "not_found: no such campaign or segment.")]
pub struct NoSegment(pub ErrorBody);

/// 404 `not_found`: no fulfilment has the id of the path.
#[derive(IntoResponses)]
#[response(status = 404, description = "not_found: no such fulfilment.")]
pub struct NoFulfilment(pub ErrorBody);

/// 404 `not_found`: a claim (hold) id that is not one, or that no claim has.
#[derive(IntoResponses)]
#[response(status = 404, description = "not_found: a malformed or unknown id.")]
pub struct NoClaim(pub ErrorBody);

/// 404 `not_found`: no promo code has this id.
#[derive(IntoResponses)]
#[response(status = 404, description = "not_found: no such code.")]
pub struct NoCode(pub ErrorBody);

/// 404 `not_found`: no use of a promo code has this id.
#[derive(IntoResponses)]
#[response(status = 404, description = "not_found: no such use.")]
pub struct NoUse(pub ErrorBody);

/// 404 `not_found`: no giveaway coupon has this code.
#[derive(IntoResponses)]
#[response(status = 404, description = "not_found: no coupon with this code.")]
pub struct NoCoupon(pub ErrorBody);

/// 409 `conflict`: the campaign is not a draw.
#[derive(IntoResponses)]
#[response(status = 409, description = "conflict: the campaign is not a draw.")]
pub struct NotADraw(pub ErrorBody);

/// 409 `no_waiting_room`: the campaign has none.
#[derive(IntoResponses)]
#[response(status = 409, description = "no_waiting_room: the campaign has none.")]
pub struct NoWaitingRoom(pub ErrorBody);

/// 409 `in_progress` + `Retry-After` (seconds): the first request with this idempotency key is
/// still running.
#[derive(IntoResponses)]
#[response(
    status = 409,
    description = "in_progress (+ `Retry-After`).",
    headers(("Retry-After" = u32))
)]
pub struct InProgress(pub ErrorBody);

/// 413 `payload_too_large`: a body past the operation's bound.
#[derive(IntoResponses)]
#[response(status = 413, description = "payload_too_large.")]
pub struct PayloadTooLarge(pub ErrorBody);

/// 413 `payload_too_large` of a customer call the edge forwards (a claim, a join, an entry).
#[derive(IntoResponses)]
#[response(status = 413, description = "payload_too_large: a body past 4 KiB.")]
pub struct PayloadPast4KiB(pub ErrorBody);

/// 413 `payload_too_large` of an edge presence report.
#[derive(IntoResponses)]
#[response(status = 413, description = "payload_too_large: a body past 1 MiB.")]
pub struct PayloadPast1MiB(pub ErrorBody);

/// 413 `payload_too_large` of an edge report of issued tickets.
#[derive(IntoResponses)]
#[response(status = 413, description = "payload_too_large: a body past 4 MiB.")]
pub struct PayloadPast4MiB(pub ErrorBody);

/// 415 `unsupported_media_type`: not `application/json`.
#[derive(IntoResponses)]
#[response(status = 415, description = "unsupported_media_type.")]
pub struct UnsupportedMediaType(pub ErrorBody);

/// 415 `unsupported_media_type`, worded for the customer's calls.
#[derive(IntoResponses)]
#[response(
    status = 415,
    description = "unsupported_media_type: not `application/json`."
)]
pub struct NotJson(pub ErrorBody);

/// 422 `validation_failed`: a filter names a status there is not.
#[derive(IntoResponses)]
#[response(status = 422, description = "validation_failed: an unknown status.")]
pub struct UnknownStatus(pub ErrorBody);

/// A set of answers documented together: `set!(Name = [A, B, …])` is the [`IntoResponses`]
/// `Name` whose answers are those of `A`, `B`, ….
macro_rules! set {
    ($(#[$doc:meta])* $name:ident = [$($part:ident),+ $(,)?]) => {
        $(#[$doc])*
        pub struct $name;

        impl IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
                let mut all = BTreeMap::new();
                $(all.extend($part::responses());)+
                all
            }
        }
    };
}

set!(
    /// The errors of a JSON body: 400 `invalid_json`, 413 `payload_too_large`, 415
    /// `unsupported_media_type`.
    JsonBody = [InvalidJson, PayloadTooLarge, UnsupportedMediaType]
);

set!(
    /// The errors of a JSON body with an `Idempotency-Key`: 400 `invalid_json` or
    /// `invalid_idempotency_key`, 413 `payload_too_large`, 415 `unsupported_media_type`.
    KeyedJsonBody = [InvalidJsonOrKey, PayloadTooLarge, UnsupportedMediaType]
);
