//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>): the `traceparent` header a
//! caller (the edge worker) sends is `00-{trace-id}-{parent-id}-{flags}`, with a 32-hex-digit
//! trace id and a 16-hex-digit parent span id, lowercase, neither all zeros. The origin
//! continues that trace: its `request` span carries the trace id (`trace_id`), so every log
//! line of the request does. A request without a valid one starts a new trace.

use axum::http::HeaderMap;

/// The header name (lowercase, as HTTP/2 and the spec write it).
pub const TRACEPARENT: &str = "traceparent";

/// The trace id of a valid `traceparent` value (version `00` or a later one, read as `00`),
/// else `None`.
pub fn parse_trace_id(value: &str) -> Option<&str> {
    let mut parts = value.split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let version_ok = is_hex(version, 2) && version != "ff";
    // Version 00 has exactly four fields; later versions may append more.
    let fields_ok = version != "00" || parts.next().is_none();
    let ids_ok = is_hex(trace, 32) && is_hex(parent, 16) && !all_zeros(trace) && !all_zeros(parent);
    (version_ok && fields_ok && ids_ok && is_hex(flags, 2)).then_some(trace)
}

/// The trace id of the request's `traceparent`, or a new random one (32 lowercase hex digits).
pub fn trace_id(headers: &HeaderMap) -> String {
    headers
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_trace_id)
        .map(str::to_string)
        .unwrap_or_else(new_trace_id)
}

/// A new random trace id (a UUID v4's 128 bits, in hex: never all zeros).
pub fn new_trace_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn all_zeros(s: &str) -> bool {
    s.bytes().all(|b| b == b'0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_trace_id_of_a_valid_header_only() {
        let t = "4bf92f3577b34da6a3ce929d0e0e4736";
        assert_eq!(
            parse_trace_id(&format!("00-{t}-00f067aa0ba902b7-01")),
            Some(t)
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
        ] {
            assert_eq!(parse_trace_id(bad), None, "{bad}");
        }
        assert_eq!(new_trace_id().len(), 32);
    }
}
