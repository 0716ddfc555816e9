//! The `Idempotency-Key` header rule (after the IETF draft "The Idempotency-Key HTTP Header
//! Field"): 1..=255 characters of visible ASCII (0x21..=0x7E). Keys are scoped per customer:
//! the same string from two customers names two different requests.

/// Longest idempotency key, in bytes.
pub const MAX_KEY_LEN: usize = 255;

/// True when `key` is 1..=255 visible ASCII characters.
pub fn is_valid_key(key: &[u8]) -> bool {
    std::str::from_utf8(key).is_ok_and(|k| crate::text::is_visible_ascii(k, MAX_KEY_LEN))
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
}
