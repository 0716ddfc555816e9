//! Request checks shared by handlers: credentials, the edge signature, the client IP, and
//! JSON bodies.
//! Each refusal is an [`ApiError`] with the documented body; none touches a store.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::connect_info::ConnectInfo;
use axum::http::{header, Extensions, HeaderMap, Uri};
use flashgate_shared::api::is_valid_slug;
use flashgate_shared::{signature, token};
use serde::de::DeserializeOwned;
use subtle::ConstantTimeEq;

pub use crate::admin::roles::{Admin, Role};
use crate::campaigns::store::CampaignRow;
use crate::error::{ApiError, ApiResult};
use crate::secret::Secret;
use crate::state::AppState;

/// Largest JSON body of admin and service calls, in bytes.
pub const MAX_JSON_BODY_BYTES: usize = 64 * 1024;

fn bearer_of(headers: &HeaderMap) -> ApiResult<&str> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| ApiError::Unauthorized("missing Authorization: Bearer token".into()))?
        .to_str()
        .map_err(|_| ApiError::Unauthorized("Authorization header is not ASCII".into()))?;
    token::bearer(value)
        .ok_or_else(|| ApiError::Unauthorized("Authorization must be 'Bearer <token>'".into()))
}

/// The customer id from a valid customer token (HS256 / RS256 / ES256 JWT, issuer and
/// audience as configured; a token verified before by this origin is taken from its cache,
/// [`crate::customer_tokens::CustomerTokens::verify`]). 401 otherwise.
pub async fn customer(headers: &HeaderMap, state: &AppState) -> ApiResult<String> {
    let jwt = bearer_of(headers)?;
    state
        .customer_tokens
        .verify(jwt)
        .await
        .map_err(|e| match e {
            // The identity provider has been unreachable since start-up: 503 + Retry-After.
            token::TokenError::KeysUnavailable => ApiError::Unavailable(e.message().into()),
            _ => ApiError::Unauthorized(e.message().into()),
        })
}

/// True when `given` equals `expected`, compared in constant time.
pub fn token_matches(given: &str, expected: &Secret) -> bool {
    given.as_bytes().ct_eq(expected.expose().as_bytes()).into()
}

/// Requires `Authorization: Bearer <expected>`: 401 without a token, 403 with another one.
pub fn require_token(headers: &HeaderMap, expected: &Secret, what: &str) -> ApiResult<()> {
    let given = bearer_of(headers)?;
    if token_matches(given, expected) {
        Ok(())
    } else {
        Err(ApiError::Forbidden(format!(
            "this token may not call {what}"
        )))
    }
}

/// Requires an admin token (`Authorization: Bearer <token>`) of at least role `needed`:
/// 401 without a bearer token, 403 with a token that is not configured or when a viewer token
/// is used for a write. Returns who called (for the audit trail). Tokens are compared in
/// constant time and never logged.
pub fn admin(headers: &HeaderMap, state: &AppState, needed: Role) -> ApiResult<Admin> {
    let given = bearer_of(headers)?;
    let admin = state
        .config
        .admin_tokens()
        .find(given)
        .ok_or_else(|| ApiError::Forbidden("this token may not call the admin API".into()))?;
    if admin.role.allows(needed) {
        Ok(admin)
    } else {
        Err(ApiError::Forbidden(format!(
            "a {} token may not do this; it needs a {} token",
            admin.role.as_str(),
            needed.as_str()
        )))
    }
}

/// The `Idempotency-Key` header: 1 to 255 visible ASCII characters
/// ([`flashgate_shared::idempotency::check_key`]). 400 `invalid_idempotency_key` otherwise, the
/// message saying whether the header is missing or malformed.
pub fn idempotency_key(headers: &HeaderMap) -> ApiResult<String> {
    let given = headers
        .get(flashgate_shared::IDEMPOTENCY_KEY_HEADER)
        .map(|v| v.as_bytes());
    flashgate_shared::idempotency::check_key(given)
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .map_err(|message| {
            ApiError::BadRequest(
                flashgate_shared::api::codes::INVALID_IDEMPOTENCY_KEY,
                message.into(),
            )
        })
}

/// What the edge signature of a request proves ([`flashgate_shared::signature`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeProof {
    /// No edge secret is configured: nothing is signed, nothing is required.
    NotConfigured,
    /// The request carries no edge signature (it did not come through the edge).
    Unsigned,
    /// A valid, fresh edge signature over the method, path, body, `Authorization`,
    /// `Idempotency-Key` and `Flashgate-Client-Ip` as received.
    Signed,
}

