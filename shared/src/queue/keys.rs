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
}
