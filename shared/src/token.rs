//! The customer token: a compact JWS (RFC 7515) carrying a JWT (RFC 7519), signed with
//! HS256 (HMAC-SHA256) under a secret shared by the origin and the edge.
//!
//! Accepted tokens: header `{"alg":"HS256"}` (a `typ` of `JWT` is allowed, any other `alg`,
//! including `none`, is refused); claims `sub` (customer id, 1..=128 printable ASCII
//! characters) and `exp` (required; the token is expired when `now >= exp`). An optional `nbf`
//! is honoured (`now < nbf` is refused); `iat` and other claims are ignored. Time claims are
//! NumericDate values (RFC 7519 §2): seconds since the Unix epoch, integer or not (`1.9e9`,
//! `1900000000.5`), compared as numbers with the verifier's millisecond clock. Signatures are
//! compared in constant time.
//!
//! Written here rather than taken from a JWT crate because the very same code must run on
//! the host and inside the wasm32 worker, and it is only HS256 over `hmac` + `sha2`.

use crate::signature::keyed_mac;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::Mac;
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
    /// Expiry (RFC 7519 §4.1.4): refused when `now >= exp`.
    pub exp: NumericDate,
    /// Not-before (RFC 7519 §4.1.5): refused when `now < nbf`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<NumericDate>,
}

impl CustomerClaims {
    /// Checks the time claims against the verifier's clock `now`: [`TokenError::Expired`]
    /// when `now >= exp`, [`TokenError::NotYetValid`] when `now < nbf`.
    pub fn check_times(&self, now: NumericDate) -> Result<(), TokenError> {
        if now >= self.exp {
            return Err(TokenError::Expired);
        }
        if self.nbf.is_some_and(|nbf| now < nbf) {
            return Err(TokenError::NotYetValid);
        }
        Ok(())
    }
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
    let mut mac = keyed_mac(secret);
    mac.update(signing_input.as_bytes());
    let sig = B64.encode(mac.finalize().into_bytes());
    format!("{signing_input}.{sig}")
}

/// Verifies a compact HS256 JWT and returns its claims. `now` is the verifier's clock
/// ([`NumericDate::from_unix_ms`]). Errors: every [`TokenError`].
pub fn verify(token: &str, secret: &[u8], now: NumericDate) -> Result<CustomerClaims, TokenError> {
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
    let mut mac = keyed_mac(secret);
    mac.update(h.as_bytes());
    mac.update(b".");
    mac.update(p.as_bytes());
    // `verify_slice` compares in constant time.
    mac.verify_slice(&sig)
        .map_err(|_| TokenError::BadSignature)?;
    let payload = B64.decode(p).map_err(|_| TokenError::Malformed)?;
    let claims: CustomerClaims =
        serde_json::from_slice(&payload).map_err(|_| TokenError::Malformed)?;
    claims.check_times(now)?;
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
            exp: exp.into(),
            nbf: None,
        }
    }

    #[test]
    fn round_trip() {
        let t = mint(&claims(2_000), SECRET);
        assert_eq!(verify(&t, SECRET, at(1_000)).unwrap().sub, "cust-1");
    }

    #[test]
    fn refuses_expired_forged_and_none() {
        let t = mint(&claims(2_000), SECRET);
        assert_eq!(verify(&t, SECRET, at(2_000)), Err(TokenError::Expired));
        assert_eq!(
            verify(&t, b"other", at(1_000)),
            Err(TokenError::BadSignature)
        );
        let none = format!(
            "{}.{}.",
            B64.encode(br#"{"alg":"none"}"#),
            B64.encode(br#"{"sub":"x","exp":9999999999}"#)
        );
        assert_eq!(
            verify(&none, SECRET, at(1)),
            Err(TokenError::UnsupportedAlgorithm)
        );
        assert_eq!(verify("a.b", SECRET, at(1)), Err(TokenError::Malformed));
        // A payload tampered after signing.
        let mut parts: Vec<&str> = t.split('.').collect();
        let forged = B64.encode(br#"{"sub":"admin","exp":9999999999}"#);
        parts[1] = &forged;
        assert_eq!(
            verify(&parts.join("."), SECRET, at(1)),
            Err(TokenError::BadSignature)
        );
    }

    fn at(seconds: i64) -> NumericDate {
        NumericDate::from(seconds)
    }

    /// A token signed under [`SECRET`] over a payload given as raw JSON.
    fn signed_payload(payload: &str) -> String {
        let header = B64.encode(br#"{"alg":"HS256"}"#);
        let input = format!("{header}.{}", B64.encode(payload));
        let mut mac = keyed_mac(SECRET);
        mac.update(input.as_bytes());
        format!("{input}.{}", B64.encode(mac.finalize().into_bytes()))
    }

    #[test]
    fn fractional_time_claims_are_numbers_compared_with_the_millisecond_clock() {
        let t = signed_payload(r#"{"sub":"c","exp":2000.5,"nbf":1000.25,"iat":999.75}"#);
        let ms = NumericDate::from_unix_ms;
        assert_eq!(verify(&t, SECRET, ms(1_000_250)).unwrap().sub, "c");
        assert_eq!(verify(&t, SECRET, ms(2_000_499)).unwrap().sub, "c");
        assert_eq!(verify(&t, SECRET, ms(2_000_500)), Err(TokenError::Expired));
        assert_eq!(
            verify(&t, SECRET, ms(1_000_249)),
            Err(TokenError::NotYetValid)
        );
        // Exponent notation is a number too.
        let e = signed_payload(r#"{"sub":"c","exp":2.0005e3}"#);
        assert_eq!(verify(&e, SECRET, ms(2_000_499)).unwrap().sub, "c");
        assert_eq!(verify(&e, SECRET, ms(2_000_500)), Err(TokenError::Expired));
        // Whatever is not a number stays malformed.
        for bad in [
            r#"{"sub":"c","exp":"2000"}"#,
            r#"{"sub":"c","exp":null}"#,
            r#"{"sub":"c","exp":1e999}"#,
            r#"{"sub":"c","exp":2000,"nbf":"x"}"#,
        ] {
            assert_eq!(
                verify(&signed_payload(bad), SECRET, at(1)),
                Err(TokenError::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn whole_numeric_dates_are_written_as_integers() {
        let c = CustomerClaims {
            sub: "c".into(),
            exp: 2_000.into(),
            nbf: Some(NumericDate::from_unix_ms(1_500)),
        };
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"sub":"c","exp":2000,"nbf":1.5}"#
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
