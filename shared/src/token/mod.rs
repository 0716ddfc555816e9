//! The customer token: a compact JWS (RFC 7515) carrying a JWT (RFC 7519), verified the same
//! way by the origin and the edge worker.
//!
//! - Algorithms (RFC 7518 §3): HS256 under a secret shared with the shop, RS256 and ES256 under
//!   an identity provider's public keys (a JWKS). Each key is pinned to its algorithm
//!   ([`keys`]); `none` and every other `alg` are refused.
//! - Key ids: a token's `kid` header picks its key; a token without one is tried against every
//!   key of its algorithm (today's single secret has no id).
//! - Claims: `sub` (customer id, 1..=128 printable ASCII characters) and `exp` are required;
//!   `nbf` and `iat` are honoured; `iss` and `aud` are checked when the verifier expects them
//!   (RFC 7519 §4.1.1, §4.1.3: `aud` is a string or an array of strings). Other claims are
//!   ignored.
//! - Time claims are NumericDate values (RFC 7519 §2): seconds since the Unix epoch, integer
//!   or not, compared with the verifier's millisecond clock, with a leeway for clock skew
//!   (RFC 7519 §4.1.4 allows "some small leeway"): refused when `now >= exp + leeway`,
//!   `now < nbf - leeway` or `now < iat - leeway`. A token whose `exp` lies further ahead than
//!   the longest lifetime (default 24 h) plus the leeway is refused too: `exp: 1e30` would
//!   otherwise never expire.
//! - A header with `crit` (RFC 7515 §4.1.11) is refused: the recipient must understand every
//!   extension it names, and this verifier understands none.
//! - HMAC signatures are compared in constant time.
//!
//! Verification is written over RustCrypto's `hmac`, `rsa` and `p256` rather than taken
//! from a JWT crate so that the very same code, and the same error for every refusal, runs on
//! the host and inside the wasm32 worker.

pub mod cache;
pub mod keys;
pub mod refresh;
pub mod sign;

pub use cache::TokenCache;
pub use keys::{Algorithm, KeySet, VerifyKey};
pub use sign::SigningKey;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use keys::Candidates;
use serde::{Deserialize, Serialize};

/// A NumericDate of RFC 7519 §2: seconds since the Unix epoch (1970-01-01T00:00:00Z), which
/// may have a fractional part. Read from any JSON number that fits an `f64` (a string, a
/// number out of range or `null` is refused); written as a JSON integer when it is whole.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct NumericDate(f64);

impl NumericDate {
    /// The date `ms` milliseconds after the Unix epoch (a verifier's clock).
    pub fn from_unix_ms(ms: i64) -> Self {
        NumericDate(ms as f64 / 1000.0)
    }
    /// Seconds since the Unix epoch, fraction included.
    pub fn as_secs_f64(self) -> f64 {
        self.0
    }
}

impl From<i64> for NumericDate {
    /// The date `seconds` after the Unix epoch.
    fn from(seconds: i64) -> Self {
        NumericDate(seconds as f64)
    }
}

/// Whole seconds below this bound are written as JSON integers (2^53, exact in an `f64`).
const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;

impl Serialize for NumericDate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.fract() == 0.0 && self.0.abs() < EXACT_INTEGER_LIMIT {
            s.serialize_i64(self.0 as i64)
        } else {
            s.serialize_f64(self.0)
        }
    }
}

impl<'de> Deserialize<'de> for NumericDate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if v.is_finite() {
            Ok(NumericDate(v))
        } else {
            Err(serde::de::Error::custom(
                "a NumericDate must be a finite number",
            ))
        }
    }
}

/// The claims flashgate reads from a customer token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomerClaims {
    /// Customer id.
    pub sub: String,
    /// Expiry (RFC 7519 §4.1.4): refused when `now >= exp + leeway`.
    pub exp: NumericDate,
    /// Not-before (RFC 7519 §4.1.5): refused when `now < nbf - leeway`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<NumericDate>,
}

