//! Order keys of the tickets the edge issues itself (docs/WAITING-ROOM.md, "Joins"): the
//! ticket's sequence number is its order key, so the origin admits in key order and the edge
//! needs nobody to hand out places.
//!
//! - An arrival (a `fifo` queue after the start) is keyed by the edge's arrival time:
//!   `EDGE_BLOCK + unix_ms × 1024 + salt` (`salt` random in `0..1024`, so two isolates
//!   issuing in the same millisecond rarely share a key). Every key stays exact in a JSON
//!   double until the year 2248.
//! - A draw (the prequeue, a `random` queue) is a keyed hash of (campaign, customer) under the
//!   edge secret, placed at the same fraction of the numbers still waiting,
//!   `(now_serving, RANDOM_BLOCK)`: joining again gives the same number, or a later one once
//!   admission has moved on, never a new draw.
//!
//! Positions of arrival keys come from the origin's count of the reported tickets
//! ([`QueueStatus::line_marks`]), not from arithmetic on the keys.

use hmac::Mac;
use serde::{Deserialize, Serialize};

use super::presence::REPORT_EVERY_MS;
use super::{QueueStatus, RANDOM_BLOCK};
use crate::signature::keyed_mac;

/// Sequence numbers from here on are arrival keys issued by the edge (2^41, above every
/// arrival number the origin gives, `RANDOM_BLOCK + n`).
pub const EDGE_BLOCK: u64 = 1 << 41;
/// Bits of an arrival key below its millisecond.
pub const SALT_BITS: u32 = 10;
/// Admission does not pass an arrival key younger than this (ms, by the origin's clock), so
/// the edge's report of it has arrived before admission reaches its time.
pub const ADMIT_LAG_MS: i64 = 3_000;
/// Most points in [`QueueStatus::line_marks`].
pub const MAX_LINE_MARKS: usize = 32;
/// Marks back from the last one over which [`QueueStatus::unreported_ahead`] reads the recent
/// arrival rate (an eighth of the line when all [`MAX_LINE_MARKS`] are there).
const RATE_MARKS: usize = MAX_LINE_MARKS / 8;

const DRAW_LABEL: &str = "flashgate-draw-v1";

/// The arrival key of a join at `now_ms` (Unix ms) with `salt` (only its low [`SALT_BITS`]).
pub fn arrival_key(now_ms: i64, salt: u32) -> u64 {
    let ms = u64::try_from(now_ms).unwrap_or(0);
    EDGE_BLOCK + (ms << SALT_BITS) + u64::from(salt & ((1 << SALT_BITS) - 1))
}

/// When arrival key `n` was issued (Unix ms); `None` below [`EDGE_BLOCK`].
pub fn arrival_ms(n: u64) -> Option<i64> {
    n.checked_sub(EDGE_BLOCK)
        .map(|k| i64::try_from(k >> SALT_BITS).unwrap_or(i64::MAX))
}

/// The drawn number of `customer` on campaign `campaign` under `secret`, at the fraction of
/// `(now_serving, RANDOM_BLOCK)` its keyed hash gives (`now_serving` as the issuer knows it).
pub fn drawn_key(secret: &[u8], campaign: &str, customer: &str, now_serving: u64) -> u64 {
    let mut mac = keyed_mac(secret);
    mac.update(DRAW_LABEL.as_bytes());
    mac.update(b".");
    mac.update(campaign.as_bytes());
    mac.update(b".");
    mac.update(customer.as_bytes());
    let tag = mac.finalize().into_bytes();
    let mut b = [0u8; 8];
    b.copy_from_slice(&tag[..8]);
    let h = u64::from_be_bytes(b);
    let lo = now_serving.min(RANDOM_BLOCK - 2);
    let span = RANDOM_BLOCK - 1 - lo;
    lo + 1 + ((u128::from(h) * u128::from(span)) >> 64) as u64
}

/// A point of the line of arrival keys: `ahead` tickets wait at or before key `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LineMark {
    /// An arrival key in line.
    pub n: u64,
    /// Tickets in line at or before it (drawn and origin arrivals included).
    pub ahead: u64,
}

