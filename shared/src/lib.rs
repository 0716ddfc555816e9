//! Wire types and pure rules that both halves of flashgate compile: the origin (axum, host)
//! and the edge worker (wasm32). Nothing here does I/O; nothing here depends on tokio, sqlx
//! or the `worker` crate.
//!
//! - [`api`]: request and response bodies, one file per API area, result codes, the campaign
//!   state machine.
//! - [`token`]: the customer token (a JWT, RFC 7519 / RFC 7515: HS256, RS256 and ES256 with
//!   key ids, issuer and audience checks, the JWKS refresh schedule).
//! - [`signature`]: the edge signature the worker adds to the requests it forwards
//!   (HMAC-SHA256 over method, path, body, token, idempotency key and client IP).
//! - [`idempotency`]: the `Idempotency-Key` header rule.
//! - [`code`]: coupon-code alphabet and normalisation.
//! - [`money`]: discount arithmetic in integer minor units.
//! - [`queue`]: the waiting room's wire types (campaign option, join and status replies).
//! - [`admission`]: the waiting room's signed ticket and admission token (HMAC-SHA256).
//! - [`text`]: the one definition of acceptable text in request fields.
//! - [`trace`]: W3C Trace Context (`traceparent`) read by the origin, written by the edge.
//! - `settings` (feature `clap`): settings built from their clap declarations, for the test
//!   and tool configurations of the origin and the provider simulator.
//! - [`campaign_index`]: the compact set of campaign ids the origin hands the edge.
//! - [`winners_filter`]: the compact set of a sold-out campaign's winners the edge keeps.
//! - [`draw`]: the pure rules of a draw campaign (commitment, order, winners, digest, verify).
//! - [`pow`]: proof-of-work challenges of a join (signed challenge, one-hash check).
//! - [`invite`]: the shop's signed invites to an invite-only waiting room.
//! - [`answers`]: the edge's reports of the answers it gave itself, per second and result.
//! - [`cors`]: the allowed shop origins and the CORS header lists of both halves.
//! - [`ip_limit`]: the bucket key of every per-client-IP limit (IPv6 per prefix, IPv4-mapped
//!   addresses with their IPv4 address).

#![warn(missing_docs)]

pub mod admission;
pub mod answers;
pub mod api;
pub mod campaign_index;
pub mod code;
pub mod cors;
pub mod draw;
pub mod idempotency;
pub mod invite;
pub mod ip_limit;
pub mod money;
pub mod pow;
pub mod queue;
pub mod request_id;
#[cfg(feature = "clap")]
pub mod settings;
pub mod signature;
pub mod text;
pub mod token;
pub mod trace;
pub mod winners_filter;

/// Header every response carries to say which half answered: `edge` or `origin`.
pub const ANSWERED_BY_HEADER: &str = "flashgate-answered-by";

/// Where the origin serves its OpenAPI 3.1 document; the edge passes this path through.
pub const OPENAPI_PATH: &str = "/openapi.json";
/// Header that carries the edge signature on forwarded requests (see [`signature`]).
pub const EDGE_SIGNATURE_HEADER: &str = "flashgate-edge-signature";
/// `Cache-Control` of every answer that depends on who asks (anything authenticated by a
/// customer, service or admin token, errors included, and every answer the edge makes itself
/// for a claim): no cache between the client and the edge or origin may keep or share it
/// (RFC 9111 §5.2.2.5 `no-store`, §5.2.2.7 `private`). Public campaign status has its own.
pub const PRIVATE_CACHE_CONTROL: &str = "private, no-store";
/// `Cache-Control` of the public campaign and draw status: any cache may keep it for one
/// second (RFC 9111 §5.2.2.9 `public`, §5.2.2.1 `max-age`), so a crowd polling a status costs
/// the origin about one request per cache and second.
pub const PUBLIC_STATUS_CACHE_CONTROL: &str = "public, max-age=1";
/// Header in which the edge forwards the client's IP address (from Cloudflare's
/// `CF-Connecting-IP`), covered by the edge signature. The origin trusts it only on a request
/// whose edge signature verifies.
pub const CLIENT_IP_HEADER: &str = "flashgate-client-ip";
/// Header carrying the idempotency key of a claim (IETF draft-ietf-httpapi-idempotency-key-header).
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// Header (`true`) on the kept reply of an earlier request with the same idempotency key (a
/// claim, redeem, code use, hold change, gift or admin write answered again, nothing decided
/// now). The edge learns a campaign's state only from answers without it: a replayed
/// `sold_out` says what was true when the key was first used, not now.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
/// Largest claim body accepted, in bytes, by the edge and by the origin.
pub const MAX_CLAIM_BODY_BYTES: usize = 4 * 1024;

/// Fewest bytes any secret (token key, signature key, bearer token) may have: 32 bytes, 256
/// bits — the HMAC-SHA256 output size, the shortest key RFC 2104 §3 recommends and the
/// shortest HS256 key RFC 7518 §3.2 allows.
pub const MIN_SECRET_BYTES: usize = 32;

/// Checks that the secret set in `variable` has at least [`MIN_SECRET_BYTES`] bytes. The
/// error names the variable and the rule, never the secret.
pub fn check_secret(variable: &str, secret: &[u8]) -> Result<(), String> {
    if secret.len() >= MIN_SECRET_BYTES {
        Ok(())
    } else {
        Err(format!(
            "{variable} must be at least {MIN_SECRET_BYTES} bytes long (it has {}); generate one with e.g. `openssl rand -hex 32`",
            secret.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn secrets_shorter_than_32_bytes_are_refused_by_name() {
        let e = super::check_secret("FLASHGATE_X", b"").unwrap_err();
        assert!(
            e.starts_with("FLASHGATE_X must be at least 32 bytes long (it has 0)"),
            "{e}"
        );
        assert!(super::check_secret("FLASHGATE_X", &[b'a'; 31]).is_err());
        assert_eq!(super::check_secret("FLASHGATE_X", &[b'a'; 32]), Ok(()));
    }
}