impl CustomerClaims {
    /// Checks the time claims against the verifier's clock `now`, allowing `leeway_s` seconds
    /// of clock skew: [`TokenError::Expired`] when `now >= exp + leeway_s`,
    /// [`TokenError::NotYetValid`] when `now < nbf - leeway_s`.
    pub fn check_times(&self, now: NumericDate, leeway_s: u32) -> Result<(), TokenError> {
        let leeway = f64::from(leeway_s);
        if now.0 >= self.exp.0 + leeway {
            return Err(TokenError::Expired);
        }
        if self.nbf.is_some_and(|nbf| now.0 < nbf.0 - leeway) {
            return Err(TokenError::NotYetValid);
        }
        Ok(())
    }
}

/// Why a token was refused. All map to 401 `unauthorized`, except
/// [`TokenError::KeysUnavailable`]: 503 `unavailable` + `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    /// Not three base64url parts, or parts that are not the expected JSON.
    Malformed,
    /// `alg` is not one of the configured keys' algorithms (`none` included), or the `kid`
    /// names a key of another algorithm.
    UnsupportedAlgorithm,
    /// The `kid` names no key this verifier holds (the origin and the edge then refresh the
    /// JWKS, at most once per interval, and try again).
    UnknownKey,
    /// The signature does not match.
    BadSignature,
    /// `now >= exp + leeway`.
    Expired,
    /// `now < nbf - leeway` or `now < iat - leeway`.
    NotYetValid,
    /// `exp` lies further ahead than the verifier's longest token lifetime (plus the leeway):
    /// a token that practically never expires.
    LifetimeTooLong,
    /// The header has `crit` (RFC 7515 §4.1.11): it names extensions that must be understood,
    /// and this verifier understands none, so the token must be refused.
    UnsupportedCritical,
    /// `iss` is not the expected issuer.
    WrongIssuer,
    /// `aud` does not contain the expected audience.
    WrongAudience,
    /// `sub` empty, too long or not printable ASCII.
    BadSubject,
    /// The token is signed by the identity provider (RS256 / ES256), its key is not held, and
    /// the provider's JWKS has never been fetched (the provider down since start-up): the keys
    /// are missing, not the token's. 503 `unavailable` + `Retry-After`, not 401. Once a JWKS
    /// is held, an unknown key id is [`TokenError::UnknownKey`].
    KeysUnavailable,
}

impl TokenError {
    /// A short message for humans; never includes the token.
    pub fn message(self) -> &'static str {
        match self {
            TokenError::Malformed => "customer token is malformed",
            TokenError::UnsupportedAlgorithm => {
                "customer token algorithm is not accepted for its key"
            }
            TokenError::UnknownKey => "customer token key id is unknown",
            TokenError::BadSignature => "customer token signature is invalid",
            TokenError::Expired => "customer token has expired",
            TokenError::NotYetValid => "customer token is not valid yet",
            TokenError::LifetimeTooLong => {
                "customer token expires further ahead than the longest accepted lifetime"
            }
            TokenError::UnsupportedCritical => {
                "customer token names critical header extensions that are not supported"
            }
            TokenError::WrongIssuer => "customer token issuer is not accepted",
            TokenError::WrongAudience => "customer token audience is not accepted",
            TokenError::BadSubject => "customer token subject is invalid",
            TokenError::KeysUnavailable => {
                "the identity provider's keys could not be fetched yet; retry after the given delay"
            }
        }
    }
}

/// Longest token accepted, in bytes (identity providers' tokens carry many claims).
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// Default clock-skew leeway for `exp`, `nbf` and `iat`, in seconds.
pub const DEFAULT_LEEWAY_SECONDS: u32 = 30;
/// Largest leeway accepted, in seconds (5 minutes).
pub const MAX_LEEWAY_SECONDS: u32 = 300;
/// Default longest token lifetime, in seconds (24 hours): a token whose `exp` lies further
/// ahead than this (plus the leeway) is refused, whatever its issuer says.
pub const DEFAULT_MAX_LIFETIME_SECONDS: u32 = 86_400;
/// Largest setting of the longest token lifetime, in seconds (30 days).
pub const MAX_MAX_LIFETIME_SECONDS: u32 = 30 * 86_400;

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    /// Critical header extensions (RFC 7515 §4.1.11); none are understood.
    #[serde(default)]
    crit: Option<serde::de::IgnoredAny>,
}

