//! Something the isolate fetches from the origin with an entity tag and keeps (the campaign
//! index, a sold-out campaign's winners filter): the value, its `ETag`, when the origin last
//! confirmed it, and the refresh bookkeeping ([`RefreshState`]: single-flight, back-off after
//! a failure). A refresh sends `If-None-Match`, so an unchanged value costs a bodiless 304.
//!
//! Times are ms since the Unix epoch on the edge's clock.

use crate::status::RefreshState;
use std::rc::Rc;

/// What the isolate holds of one fetched value.
#[derive(Debug)]
pub struct Held<T> {
    /// The last value received, shared with the requests reading it.
    pub value: Option<Rc<T>>,
    /// Its entity tag, sent back in `If-None-Match`.
    pub etag: Option<String>,
    /// When the origin last confirmed it (a 200 or a 304), ms.
    pub fetched_at_ms: i64,
    /// Refresh bookkeeping (single-flight, back-off).
    pub refresh: RefreshState,
}

impl<T> Default for Held<T> {
    fn default() -> Self {
        Held {
            value: None,
            etag: None,
            fetched_at_ms: 0,
            refresh: RefreshState::default(),
        }
    }
}

/// The origin's answer to a fetch, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched<T, E> {
    /// 200 with a valid body and its entity tag.
    New {
        /// The decoded body.
        value: T,
        /// Its `ETag`, if sent.
        etag: Option<String>,
    },
    /// 304: the value held is still the origin's.
    Unchanged,
    /// Anything else (the reason, for the log).
    Failed(FetchError<E>),
}

/// Why a fetch was not usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchError<E> {
    /// Unreachable, timed out, or a body over the size bound.
    Unreachable,
    /// Another HTTP status (403: the edge secret differs from the origin's; 404: an origin
    /// without the route, or an unknown campaign).
    Status(u16),
    /// 200 with a body that `decode` refused.
    BadBody(E),
}

impl<T, E> Fetched<T, E> {
    /// Reads the origin's answer: status, `ETag` and body, decoded by `decode`. A 304 when
    /// nothing is `held` is a failure (nothing to keep).
    pub fn read(
        code: u16,
        etag: Option<&str>,
        body: &[u8],
        held: bool,
        decode: impl FnOnce(&[u8]) -> Result<T, E>,
    ) -> Self {
        match code {
            200 => match decode(body) {
                Ok(value) => Fetched::New {
                    value,
                    etag: etag.map(str::to_string),
                },
                Err(e) => Fetched::Failed(FetchError::BadBody(e)),
            },
            304 if held => Fetched::Unchanged,
            other => Fetched::Failed(FetchError::Status(other)),
        }
    }
}

impl<T> Held<T> {
    /// Ms since the origin last confirmed the value (0 when the clock went backwards).
    pub fn age_ms(&self, now_ms: i64) -> i64 {
        now_ms.saturating_sub(self.fetched_at_ms).max(0)
    }

    /// True when a value is held and was confirmed less than `ttl_ms` ago.
    pub fn fresh(&self, now_ms: i64, ttl_ms: i64) -> bool {
        self.value.is_some() && self.age_ms(now_ms) < ttl_ms
    }

    /// The value when usable at `now_ms`: held and confirmed by the origin at most
    /// `max_stale_ms` ago.
    pub fn usable(&self, now_ms: i64, max_stale_ms: i64) -> Option<&T> {
        let age = now_ms.saturating_sub(self.fetched_at_ms);
        self.value.as_deref().filter(|_| age <= max_stale_ms)
    }

    /// Marks the refresh this request leads as started at `now_ms`.
    pub fn start(&mut self, now_ms: i64) {
        self.refresh.refreshing_since = Some(now_ms);
    }

    /// Takes in the refresh's outcome at `now_ms` and ends it (waiters see the new
    /// generation).
    pub fn finish<E>(&mut self, fetched: Fetched<T, E>, now_ms: i64) {
        match fetched {
            Fetched::New { value, etag } => {
                self.value = Some(Rc::new(value));
                self.etag = etag;
                self.fetched_at_ms = now_ms;
                self.refresh.failed_at = None;
            }
            Fetched::Unchanged => {
                self.fetched_at_ms = now_ms;
                self.refresh.failed_at = None;
            }
            Fetched::Failed(_) => self.refresh.failed_at = Some(now_ms),
        }
        self.refresh.refreshing_since = None;
        self.refresh.generation = self.refresh.generation.wrapping_add(1);
    }
}
