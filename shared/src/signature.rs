//! The edge signature: proof that a claim came through the edge worker.
//!
//! Header `Flashgate-Edge-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>` where the MAC is
//! taken under the shared edge secret over
//! `"<t>\n<METHOD>\n<path>\n<hex SHA-256 of the body>"` (path without the query string).
//! The origin accepts a signature whose `t` is within [`MAX_SKEW_SECONDS`] of its own clock,
//! either way. The scheme follows the common webhook-signature pattern (timestamp + HMAC).

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// HMAC-SHA256 (RFC 2104), the one MAC of flashgate's signed strings.
pub(crate) type HmacSha256 = Hmac<Sha256>;

/// A fresh HMAC-SHA256 under `secret` (any key length is valid). Check a tag with
/// `verify_slice`, which compares in constant time.
pub(crate) fn keyed_mac(secret: &[u8]) -> HmacSha256 {
    HmacSha256::new_from_slice(secret).expect("HMAC takes any key length")
}

/// How far the signature's timestamp may be from the verifier's clock, in seconds.
pub const MAX_SKEW_SECONDS: i64 = 60;

/// Why a signature was refused. All map to 403 `forbidden`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureError {
    Missing,
    Malformed,
    Stale,
    Mismatch,
}

fn mac(secret: &[u8], t: i64, method: &str, path: &str, body: &[u8]) -> HmacSha256 {
    let digest = hex::encode(Sha256::digest(body));
    let mut mac = keyed_mac(secret);
    mac.update(format!("{t}\n{}\n{path}\n{digest}", method.to_ascii_uppercase()).as_bytes());
    mac
}

/// Returns the header value signing this request at time `t` (Unix seconds).
pub fn sign(secret: &[u8], t: i64, method: &str, path: &str, body: &[u8]) -> String {
    let tag = mac(secret, t, method, path, body).finalize().into_bytes();
    format!("t={t},v1={}", hex::encode(tag))
}

/// Checks a header value against the request and the verifier's clock `now` (Unix seconds).
pub fn verify(
    secret: &[u8],
    header: Option<&str>,
    method: &str,
    path: &str,
    body: &[u8],
    now: i64,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => v1 = hex::decode(v).ok(),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return Err(SignatureError::Malformed);
    };
    if (now - t).abs() > MAX_SKEW_SECONDS {
        return Err(SignatureError::Stale);
    }
    mac(secret, t, method, path, body)
        .verify_slice(&v1)
        .map_err(|_| SignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_verify() {
        let h = sign(b"s", 100, "POST", "/api/v1/campaigns/a/claims", b"{}");
        assert_eq!(
            verify(
                b"s",
                Some(&h),
                "POST",
                "/api/v1/campaigns/a/claims",
                b"{}",
                130
            ),
            Ok(())
        );
        assert_eq!(
            verify(
                b"s",
                Some(&h),
                "POST",
                "/api/v1/campaigns/a/claims",
                b"{ }",
                130
            ),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(
                b"s",
                Some(&h),
                "POST",
                "/api/v1/campaigns/b/claims",
                b"{}",
                130
            ),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(
                b"s",
                Some(&h),
                "POST",
                "/api/v1/campaigns/a/claims",
                b"{}",
                200
            ),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify(b"s", None, "POST", "/", b"", 0),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify(b"s", Some("junk"), "POST", "/", b"", 0),
            Err(SignatureError::Malformed)
        );
    }
}
