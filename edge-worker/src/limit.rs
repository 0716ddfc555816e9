//! Per-customer and per-IP rate limits of the waiting room, as isolate-local token buckets.
//!
//! A bucket of rate `r` per second holds at most `r` tokens (one second's burst) and gains `r`
//! tokens per second; a request takes one token or is refused with the time until the next
//! one. Times are ms on the edge's clock. The budgets held across isolates, by the Workers
//! rate-limit binding, come after these: [`crate::shared_limit`].

use crate::decide::Answer;
use flashgate_shared::api::codes;
use std::collections::HashMap;

/// What a request does, for its own limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// `POST /api/v1/campaigns/{id}/queue`, per customer.
    Join,
    /// `GET /api/v1/campaigns/{id}/queue`, per customer (the ticket's).
    Poll,
    /// A claim on a campaign with a waiting room, per customer.
    Claim,
    /// A claim carried by an expired admission token (a retry the origin answers from its
    /// record), per customer.
    Replay,
    /// Any of them, per client IP (`CF-Connecting-IP`).
    AnyPerIp,
    /// A claim on a campaign with a waiting room forwarded to the origin, per campaign, at
    /// the campaign's `admit_per_second` (see [`crate::queue::paced`]).
    Forward,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Tokens in thousandths.
    milli: u64,
    at_ms: i64,
}

/// The buckets of one isolate. Holds at most `capacity` keys and starts over when full (a
/// forgotten bucket is a full one, so starting over never refuses anybody wrongly).
#[derive(Debug, Default)]
pub struct Limiter {
    buckets: HashMap<(Action, String), Bucket>,
    capacity: usize,
}

impl Limiter {
    /// An empty limiter of at most `capacity` keys.
    pub fn new(capacity: usize) -> Self {
        Limiter {
            buckets: HashMap::new(),
            capacity,
        }
    }

    /// Takes one token from the bucket of `(action, key)` at rate `per_second` (0 = no limit).
    /// Errors with the whole seconds (≥ 1) until a token is back.
    pub fn take(
        &mut self,
        action: Action,
        key: &str,
        per_second: u32,
        now_ms: i64,
    ) -> Result<(), u32> {
        if per_second == 0 {
            return Ok(());
        }
        let full = u64::from(per_second) * 1000;
        if self.buckets.len() >= self.capacity && !self.buckets.contains_key(&(action, key.into()))
        {
            self.buckets.clear();
        }
        let b = self
            .buckets
            .entry((action, key.to_string()))
            .or_insert(Bucket {
                milli: full,
                at_ms: now_ms,
            });
        let elapsed = u64::try_from(now_ms.saturating_sub(b.at_ms)).unwrap_or(0);
        b.milli = b
            .milli
            .saturating_add(elapsed.saturating_mul(u64::from(per_second)))
            .min(full);
        b.at_ms = b.at_ms.max(now_ms);
        if b.milli >= 1000 {
            b.milli -= 1000;
            return Ok(());
        }
        let wait_ms = (1000 - b.milli).div_ceil(u64::from(per_second));
        Err(u32::try_from(wait_ms.div_ceil(1000))
            .unwrap_or(u32::MAX)
            .max(1))
    }
}

/// 429 `rate_limited` with `Retry-After`.
pub fn rate_limited(retry_after_s: u32) -> Answer {
    Answer {
        retry_after_s: Some(retry_after_s),
        ..Answer::error(
            429,
            codes::RATE_LIMITED,
            "too many requests; retry after the given delay",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_per_second_then_refused_then_refilled() {
        let mut l = Limiter::new(100);
        for _ in 0..5 {
            assert_eq!(l.take(Action::Claim, "ana", 5, 1_000), Ok(()));
        }
        assert_eq!(l.take(Action::Claim, "ana", 5, 1_000), Err(1));
        // Other customers, other actions: own buckets.
        assert_eq!(l.take(Action::Claim, "bob", 5, 1_000), Ok(()));
        assert_eq!(l.take(Action::Join, "ana", 2, 1_000), Ok(()));
        // 200 ms give one token back at 5/s.
        assert_eq!(l.take(Action::Claim, "ana", 5, 1_199), Err(1));
        assert_eq!(l.take(Action::Claim, "ana", 5, 1_200), Ok(()));
        assert_eq!(l.take(Action::Claim, "ana", 5, 1_200), Err(1));
        // A long pause refills only up to one second's burst.
        for _ in 0..5 {
            assert_eq!(l.take(Action::Claim, "ana", 5, 60_000), Ok(()));
        }
        assert!(l.take(Action::Claim, "ana", 5, 60_000).is_err());
        // 0 = off; a clock that went backwards refills nothing and does not panic.
        assert_eq!(l.take(Action::AnyPerIp, "1.2.3.4", 0, 0), Ok(()));
        assert!(l.take(Action::Claim, "ana", 5, 0).is_err());
    }

    #[test]
    fn slow_rates_wait_whole_seconds_and_capacity_is_bounded() {
        let mut l = Limiter::new(2);
        assert_eq!(l.take(Action::Poll, "a", 1, 0), Ok(()));
        assert_eq!(l.take(Action::Poll, "a", 1, 100), Err(1));
        l.take(Action::Poll, "b", 1, 0).unwrap();
        // Full: starts over, so "c" and then "a" get fresh buckets.
        l.take(Action::Poll, "c", 1, 100).unwrap();
        assert_eq!(l.buckets.len(), 1);
        let a = rate_limited(3);
        assert_eq!((a.status, a.retry_after_s), (429, Some(3)));
        assert!(a.body.starts_with(r#"{"result":"rate_limited""#));
    }

    #[test]
    fn the_forwarding_pace_keeps_any_second_to_twice_the_rate_even_after_a_stall() {
        // 100 per second; claims arrive in bunches at instants 0, 1,000 (a stalled second's
        // worth at once), 1,990, 2,000 ... : never more than 200 pass in any 1,000 ms window.
        let mut l = Limiter::new(10);
        let mut passed: Vec<i64> = Vec::new();
        for at in [0, 1_000, 1_990, 2_000, 2_500, 5_000, 5_999] {
            for _ in 0..300 {
                if l.take(Action::Forward, "spring", 100, at).is_ok() {
                    passed.push(at);
                }
            }
        }
        for &t0 in &passed {
            let n = passed
                .iter()
                .filter(|&&t| t >= t0 && t < t0 + 1_000)
                .count();
            assert!(n <= 200, "{n} forwarded in the second from {t0}");
        }
        // Full burst at the start, a second's worth after a second, then the refill only.
        let at = |t: i64| passed.iter().filter(|&&p| p == t).count();
        assert_eq!((at(0), at(1_000), at(1_990), at(2_000)), (100, 100, 99, 1));
        assert_eq!(
            queue_paced_retry(),
            (429, Some(1), r#"{"result":"queued"}"#.to_string())
        );
    }

    fn queue_paced_retry() -> (u16, Option<u32>, String) {
        let a = crate::queue::paced(0);
        (a.status, a.retry_after_s, a.body)
    }
}