fn forbidden_signature() -> ApiError {
    ApiError::Forbidden("missing or invalid edge signature: send this through the edge".into())
}

/// Checks the edge signature when an edge secret is configured. 403 `forbidden` when one is
/// present but malformed, stale (more than 60 s off) or does not match the request (another
/// token, idempotency key, client IP, path or body than the edge signed).
pub fn edge_proof(
    headers: &HeaderMap,
    secret: Option<&Secret>,
    method: &str,
    path: &str,
    body: &[u8],
) -> ApiResult<EdgeProof> {
    let Some(secret) = secret else {
        return Ok(EdgeProof::NotConfigured);
    };
    let Some(header) = headers.get(flashgate_shared::EDGE_SIGNATURE_HEADER) else {
        return Ok(EdgeProof::Unsigned);
    };
    let raw = |name: &str| headers.get(name).map(|v| v.as_bytes());
    let signed = signature::Signed {
        method,
        path,
        body,
        authorization: raw(header::AUTHORIZATION.as_str()),
        idempotency_key: raw(flashgate_shared::IDEMPOTENCY_KEY_HEADER),
        client_ip: raw(flashgate_shared::CLIENT_IP_HEADER),
    };
    let now = chrono::Utc::now().timestamp();
    let header = header.to_str().ok();
    signature::verify(secret.expose().as_bytes(), header, &signed, now)
        .map(|()| EdgeProof::Signed)
        .map_err(|_| forbidden_signature())
}

/// Requires a valid edge signature ([`edge_proof`]) when an edge secret is configured: 403
/// `forbidden` when it is missing or invalid.
pub fn edge_signature(
    headers: &HeaderMap,
    secret: Option<&Secret>,
    method: &str,
    path: &str,
    body: &[u8],
) -> ApiResult<()> {
    match edge_proof(headers, secret, method, path, body)? {
        EdgeProof::Unsigned => Err(forbidden_signature()),
        EdgeProof::NotConfigured | EdgeProof::Signed => Ok(()),
    }
}

/// A customer POST the edge forwards on `…/campaigns/{id}/…` (claims, queue joins): the
/// campaign id of the path (recorded in the request's span), the headers, and the body, still
/// unread. The path must decode (404 otherwise); nothing else is checked until
/// [`ForwardedPost::signed_body`].
pub struct ForwardedPost {
    /// The campaign id, as the path names it (not checked yet).
    pub campaign: String,
    /// The request's headers.
    pub headers: HeaderMap,
    /// True when the sold-out fast path already asked [`crate::claims::service::answer_early`]
    /// about this claim and handed it on to the gate ([`EarlyAsked`]).
    pub early_asked: bool,
    uri: Uri,
    body: Body,
}

/// Marks a claim the sold-out fast path (`super::fast`) handed on after
/// [`crate::claims::service::answer_early`] said it goes to the gate: the claim handler does not
/// ask again. (Asking twice could answer it from memory, although it is the claim chosen to ask
/// Redis once the sold-out memory is stale: [`crate::gate::flags`].) It lives here, beside the
/// extractor that reads it, so that the fast path depends on the extractors and not the reverse.
#[derive(Debug, Clone, Copy)]
pub struct EarlyAsked;

impl axum::extract::FromRequest<AppState> for ForwardedPost {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &AppState) -> ApiResult<Self> {
        use axum::extract::FromRequestParts;
        let (mut parts, body) = req.into_parts();
        let Path(campaign) = Path::<String>::from_request_parts(&mut parts, state).await?;
        tracing::Span::current().record("campaign", campaign.as_str());
        Ok(ForwardedPost {
            campaign,
            early_asked: parts.extensions.get::<EarlyAsked>().is_some(),
            headers: parts.headers,
            uri: parts.uri,
            body,
        })
    }
}

impl ForwardedPost {
    /// Reads the body, at most [`flashgate_shared::MAX_CLAIM_BODY_BYTES`] (413 past it), and
    /// requires its edge signature ([`edge_signature`], 403) over the path as sent (the edge
    /// signs it still percent-encoded). The secret is the state's `FLASHGATE_EDGE_SECRET`. The
    /// body is taken: a second call reads an empty one.
    pub async fn signed_body(&mut self, state: &AppState) -> ApiResult<Bytes> {
        let body = std::mem::take(&mut self.body);
        let body = read_body(&self.headers, body, flashgate_shared::MAX_CLAIM_BODY_BYTES).await?;
        let secret = state.config.edge_secret.as_ref();
        edge_signature(&self.headers, secret, "POST", self.uri.path(), &body)?;
        Ok(body)
    }

