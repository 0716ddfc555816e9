//! When to fetch an identity provider's JWKS again: the pure schedule the origin and the edge
//! worker share (each does the fetch its own way).
//!
//! - The key set is refetched once it is `ttl_ms` old.
//! - A token the keys held may be out of date for ([`keys_may_be_stale`]: an unknown `kid`,
//!   or a signature that fails on a known one, as when a provider rotated its keys or replaced
//!   the key under a `kid`) triggers a fetch at once, but never sooner than `min_interval_ms`
//!   after the last attempt, so a flood of tokens with made-up key ids or bad signatures
//!   causes at most one fetch per interval.
//! - One fetch at a time (single-flight): while one runs, a request that needs it waits for
//!   its outcome and others go on with the keys held.
//! - A failed fetch keeps the keys held (an outage of the provider does not log everybody
//!   out) and is retried after `min_interval_ms`.

use super::TokenError;

/// True when verifying with a newer JWKS could turn `error` into a success, so the caller may
/// fetch it (on the [`State::step`] schedule) and verify again: the token names a key id not
/// held ([`TokenError::UnknownKey`], [`TokenError::KeysUnavailable`]), its signature does not
/// match the key held under its key id ([`TokenError::BadSignature`]: the provider may have
/// replaced the key and kept the `kid`), or its key id names a key of another algorithm
/// ([`TokenError::UnsupportedAlgorithm`]: replaced by a key of another type). Errors of the
/// claims (times, issuer, audience, subject) or of the token's form are not.
pub fn keys_may_be_stale(error: TokenError) -> bool {
    matches!(
        error,
        TokenError::UnknownKey
            | TokenError::KeysUnavailable
            | TokenError::BadSignature
            | TokenError::UnsupportedAlgorithm
    )
}

/// The schedule, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Age at which the key set is fetched again.
    pub ttl_ms: i64,
    /// Least time between two fetch attempts.
    pub min_interval_ms: i64,
}

/// What one verifier knows about its fetches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct State {
    /// When the key set in use was fetched (epoch ms); `None` before the first success.
    pub fetched_at_ms: Option<i64>,
    /// When the last fetch started (epoch ms), whatever its outcome.
    pub attempted_at_ms: Option<i64>,
    /// A fetch is under way.
    pub fetching: bool,
}

/// What a request does about the JWKS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Verify with the keys held.
    Use,
    /// Fetch now (this request leads; mark the state `fetching` first), then verify.
    Fetch,
    /// Another request is fetching: wait for it, then verify.
    Wait,
}

impl State {
    /// The step of a request at `now_ms`; `stale_keys` when its token failed in a way a newer
    /// JWKS could cure ([`keys_may_be_stale`]).
    pub fn step(&self, schedule: Schedule, now_ms: i64, stale_keys: bool) -> Step {
        if self.fetching {
            return if stale_keys { Step::Wait } else { Step::Use };
        }
        let since = |t: Option<i64>| t.map(|t| now_ms.saturating_sub(t));
        let stale = since(self.fetched_at_ms).is_none_or(|age| age >= schedule.ttl_ms);
        let may_try = since(self.attempted_at_ms).is_none_or(|d| d >= schedule.min_interval_ms);
        if may_try && (stale || stale_keys) {
            Step::Fetch
        } else {
            Step::Use
        }
    }

    /// Records the start of a fetch at `now_ms`.
    pub fn start(&mut self, now_ms: i64) {
        self.fetching = true;
        self.attempted_at_ms = Some(now_ms);
    }

    /// Records the end of a fetch at `now_ms` (`ok`: a new key set is in use).
    pub fn finish(&mut self, now_ms: i64, ok: bool) {
        self.fetching = false;
        if ok {
            self.fetched_at_ms = Some(now_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Schedule = Schedule {
        ttl_ms: 600_000,
        min_interval_ms: 30_000,
    };

    #[test]
    fn fetches_first_then_on_ttl_or_unknown_kid_at_most_once_per_interval() {
        let mut st = State::default();
        assert_eq!(st.step(S, 0, false), Step::Fetch);
        st.start(0);
        assert_eq!(st.step(S, 1, true), Step::Wait);
        assert_eq!(st.step(S, 1, false), Step::Use);
        st.finish(10, true);
        assert_eq!(st.step(S, 20, false), Step::Use);
        // Unknown kids within the interval use the keys held.
        assert_eq!(st.step(S, 29_999, true), Step::Use);
        assert_eq!(st.step(S, 30_000, true), Step::Fetch);
        st.start(30_000);
        st.finish(30_010, false);
        // Failed: keys kept, the TTL stays counted from the last success.
        assert_eq!(st.fetched_at_ms, Some(10));
        assert_eq!(st.step(S, 59_999, true), Step::Use);
        assert_eq!(st.step(S, 600_010, false), Step::Fetch);
    }

    #[test]
    fn a_bad_signature_on_a_known_kid_may_be_a_replaced_key_but_bad_claims_are_not() {
        for e in [
            TokenError::UnknownKey,
            TokenError::KeysUnavailable,
            TokenError::BadSignature,
            TokenError::UnsupportedAlgorithm,
        ] {
            assert!(keys_may_be_stale(e), "{e:?}");
        }
        for e in [
            TokenError::Malformed,
            TokenError::Expired,
            TokenError::NotYetValid,
            TokenError::LifetimeTooLong,
            TokenError::UnsupportedCritical,
            TokenError::WrongIssuer,
            TokenError::WrongAudience,
            TokenError::BadSubject,
        ] {
            assert!(!keys_may_be_stale(e), "{e:?}");
        }
    }
}
