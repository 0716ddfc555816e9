//! Cross-origin resource sharing (the Fetch standard's CORS protocol,
//! <https://fetch.spec.whatwg.org/#http-cors-protocol>) as both halves apply it: the list of
//! allowed shop origins (`FLASHGATE_CORS_ORIGINS`) and the headers an allowed origin may use.
//! The origin answers with tower-http's `CorsLayer` configured from these; the edge with its
//! own glue from the same values, so a browser sees the same answer from either.

/// Methods a cross-origin caller may use (`Access-Control-Allow-Methods`): those of the API.
pub const ALLOW_METHODS: &[&str] = &["GET", "HEAD", "POST"];
/// Request headers a cross-origin caller may send (`Access-Control-Allow-Headers`): the
/// customer token, the JSON body's type, the idempotency key, the waiting room's ticket and
/// admission token, and the trace context.
pub const ALLOW_HEADERS: &[&str] = &[
    "authorization",
    "content-type",
    crate::IDEMPOTENCY_KEY_HEADER,
    crate::queue::TICKET_HEADER,
    crate::queue::ADMISSION_HEADER,
    crate::trace::TRACEPARENT_HEADER,
];
/// Response headers a cross-origin caller may read besides the CORS-safelisted ones
/// (`Access-Control-Expose-Headers`): `Retry-After` of 429/503, `Allow` of 405, `Age`, who
/// answered, the status age and stale mark, and the request id.
pub const EXPOSE_HEADERS: &[&str] = &[
    "retry-after",
    "allow",
    "age",
    crate::ANSWERED_BY_HEADER,
    "flashgate-status-age-ms",
    "flashgate-stale",
    "x-request-id",
];
/// `Vary` of every answer while CORS is on (the answer depends on these request headers): the
/// value tower-http's `CorsLayer` sends by default.
pub const VARY: &str = "origin, access-control-request-method, access-control-request-headers";
/// How long a browser may keep a preflight's answer (`Access-Control-Max-Age`), seconds.
pub const MAX_AGE_S: u32 = 600;

/// Reads `FLASHGATE_CORS_ORIGINS`: origins (RFC 6454 §6.2 serialisation,
/// `scheme://host[:port]`) separated by commas and/or whitespace, e.g.
/// `https://shop.example, https://www.shop.example`. Empty (or unset) is the empty list: no
/// cross-origin caller is allowed (same-origin only). Entries are lowercased, as browsers send
/// them; a trailing `/` is dropped. Errors name the variable and the entry: anything that is
/// not `http://` or `https://` with a host and nothing after it (no path, query or `*`).
pub fn parse_origins(variable: &str, value: Option<&str>) -> Result<Vec<String>, String> {
    let mut origins = Vec::new();
    for entry in value
        .unwrap_or_default()
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|e| !e.is_empty())
    {
        let origin = entry
            .strip_suffix('/')
            .unwrap_or(entry)
            .to_ascii_lowercase();
        let host = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"));
        let ok = host.is_some_and(|h| {
            !h.is_empty()
                && h.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
                })
        });
        if !ok {
            return Err(format!(
                "{variable}: {entry:?} is not an origin like https://shop.example \
                 (scheme and host, optional port, nothing else)"
            ));
        }
        if !origins.contains(&origin) {
            origins.push(origin);
        }
    }
    Ok(origins)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_refuses_what_is_not_an_origin() {
        let p = |v: &str| parse_origins("FLASHGATE_CORS_ORIGINS", Some(v));
        assert_eq!(p(""), Ok(vec![]));
        assert_eq!(parse_origins("X", None), Ok(vec![]));
        assert_eq!(
            p(" https://Shop.example/, http://localhost:3000  https://shop.example"),
            Ok(vec![
                "https://shop.example".to_string(),
                "http://localhost:3000".to_string()
            ])
        );
        assert_eq!(
            p("https://[::1]:8443"),
            Ok(vec!["https://[::1]:8443".into()])
        );
        for bad in [
            "*",
            "shop.example",
            "https://",
            "https://shop.example/path",
            "ftp://shop.example",
            "https://shop.example?x",
        ] {
            let e = p(bad).unwrap_err();
            assert!(e.starts_with("FLASHGATE_CORS_ORIGINS: "), "{e}");
        }
    }
}
