//! The edge signature: proof that a request came through the edge worker, and that who it is
//! for was not changed on the way.
//!
//! Header `Flashgate-Edge-Signature: t=<unix seconds>,v2=<hex HMAC-SHA256>` where the MAC is
//! taken under the shared edge secret over the lines
//!
//! ```text
//! <t>
//! <METHOD>
//! <path, as sent, without the query string>
//! <hex SHA-256 of the body>
//! <Authorization value>
//! <Idempotency-Key value>
//! <client IP forwarded in Flashgate-Client-Ip>
//! ```
//!
//! joined by `\n`; an absent header is an empty line (header values never contain a line
//! break, RFC 9110 §5.5). So a signature captured in transit is useless with another customer
//! token, another idempotency key or another client IP. The origin accepts a signature whose
//! `t` is within [`MAX_SKEW_SECONDS`] of its own clock, either way. The scheme follows the
//! common webhook-signature pattern (timestamp + HMAC, RFC 2104).

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// HMAC-SHA256 (RFC 2104), the one MAC of flashgate's signed strings.
pub(crate) type HmacSha256 = Hmac<Sha256>;

/// Keys whose keyed state this thread keeps at most ([`keyed_mac`]).
const KEYED_KEPT: usize = 4;

thread_local! {
    /// The keyed states of the last [`KEYED_KEPT`] keys this thread used, with their keys.
    /// Keying HMAC-SHA256 costs two SHA-256 compressions, as much as the MAC of a short
    /// message itself; a copy of a keyed state costs a few hundred bytes moved. The keys are
    /// the service's own secrets (the edge secret, the customer-token secret, keys derived
    /// from them, a draw's seed), never a caller's input.
    static KEYED: std::cell::RefCell<Vec<(Vec<u8>, HmacSha256)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// A fresh HMAC-SHA256 under `secret` (any key length is valid): a copy of the keyed state
/// when this thread keyed one under the same secret lately. Check a tag with `verify_slice`,
/// which compares in constant time.
pub(crate) fn keyed_mac(secret: &[u8]) -> HmacSha256 {
    KEYED.with(|kept| {
        let mut kept = kept.borrow_mut();
        if let Some((_, mac)) = kept.iter().find(|(key, _)| key.as_slice() == secret) {
            return mac.clone();
        }
        let mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
        if kept.len() >= KEYED_KEPT {
            kept.remove(0);
        }
        kept.push((secret.to_vec(), mac.clone()));
        mac
    })
}

/// How far the signature's timestamp may be from the verifier's clock, in seconds.
pub const MAX_SKEW_SECONDS: i64 = 60;

/// Why a signature was refused. All map to 403 `forbidden`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureError {
    /// No signature header.
    Missing,
    /// Not `t=<integer>,v2=<hex>`.
    Malformed,
    /// `t` is more than [`MAX_SKEW_SECONDS`] from the verifier's clock.
    Stale,
    /// The MAC does not match the request.
    Mismatch,
}

/// The parts of a request the signature covers. Header values are the raw bytes as sent;
/// `None` for an absent header.
#[derive(Debug, Clone, Copy, Default)]
pub struct Signed<'a> {
    /// HTTP method (compared case-insensitively).
    pub method: &'a str,
    /// Path as sent (still percent-encoded), without the query string.
    pub path: &'a str,
    /// Body bytes.
    pub body: &'a [u8],
    /// The `Authorization` header (the customer token).
    pub authorization: Option<&'a [u8]>,
    /// The `Idempotency-Key` header.
    pub idempotency_key: Option<&'a [u8]>,
    /// The client IP the edge forwards in [`crate::CLIENT_IP_HEADER`].
    pub client_ip: Option<&'a [u8]>,
}

fn mac(secret: &[u8], t: i64, r: &Signed<'_>) -> HmacSha256 {
    let digest = hex::encode(Sha256::digest(r.body));
    let mut mac = keyed_mac(secret);
    mac.update(
        format!(
            "{t}\n{}\n{}\n{digest}",
            r.method.to_ascii_uppercase(),
            r.path
        )
        .as_bytes(),
    );
    for value in [r.authorization, r.idempotency_key, r.client_ip] {
        mac.update(b"\n");
        mac.update(value.unwrap_or_default());
    }
    mac
}

/// Returns the header value signing the request `r` at time `t` (Unix seconds).
pub fn sign(secret: &[u8], t: i64, r: &Signed<'_>) -> String {
    let tag = mac(secret, t, r).finalize().into_bytes();
    format!("t={t},v2={}", hex::encode(tag))
}