    /// The prelude of a forwarded customer POST that takes no body (a join, a draw entry):
    /// [`ForwardedPost::signed_body`] (413, 403; the body is read and dropped), then the
    /// customer token ([`customer`], 401). Returns the campaign id of the path (not checked
    /// yet) and the customer id.
    pub async fn signed_customer(mut self, state: &AppState) -> ApiResult<(String, String)> {
        self.signed_body(state).await?;
        let customer = customer(&self.headers, state).await?;
        Ok((self.campaign, customer))
    }
}

/// 404 `not_found` naming campaign `id`.
pub fn no_campaign(id: &str) -> ApiError {
    ApiError::NotFound(flashgate_shared::api::common::no_campaign_message(id))
}

/// The campaign row of `id` from the origin's cache (at most `FLASHGATE_CAMPAIGN_CACHE_MS`
/// old). 404 ([`no_campaign`]) when `id` is not a slug (no query is made) or no campaign has
/// it; 503 when PostgreSQL fails.
pub async fn campaign(state: &AppState, id: &str) -> ApiResult<Arc<CampaignRow>> {
    if !is_valid_slug(id) {
        return Err(no_campaign(id));
    }
    state
        .campaigns
        .get(&state.db, id)
        .await?
        .ok_or_else(|| no_campaign(id))
}

/// The client's IP address: the `Flashgate-Client-Ip` the edge forwarded, only on a request
/// whose edge signature verified ([`EdgeProof::Signed`]); otherwise the TCP peer when the
/// server records it. Client-supplied `CF-Connecting-IP` or `X-Forwarded-For` are never
/// trusted. `None` when neither is known (no per-IP limit applies).
pub fn client_ip(proof: EdgeProof, headers: &HeaderMap, ext: &Extensions) -> Option<IpAddr> {
    let signed = (proof == EdgeProof::Signed)
        .then(|| headers.get(flashgate_shared::CLIENT_IP_HEADER))
        .flatten()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<IpAddr>().ok());
    signed.or_else(|| {
        ext.get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(a)| a.ip())
    })
}

/// Requires `Content-Type: application/json` (parameters such as charset allowed). 415.
pub fn require_json(headers: &HeaderMap) -> ApiResult<()> {
    let ok = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
    if ok {
        Ok(())
    } else {
        Err(ApiError::UnsupportedMediaType(
            "Content-Type must be application/json".into(),
        ))
    }
}

/// Most bytes of an oversized body read and dropped before answering 413. Reading them lets
/// a client that writes its whole body before reading the answer see the 413 instead of a
/// reset connection; past this bound the connection is closed instead.
pub const MAX_DRAINED_BODY_BYTES: usize = 8 * 1024 * 1024;

/// 408 `request_timeout` when the body did not arrive within `FLASHGATE_BODY_READ_TIMEOUT_MS`
/// ([`super::body_deadline`]'s error), else 400 `invalid_request`.
pub fn body_error(e: &axum::Error) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<super::body_deadline::BodyDeadlineElapsed>() {
            return ApiError::RequestTimeout("the body did not arrive in time".into());
        }
        source = s.source();
    }
    ApiError::BadRequest(
        flashgate_shared::api::codes::INVALID_REQUEST,
        "the body could not be read".into(),
    )
}

/// Reads at most `limit` bytes of body. 413 when larger (by Content-Length or by count); the
/// excess, up to [`MAX_DRAINED_BODY_BYTES`], is read and dropped, never kept in memory.
pub async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> ApiResult<Bytes> {
    use futures::StreamExt;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || ApiError::PayloadTooLarge(format!("body must be at most {limit} bytes"));
    let mut stream = body.into_data_stream();
    let mut kept = Vec::new();
    let mut seen = 0usize;
    if declared.is_none_or(|n| n <= limit as u64) {
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| body_error(&e))?;
            seen += chunk.len();
            if seen > limit {
                break;
            }
            kept.extend_from_slice(&chunk);
        }
        if seen <= limit {
            return Ok(Bytes::from(kept));
        }
    }
    if declared.is_none_or(|n| n <= MAX_DRAINED_BODY_BYTES as u64) {
        while let Some(Ok(chunk)) = stream.next().await {
            seen += chunk.len();
            if seen > MAX_DRAINED_BODY_BYTES {
                break;
            }
        }
    }
    Err(too_large())
}

