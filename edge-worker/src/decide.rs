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
    /// `POST /api/v1/campaigns/{id}/claims`: checked, gated, maybe forwarded.
    Claim {
        /// Campaign id (a valid slug).
        id: &'a str,
    },
    /// Any other `/api/v1/...` request: passed to the origin unchanged.
    PassThrough,
    /// Outside `/api/v1/`, or a campaign id that no campaign can have: 404 at the edge.
    NotFound,
}

/// Routes a request by method and URL path (the path as sent, without the query string).
pub fn route<'a>(method: &str, path: &'a str) -> Route<'a> {
    let Some(rest) = path.strip_prefix("/api/v1/") else {
        return Route::NotFound;
    };
    let Some(tail) = rest.strip_prefix("campaigns/") else {
        return Route::PassThrough;
    };
    let (id, sub) = match tail.split_once('/') {
        Some((id, sub)) => (id, Some(sub)),
        None => (tail, None),
    };
    match (method, sub) {
        ("GET", None) | ("POST", Some("claims")) if !is_valid_slug(id) => Route::NotFound,
        ("GET", None) => Route::Status { id },
        ("POST", Some("claims")) => Route::Claim { id },
        _ => Route::PassThrough,
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
                "the service is unavailable, retry later",
            )
        }
    }

    /// 404 `not_found` for a path the edge knows no campaign can have.
    pub fn not_found() -> Self {
        Answer::error(404, codes::NOT_FOUND, "no such resource")
    }
}

/// The parts of a claim request the edge checks.
#[derive(Debug, Clone, Copy)]
pub struct ClaimInput<'a> {
    /// `Authorization` header value.
    pub authorization: Option<&'a str>,
    /// `Idempotency-Key` header value, as bytes.
    pub idempotency_key: Option<&'a [u8]>,
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
        &format!("claim body must be at most {MAX_CLAIM_BODY_BYTES} bytes"),
    )
}

/// Checks a declared `Content-Length` before reading the body: 413 when it is larger than
/// [`MAX_CLAIM_BODY_BYTES`] (any number too large to parse counts as too large); 400 when it
/// is not a number.
pub fn check_content_length(value: Option<&str>) -> Result<(), Answer> {
    let Some(v) = value else { return Ok(()) };
    let v = v.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Answer::error(
            400,
            codes::INVALID_REQUEST,
            "Content-Length must be a non-negative integer",
        ));
    }
    match v.parse::<usize>() {
        Ok(n) if n <= MAX_CLAIM_BODY_BYTES => Ok(()),
        _ => Err(too_large()),
    }
}

/// Checks a claim request in the origin's order — body size (413), customer token (401),
/// idempotency key (400), JSON body (400) — and returns the customer id (the token's `sub`)
/// or the origin's 4xx answer. `now_unix` is the edge's clock in seconds.
pub fn check_claim(
    input: &ClaimInput<'_>,
    token_secret: &[u8],
    now_unix: i64,
) -> Result<String, Answer> {
    check_content_length(input.content_length)?;
    let body = input.body.unwrap_or_default();
    if body.len() > MAX_CLAIM_BODY_BYTES {
        return Err(too_large());
    }
    let Some(tok) = input.authorization.and_then(token::bearer) else {
        return Err(Answer::error(
            401,
            codes::UNAUTHORIZED,
            "a customer token is required (Authorization: Bearer <token>)",
        ));
    };
    let claims = token::verify(tok, token_secret, now_unix)
        .map_err(|e| Answer::error(401, codes::UNAUTHORIZED, e.message()))?;
    if !input.idempotency_key.is_some_and(idempotency::is_valid_key) {
        return Err(Answer::error(
            400,
            codes::INVALID_IDEMPOTENCY_KEY,
            "Idempotency-Key must be 1 to 255 visible ASCII characters",
        ));
    }
    parse_claim_body(body).map_err(|e| Answer {
        status: 400,
        body: e.to_json(),
        retry_after_s: None,
    })?;
    Ok(claims.sub)
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

    fn tok(exp: i64) -> String {
        let c = CustomerClaims {
            sub: "cust-7".into(),
            exp,
            nbf: None,
        };
        format!("Bearer {}", mint(&c, SECRET))
    }

    #[test]
    fn routes() {
        assert_eq!(
            route("GET", "/api/v1/campaigns/spring"),
            Route::Status { id: "spring" }
        );
        assert_eq!(
            route("POST", "/api/v1/campaigns/spring/claims"),
            Route::Claim { id: "spring" }
        );
        assert_eq!(route("GET", "/api/v1/campaigns/Spring%20"), Route::NotFound);
        assert_eq!(route("POST", "/api/v1/campaigns//claims"), Route::NotFound);
        assert_eq!(
            route("GET", "/api/v1/campaigns/spring/claims"),
            Route::PassThrough
        );
        assert_eq!(route("PUT", "/api/v1/campaigns/spring"), Route::PassThrough);
        assert_eq!(route("GET", "/api/v1/claims/c_1"), Route::PassThrough);
        assert_eq!(route("GET", "/admin/v1/campaigns"), Route::NotFound);
        assert_eq!(route("GET", "/metrics"), Route::NotFound);
        assert_eq!(route("GET", ""), Route::NotFound);
    }

    fn input<'a>(auth: Option<&'a str>, key: Option<&'a [u8]>, body: &'a [u8]) -> ClaimInput<'a> {
        ClaimInput {
            authorization: auth,
            idempotency_key: key,
            content_length: None,
            body: Some(body),
        }
    }

    #[test]
    fn accepts_a_good_claim() {
        let a = tok(NOW + 60);
        let r = check_claim(&input(Some(&a), Some(b"k-1"), b"{}"), SECRET, NOW);
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
        for (i, (inp, status, code)) in cases.into_iter().enumerate() {
            let a = check_claim(&inp, SECRET, NOW).unwrap_err();
            let body: ErrorBody = serde_json::from_str(&a.body).unwrap();
            assert_eq!((a.status, body.result.as_str()), (status, code), "case {i}");
        }
    }

    #[test]
    fn content_length_is_checked_before_reading() {
        let good = tok(NOW + 60);
        for (cl, status) in [
            ("4097", 413),
            ("99999999999999999999999999", 413),
            ("-1", 400),
            ("x", 400),
        ] {
            let inp = ClaimInput {
                content_length: Some(cl),
                body: None,
                ..input(Some(&good), Some(b"k"), b"")
            };
            assert_eq!(
                check_claim(&inp, SECRET, NOW).unwrap_err().status,
                status,
                "{cl}"
            );
        }
        assert_eq!(check_content_length(Some("4096")), Ok(()));
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
}
