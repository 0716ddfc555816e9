//! Wire types and pure rules that both halves of flashgate compile: the origin (axum, host)
//! and the edge worker (wasm32). Nothing here does I/O; nothing here depends on tokio, sqlx
//! or the `worker` crate.
//!
//! - [`api`]: request and response bodies, result codes, the campaign state machine.
//! - [`token`]: the customer token (an HS256 JWT, RFC 7519 / RFC 7515).
//! - [`signature`]: the edge signature the worker adds to forwarded claims (HMAC-SHA256).
//! - [`idempotency`]: the `Idempotency-Key` header rule.
//! - [`code`]: coupon-code alphabet and normalisation.
//! - [`money`]: discount arithmetic in integer minor units.
//! - [`text`]: the one definition of acceptable text in request fields.

pub mod api;
pub mod code;
pub mod idempotency;
pub mod money;
pub mod signature;
pub mod text;
pub mod token;

/// Header every response carries to say which half answered: `edge` or `origin`.
pub const ANSWERED_BY_HEADER: &str = "flashgate-answered-by";
/// Header that carries the edge signature on forwarded requests (see [`signature`]).
pub const EDGE_SIGNATURE_HEADER: &str = "flashgate-edge-signature";
/// `Cache-Control` of every answer that depends on who asks (anything authenticated by a
/// customer, service or admin token, errors included, and every answer the edge makes itself
/// for a claim): no cache between the client and the edge or origin may keep or share it
/// (RFC 9111 §5.2.2.5 `no-store`, §5.2.2.7 `private`). Public campaign status has its own.
pub const PRIVATE_CACHE_CONTROL: &str = "private, no-store";
/// Header carrying the idempotency key of a claim (IETF draft-ietf-httpapi-idempotency-key-header).
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// Largest claim body accepted, in bytes, by the edge and by the origin.
pub const MAX_CLAIM_BODY_BYTES: usize = 4 * 1024;
