//! What the edge answers for a request, given its cached status: routing, the request checks
//! that cost the origin nothing, and the sold-out gate. Plain Rust, no I/O, never panics.

use crate::status::{Known, StatusEntry};
use flashgate_shared::api::{
    codes, is_valid_slug, parse_claim_body, CampaignState, ClaimReply, ErrorBody,
};
use flashgate_shared::{idempotency, token, MAX_CLAIM_BODY_BYTES};
use std::borrow::Cow;

/// `Retry-After` of a 503 `unavailable` answered by the edge, seconds.
pub const UNAVAILABLE_RETRY_AFTER_S: u32 = 1;

/// Where a request goes. Every per-campaign route carries the campaign id, checked against the
/// campaign index ([`crate::index`]) before anything else is asked of the origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route<'a> {
    /// `GET` or `HEAD /api/v1/campaigns/{id}`: served from the status cache (a `HEAD` without
    /// the body).
    Status {
        /// Campaign id (a valid slug).
        id: &'a str,
    },
    /// `POST /api/v1/campaigns/{id}/claims`: checked, gated, maybe forwarded. The id may be
    /// an invalid slug: the origin checks the request before the campaign, and so does the
    /// edge ([`claim_campaign_check`]).
    Claim {
        /// Campaign id as sent (a path segment, no `%`).
        id: &'a str,
    },
    /// `GET /api/v1/campaigns/{id}/queue`: a waiting-room poll, answered at the edge.
    QueuePoll {
        /// Campaign id (a valid slug).
        id: &'a str,
    },
    /// `POST /api/v1/campaigns/{id}/queue`: a join, rate limited, then passed to the origin.
    QueueJoin {
        /// Campaign id (a valid slug).
        id: &'a str,
    },
    /// `GET /api/v1/campaigns/{id}/queue/challenge`: a proof-of-work challenge, answered at
    /// the edge ([`crate::access`]).
    QueueChallenge {
        /// Campaign id (a valid slug).
        id: &'a str,
    },
    /// `GET /api/v1/campaigns/{id}/draw`: a browser (`Accept: text/html`) gets the draw's page
    /// at the edge ([`crate::page_draw`]); anything else is passed to the origin unchanged.
    Draw {
        /// Campaign id (a valid slug).
        id: &'a str,
    },
    /// Another per-campaign route (`claims/mine`, `HEAD` of the queue), or any of them with a
    /// percent-encoded id in a path not made canonical first ([`canonical_path`]): passed to
    /// the origin unchanged once the index lets the id through.
    CampaignPassThrough {
        /// The campaign id, percent-decoded (a valid slug).
        id: Cow<'a, str>,
    },
    /// Any other documented `/api/v1/...` path and method ([`API_ROUTES`]), and `GET` / `HEAD`
    /// of the OpenAPI document ([`flashgate_shared::OPENAPI_PATH`]): passed to the origin
    /// unchanged.
    PassThrough,
    /// A documented `/api/v1/...` path with a method it does not take: 405
    /// `method_not_allowed` with `Allow` at the edge ([`method_not_allowed`]).
    WrongMethod {
        /// The `Allow` header: the path's methods.
        allow: &'static str,
    },
    /// A campaign id that is not a slug (also once percent-decoded): the origin's 404
    /// `no campaign {id}` at the edge, without any lookup.
    NoSuchCampaign {
        /// The id as sent.
        id: &'a str,
    },
    /// Outside `/api/v1/` (but the OpenAPI document): the origin's 404 `no such route` at the
    /// edge (admin, metrics and health endpoints are not served through the edge).
    NoSuchRoute,
}

/// The documented routes under `/api/v1/` (docs/API.md): path segments (`*` = one non-empty
/// segment, an id or a code) and the `Allow` of the path. A `GET` route also takes `HEAD`, as
/// the origin does. Anything else under `/api/v1/` is answered by the edge: 404 for an unknown
/// path, 405 with `Allow` for a known path and another method.
pub const API_ROUTES: &[(&[&str], &str)] = &[
    (&["campaigns", "*"], "GET, HEAD"),
    (&["campaigns", "*", "claims"], "POST"),
    (&["campaigns", "*", "claims", "mine"], "GET, HEAD"),
    (&["campaigns", "*", "queue"], "GET, HEAD, POST"),
    (&["campaigns", "*", "queue", "challenge"], "GET"),
    (&["campaigns", "*", "draw"], "GET, HEAD"),
    (&["campaigns", "*", "draw", "entries"], "POST"),
    (&["campaigns", "*", "draw", "entries", "mine"], "GET, HEAD"),
    (&["claims", "*"], "GET, HEAD"),
    (&["claims", "*", "pay"], "POST"),
    (&["claims", "*", "release"], "POST"),
    (&["claims", "*", "extend"], "POST"),
    (&["codes", "*", "check"], "POST"),
    (&["codes", "*", "use"], "POST"),
    (&["uses", "*", "confirm"], "POST"),
    (&["uses", "*", "release"], "POST"),
    (&["coupons", "*"], "GET, HEAD"),
    (&["coupons", "*", "redeem"], "POST"),
    (&["gift-campaigns", "*", "eligibility"], "GET, HEAD"),
    (&["gift-campaigns", "*", "fulfilments"], "POST"),
    (&["fulfilments", "*"], "GET, HEAD"),
];

