//! What the edge answers for a request, given its cached status: routing, the request checks
//! that cost the origin nothing, and the sold-out gate. Plain Rust, no I/O, never panics.

use crate::status::{Known, StatusEntry};
use flashgate_shared::api::{
    codes, is_valid_slug, parse_claim_body, CampaignState, ClaimReply, ErrorBody,
};
use flashgate_shared::{idempotency, token, MAX_CLAIM_BODY_BYTES};

/// `Retry-After` of a 503 `unavailable` answered by the edge, seconds.
pub const UNAVAILABLE_RETRY_AFTER_S: u32 = 1;

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `GET /api/v1/campaigns/{id}`: served from the status cache.
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
    /// Any other `/api/v1/...` request: passed to the origin unchanged. Also ids with
    /// percent-encoding, so that the origin's own 404 message (with the decoded id) is served.
    PassThrough,
    /// A campaign id that is not a slug: the origin's 404 `no campaign {id}` at the edge.
    NoSuchCampaign {
        /// The id as sent.
        id: &'a str,
    },
    /// Outside `/api/v1/`: the origin's 404 `no such route` at the edge (admin, metrics and
    /// health endpoints are not served through the edge).
    NoSuchRoute,
}

/// Routes a request by method and URL path (the path as sent, without the query string).
pub fn route<'a>(method: &str, path: &'a str) -> Route<'a> {
    let Some(rest) = path.strip_prefix("/api/v1/") else {
        return Route::NoSuchRoute;
    };
    let Some(tail) = rest.strip_prefix("campaigns/") else {
        return Route::PassThrough;
    };
    let (id, sub) = match tail.split_once('/') {
        Some((id, sub)) => (id, Some(sub)),
        None => (tail, None),
    };
    if id.is_empty() || id.contains('%') {
        return Route::PassThrough;
    }
    match (method, sub) {
        ("GET", None) if !is_valid_slug(id) => Route::NoSuchCampaign { id },
        ("GET", None) => Route::Status { id },
        ("POST", Some("claims")) => Route::Claim { id },
        _ => Route::PassThrough,
    }
}