/// `aud`: one audience or several (RFC 7519 §4.1.3).
#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn contains(&self, expected: &str) -> bool {
        match self {
            Audience::One(a) => a == expected,
            Audience::Many(all) => all.iter().any(|a| a == expected),
        }
    }
}

/// Every claim the verifier reads.
#[derive(Deserialize)]
struct Payload {
    sub: String,
    exp: NumericDate,
    #[serde(default)]
    nbf: Option<NumericDate>,
    #[serde(default)]
    iat: Option<NumericDate>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    aud: Option<Audience>,
}

/// Verifies customer tokens: the keys, the expected issuer and audience, and the leeway.
#[derive(Debug, Clone)]
pub struct Verifier {
    keys: KeySet,
    issuer: Option<String>,
    audience: Option<String>,
    leeway_s: u32,
    max_lifetime_s: u32,
    /// A JWKS URL is configured and no JWKS was fetched yet ([`TokenError::KeysUnavailable`]).
    awaiting_jwks: bool,
}

impl Verifier {
    /// A verifier of `keys` that checks no issuer or audience, with
    /// [`DEFAULT_LEEWAY_SECONDS`].
    pub fn new(keys: KeySet) -> Self {
        Verifier {
            keys,
            issuer: None,
            audience: None,
            leeway_s: DEFAULT_LEEWAY_SECONDS,
            max_lifetime_s: DEFAULT_MAX_LIFETIME_SECONDS,
            awaiting_jwks: false,
        }
    }

    /// A verifier of today's single HS256 secret (no key id).
    pub fn hs256(secret: &[u8]) -> Self {
        let mut keys = KeySet::new();
        keys.push(VerifyKey::hs256(None, secret))
            .expect("an empty set takes one key");
        Verifier::new(keys)
    }

    /// Requires `iss` to equal `issuer` (when `Some`).
    pub fn with_issuer(mut self, issuer: Option<String>) -> Self {
        self.issuer = issuer;
        self
    }

    /// Requires `aud` to contain `audience` (when `Some`).
    pub fn with_audience(mut self, audience: Option<String>) -> Self {
        self.audience = audience;
        self
    }

    /// Allows `seconds` of clock skew on `exp`, `nbf` and `iat` (capped at
    /// [`MAX_LEEWAY_SECONDS`]).
    pub fn with_leeway_seconds(mut self, seconds: u32) -> Self {
        self.leeway_s = seconds.min(MAX_LEEWAY_SECONDS);
        self
    }

    /// `true`: the identity provider's JWKS is still to be fetched (a JWKS URL is set), so a
    /// provider-signed token whose key is not held is [`TokenError::KeysUnavailable`].
    pub fn awaiting_jwks(mut self, awaiting: bool) -> Self {
        self.awaiting_jwks = awaiting;
        self
    }

    /// The same verifier with `more` keys added (a fetched JWKS), no longer awaiting one.
    /// Errors as [`KeySet::push`].
    pub fn with_more_keys(&self, more: KeySet) -> Result<Self, String> {
        let mut v = self.clone();
        v.keys.extend(more)?;
        v.awaiting_jwks = false;
        Ok(v)
    }

    /// The keys held.
    pub fn keys(&self) -> &KeySet {
        &self.keys
    }

    /// Refuses tokens whose `exp` lies more than `seconds` (plus the leeway) ahead of the
    /// verifier's clock (capped at [`MAX_MAX_LIFETIME_SECONDS`]).
    pub fn with_max_lifetime_seconds(mut self, seconds: u32) -> Self {
        self.max_lifetime_s = seconds.min(MAX_MAX_LIFETIME_SECONDS);
        self
    }

    /// The leeway, in seconds.
    pub fn leeway_seconds(&self) -> u32 {
        self.leeway_s
    }