/// The `Allow` of `/api/v1/{rest}` in [`API_ROUTES`]; `None` for an undocumented path.
pub fn allowed_methods(rest: &str) -> Option<&'static str> {
    API_ROUTES.iter().find_map(|(pattern, allow)| {
        let mut segments = rest.split('/');
        let matched = pattern.iter().all(|p| {
            segments
                .next()
                .is_some_and(|s| if *p == "*" { !s.is_empty() } else { s == *p })
        }) && segments.next().is_none();
        matched.then_some(*allow)
    })
}

/// 405 `{"result":"method_not_allowed","message":…}`; the caller adds `Allow`.
pub fn method_not_allowed() -> Answer {
    Answer::error(
        405,
        codes::METHOD_NOT_ALLOWED,
        "method not allowed on this path",
    )
}

/// The `Allow` of the OpenAPI document's path.
pub const OPENAPI_ALLOW: &str = "GET, HEAD";

/// Routes a request by method and URL path (the path as sent, without the query string).
pub fn route<'a>(method: &str, path: &'a str) -> Route<'a> {
    if path == flashgate_shared::OPENAPI_PATH {
        return match method {
            "GET" | "HEAD" => Route::PassThrough,
            _ => Route::WrongMethod {
                allow: OPENAPI_ALLOW,
            },
        };
    }
    let Some(rest) = path.strip_prefix("/api/v1/") else {
        return Route::NoSuchRoute;
    };
    let Some(allow) = allowed_methods(rest) else {
        return Route::NoSuchRoute;
    };
    if !allow.split(", ").any(|m| m == method) {
        return Route::WrongMethod { allow };
    }
    let Some(tail) = rest.strip_prefix("campaigns/") else {
        return Route::PassThrough;
    };
    let (raw, sub) = match tail.split_once('/') {
        Some((id, sub)) => (id, Some(sub)),
        None => (tail, None),
    };
    let encoded = raw.contains('%');
    let id = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .unwrap_or(Cow::Borrowed(raw));
    if !is_valid_slug(&id) {
        // A claim is checked first, as the origin does; the 404 comes after the checks.
        return match (method, sub) {
            ("POST", Some("claims")) if !encoded => Route::Claim { id: raw },
            _ => Route::NoSuchCampaign { id: raw },
        };
    }
    if encoded {
        // Not reached through the worker, which routes the canonical path
        // ([`canonical_path`]); kept so that an encoded id never skips the index.
        return Route::CampaignPassThrough { id };
    }
    match (method, sub) {
        ("GET" | "HEAD", None) => Route::Status { id: raw },
        ("GET", Some("queue")) => Route::QueuePoll { id: raw },
        ("POST", Some("queue")) => Route::QueueJoin { id: raw },
        ("GET", Some("queue/challenge")) => Route::QueueChallenge { id: raw },
        ("GET", Some("draw")) => Route::Draw { id: raw },
        ("POST", Some("claims")) => Route::Claim { id: raw },
        _ => Route::CampaignPassThrough { id },
    }
}

/// The canonical form of a path whose campaign id segment (`/api/v1/campaigns/{id}...`) is
/// percent-encoded and decodes to a valid slug: the same path with the decoded id
/// (RFC 3986 §6.2.2.2: a percent-encoded unreserved character is the character itself), so
/// that `/api/v1/campaigns/%73ale` is routed, cached, gated, rate limited and forwarded exactly
/// as `/api/v1/campaigns/sale`. `None` when the path is already canonical or the decoded id is
/// not a slug (then [`route`] answers 404 for it).
pub fn canonical_path(path: &str) -> Option<String> {
    let tail = path.strip_prefix("/api/v1/campaigns/")?;
    let (raw, sub) = match tail.split_once('/') {
        Some((id, sub)) => (id, Some(sub)),
        None => (tail, None),
    };
    if !raw.contains('%') {
        return None;
    }
    let id = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .ok()?;
    if !is_valid_slug(&id) {
        return None;
    }
    Some(match sub {
        Some(sub) => format!("/api/v1/campaigns/{id}/{sub}"),
        None => format!("/api/v1/campaigns/{id}"),
    })
}

