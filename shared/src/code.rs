//! Coupon codes, of promo codes and giveaway coupons alike: the alphabet of generated codes
//! and the normalisation of typed ones.

use unicode_normalization::UnicodeNormalization;

/// The 32 symbols of generated codes: `A–Z` and `2–9` without `0`, `O`, `1` and `I`, so that
/// no two symbols are easy to confuse when read aloud or typed from paper.
pub const ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
/// Longest code accepted, typed or stored, in characters.
pub const MAX_LEN: usize = 64;
/// Length of a generated code: 32^12 = 2^60 possible codes.
pub const GENERATED_LEN: usize = 12;

/// Normalises a typed code: trim, Unicode NFKC (full-width `ＳＰＲＩＮＧ１０` becomes
/// `SPRING10`), uppercase. Returns `None` when anything is left outside `A–Z0–9` (so a
/// Cyrillic look-alike never matches) or the result is empty or longer than [`MAX_LEN`].
pub fn normalise(input: &str) -> Option<String> {
    let s: String = input.trim().nfkc().collect::<String>().to_uppercase();
    let ok = crate::text::is_ascii_of(&s, MAX_LEN, |b| {
        b.is_ascii_uppercase() || b.is_ascii_digit()
    });
    ok.then_some(s)
}

/// Builds a generated code from 12 random bytes (each taken modulo 32, which is unbiased since
/// 256 is a multiple of 32). The caller supplies bytes from a CSPRNG.
pub fn from_random_bytes(bytes: &[u8; GENERATED_LEN]) -> String {
    bytes
        .iter()
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect()
}

/// True when `s` looks like a generated code: 12 symbols of [`ALPHABET`].
pub fn is_generated_shape(s: &str) -> bool {
    s.len() == GENERATED_LEN && s.bytes().all(|b| ALPHABET.contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises() {
        assert_eq!(normalise(" spring10 ").as_deref(), Some("SPRING10"));
        assert_eq!(normalise("Spring10").as_deref(), Some("SPRING10"));
        assert_eq!(normalise("ＳＰＲＩＮＧ１０").as_deref(), Some("SPRING10"));
        // Cyrillic С and Р look like Latin C and P.
        assert_eq!(normalise("\u{0421}\u{0420}RING10"), None);
        assert_eq!(normalise("   "), None);
    }

    #[test]
    fn alphabet_has_no_look_alikes() {
        for c in b"0O1I" {
            assert!(!ALPHABET.contains(c));
        }
        let code = from_random_bytes(&[255; 12]);
        assert!(is_generated_shape(&code));
    }
}
