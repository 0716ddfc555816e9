//! The request's URL, read without parsing it on the hot paths (part of the wasm32 glue,
//! [`super`]). A sold-out answer needs only the path, which the runtime's request already
//! carries; parsing the whole URL (scheme, host, port, path, query) cost the sold-out answer
//! more than any of its decisions, so it is parsed only when a request is forwarded, refreshes
//! the status or reads its query.

use std::cell::OnceCell;
use worker::{Request, Result, Url};

/// The URL of one request: its canonical path at once, the parsed URL on first use.
pub(super) struct RequestUrl {
    /// The URL as the runtime serialised it.
    raw: String,
    /// The path the worker routes by: the request's, or its canonical form when a campaign id
    /// was sent percent-encoded ([`crate::decide::canonical_path`]).
    path: String,
    parsed: OnceCell<Url>,
}

impl RequestUrl {
    /// The URL of `req`, with its path made canonical.
    pub(super) fn of(req: &Request) -> Self {
        let path = req.path();
        let path = crate::decide::canonical_path(&path).unwrap_or(path);
        RequestUrl {
            raw: req.inner().url(),
            path,
            parsed: OnceCell::new(),
        }
    }

    /// The canonical path (never percent-encoded campaign ids).
    pub(super) fn path(&self) -> &str {
        &self.path
    }

    /// The whole URL, parsed on first use, with the canonical path. Error: a URL the runtime
    /// gave that does not parse (not seen: the runtime serialises a parsed URL).
    pub(super) fn parsed(&self) -> Result<&Url> {
        if let Some(u) = self.parsed.get() {
            return Ok(u);
        }
        let mut u: Url = self
            .raw
            .parse()
            .map_err(|e| worker::Error::RustError(format!("request URL {}: {e}", self.raw)))?;
        u.set_path(&self.path);
        Ok(self.parsed.get_or_init(|| u))
    }
}