/// The origin's 404 for a campaign id that does not exist.
pub fn no_such_campaign(id: &str) -> Answer {
    Answer::error(
        404,
        codes::NOT_FOUND,
        &flashgate_shared::api::common::no_campaign_message(id),
    )
}

/// After the request checks of a claim: the origin's 404 when the id is not a slug.
pub fn claim_campaign_check(id: &str) -> Result<(), Answer> {
    if is_valid_slug(id) {
        Ok(())
    } else {
        Err(no_such_campaign(id))
    }
}

/// An answer the edge gives itself: HTTP status, JSON body and an optional `Retry-After`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status code.
    pub status: u16,
    /// JSON body.
    pub body: String,
    /// `Retry-After` in seconds, when set.
    pub retry_after_s: Option<u32>,
}

impl Answer {
    /// A request error `{"result": code, "message": message}`.
    pub fn error(status: u16, code: &str, message: &str) -> Self {
        Answer {
            status,
            body: ErrorBody::new(code, message).to_json(),
            retry_after_s: None,
        }
    }

    /// A business answer to a claim (201 or 409 with the [`ClaimReply`] body).
    pub fn reply(reply: &ClaimReply) -> Self {
        Answer {
            status: reply.http_status(),
            // A ClaimReply always serialises; the fallback keeps this panic-free regardless.
            body: serde_json::to_string(reply).unwrap_or_default(),
            retry_after_s: None,
        }
    }

    /// 503 `unavailable` with `Retry-After`: the origin is unreachable, timed out or failed.
    /// Never a made-up `claimed` or `sold_out`.
    pub fn unavailable() -> Self {
        Answer {
            retry_after_s: Some(UNAVAILABLE_RETRY_AFTER_S),
            ..Answer::error(
                503,
                codes::UNAVAILABLE,
                "a dependency is unavailable; retry after the given delay",
            )
        }
    }

    /// 503 `{"result":"unavailable","message":"the edge is misconfigured; …"}` (no
    /// `Retry-After`): a worker setting is missing or invalid, e.g. a secret shorter than 32
    /// bytes. The log names the setting; the body does not.
    pub fn misconfigured() -> Self {
        Answer::error(
            503,
            codes::UNAVAILABLE,
            "the edge is misconfigured; its operator has to fix a setting",
        )
    }

    /// The origin's 404 `not_found` for a path outside the API.
    pub fn no_such_route() -> Self {
        Answer::error(404, codes::NOT_FOUND, "no such route")
    }
}

/// The parts of a claim request the edge checks.
#[derive(Debug, Clone, Copy)]
pub struct ClaimInput<'a> {
    /// `Authorization` header value.
    pub authorization: Option<&'a str>,
    /// `Idempotency-Key` header value, as bytes.
    pub idempotency_key: Option<&'a [u8]>,
    /// `Content-Type` header value.
    pub content_type: Option<&'a str>,
    /// `Content-Length` header value, when sent (checked before the body is read).
    pub content_length: Option<&'a str>,
    /// The body bytes (`None` while not read yet).
    pub body: Option<&'a [u8]>,
}

/// 413 for a body over [`MAX_CLAIM_BODY_BYTES`].
pub fn too_large() -> Answer {
    Answer::error(
        413,
        codes::PAYLOAD_TOO_LARGE,
        &format!("body must be at most {MAX_CLAIM_BODY_BYTES} bytes"),
    )
}

/// Whether a request to the origin (or the identity provider) is sent once more when its
/// first try failed before any answer came (a connection refused or reset; never a timeout,
/// never after an answer began): a `GET` or `HEAD` (safe methods, RFC 9110 §9.2.1), or a
/// request with an `Idempotency-Key`, which the origin replays instead of doing twice. A
/// server closing an idle keep-alive connection just as the runtime reuses it fails this way
/// (RFC 9112 §9.3.1 lets a client retry such a request automatically when it is idempotent).
pub fn may_resend(method: &str, has_idempotency_key: bool) -> bool {
    has_idempotency_key || method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD")
}

