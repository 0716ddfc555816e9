//! The `Idempotency-Key` header rule (after the IETF draft "The Idempotency-Key HTTP Header
//! Field"): 1..=255 characters of visible ASCII (0x21..=0x7E). Keys are scoped per customer:
//! the same string from two customers names two different requests.

/// Longest idempotency key, in bytes.
pub const MAX_KEY_LEN: usize = 255;

/// True when `key` is 1..=255 visible ASCII characters.
pub fn is_valid_key(key: &[u8]) -> bool {
    std::str::from_utf8(key).is_ok_and(|k| crate::text::is_visible_ascii(k, MAX_KEY_LEN))
}

/// The message of a request without an `Idempotency-Key` header (400
/// `invalid_idempotency_key`).
pub const MISSING_KEY: &str = "the Idempotency-Key header is missing";

/// The message of an `Idempotency-Key` that breaks the rule (400 `invalid_idempotency_key`).
pub const MALFORMED_KEY: &str = "Idempotency-Key must be 1 to 255 visible ASCII characters";

/// The key of a request's `Idempotency-Key` header (`None`: no header), or the message of
/// its refusal: [`MISSING_KEY`] or [`MALFORMED_KEY`].
pub fn check_key(key: Option<&[u8]>) -> Result<&[u8], &'static str> {
    match key {
        None => Err(MISSING_KEY),
        Some(k) if is_valid_key(k) => Ok(k),
        Some(_) => Err(MALFORMED_KEY),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_rule() {
        assert!(is_valid_key(b"k7"));
        assert!(is_valid_key(&[b'a'; 255]));
        assert!(!is_valid_key(&[b'a'; 256]));
        assert!(!is_valid_key(b""));
        assert!(!is_valid_key("é".as_bytes()));
        assert!(!is_valid_key(b"a b"));
    }

    #[test]
    fn a_missing_key_and_a_malformed_one_get_their_own_message() {
        assert_eq!(check_key(Some(b"k7")), Ok(&b"k7"[..]));
        assert_eq!(check_key(None), Err(MISSING_KEY));
        assert_eq!(check_key(Some(b"")), Err(MALFORMED_KEY));
        assert_eq!(check_key(Some(b"a b")), Err(MALFORMED_KEY));
    }
}
