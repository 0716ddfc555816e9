//! Request and response bodies of the public and admin API, shared by origin and edge so that
//! both give byte-for-byte the same bodies for the same results. One file per area:
//!
//! - [`common`]: the request-error body and its result codes, field rules used by several areas;
//! - [`campaigns`]: kind, state, public status, the creation body and its limits;
//! - [`claims`]: the claim, its request and its answers;
//! - [`holds`]: pay and release of a sale's hold;
//! - [`giveaway`]: giveaway coupons (redeem, coupon view, QR payload);
//! - [`gifts`]: gift fulfilment (gift campaigns, segments, caps, eligibility, fulfilments);
//! - [`promo`]: the coupon-code service (promo codes: check, use, confirm, release, batches);
//! - [`admin`]: the admin bodies (campaign views, change request and reply, audit, reconcile).
//!
//! Every item is also re-exported here, so `flashgate_shared::api::X` names it whatever its
//! area; [`coupons`] is the former name of [`promo`].
//!
//! Every non-2xx answer has one of two shapes:
//! - a business result: `{"result": "<code>", ...fields of that result}` (e.g. 409 `sold_out`);
//! - a request error: `{"result": "<code>", "message": "<text for humans>"}` ([`ErrorBody`]).
//!
//! Times are RFC 3339 in UTC; counts are plain integers; money is integer minor units.

pub mod admin;
pub mod campaigns;
pub mod claims;
pub mod common;
pub mod gifts;
pub mod giveaway;
pub mod holds;
pub mod promo;

pub use admin::*;
pub use campaigns::*;
pub use claims::*;
pub use common::*;
pub use giveaway::*;
pub use holds::*;
/// The former name of [`promo`], kept while callers move to it.
pub use promo as coupons;
