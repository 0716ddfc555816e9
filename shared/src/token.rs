//! The customer token: a compact JWS (RFC 7515) carrying a JWT (RFC 7519), signed with
//! HS256 (HMAC-SHA256) under a secret shared by the origin and the edge.
//!
//! Accepted tokens: header `{"alg":"HS256"}` (a `typ` of `JWT` is allowed, any other `alg`,
//! including `none`, is refused); claims `sub` (customer id, 1..=128 printable ASCII
//! characters) and `exp` (seconds since the Unix epoch, required; the token is expired when
//! `now >= exp`). An optional `nbf` is honoured. Signatures are compared in constant time.
//!
//! Written here rather than taken from a JWT crate because the very same code must run on
//! the host and inside the wasm32 worker, and it is only HS256 over `hmac` + `sha2`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The claims flashgate reads from a customer token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomerClaims {
    /// Customer id.
    pub sub: String,
    /// Expiry, seconds since the Unix epoch.
    pub exp: i64,
    /// Not-before, seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
}

/// Why a token was refused. All map to 401 `unauthorized`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    /// Not three base64url parts, or parts that are not the expected JSON.
    Malformed,
    /// `alg` is not HS256.
    UnsupportedAlgorithm,
    /// The signature does not match.
    BadSignature,
    /// `now >= exp`.
    Expired,
    /// `now < nbf`.
    NotYetValid,
    /// `sub` empty, too long or not printable ASCII.
    BadSubject,
}

impl TokenError {
    /// A short message for humans; never includes the token.
    pub fn message(self) -> &'static str {
        match self {
            TokenError::Malformed => "customer token is malformed",
            TokenError::UnsupportedAlgorithm => "customer token must be signed with HS256",
            TokenError::BadSignature => "customer token signature is invalid",
            TokenError::Expired => "customer token has expired",
            TokenError::NotYetValid => "customer token is not valid yet",
            TokenError::BadSubject => "customer token subject is invalid",
        }
    }
}

#[derive(Deserialize)]
struct Header {
    alg: String,
}

/// Signs `claims` into a compact HS256 JWT under `secret`.
pub fn mint(claims: &CustomerClaims, secret: &[u8]) -> String {
    let header = B64.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = B64.encode(serde_json::to_vec(claims).expect("claims serialise"));
    let signing_input = format!("{header}.{payload}");
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(signing_input.as_bytes());
    let sig = B64.encode(mac.finalize().into_bytes());
    format!("{signing_input}.{sig}")
}

/// Verifies a compact HS256 JWT and returns its claims. `now_unix` is the verifier's clock in
/// seconds since the Unix epoch.
pub fn verify(token: &str, secret: &[u8], now_unix: i64) -> Result<CustomerClaims, TokenError> {
    if token.len() > 4096 {
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
    if header.alg != "HS256" {
        return Err(TokenError::UnsupportedAlgorithm);
    }
    let sig = B64.decode(s).map_err(|_| TokenError::Malformed)?;
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(h.as_bytes());
    mac.update(b".");
    mac.update(p.as_bytes());
    // `verify_slice` compares in constant time.
    mac.verify_slice(&sig)
        .map_err(|_| TokenError::BadSignature)?;
    let payload = B64.decode(p).map_err(|_| TokenError::Malformed)?;
    let claims: CustomerClaims =
        serde_json::from_slice(&payload).map_err(|_| TokenError::Malformed)?;
    if now_unix >= claims.exp {
        return Err(TokenError::Expired);
    }
    if claims.nbf.is_some_and(|nbf| now_unix < nbf) {
        return Err(TokenError::NotYetValid);
    }
    if !is_valid_customer_id(&claims.sub) {
        return Err(TokenError::BadSubject);
    }
    Ok(claims)
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
mod tests {
    use super::*;

    const SECRET: &[u8] = b"test-secret";

    fn claims(exp: i64) -> CustomerClaims {
        CustomerClaims {
            sub: "cust-1".into(),
            exp,
            nbf: None,
        }
    }

    #[test]
    fn round_trip() {
        let t = mint(&claims(2_000), SECRET);
        assert_eq!(verify(&t, SECRET, 1_000).unwrap().sub, "cust-1");
    }

    #[test]
    fn refuses_expired_forged_and_none() {
        let t = mint(&claims(2_000), SECRET);
        assert_eq!(verify(&t, SECRET, 2_000), Err(TokenError::Expired));
        assert_eq!(verify(&t, b"other", 1_000), Err(TokenError::BadSignature));
        let none = format!(
            "{}.{}.",
            B64.encode(br#"{"alg":"none"}"#),
            B64.encode(br#"{"sub":"x","exp":9999999999}"#)
        );
        assert_eq!(
            verify(&none, SECRET, 1),
            Err(TokenError::UnsupportedAlgorithm)
        );
        assert_eq!(verify("a.b", SECRET, 1), Err(TokenError::Malformed));
        // A payload tampered after signing.
        let mut parts: Vec<&str> = t.split('.').collect();
        let forged = B64.encode(br#"{"sub":"admin","exp":9999999999}"#);
        parts[1] = &forged;
        assert_eq!(
            verify(&parts.join("."), SECRET, 1),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn bearer_header() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer abc"), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
    }
}
