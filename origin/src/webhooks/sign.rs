//! Standard Webhooks 1.0 signatures (standardwebhooks.com): `v1,` + base64 of
//! HMAC-SHA256(secret bytes, `"{id}.{timestamp}.{body}"`), the secret bytes being the base64
//! after `whsec_`. Our own code over the `hmac` and `sha2` crates (the `standardwebhooks` crate
//! would add a second base64 and HMAC implementation for these few lines), checked against
//! the specification's test vector below and, in the integration tests, by the reference
//! Python library.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

/// The prefix of every secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Fewest and most random bytes of a secret.
pub const SECRET_BYTES: std::ops::RangeInclusive<usize> = 24..=64;
/// Random bytes of a secret the origin makes.
const NEW_SECRET_BYTES: usize = 32;

/// Why a secret is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("a secret starts with whsec_")]
    Prefix,
    #[error("the part after whsec_ is not base64")]
    NotBase64,
    #[error("a secret is 24 to 64 bytes (base64 after whsec_), this one is {0}")]
    Length(usize),
}

/// The key bytes of `secret` (`whsec_` + base64 of 24..=64 bytes).
pub fn key_of(secret: &str) -> Result<Vec<u8>, SecretError> {
    let b64 = secret
        .strip_prefix(SECRET_PREFIX)
        .ok_or(SecretError::Prefix)?;
    let key = STANDARD.decode(b64).map_err(|_| SecretError::NotBase64)?;
    if !SECRET_BYTES.contains(&key.len()) {
        return Err(SecretError::Length(key.len()));
    }
    Ok(key)
}

/// A new random secret (`whsec_` + base64 of 32 bytes).
pub fn new_secret() -> String {
    let mut key = [0u8; NEW_SECRET_BYTES];
    rand::rng().fill_bytes(&mut key);
    format!("{SECRET_PREFIX}{}", STANDARD.encode(key))
}

/// One signature, `v1,<base64>`, of `body` sent as message `id` at `timestamp` (unix seconds).
pub fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256>>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` header: one signature per key, space-separated (the current secret
/// first, then the previous one during a rotation's overlap).
pub fn header(keys: &[Vec<u8>], id: &str, timestamp: i64, body: &[u8]) -> String {
    keys.iter()
        .map(|k| sign(k, id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The specification's test vector (standard-webhooks, spec and reference libraries).
    #[test]
    fn signature_matches_the_specifications_test_vector() {
        let key = key_of("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = sign(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn two_keys_give_two_space_separated_signatures() {
        let a = key_of(&new_secret()).unwrap();
        let b = key_of(&new_secret()).unwrap();
        let h = header(&[a.clone(), b.clone()], "id", 1, b"{}");
        let parts: Vec<&str> = h.split(' ').collect();
        assert_eq!(
            parts,
            vec![sign(&a, "id", 1, b"{}"), sign(&b, "id", 1, b"{}")]
        );
    }

    #[test]
    fn secrets_of_the_wrong_shape_or_length_are_refused() {
        assert_eq!(
            key_of("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            Err(SecretError::Prefix)
        );
        assert_eq!(key_of("whsec_!!!"), Err(SecretError::NotBase64));
        let short = format!("whsec_{}", STANDARD.encode([1u8; 23]));
        assert_eq!(key_of(&short), Err(SecretError::Length(23)));
        let long = format!("whsec_{}", STANDARD.encode([1u8; 65]));
        assert_eq!(key_of(&long), Err(SecretError::Length(65)));
        assert_eq!(key_of(&new_secret()).unwrap().len(), 32);
    }
}