/// Largest body the edge forwards on a pass-through path, in bytes: the origin's largest JSON
/// body (admin, service and coupon-code calls). A larger one could never succeed there, so it
/// is refused here rather than failing the forward (which would read as a retryable 503).
pub const MAX_PASS_THROUGH_BODY_BYTES: usize = 64 * 1024;

/// 413 for a pass-through body of `len` bytes over [`MAX_PASS_THROUGH_BODY_BYTES`].
pub fn check_pass_through_body(len: usize) -> Result<(), Answer> {
    if len <= MAX_PASS_THROUGH_BODY_BYTES {
        return Ok(());
    }
    Err(Answer::error(
        413,
        codes::PAYLOAD_TOO_LARGE,
        &format!("body must be at most {MAX_PASS_THROUGH_BODY_BYTES} bytes"),
    ))
}

/// 400 `invalid_request` for a pass-through body that could not be read whole (the client
/// sent less than its `Content-Length` and closed, or went away): nothing is forwarded, as the
/// origin answers such a request (a redeem whose body is optional must not go ahead on an
/// empty one).
pub fn unreadable_body() -> Answer {
    Answer::error(400, codes::INVALID_REQUEST, "the body could not be read")
}

/// Whether a client's request header is passed on to the origin (`name` in lowercase, as the
/// runtime lists them). Kept back: the hop-by-hop headers (RFC 9110 §7.6.1: `connection`,
/// `keep-alive`, `proxy-connection`, `te`, `trailer`, `transfer-encoding`, `upgrade`);
/// `expect` (RFC 9110 §10.1.1: the edge has read the whole body before it forwards, so a
/// `100-continue` has nothing left to ask, and the runtime's `fetch` fails on it); `host` and
/// `content-length` (the forwarded request's own); `x-forwarded-for` and `cf-*` (the
/// runtime's); and the edge signature and client IP, which only the edge sets.
pub fn passes_on(name: &str) -> bool {
    !matches!(
        name,
        "host"
            | "content-length"
            | "connection"
            | "keep-alive"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "expect"
            | "x-forwarded-for"
            | flashgate_shared::EDGE_SIGNATURE_HEADER
            | flashgate_shared::CLIENT_IP_HEADER
    ) && !name.starts_with("cf-")
}

/// Checks a declared `Content-Length` before reading the body: 413 when it is a number larger
/// than [`MAX_CLAIM_BODY_BYTES`] (also one too large to parse). Anything else passes; the
/// length of the body read decides then.
pub fn check_content_length(value: Option<&str>) -> Result<(), Answer> {
    let Some(v) = value.map(str::trim) else {
        return Ok(());
    };
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(());
    }
    match v.parse::<usize>() {
        Ok(n) if n <= MAX_CLAIM_BODY_BYTES => Ok(()),
        _ => Err(too_large()),
    }
}

/// Largest body the edge still reads (and drops) before answering 413, bytes. Answering
/// without reading makes the runtime close the client's connection; above this size that is
/// the better deal.
pub const DRAIN_LIMIT_BYTES: usize = 64 * 1024;

/// True when a too-large body of this declared `Content-Length` should still be read before
/// the 413 (at most [`DRAIN_LIMIT_BYTES`]).
pub fn drain_before_refusing(content_length: Option<&str>) -> bool {
    content_length
        .and_then(|v| v.trim().parse::<usize>().ok())
        .is_some_and(|n| n <= DRAIN_LIMIT_BYTES)
}

/// The client IP to forward to the origin: the value of Cloudflare's `CF-Connecting-IP`
/// when it is an IPv4 or IPv6 address (normalised, e.g. `2001:DB8::1` → `2001:db8::1`);
/// `None` when absent or not an address.
pub fn client_ip(cf_connecting_ip: Option<&str>) -> Option<String> {
    cf_connecting_ip
        .and_then(|v| v.trim().parse::<std::net::IpAddr>().ok())
        .map(|ip| ip.to_string())
}