/// The origin's 404 for a campaign id that does not exist.
pub fn no_such_campaign(id: &str) -> Answer {
    Answer::error(404, codes::NOT_FOUND, &format!("no campaign {id}"))
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

/// Customer tokens this isolate has verified, so that a customer's retries (a stampede is
/// mostly retries and double taps) skip the HMAC and the JSON parsing. A hit is only the very
/// same token string whose signature was checked under this secret; its `exp` and `nbf` are
/// checked again on every use. Holds at most `capacity` tokens and starts over when full.
#[derive(Debug, Default)]
pub struct TokenCache {
    verified: std::collections::HashMap<String, token::CustomerClaims>,
    capacity: usize,
}

impl TokenCache {
    /// An empty cache holding at most `capacity` tokens (0 disables it).
    pub fn new(capacity: usize) -> Self {
        TokenCache {
            verified: std::collections::HashMap::new(),
            capacity,
        }
    }

    /// Same result as [`token::verify`] for the same token, secret and clock.
    pub fn verify(
        &mut self,
        tok: &str,
        secret: &[u8],
        now: token::NumericDate,
    ) -> Result<String, token::TokenError> {
        if let Some(c) = self.verified.get(tok) {
            c.check_times(now)?;
            return Ok(c.sub.clone());
        }
        let claims = token::verify(tok, secret, now)?;
        if self.capacity > 0 {
            if self.verified.len() >= self.capacity {
                self.verified.clear();
            }
            self.verified.insert(tok.to_string(), claims.clone());
        }
        Ok(claims.sub)
    }

    /// Number of tokens held.
    pub fn len(&self) -> usize {
        self.verified.len()
    }

    /// True when no token is held.
    pub fn is_empty(&self) -> bool {
        self.verified.is_empty()
    }
}

/// Checks a claim request in the origin's order — body size (413), `Content-Type` (415),
/// customer token (401), idempotency key (400), JSON body `{}` (400) — and returns the
/// customer id (the token's `sub`) or the origin's 4xx answer, byte for byte. `now` is the
/// edge's clock ([`token::NumericDate::from_unix_ms`]). (The origin checks the edge signature between size and
/// content type; the edge adds it.)
pub fn check_claim(
    input: &ClaimInput<'_>,
    tokens: &mut TokenCache,
    token_secret: &[u8],
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
    let customer = tokens
        .verify(tok, token_secret, now)
        .map_err(|e| Answer::error(401, codes::UNAUTHORIZED, e.message()))?;
    if !input.idempotency_key.is_some_and(idempotency::is_valid_key) {
        return Err(Answer::error(
            400,
            codes::INVALID_IDEMPOTENCY_KEY,
            "Idempotency-Key must be 1 to 255 visible ASCII characters",
        ));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::tests::{entry, t};
    use flashgate_shared::token::{mint, CustomerClaims};

    const SECRET: &[u8] = b"k";
    const NOW: i64 = 1_900_000_000;

    fn at(seconds: i64) -> token::NumericDate {
        seconds.into()
    }

    fn tok(exp: i64) -> String {
        let c = CustomerClaims {
            sub: "cust-7".into(),
            exp: exp.into(),
            nbf: None,
        };
        format!("Bearer {}", mint(&c, SECRET))
    }

    #[test]
    fn client_ip_is_forwarded_only_when_it_is_an_address() {
        assert_eq!(
            client_ip(Some(" 203.0.113.7 ")).as_deref(),
            Some("203.0.113.7")
        );
        assert_eq!(
            client_ip(Some("2001:DB8::1")).as_deref(),
            Some("2001:db8::1")
        );
        for bad in [None, Some(""), Some("203.0.113.7, 10.0.0.1"), Some("x")] {
            assert_eq!(client_ip(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn routes() {
        assert_eq!(
            route("GET", "/api/v1/campaigns/spring"),
            Route::Status { id: "spring" }
        );
        assert_eq!(
            route("POST", "/api/v1/campaigns/Bad_Id/claims"),
            Route::Claim { id: "Bad_Id" }
        );
        assert_eq!(
            claim_campaign_check("Bad_Id").unwrap_err().body,
            r#"{"result":"not_found","message":"no campaign Bad_Id"}"#
        );
        assert_eq!(
            route("POST", "/api/v1/campaigns/spring/claims"),
            Route::Claim { id: "spring" }
        );
        assert_eq!(
            route("GET", "/api/v1/campaigns/Spring%20"),
            Route::PassThrough
        );
        assert_eq!(
            route("POST", "/api/v1/campaigns//claims"),
            Route::PassThrough
        );
        assert_eq!(
            route("GET", "/api/v1/campaigns/Spring"),
            Route::NoSuchCampaign { id: "Spring" }
        );
        assert_eq!(
            route("GET", "/api/v1/campaigns/spring/claims"),
            Route::PassThrough
        );
        assert_eq!(route("PUT", "/api/v1/campaigns/spring"), Route::PassThrough);
        assert_eq!(route("GET", "/api/v1/claims/c_1"), Route::PassThrough);
        assert_eq!(route("GET", "/admin/v1/campaigns"), Route::NoSuchRoute);
        assert_eq!(route("GET", "/metrics"), Route::NoSuchRoute);
        assert_eq!(route("GET", ""), Route::NoSuchRoute);
    }

    fn input<'a>(auth: Option<&'a str>, key: Option<&'a [u8]>, body: &'a [u8]) -> ClaimInput<'a> {
        ClaimInput {
            authorization: auth,
            idempotency_key: key,
            content_type: Some("application/json; charset=utf-8"),
            content_length: None,
            body: Some(body),
        }
    }

    #[test]
    fn accepts_a_good_claim() {
        let a = tok(NOW + 60);
        let r = check_claim(
            &input(Some(&a), Some(b"k-1"), b"{}"),
            &mut TokenCache::new(8),
            SECRET,
            at(NOW),
        );
        assert_eq!(r, Ok("cust-7".to_string()));
    }

    #[test]
    fn refuses_bad_claims_with_origin_codes() {
        let good = tok(NOW + 60);
        let expired = tok(NOW);
        let big = vec![b' '; MAX_CLAIM_BODY_BYTES + 1];
        let cases: Vec<(ClaimInput, u16, &str)> = vec![
            (
                input(Some(&good), Some(b"k"), &big),
                413,
                "payload_too_large",
            ),
            (input(None, Some(b"k"), b"{}"), 401, "unauthorized"),
            (
                input(Some("Bearer x.y.z"), Some(b"k"), b"{}"),
                401,
                "unauthorized",
            ),
            (
                input(Some(&expired), Some(b"k"), b"{}"),
                401,
                "unauthorized",
            ),
            (
                input(Some(&good), None, b"{}"),
                400,
                "invalid_idempotency_key",
            ),
            (
                input(Some(&good), Some(b"has space"), b"{}"),
                400,
                "invalid_idempotency_key",
            ),
            (input(Some(&good), Some(b"k"), b"{"), 400, "invalid_json"),
            (
                input(Some(&good), Some(b"k"), br#"{"quantity":-1}"#),
                400,
                "invalid_json",
            ),
            (
                input(Some(&good), Some(b"k"), br#"{"n":1e999999}"#),
                400,
                "invalid_json",
            ),
            (
                input(Some(&good), Some(b"k"), b"99999999999999999999999"),
                400,
                "invalid_json",
            ),
            (input(Some(&good), Some(b"k"), b""), 400, "invalid_json"),
        ];
        let plain = ClaimInput {
            content_type: Some("text/plain"),
            ..input(Some(&good), Some(b"k"), b"{}")
        };
        let none = ClaimInput {
            content_type: None,
            ..input(Some(&good), Some(b"k"), b"{}")
        };
        let mut cases = cases;
        cases.push((plain, 415, "unsupported_media_type"));
        cases.push((none, 415, "unsupported_media_type"));
        for (i, (inp, status, code)) in cases.into_iter().enumerate() {
            let a = check_claim(&inp, &mut TokenCache::new(8), SECRET, at(NOW)).unwrap_err();
            let body: ErrorBody = serde_json::from_str(&a.body).unwrap();
            assert_eq!((a.status, body.result.as_str()), (status, code), "case {i}");
        }
    }

    #[test]
    fn token_cache_gives_the_same_results_as_verify() {
        let mut cache = TokenCache::new(2);
        let c = |exp: i64, nbf: Option<i64>| CustomerClaims {
            sub: "cust-7".into(),
            exp: exp.into(),
            nbf: nbf.map(Into::into),
        };
        let live = mint(&c(NOW + 60, None), SECRET);
        let later = mint(&c(NOW + 60, Some(NOW + 30)), SECRET);
        for _ in 0..2 {
            // First round fills the cache, the second answers from it.
            assert_eq!(cache.verify(&live, SECRET, at(NOW)), Ok("cust-7".into()));
            assert_eq!(
                cache.verify(&later, SECRET, at(NOW)),
                Err(token::TokenError::NotYetValid)
            );
        }
        assert_eq!(cache.len(), 1);
        // Expiry is checked on every use of a cached token.
        assert_eq!(
            cache.verify(&live, SECRET, at(NOW + 60)),
            Err(token::TokenError::Expired)
        );
        // Another secret never hits: the token is verified again and refused.
        let mut fresh = TokenCache::new(2);
        assert_eq!(
            fresh.verify(&live, b"other", at(NOW)),
            Err(token::TokenError::BadSignature)
        );
        assert!(fresh.is_empty());
        // Full: starts over.
        let a = mint(&c(NOW + 61, None), SECRET);
        let b = mint(&c(NOW + 62, None), SECRET);
        cache.verify(&a, SECRET, at(NOW)).unwrap();
        cache.verify(&b, SECRET, at(NOW)).unwrap();
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn content_length_is_checked_before_reading() {
        let good = tok(NOW + 60);
        for (cl, status) in [
            ("4097", 413),
            ("99999999999999999999999999", 413),
            // Not a number: ignored, the (empty) body decides.
            ("-1", 400),
            ("x", 400),
        ] {
            let inp = ClaimInput {
                content_length: Some(cl),
                body: None,
                ..input(Some(&good), Some(b"k"), b"")
            };
            assert_eq!(
                check_claim(&inp, &mut TokenCache::new(8), SECRET, at(NOW))
                    .unwrap_err()
                    .status,
                status,
                "{cl}"
            );
        }
        assert_eq!(check_content_length(Some("4096")), Ok(()));
        assert!(drain_before_refusing(Some("5000")));
        assert!(!drain_before_refusing(Some("65537")));
        assert!(!drain_before_refusing(Some("x")));
    }

    #[test]
    fn gate_answers_closed_states_at_the_edge() {
        let now = t("2026-03-01T11:00:00Z").timestamp_millis();
        let answer = |s| match gate(Some(&entry(s, now)), true, now, 2_000) {
            Gate::Answer(a) => Some((a.status, a.body)),
            Gate::Forward => None,
        };
        assert_eq!(
            answer(CampaignState::SoldOut),
            Some((409, r#"{"result":"sold_out"}"#.into()))
        );
        assert_eq!(
            answer(CampaignState::Ended),
            Some((409, r#"{"result":"ended"}"#.into()))
        );
        assert_eq!(
            answer(CampaignState::Paused),
            Some((409, r#"{"result":"paused"}"#.into()))
        );
        assert_eq!(answer(CampaignState::Active), None);
        // Stale or missing state: forward, never a made-up answer.
        let so = entry(CampaignState::SoldOut, now);
        assert_eq!(gate(Some(&so), false, now, 2_000), Gate::Forward);
        assert_eq!(gate(None, true, now, 2_000), Gate::Forward);
    }

    #[test]
    fn not_started_only_when_clearly_early() {
        // starts_at is 2026-03-01T10:00:00Z.
        let e = entry(CampaignState::Scheduled, 0);
        let start = t("2026-03-01T10:00:00Z").timestamp_millis();
        let Gate::Answer(a) = gate(Some(&e), true, start - 2_001, 2_000) else {
            panic!("forwarded")
        };
        assert_eq!(
            (a.status, a.body.as_str()),
            (
                409,
                r#"{"result":"not_started","starts_at":"2026-03-01T10:00:00Z"}"#
            )
        );
        assert_eq!(gate(Some(&e), true, start - 2_000, 2_000), Gate::Forward);
        assert_eq!(gate(Some(&e), true, start + 5, 2_000), Gate::Forward);
        assert_eq!(gate(Some(&e), true, i64::MAX, 2_000), Gate::Forward);
    }

    #[test]
    fn unknown_campaign_answers_the_origin_404() {
        let e = crate::status::from_origin("x", 404, br#"{"result":"not_found","message":"m"}"#, 0)
            .unwrap();
        let Gate::Answer(a) = gate(Some(&e), true, 0, 0) else {
            panic!()
        };
        assert_eq!(
            (a.status, a.body.as_str()),
            (404, r#"{"result":"not_found","message":"m"}"#)
        );
        let u = Answer::unavailable();
        assert_eq!((u.status, u.retry_after_s), (503, Some(1)));
        assert!(u.body.starts_with(r#"{"result":"unavailable","#));
    }

    #[test]
    fn pass_through_bodies_past_the_origin_limit_are_refused() {
        assert!(check_pass_through_body(MAX_PASS_THROUGH_BODY_BYTES).is_ok());
        let refused = check_pass_through_body(MAX_PASS_THROUGH_BODY_BYTES + 1).unwrap_err();
        assert_eq!(refused.status, 413);
    }
}