impl QueueStatus {
    /// Position of arrival key `seq` (`>= EDGE_BLOCK`, above `now_serving`): linear between the
    /// nearest [`QueueStatus::line_marks`] around it (from `now_serving` with the tickets
    /// before the arrival keys); one past the last mark for a key the origin has not counted
    /// yet (those ahead of it not reported yet are missed: the lag of one report interval).
    pub fn keyed_position(&self, seq: u64) -> u64 {
        let mut lo = (self.now_serving.max(EDGE_BLOCK), self.line_before_keys);
        for m in self.line_marks.iter().filter(|m| m.n > self.now_serving) {
            if m.n >= seq {
                if m.n == seq || m.n <= lo.0 {
                    return m.ahead.max(1);
                }
                let part = u128::from(seq.saturating_sub(lo.0))
                    * u128::from(m.ahead.saturating_sub(lo.1))
                    / u128::from(m.n - lo.0);
                let at = lo.1.saturating_add(u64::try_from(part).unwrap_or(u64::MAX));
                return at.clamp(lo.1 + 1, m.ahead.max(lo.1 + 1));
            }
            lo = (m.n, m.ahead);
        }
        lo.1.max(self.line) + 1
    }

    /// The instant (Unix ms) up to which the line of a status the origin read at about
    /// `as_of_ms` holds every arrival: the later of its last mark's issue time and `as_of_ms −`
    /// [`REPORT_EVERY_MS`] (every join is reported within that).
    pub fn line_known_until_ms(&self, as_of_ms: i64) -> i64 {
        let last = self
            .line_marks
            .iter()
            .rev()
            .find(|m| m.n > self.now_serving)
            .and_then(|m| arrival_ms(m.n));
        last.unwrap_or(i64::MIN)
            .max(as_of_ms.saturating_sub(REPORT_EVERY_MS))
    }

    /// Tickets probably ahead of arrival key `seq` that this status does not count yet, for a
    /// status the origin read at about `as_of_ms` (Unix ms): 0 unless `seq` is past the last
    /// mark. Every join is reported within [`REPORT_EVERY_MS`], so the line holds the arrivals
    /// before `as_of_ms − REPORT_EVERY_MS` (and before the last mark's own time); the arrivals
    /// between that instant and `seq`'s are estimated at the rate the last marks show (tickets
    /// per ms between a mark [`RATE_MARKS`] back and the known instant). Without it a join in
    /// a crowd is told the place the line had one report interval and one status TTL ago.
    pub fn unreported_ahead(&self, seq: u64, as_of_ms: i64) -> u64 {
        let live: Vec<&LineMark> = self
            .line_marks
            .iter()
            .filter(|m| m.n > self.now_serving)
            .collect();
        let (Some(last), Some(at)) = (live.last(), arrival_ms(seq)) else {
            return 0;
        };
        if seq <= last.n || live.len() < 2 {
            return 0;
        }
        let first = live[live.len().saturating_sub(RATE_MARKS + 1)];
        let Some(first_ms) = arrival_ms(first.n) else {
            return 0;
        };
        let known_ms = self.line_known_until_ms(as_of_ms);
        let span_ms = known_ms.saturating_sub(first_ms);
        let gap_ms = at.saturating_sub(known_ms);
        if span_ms <= 0 || gap_ms <= 0 {
            return 0;
        }
        let tickets = last.ahead.saturating_sub(first.ahead);
        let ahead = u128::from(tickets) * gap_ms as u128 / span_ms as u128;
        u64::try_from(ahead).unwrap_or(u64::MAX)
    }
}