/// True for `application/json`, parameters (such as `charset`) allowed, case-insensitive.
fn is_json_media_type(value: Option<&str>) -> bool {
    value
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// Customer tokens this isolate has verified (one cache per isolate, in the glue).
pub use flashgate_shared::token::TokenCache;

/// Checks a claim request in the origin's order — body size (413), `Content-Type` (415),
/// customer token (401), idempotency key (400), JSON body `{}` (400) — and returns the
/// customer id (the token's `sub`) or the origin's 4xx answer, byte for byte. `now` is the
/// edge's clock ([`token::NumericDate::from_unix_ms`]). (The origin checks the edge signature between size and
/// content type; the edge adds it.)
pub fn check_claim(
    input: &ClaimInput<'_>,
    tokens: &mut TokenCache,
    verifier: &token::Verifier,
    now: token::NumericDate,
) -> Result<String, Answer> {
    check_content_length(input.content_length)?;
    let body = input.body.unwrap_or_default();
    if body.len() > MAX_CLAIM_BODY_BYTES {
        return Err(too_large());
    }
    if !is_json_media_type(input.content_type) {
        return Err(Answer::error(
            415,
            codes::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        ));
    }
    let Some(authorization) = input.authorization else {
        return Err(Answer::error(
            401,
            codes::UNAUTHORIZED,
            "missing Authorization: Bearer token",
        ));
    };
    let Some(tok) = token::bearer(authorization) else {
        return Err(Answer::error(
            401,
            codes::UNAUTHORIZED,
            "Authorization must be 'Bearer <token>'",
        ));
    };
    let customer = tokens.verify(tok, verifier, now).map_err(|e| match e {
        // The identity provider has been unreachable since start-up: 503 + Retry-After.
        token::TokenError::KeysUnavailable => Answer::unavailable(),
        _ => Answer::error(401, codes::UNAUTHORIZED, e.message()),
    })?;
    idempotency::check_key(input.idempotency_key)
        .map_err(|m| Answer::error(400, codes::INVALID_IDEMPOTENCY_KEY, m))?;
    parse_claim_body(body).map_err(|e| Answer::error(400, codes::INVALID_JSON, &e.message))?;
    Ok(customer)
}

/// The sold-out gate's verdict for a checked claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Send it to the origin (signed).
    Forward,
    /// Answer at the edge.
    Answer(Answer),
}

/// Decides a checked claim from the cached status.
///
/// - No entry, or an entry that could not be refreshed (`fresh == false`): forward — the edge
///   never answers from a stale state.
/// - `sold_out`, `ended`, `paused`: the origin's 409 body for that state.
/// - `scheduled`: `not_started` only while `now_ms + skew_ms < starts_at`; closer to the start
///   the origin's clock decides.
/// - `active`: forward.
/// - Unknown campaign (404 cached): the origin's 404 body.
pub fn gate(entry: Option<&StatusEntry>, fresh: bool, now_ms: i64, skew_ms: i64) -> Gate {
    let Some(entry) = entry.filter(|_| fresh) else {
        return Gate::Forward;
    };
    let status = match &entry.known {
        Known::NotFound { body } => {
            return Gate::Answer(Answer {
                status: 404,
                body: body.clone(),
                retry_after_s: None,
            })
        }
        Known::Found { status, .. } => status,
    };
    if status.state == CampaignState::Scheduled
        && now_ms.saturating_add(skew_ms) >= status.starts_at.timestamp_millis()
    {
        return Gate::Forward;
    }
    match ClaimReply::for_state(status.state, status.starts_at) {
        None => Gate::Forward,
        Some(reply) => Gate::Answer(Answer::reply(&reply)),
    }
}

/// The variant a checked claim body names (`{"variant": "42"}`); `None` for `{}` (or a body
/// that is no claim body: [`check_claim`] refused it already).
pub fn claimed_variant(body: &[u8]) -> Option<String> {
    parse_claim_body(body).ok().and_then(|b| b.variant)
}

/// Decides a checked claim of variant `variant` that [`gate`] would forward: on a fresh entry
/// of an active campaign whose cached variant has no unit left, the answer is 409
/// `{"result":"sold_out","variant":"<id>"}` (the origin's body for it); otherwise (a variant
/// with units, one the cache does not list, a stale entry) the origin decides.
pub fn variant_gate(entry: Option<&StatusEntry>, fresh: bool, variant: &str) -> Gate {
    let Some(Known::Found {
        status, variants, ..
    }) = entry.filter(|_| fresh).map(|e| &e.known)
    else {
        return Gate::Forward;
    };
    let sold_out = status.state == CampaignState::Active
        && variants.iter().any(|v| v.id == variant && v.remaining <= 0);
    if !sold_out {
        return Gate::Forward;
    }
    Gate::Answer(Answer {
        status: 409,
        body: serde_json::json!({"result": "sold_out", "variant": variant}).to_string(),
        retry_after_s: None,
    })
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
