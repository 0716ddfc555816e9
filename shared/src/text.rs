//! The one definition of acceptable text in request fields, used by every field of every
//! endpoint at the edge and at the origin (and by fields added later).
//!
//! Two kinds of field:
//! - a *token-like* field (idempotency key, payment reference, order reference, store, token
//!   subject, admin token) is 1..=`max` bytes of visible ASCII, 0x21..=0x7E (the `VCHAR` rule
//!   of RFC 5234, appendix B.1) — [`is_visible_ascii`];
//! - a *free-text* field (campaign name, release reason) is 1..=`max` Unicode scalar values,
//!   not blank, with no control character (Unicode general category `Cc`: U+0000..=U+001F,
//!   U+007F..=U+009F, which includes NUL, which PostgreSQL refuses in text) — [`is_free_text`].
//!
//! Lone UTF-16 surrogates cannot reach these checks: JSON text such as `"\ud800"` is refused by
//! the JSON parser (400 `invalid_json`), as RFC 8259 §8.2 allows.

/// True when `s` is 1..=`max` bytes and `allowed` accepts each of them: the one shape of every
/// "1..=N characters of this ASCII set" rule (visible ASCII here; campaign slug, claim id,
/// currency, admin token name and code alphabet elsewhere). `allowed` must refuse bytes
/// outside ASCII, so that bytes and characters are the same count.
pub fn is_ascii_of(s: &str, max: usize, allowed: impl Fn(u8) -> bool) -> bool {
    (1..=max).contains(&s.len()) && s.bytes().all(allowed)
}

/// True when `s` is 1..=`max` bytes, each visible ASCII (0x21..=0x7E: no space, no control
/// character, nothing outside ASCII).
pub fn is_visible_ascii(s: &str, max: usize) -> bool {
    is_ascii_of(s, max, |b| b.is_ascii_graphic())
}

/// True when `s` is free text of 1..=`max_chars` characters (Unicode scalar values), not only
/// white space, without control characters (`char::is_control`, category `Cc`).
pub fn is_free_text(s: &str, max_chars: usize) -> bool {
    !s.trim().is_empty() && s.chars().count() <= max_chars && !s.chars().any(char::is_control)
}

/// Checks a token-like `field`: `Err` carries the message naming the field, for a 422
/// `validation_failed` (e.g. `"payment_ref must be 1 to 255 visible ASCII characters"`).
pub fn check_visible_ascii(field: &str, s: &str, max: usize) -> Result<(), String> {
    if is_visible_ascii(s, max) {
        Ok(())
    } else {
        Err(format!(
            "{field} must be 1 to {max} visible ASCII characters"
        ))
    }
}

/// Checks a free-text `field`: `Err` carries the message naming the field, for a 422
/// `validation_failed` (e.g. `"name must be 1 to 200 characters, not blank, without control
/// characters"`).
pub fn check_free_text(field: &str, s: &str, max_chars: usize) -> Result<(), String> {
    if is_free_text(s, max_chars) {
        Ok(())
    } else {
        Err(format!(
            "{field} must be 1 to {max_chars} characters, not blank, without control characters"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_ascii_is_vchar_within_length() {
        assert!(is_visible_ascii("pay_123", 255));
        assert!(is_visible_ascii("~!", 2));
        assert!(!is_visible_ascii("abc", 2));
        assert!(!is_visible_ascii("", 2));
        assert!(!is_visible_ascii("pay 123", 255));
        assert!(!is_visible_ascii("a\0", 255));
        assert!(!is_visible_ascii("a\u{7f}", 255));
        assert!(!is_visible_ascii("é", 255));
    }

    #[test]
    fn free_text_refuses_control_characters_and_blank() {
        assert!(is_free_text("T-shirt drop", 200));
        assert!(is_free_text("Été 2026 — ünïcödé ✓", 200));
        assert!(is_free_text(&"é".repeat(200), 200));
        assert!(!is_free_text(&"é".repeat(201), 200));
        assert!(!is_free_text("", 200));
        assert!(!is_free_text("   ", 200));
        assert!(!is_free_text("bad\u{0}name", 200));
        assert!(!is_free_text("r\u{0}", 200));
        assert!(!is_free_text("tab\there", 200));
        assert!(!is_free_text("line\nbreak", 200));
        assert!(!is_free_text("del\u{7f}", 200));
        assert!(!is_free_text("c1\u{85}", 200));
    }

    #[test]
    fn messages_name_the_field() {
        assert_eq!(
            check_free_text("reason", "r\u{0}", 200).unwrap_err(),
            "reason must be 1 to 200 characters, not blank, without control characters"
        );
        assert_eq!(
            check_visible_ascii("store", "a b", 200).unwrap_err(),
            "store must be 1 to 200 visible ASCII characters"
        );
        assert!(check_free_text("name", "ok", 200).is_ok());
    }
}