/// Seconds until admission may pass arrival key `seq` at `now_ms` (Unix ms): admission waits
/// [`ADMIT_LAG_MS`] after a key's issue for its report; 0 for other numbers or once passed.
pub fn admit_lag_left_seconds(seq: u64, now_ms: i64) -> u64 {
    arrival_ms(seq).map_or(0, |at| {
        let left = at.saturating_add(ADMIT_LAG_MS).saturating_sub(now_ms);
        u64::try_from(left.max(0)).unwrap_or(0).div_ceil(1000)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrival_keys_order_by_time_and_stay_exact_in_json() {
        let t = 1_800_000_000_000;
        let a = arrival_key(t, 1_023);
        let b = arrival_key(t + 1, 0);
        assert!(EDGE_BLOCK < a && a < b);
        assert_eq!((arrival_ms(a), arrival_ms(b)), (Some(t), Some(t + 1)));
        assert_eq!(arrival_ms(RANDOM_BLOCK + 5), None);
        // Year 2200 still below 2^53.
        assert!(arrival_key(7_258_118_400_000, 1_023) < 1 << 53);
    }

    #[test]
    fn draws_are_the_same_for_the_same_customer_and_never_earlier() {
        let k = b"secret";
        let a = drawn_key(k, "c", "alice", 0);
        assert_eq!(a, drawn_key(k, "c", "alice", 0));
        assert_ne!(a, drawn_key(k, "c", "bob", 0));
        assert_ne!(a, drawn_key(k, "d", "alice", 0));
        assert_ne!(a, drawn_key(b"other", "c", "alice", 0));
        assert!(a > 0 && a < RANDOM_BLOCK);
        let later = drawn_key(k, "c", "alice", RANDOM_BLOCK / 2);
        assert!(later > RANDOM_BLOCK / 2 && later >= a && later < RANDOM_BLOCK);
    }

    #[test]
    fn positions_come_from_the_marks() {
        let t = |ms| arrival_key(ms, 0);
        let q = QueueStatus {
            admit_per_second: 10,
            line: 110,
            line_before_keys: 10,
            line_marks: vec![
                LineMark {
                    n: t(1_000),
                    ahead: 60,
                },
                LineMark {
                    n: t(2_000),
                    ahead: 110,
                },
            ],
            ..Default::default()
        };
        assert_eq!(q.keyed_position(t(1_000)), 60);
        assert_eq!(q.keyed_position(t(1_500)), 85);
        assert_eq!(q.keyed_position(t(2_000)), 110);
        assert_eq!(q.keyed_position(t(2_001)), 111, "not counted yet: last");
        // Passed marks are left out; a key just past the cursor is near the front.
        let on = QueueStatus {
            now_serving: t(1_000),
            line: 50,
            line_before_keys: 0,
            line_marks: vec![LineMark {
                n: t(2_000),
                ahead: 50,
            }],
            ..q.clone()
        };
        assert_eq!(on.keyed_position(t(1_001)), 1);
        assert_eq!(on.keyed_position(t(2_000)), 50);
        assert_eq!(QueueStatus::default().keyed_position(t(5)), 1);
    }

    #[test]
    fn arrivals_not_reported_yet_are_estimated_from_the_recent_rate() {
        let t = |ms| arrival_key(ms, 0);
        // 100 tickets per second between the marks at 1 s and 2 s.
        let q = QueueStatus {
            admit_per_second: 10,
            line: 210,
            line_before_keys: 10,
            line_marks: vec![
                LineMark {
                    n: t(1_000),
                    ahead: 110,
                },
                LineMark {
                    n: t(2_000),
                    ahead: 210,
                },
            ],
            ..Default::default()
        };
        // Read at 2.5 s: arrivals before 2 s (the last mark) are counted; a key at 2.5 s has
        // about 50 more ahead of it.
        assert_eq!(q.unreported_ahead(t(2_500), 2_500), 50);
        // Read at 4 s and nothing reported after 2 s: the line is known to 3 s, where the rate
        // has fallen to 100 tickets over 2 s; a key at 4 s has about 50 ahead.
        assert_eq!(q.unreported_ahead(t(4_000), 4_000), 50);
        // Counted keys, keys before the known instant, and a line with one mark: none.
        assert_eq!(q.unreported_ahead(t(2_000), 2_500), 0);
        assert_eq!(q.unreported_ahead(t(2_900), 4_000), 0);
        assert_eq!(q.unreported_ahead(RANDOM_BLOCK + 3, 4_000), 0);
        let one = QueueStatus {
            line_marks: q.line_marks[1..].to_vec(),
            ..q.clone()
        };
        assert_eq!(one.unreported_ahead(t(2_500), 2_500), 0);
    }

    #[test]
    fn the_admit_lag_left() {
        let k = arrival_key(10_000, 5);
        assert_eq!(admit_lag_left_seconds(k, 10_000), 3);
        assert_eq!(admit_lag_left_seconds(k, 11_500), 2);
        assert_eq!(admit_lag_left_seconds(k, 13_000), 0);
        assert_eq!(admit_lag_left_seconds(RANDOM_BLOCK + 1, 0), 0);
    }
}