    /// True when `token`'s header names a key id this verifier does not hold (a cheap look at
    /// the header, no signature check): the caller may refresh its JWKS first.
    pub fn names_unknown_key(&self, token: &str) -> bool {
        let Some(h) = token
            .split('.')
            .next()
            .filter(|_| token.len() <= MAX_TOKEN_BYTES)
        else {
            return false;
        };
        B64.decode(h)
            .ok()
            .and_then(|b| serde_json::from_slice::<Header>(&b).ok())
            .and_then(|h| h.kid)
            .is_some_and(|kid| !self.keys.has_kid(&kid))
    }

    /// Verifies a compact JWS and returns its claims. `now` is the verifier's clock
    /// ([`NumericDate::from_unix_ms`]). Errors: every [`TokenError`].
    pub fn verify(&self, token: &str, now: NumericDate) -> Result<CustomerClaims, TokenError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::Malformed);
        }
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let header_bytes = B64.decode(h).map_err(|_| TokenError::Malformed)?;
        let header: Header =
            serde_json::from_slice(&header_bytes).map_err(|_| TokenError::Malformed)?;
        let alg = Algorithm::parse(&header.alg).ok_or(TokenError::UnsupportedAlgorithm)?;
        if header.crit.is_some() {
            return Err(TokenError::UnsupportedCritical);
        }
        // A provider-signed token without its key while the JWKS is still to be fetched: the
        // keys are missing, not the token's.
        let missing = |e| match alg {
            Algorithm::Rs256 | Algorithm::Es256 if self.awaiting_jwks => {
                TokenError::KeysUnavailable
            }
            _ => e,
        };
        let keys = match self.keys.candidates(alg, header.kid.as_deref()) {
            Candidates::Keys(keys) => keys,
            Candidates::UnknownKid => return Err(missing(TokenError::UnknownKey)),
            // No key of its algorithm at all (no `kid` to name a key of another one).
            Candidates::WrongAlgorithm if header.kid.is_none() => {
                return Err(missing(TokenError::UnsupportedAlgorithm))
            }
            Candidates::WrongAlgorithm => return Err(TokenError::UnsupportedAlgorithm),
        };
        let sig = B64.decode(s).map_err(|_| TokenError::Malformed)?;
        let input = &token.as_bytes()[..h.len() + 1 + p.len()];
        if !keys.iter().any(|k| k.verifies(input, &sig)) {
            return Err(TokenError::BadSignature);
        }
        let payload = B64.decode(p).map_err(|_| TokenError::Malformed)?;
        let payload: Payload =
            serde_json::from_slice(&payload).map_err(|_| TokenError::Malformed)?;
        let claims = CustomerClaims {
            sub: payload.sub,
            exp: payload.exp,
            nbf: payload.nbf,
        };
        claims.check_times(now, self.leeway_s)?;
        if claims.exp.0 - now.0 > f64::from(self.max_lifetime_s) + f64::from(self.leeway_s) {
            return Err(TokenError::LifetimeTooLong);
        }
        if payload
            .iat
            .is_some_and(|iat| now.0 < iat.0 - f64::from(self.leeway_s))
        {
            return Err(TokenError::NotYetValid);
        }
        if let Some(issuer) = &self.issuer {
            if payload.iss.as_deref() != Some(issuer.as_str()) {
                return Err(TokenError::WrongIssuer);
            }
        }
        if let Some(audience) = &self.audience {
            if !payload.aud.is_some_and(|a| a.contains(audience)) {
                return Err(TokenError::WrongAudience);
            }
        }
        if !is_valid_customer_id(&claims.sub) {
            return Err(TokenError::BadSubject);
        }
        Ok(claims)
    }
}

/// Signs `claims` into a compact HS256 JWT under `secret` (no key id).
pub fn mint(claims: &CustomerClaims, secret: &[u8]) -> String {
    SigningKey::hs256(None, secret).sign(claims)
}

/// A customer id is 1..=128 visible ASCII characters ([`crate::text::is_visible_ascii`]).
pub fn is_valid_customer_id(s: &str) -> bool {
    crate::text::is_visible_ascii(s, 128)
}

/// Takes the token out of an `Authorization: Bearer <token>` header value (RFC 6750 §2.1;
/// the scheme is matched case-insensitively).
pub fn bearer(header_value: &str) -> Option<&str> {
    let (scheme, rest) = header_value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests;