/// Checks a header value against the request `r` and the verifier's clock `now` (Unix
/// seconds). Errors: every [`SignatureError`].
pub fn verify(
    secret: &[u8],
    header: Option<&str>,
    r: &Signed<'_>,
    now: i64,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let mut t = None;
    let mut tag = None;
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v2", v)) => tag = hex::decode(v).ok(),
            _ => {}
        }
    }
    let (Some(t), Some(tag)) = (t, tag) else {
        return Err(SignatureError::Malformed);
    };
    if now.abs_diff(t) > MAX_SKEW_SECONDS.unsigned_abs() {
        return Err(SignatureError::Stale);
    }
    mac(secret, t, r)
        .verify_slice(&tag)
        .map_err(|_| SignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_keyed_state_gives_the_mac_of_a_fresh_one() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let rfc = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        let mac_of = |key: &[u8], data: &[u8]| {
            let mut m = keyed_mac(key);
            m.update(data);
            hex::encode(m.finalize().into_bytes())
        };
        assert_eq!(mac_of(b"Jefe", b"what do ya want for nothing?"), rfc);
        // More keys than are kept, in turn, each twice: every MAC as a fresh keying gives it.
        let keys: Vec<Vec<u8>> = (0..KEYED_KEPT + 2).map(|i| vec![i as u8; 32 + i]).collect();
        for _ in 0..2 {
            for key in keys.iter().chain([b"Jefe".to_vec()].iter()) {
                let mut fresh = HmacSha256::new_from_slice(key).unwrap();
                fresh.update(b"data");
                assert_eq!(
                    mac_of(key, b"data"),
                    hex::encode(fresh.finalize().into_bytes())
                );
            }
        }
        assert_eq!(mac_of(b"Jefe", b"what do ya want for nothing?"), rfc);
        // A key that is a prefix of a kept one is another key.
        assert_ne!(mac_of(&keys[3][..10], b"data"), mac_of(&keys[3], b"data"));
    }

    fn request() -> Signed<'static> {
        Signed {
            method: "POST",
            path: "/api/v1/campaigns/a/claims",
            body: b"{}",
            authorization: Some(b"Bearer token-of-ana"),
            idempotency_key: Some(b"k-1"),
            client_ip: Some(b"203.0.113.7"),
        }
    }

    #[test]
    fn sign_verify() {
        let r = request();
        let h = sign(b"s", 100, &r);
        assert_eq!(verify(b"s", Some(&h), &r, 130), Ok(()));
        assert_eq!(verify(b"s", Some(&h), &r, 40), Ok(()));
        let lower = Signed {
            method: "post",
            ..r
        };
        assert_eq!(verify(b"s", Some(&h), &lower, 130), Ok(()));
        assert_eq!(
            verify(b"other", Some(&h), &r, 130),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(verify(b"s", Some(&h), &r, 200), Err(SignatureError::Stale));
        assert_eq!(
            verify(b"s", Some(&h), &r, i64::MIN),
            Err(SignatureError::Stale)
        );
        assert_eq!(verify(b"s", None, &r, 0), Err(SignatureError::Missing));
        assert_eq!(
            verify(b"s", Some("junk"), &r, 0),
            Err(SignatureError::Malformed)
        );
        // The former scheme (v1, without the token, key and client IP) is not accepted.
        let v1 = h.replace("v2=", "v1=");
        assert_eq!(
            verify(b"s", Some(&v1), &r, 130),
            Err(SignatureError::Malformed)
        );
    }

    #[test]
    fn every_covered_part_is_bound() {
        let r = request();
        let h = sign(b"s", 100, &r);
        let swapped = [
            Signed { body: b"{ }", ..r },
            Signed {
                path: "/api/v1/campaigns/b/claims",
                ..r
            },
            Signed { method: "PUT", ..r },
            Signed {
                authorization: Some(b"Bearer token-of-bea"),
                ..r
            },
            Signed {
                authorization: None,
                ..r
            },
            Signed {
                idempotency_key: Some(b"k-2"),
                ..r
            },
            Signed {
                idempotency_key: None,
                ..r
            },
            Signed {
                client_ip: Some(b"198.51.100.1"),
                ..r
            },
            Signed {
                client_ip: None,
                ..r
            },
        ];
        for (i, other) in swapped.iter().enumerate() {
            assert_eq!(
                verify(b"s", Some(&h), other, 100),
                Err(SignatureError::Mismatch),
                "case {i}: {other:?}"
            );
        }
        // Parts cannot be shifted from one line to the next.
        let shifted = Signed {
            idempotency_key: Some(b"k-1\n203.0.113.7"),
            client_ip: None,
            ..r
        };
        assert_eq!(
            verify(b"s", Some(&h), &shifted, 100),
            Err(SignatureError::Mismatch)
        );
    }
}
