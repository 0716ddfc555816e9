//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>): the `traceparent` header is
//! `{version}-{trace-id}-{parent-id}-{flags}`, a 32-hex-digit trace id and a 16-hex-digit
//! parent span id, lowercase, neither all zeros. The edge worker writes one on every request it
//! forwards ([`child`]: the caller's trace continued, or a new one); the origin reads its trace
//! id ([`trace_id`]) into the spans and log lines of the request.

/// The header name, lowercase.
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// The trace id of a valid `traceparent` value, else `None`. Version `00` has exactly four
/// fields; a later version (not `ff`) is read as `00` and may append fields.
pub fn trace_id(value: &str) -> Option<&str> {
    let mut parts = value.trim().split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let version_ok = is_hex(version, 2) && version != "ff";
    let fields_ok = version != "00" || parts.next().is_none();
    let ids_ok = is_hex(trace, 32) && is_hex(parent, 16) && !all_zeros(trace) && !all_zeros(parent);
    (version_ok && fields_ok && ids_ok && is_hex(flags, 2)).then_some(trace)
}

/// The `traceparent` of a request made on behalf of one that carried `incoming`: the same
/// trace with a new parent span id when `incoming` is valid, else a new trace; sampled flag
/// set. `random` supplies the new ids (the first 16 bytes the trace id, the last 8 the span
/// id); an all-zero id is replaced by one with its last bit set, so the result is always valid.
pub fn child(incoming: Option<&str>, random: [u8; 24]) -> String {
    let new_trace = hex_id(&random[..16]);
    let trace = incoming.and_then(trace_id).unwrap_or(&new_trace);
    format!("00-{trace}-{}-01", hex_id(&random[16..]))
}

fn hex_id(bytes: &[u8]) -> String {
    let mut s: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    if all_zeros(&s) {
        s.pop();
        s.push('1');
    }
    s
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

    const T: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

    #[test]
    fn reads_the_trace_id_of_a_valid_header_only() {
        assert_eq!(trace_id(&format!("00-{T}-00f067aa0ba902b7-01")), Some(T));
        assert_eq!(
            trace_id(&format!("01-{T}-00f067aa0ba902b7-01-more")),
            Some(T)
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
            assert_eq!(trace_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_child_continues_a_valid_trace_and_starts_one_otherwise() {
        let mut random = [0xabu8; 24];
        random[16..].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let incoming = format!("00-{T}-00f067aa0ba902b7-00");
        assert_eq!(
            child(Some(&incoming), random),
            format!("00-{T}-0102030405060708-01")
        );
        let fresh = child(Some("garbage"), random);
        assert_eq!(fresh, format!("00-{}-0102030405060708-01", "ab".repeat(16)));
        assert_eq!(trace_id(&fresh), Some("ab".repeat(16).as_str()));
        let zeros = child(None, [0; 24]);
        assert!(trace_id(&zeros).is_some(), "{zeros}");
    }
}
