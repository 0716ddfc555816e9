//! flashgate edge worker: a Cloudflare Worker (Rust, `worker` crate, built with worker-build)
//! that sits in front of the origin.
//!
//! - `GET /api/v1/campaigns/{id}` is served from a per-isolate cache (plus the Cache API),
//!   refreshed from the origin at most once per status TTL per isolate, single-flight.
//! - `POST /api/v1/campaigns/{id}/claims` is checked at the edge (body size, JSON, idempotency
//!   key, customer token), answered at the edge when the cached state says `sold_out`, `ended`,
//!   `paused` or clearly `not_started`, and otherwise forwarded to the origin with an edge
//!   signature.
//! - The waiting room: `GET /api/v1/campaigns/{id}/queue` (a poll with a ticket) is answered
//!   at the edge ([`queue`], [`page`] for browsers); claims on a campaign with a waiting room
//!   need an admission token; joins, polls and those claims are rate limited ([`limit`], and
//!   across isolates by the Workers rate-limit binding where one is bound: [`shared_limit`]); the
//!   tickets that polled are reported to the origin in batches ([`presence`]); joins whose
//!   customer token verifies here go to the origin in groups ([`joins`]).
//! - The answers the edge gives itself (claims answered here, joins that failed their
//!   challenge) are counted per campaign, second and result and reported to the origin once a
//!   second ([`answers`], on the schedule of [`reporter`]).
//! - A browser's `GET /api/v1/campaigns/{id}/draw` gets the draw's page ([`page_draw`]).
//! - Every per-campaign path first checks the id against the isolate's campaign index
//!   ([`index`], fetched at most once per TTL): an unknown campaign is a 404 at the edge.
//! - With `FLASHGATE_CORS_ORIGINS` set, preflights are answered here and every answer carries
//!   the CORS headers of its origin ([`cors`]).
//! - Other documented `/api/v1/...` requests are passed through to the origin unchanged.
//!
//! Every decision is plain Rust in [`config`], [`decide`], [`status`], [`index`], [`winners`], [`held`], [`memo`], [`cors`],
//! [`queue`], [`joins`], [`presence`], [`answers`], [`reporter`], [`reveal`], [`limit`],
//! [`shared_limit`] and [`page`], tested on the host;
//! the order of a claim's rules is [`plan`]'s.
//! The glue that talks to the Workers runtime lives in a module compiled for `wasm32` only.
//! Nothing here panics on input: a panic inside workerd resets the isolate (and its cache).

#![warn(missing_docs)]

pub mod access;
pub mod answers;
pub mod config;
pub mod cors;
pub mod decide;
pub mod held;
pub mod index;
pub mod joins;
pub mod limit;
pub mod memo;
pub mod page;
pub mod page_draw;
pub mod plan;
pub mod presence;
pub mod queue;
pub mod reporter;
pub mod reveal;
pub mod shared_limit;
pub mod status;
pub mod telemetry;
pub mod winners;

#[cfg(target_arch = "wasm32")]
mod glue;