/// Parses a JSON body strictly: duplicate keys and (where the type says so) unknown fields are
/// refused. 400 `invalid_json` for syntax, 422 `validation_failed` for a wrong shape.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| json_error(e.inner(), Some(e.path())))?;
    de.end().map_err(|e| json_error(&e, None))?;
    Ok(value)
}

/// 400 `invalid_json` for syntax; 422 `validation_failed` for a wrong shape, naming the field
/// it failed at (a dotted path such as `caps[0].max`; none for the body as a whole).
fn json_error(e: &serde_json::Error, path: Option<&serde_path_to_error::Path>) -> ApiError {
    use serde_json::error::Category;
    if !matches!(e.classify(), Category::Data) {
        return ApiError::invalid_json(format!("body is not valid JSON: {e}"));
    }
    let e = without_type_names(&e.to_string());
    match path.map(ToString::to_string).filter(|p| p != ".") {
        Some(at) => ApiError::validation(format!(
            "body does not match the expected shape at `{at}`: {e}"
        )),
        None => ApiError::validation(format!("body does not match the expected shape: {e}")),
    }
}

/// A serde message with the code's type names taken out: "struct WaitingRoom with 11
/// elements" and "struct WaitingRoom" become "a JSON object" (serde reads an array as the
/// fields in order, and says so in its own terms; the API speaks JSON).
fn without_type_names(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("struct ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "struct ".len()..];
        let name_len = after
            .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
            .unwrap_or(after.len());
        if name_len == 0 {
            out.push_str("struct ");
            rest = after;
            continue;
        }
        out.push_str("a JSON object");
        rest = &after[name_len..];
        if let Some(tail) = rest.strip_prefix(" with ") {
            let digits = tail
                .find(|ch: char| !ch.is_ascii_digit())
                .unwrap_or(tail.len());
            if digits > 0 {
                if let Some(r) = tail[digits..]
                    .strip_prefix(" elements")
                    .or_else(|| tail[digits..].strip_prefix(" element"))
                {
                    rest = r;
                }
            }
        }
    }
    out.push_str(rest);
    out
}

/// Content type check, size limit and strict parse, in that order.
pub async fn json_body<T: DeserializeOwned>(headers: &HeaderMap, body: Body) -> ApiResult<T> {
    require_json(headers)?;
    let bytes = read_body(headers, body, MAX_JSON_BODY_BYTES).await?;
    parse_json(&bytes)
}

/// A manager's JSON write: the caller, refused before the body is parsed when the token is not a
/// manager's ([`admin`]: 401, 403), then the body as [`json_body`] reads it (415, 413, 400,
/// 422).
pub struct ManagerJson<T> {
    /// The caller, for the audit trail.
    pub who: Admin,
    /// The body.
    pub body: T,
}

impl<T: DeserializeOwned> axum::extract::FromRequest<AppState> for ManagerJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &AppState) -> ApiResult<Self> {
        let (parts, body) = req.into_parts();
        let who = admin(&parts.headers, state, Role::Manager)?;
        let body = json_body(&parts.headers, body).await?;
        Ok(ManagerJson { who, body })
    }
}

/// [`json_body`] for an admin body with time fields: each of `time_fields` may take every form
/// of the admin API's one time parser ([`crate::admin::time::parse_instant`]); a time that
/// parses in none is 422 `validation_failed` naming the field and the accepted forms.
pub async fn json_body_with_times<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    time_fields: &[&str],
) -> ApiResult<T> {
    let StrictValue(mut value) = json_body(headers, body).await?;
    crate::admin::time::normalize_times(&mut value, time_fields, chrono::Utc::now())
        .map_err(ApiError::validation)?;
    serde_path_to_error::deserialize(value).map_err(|e| json_error(e.inner(), Some(e.path())))
}

/// A JSON value read as the typed bodies are: an object that repeats a key is refused
/// (`serde_json::Value` alone keeps the last one).
struct StrictValue(serde_json::Value);

impl<'de> serde::Deserialize<'de> for StrictValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(items.into())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate field `{key}`"
                )));
            }
            let StrictValue(v) = map.next_value()?;
            object.insert(key, v);
        }
        Ok(object.into())
    }
}

/// `axum::extract::Path` whose rejection has the documented body: a path segment that does
/// not decode (bad percent-encoding, invalid UTF-8) names nothing that exists, so it is a 404
/// `not_found`, never axum's plain-text 400.
#[derive(axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);

impl From<axum::extract::rejection::PathRejection> for ApiError {
    fn from(_: axum::extract::rejection::PathRejection) -> Self {
        ApiError::NotFound("no such resource: the path does not decode".into())
    }
}
