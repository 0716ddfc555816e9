//! CORS at the edge ([`flashgate_shared::cors`]): which `Access-Control-*` headers an answer
//! carries, and the preflight answer. The same headers as the origin's tower-http `CorsLayer`
//! with the same settings, so a shop front-end sees one behaviour behind the edge and direct.
//!
//! - No allowed origins (`FLASHGATE_CORS_ORIGINS` empty, the default): no CORS at all; an
//!   `OPTIONS` is a 405 like any other method a path does not take.
//! - Allowed origins set: every `OPTIONS` is a preflight answered by the edge (200, empty
//!   body); every answer (edge or origin, errors included) carries `Vary` ([`VARY`]), and, when
//!   the request's `Origin` is in the list, `Access-Control-Allow-Origin` with it and the
//!   other headers below. Other origins get no `Access-Control-*` header at all.

use flashgate_shared::cors::{ALLOW_HEADERS, ALLOW_METHODS, EXPOSE_HEADERS, MAX_AGE_S, VARY};

/// The allowed origins (lowercase, as [`flashgate_shared::cors::parse_origins`] leaves them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cors {
    origins: Vec<String>,
}

impl Cors {
    /// CORS for these origins (empty: none).
    pub fn new(origins: Vec<String>) -> Self {
        Cors { origins }
    }

    /// True when some cross-origin caller is allowed.
    pub fn enabled(&self) -> bool {
        !self.origins.is_empty()
    }

    /// True when a request of `method` is a preflight the edge answers itself.
    pub fn is_preflight(&self, method: &str) -> bool {
        self.enabled() && method == "OPTIONS"
    }

    /// The headers to set on an answer to a request from `origin` (its `Origin` header):
    /// `(name, value)` pairs, empty without CORS. `preflight` adds the preflight's headers
    /// (methods, headers, max age) instead of `Access-Control-Expose-Headers`. Any
    /// `Access-Control-*` header already on a relayed answer is to be removed first.
    pub fn headers(&self, origin: Option<&str>, preflight: bool) -> Vec<(&'static str, String)> {
        if !self.enabled() {
            return Vec::new();
        }
        let mut out = vec![("vary", VARY.to_string())];
        let Some(origin) = origin.filter(|o| self.origins.iter().any(|a| a == o)) else {
            return out;
        };
        out.push(("access-control-allow-origin", origin.to_string()));
        if preflight {
            out.push(("access-control-allow-methods", ALLOW_METHODS.join(",")));
            out.push(("access-control-allow-headers", ALLOW_HEADERS.join(",")));
            out.push(("access-control-max-age", MAX_AGE_S.to_string()));
        } else {
            out.push(("access-control-expose-headers", EXPOSE_HEADERS.join(",")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shop() -> Cors {
        Cors::new(vec!["https://shop.example".into()])
    }

    #[test]
    fn nothing_without_origins() {
        let none = Cors::default();
        assert!(!none.enabled() && !none.is_preflight("OPTIONS"));
        assert!(none.headers(Some("https://shop.example"), true).is_empty());
    }

    #[test]
    fn allowed_origin_gets_the_headers_others_only_vary() {
        let c = shop();
        assert!(c.is_preflight("OPTIONS") && !c.is_preflight("GET"));
        let names =
            |h: Vec<(&'static str, String)>| h.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        let pre = c.headers(Some("https://shop.example"), true);
        assert!(pre.contains(&("access-control-allow-origin", "https://shop.example".into())));
        assert!(pre.contains(&("access-control-allow-methods", "GET,HEAD,POST".into())));
        assert!(pre.contains(&("access-control-max-age", "600".into())));
        assert!(pre
            .iter()
            .any(|(n, v)| *n == "access-control-allow-headers" && v.contains("idempotency-key")));
        assert_eq!(
            names(c.headers(Some("https://shop.example"), false)),
            [
                "vary",
                "access-control-allow-origin",
                "access-control-expose-headers"
            ]
        );
        for other in [
            Some("https://evil.example"),
            Some("https://SHOP.example"),
            None,
        ] {
            assert_eq!(c.headers(other, true), [("vary", VARY.to_string())]);
        }
    }
}
