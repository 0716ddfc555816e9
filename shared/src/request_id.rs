//! The request id a caller may send in `x-request-id` (a common convention; no RFC): the
//! origin keeps it for its log lines and sends it back, the edge forwards it and sends it back
//! on the answers it makes itself. Kept only when it is 1 ..= [`MAX_REQUEST_ID_LEN`] visible
//! ASCII characters: an unbounded id would be copied into every log line and echoed.

/// The header name, lowercase.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The longest caller's request id kept, in bytes (a UUID is 36; a CDN's ray id with a colo
/// suffix is ~20).
pub const MAX_REQUEST_ID_LEN: usize = 128;

/// Whether a caller's request id `id` is kept: 1 ..= [`MAX_REQUEST_ID_LEN`] bytes, each
/// visible ASCII (`!` ..= `~`).
pub fn is_kept(id: &[u8]) -> bool {
    !id.is_empty() && id.len() <= MAX_REQUEST_ID_LEN && id.iter().all(|c| c.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_visible_ascii_ids_are_kept() {
        assert!(is_kept(b"my-claim-rid-1"));
        assert!(is_kept(&[b'a'; MAX_REQUEST_ID_LEN]));
        assert!(!is_kept(&[b'a'; MAX_REQUEST_ID_LEN + 1]));
        assert!(!is_kept(b""));
        assert!(!is_kept(b"two words"));
        assert!(!is_kept("é".as_bytes()));
    }
}
