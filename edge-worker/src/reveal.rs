//! Admissions revealed at the admit rate: how far into the origin's `now_serving` an isolate
//! lets its queue polls see.
//!
//! The origin admits at `admit_per_second` (plus at most one second's burst), but an isolate
//! learns of it once per status refresh. Shown as it arrives, every admission made since the
//! previous refresh would appear in one instant (one TTL's worth), and the customers polling
//! then would all claim within the same second. So each isolate keeps a reveal point (a count
//! of admissions and the sequence number that goes with it) that moves on at
//! `admit_per_second` toward the latest `admitted` / `now_serving` it knows, never faster. A
//! poll answers from the queue as revealed ([`Reveal::visible`]): position, ETA and admission
//! follow the revealed `now_serving`.
//!
//! The bounds (see `docs/WAITING-ROOM.md`, "The bound on claims at the origin"):
//! - an isolate reveals at most `admit_per_second` customers per second, except that it never
//!   hides more than `admit_per_second × (TTL + 1 s)` admissions it knows of (after an idle
//!   spell or a burst longer than that, the excess is revealed at once), and a new isolate
//!   reveals at once what was admitted more than one TTL's worth before its first status;
//! - while the origin admits at the rate, an isolate's reveal lags the origin by one refresh
//!   interval (it spreads over the next interval what the last one brought);
//! - every isolate reveals in line order, so across isolates the customers first revealed in
//!   any second are also at most `admit_per_second` (the highest of curves that each grow at
//!   most at that rate grows at most at that rate).
//!
//! Counts map to sequence numbers exactly for arrival numbers (`RANDOM_BLOCK + 1, + 2, …`, one
//! per customer); for numbers drawn at random, which the edge cannot list, linearly between the
//! two nearest known points (drawn numbers are spread uniformly, so this reveals about
//! `admit_per_second` of them per second). Arrival keys issued by the edge (times) likewise,
//! from the last key the point knows, or, when it knows none yet (a first status taken
//! mid-admission), from the key about as many tickets back as the point is admissions back
//! ([`key_before`]); the numbers before the keys are revealed at once when the cursor has moved
//! on to them.

use flashgate_shared::queue::keys::{EDGE_BLOCK, SALT_BITS};
use flashgate_shared::queue::{QueueStatus, RANDOM_BLOCK};

/// Where an isolate's reveal of one campaign's admissions stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reveal {
    /// Customers revealed as admitted at `at_ms` (a count, like [`QueueStatus::admitted`]).
    pub count: u64,
    /// The sequence number that goes with `count`: every ticket up to it is revealed.
    pub seq: u64,
    /// From when the point moves on at `admit_per_second`, ms since the epoch.
    pub at_ms: i64,
}

impl Reveal {
    /// Customers revealed at `now_ms` of `queue`: `count` plus `admit_per_second` per second
    /// since `at_ms`, at most `queue.admitted`.
    pub fn count_at(&self, queue: &QueueStatus, now_ms: i64) -> u64 {
        let elapsed_ms = u64::try_from(now_ms.saturating_sub(self.at_ms)).unwrap_or(0);
        let grown = elapsed_ms.saturating_mul(u64::from(queue.admit_per_second)) / 1000;
        self.count.saturating_add(grown).min(queue.admitted)
    }

    /// `queue` as revealed at `now_ms`: `admitted` and `now_serving` moved back to the reveal
    /// point (the queue itself once everything is revealed).
    pub fn visible(&self, queue: &QueueStatus, now_ms: i64) -> QueueStatus {
        let count = self.count_at(queue, now_ms);
        if count >= queue.admitted {
            return queue.clone();
        }
        QueueStatus {
            now_serving: seq_at((self.count, self.seq), queue, count),
            admitted: count,
            ..queue.clone()
        }
    }

    /// The reveal point of `new` (the queue of a status this isolate adopts at `now_ms`),
    /// following `prev` (the queue and reveal of the status it replaces; `None` for the first
    /// one). Status TTL `ttl_ms`.
    ///
    /// The point keeps moving at the rate from where `prev` had got to; one that had caught up
    /// starts again from `prev`'s queue at `now_ms`. It never hides more than
    /// `admit_per_second × (ttl_ms + 1 s)` of `new`'s admissions (`× ttl_ms` for a first
    /// status, or after the queue started over).
    pub fn after(
        prev: Option<(&QueueStatus, &Reveal)>,
        new: &QueueStatus,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Reveal {
        let rate = u64::from(new.admit_per_second);
        let worth = |ms: i64| rate.saturating_mul(u64::try_from(ms).unwrap_or(0)) / 1000;
        // The same queue, moved on (a queue set up again starts over from nothing).
        let continued = prev
            .filter(|(q, _)| q.admitted <= new.admitted && q.now_serving <= new.now_serving)
            .map(|(q, r)| {
                let count = r.count_at(q, now_ms);
                if count >= q.admitted {
                    Reveal {
                        count: q.admitted,
                        seq: q.now_serving,
                        at_ms: now_ms,
                    }
                } else if q.admit_per_second == new.admit_per_second {
                    *r
                } else {
                    Reveal {
                        count,
                        seq: seq_at((r.count, r.seq), q, count),
                        at_ms: now_ms,
                    }
                }
            });
        let (point, most_hidden) = match continued {
            Some(r) => (r, worth(ttl_ms.saturating_add(1000))),
            None => (
                Reveal {
                    count: 0,
                    seq: 0,
                    at_ms: now_ms,
                },
                worth(ttl_ms),
            ),
        };
        let floor = new.admitted.saturating_sub(most_hidden);
        if point.count_at(new, now_ms) >= floor {
            return point;
        }
        Reveal {
            count: floor,
            seq: seq_at((point.count, point.seq), new, floor),
            at_ms: now_ms,
        }
    }
}

/// The sequence number of the `count`-th admission of `queue`, from the known point `lo`
/// (`(count, seq)`, at or before it). Arrival numbers exactly: the arrivals admitted are
/// `now_serving − RANDOM_BLOCK`, after every drawn number. Drawn numbers linearly between `lo`
/// and the last drawn one (or `now_serving`). Never beyond `now_serving`.
fn seq_at(lo: (u64, u64), queue: &QueueStatus, count: u64) -> u64 {
    if count >= queue.admitted {
        return queue.now_serving;
    }
    // Arrival keys (the edge's arrival times): linearly in time, from the known point when
    // it is a key, else from the key about as many tickets back as `lo` is admissions back.
    let (lo, hi) = if queue.now_serving >= EDGE_BLOCK {
        let lo_seq = if lo.1 >= EDGE_BLOCK {
            lo.1
        } else {
            key_before(queue, queue.admitted.saturating_sub(lo.0))
        };
        ((lo.0, lo_seq), (queue.admitted, queue.now_serving))
    } else if queue.now_serving > RANDOM_BLOCK {
        let arrivals = queue.now_serving - RANDOM_BLOCK;
        let drawn_done = queue.admitted.saturating_sub(arrivals);
        if count >= drawn_done {
            return RANDOM_BLOCK + (count - drawn_done);
        }
        (lo, (drawn_done, RANDOM_BLOCK - 1))
    } else {
        (lo, (queue.admitted, queue.now_serving))
    };
    let seq = if count <= lo.0 || hi.0 <= lo.0 || hi.1 <= lo.1 {
        lo.1
    } else {
        let span = u128::from(hi.1 - lo.1) * u128::from(count - lo.0) / u128::from(hi.0 - lo.0);
        lo.1.saturating_add(u64::try_from(span).unwrap_or(u64::MAX))
    };
    seq.min(queue.now_serving)
}

/// The arrival key about `tickets` admissions before `queue.now_serving` (an arrival key),
/// for a reveal point that knows no key yet (a first status taken mid-admission, or the first
/// keys after drawn numbers). The line just past `now_serving` gives the keys' density (its
/// first mark); admission passed tickets that came at least as densely as it admits, so the
/// span is also at most `tickets` at `admit_per_second` in time. The smaller span: a key too
/// early only hides more for the one refresh until the point catches up, while `EDGE_BLOCK`
/// (the Unix epoch in key time) would hide every key until admission pauses.
fn key_before(queue: &QueueStatus, tickets: u64) -> u64 {
    let rate = u64::from(queue.admit_per_second.max(1));
    let by_time = (u128::from(tickets) * 1000 / u128::from(rate)) << SALT_BITS;
    let by_line = queue
        .line_marks
        .iter()
        .find(|m| m.n > queue.now_serving && m.ahead > 0)
        .map_or(u128::MAX, |m| {
            u128::from(tickets) * u128::from(m.n - queue.now_serving) / u128::from(m.ahead)
        });
    let span = u64::try_from(by_time.min(by_line)).unwrap_or(u64::MAX);
    queue.now_serving.saturating_sub(span).max(EDGE_BLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(now_serving: u64, admitted: u64, drawn: u64) -> QueueStatus {
        QueueStatus {
            now_serving,
            admit_per_second: 100,
            admission_ttl_seconds: 120,
            paused: false,
            admitted,
            drawn,
            ..Default::default()
        }
    }

    const A: u64 = RANDOM_BLOCK;

    #[test]
    fn a_refresh_is_spread_at_the_rate_from_where_the_last_one_ended() {
        // Arrivals only: 1,000 admitted at the first status (a new isolate hides one TTL's
        // worth at the rate: 100 of them), 1,100 one second later.
        let first = q(A + 1_000, 1_000, 0);
        let r0 = Reveal::after(None, &first, 10_000, 1_000);
        assert_eq!((r0.count, r0.seq, r0.at_ms), (900, A + 900, 10_000));
        assert_eq!(r0.visible(&first, 10_000).now_serving, A + 900);
        assert_eq!(r0.visible(&first, 10_500).now_serving, A + 950);
        assert_eq!(r0.visible(&first, 11_000), first);
        let second = q(A + 1_100, 1_100, 0);
        let r1 = Reveal::after(Some((&first, &r0)), &second, 11_000, 1_000);
        // Caught up with the first: the next 100 are spread over the next second.
        assert_eq!((r1.count, r1.seq, r1.at_ms), (1_000, A + 1_000, 11_000));
        let seen: Vec<u64> = [11_000, 11_010, 11_990, 12_000, 13_000]
            .iter()
            .map(|&t| r1.visible(&second, t).now_serving - A)
            .collect();
        assert_eq!(seen, [1_000, 1_001, 1_099, 1_100, 1_100]);
        assert_eq!(r1.visible(&second, 11_500).admitted, 1_050);
    }

    #[test]
    fn a_burst_is_spread_and_never_hidden_longer_than_a_ttl_and_a_second() {
        let a = q(A + 100, 100, 0);
        let r = Reveal {
            count: 100,
            seq: A + 100,
            at_ms: 0,
        };
        // 200 admitted in 1 s (the origin's burst): still revealing at 100/s from 1,000 ms.
        let b = q(A + 300, 300, 0);
        let rb = Reveal::after(Some((&a, &r)), &b, 1_000, 1_000);
        assert_eq!(rb.count_at(&b, 1_000), 100);
        assert_eq!(rb.count_at(&b, 2_000), 200);
        // Another 100 a second later: the point keeps its pace, 100 behind at 2,000 ms.
        let c = q(A + 400, 400, 0);
        let rc = Reveal::after(Some((&b, &rb)), &c, 2_000, 1_000);
        assert_eq!(rb, rc);
        assert_eq!(rc.count_at(&c, 2_000), 200);
        // After an idle spell of 10 s, 1,000 more: all but 2 s worth revealed at once.
        let d = q(A + 1_400, 1_400, 0);
        let rd = Reveal::after(Some((&c, &rc)), &d, 12_000, 1_000);
        assert_eq!((rd.count, rd.seq, rd.at_ms), (1_200, A + 1_200, 12_000));
    }

    #[test]
    fn a_queue_set_up_again_or_a_new_rate_starts_over() {
        let a = q(A + 1_000, 1_000, 0);
        let r = Reveal {
            count: 500,
            seq: A + 500,
            at_ms: 0,
        };
        let restarted = q(A + 10, 10, 0);
        let rr = Reveal::after(Some((&a, &r)), &restarted, 1_000, 1_000);
        // As for a new isolate: one TTL's worth at the rate (100) hidden, here all 10.
        assert_eq!(rr.count_at(&restarted, 1_000), 0);
        assert_eq!(rr.count_at(&restarted, 1_100), 10);
        let faster = QueueStatus {
            admit_per_second: 1_000,
            ..q(A + 1_200, 1_200, 0)
        };
        let rf = Reveal::after(Some((&a, &r)), &faster, 1_000, 1_000);
        assert_eq!((rf.count, rf.seq, rf.at_ms), (600, A + 600, 1_000));
    }

    #[test]
    fn drawn_numbers_are_revealed_in_order_and_arrivals_exactly() {
        // 1,000 drawn numbers (the prequeue) and 50 arrivals admitted; the last status knew
        // 400 drawn ones admitted up to sequence 2^38.
        let prev = q(1 << 38, 400, 1_000);
        let r = Reveal {
            count: 400,
            seq: 1 << 38,
            at_ms: 0,
        };
        let now = q(A + 50, 1_050, 1_000);
        let rn = Reveal::after(Some((&prev, &r)), &now, 0, 100_000);
        assert_eq!(rn.count, 400);
        let at = |ms| rn.visible(&now, ms);
        // Halfway through the drawn ones still to go: halfway between 2^38 and 2^40.
        let half = at(3_000);
        assert_eq!(half.admitted, 700);
        assert_eq!(half.now_serving, (1 << 38) + ((A - 1 - (1 << 38)) / 2));
        // Every drawn one, then the arrivals one by one.
        assert_eq!(at(6_000).now_serving, A);
        assert_eq!(at(6_010).now_serving, A + 1);
        assert_eq!(at(6_500), now);
        // Monotone all along.
        let mut last = 0;
        for ms in (0..=6_500).step_by(7) {
            let s = at(ms).now_serving;
            assert!(s >= last);
            last = s;
        }
    }

    /// The origin admitting a crowd of arrival keys (1,000 joins over 2 s) at 100/s, as an
    /// isolate that first sees the campaign mid-admission (a second campaign on a warm isolate,
    /// or a new isolate) refreshes it every second: what it reveals follows the origin at one
    /// refresh, never waiting for admission to pause.
    #[test]
    fn arrival_keys_are_revealed_from_a_first_status_taken_mid_admission() {
        use flashgate_shared::queue::keys::{arrival_key, LineMark};
        let t0: i64 = 1_800_000_000_000;
        let keys: Vec<u64> = (0..1_000).map(|i| arrival_key(t0 + 2 * i, 7)).collect();
        let status_at = |t: i64| {
            let admitted = u64::try_from((t - t0 - 3_000).max(0) / 100 * 10)
                .unwrap()
                .min(1_000);
            let i = usize::try_from(admitted).unwrap();
            let line_marks = (i..keys.len())
                .step_by(100)
                .map(|j| LineMark {
                    n: keys[j],
                    ahead: u64::try_from(j - i + 1).unwrap(),
                })
                .collect();
            QueueStatus {
                now_serving: if i == 0 { 0 } else { keys[i - 1] },
                admitted,
                line: 1_000 - admitted,
                line_marks,
                ..q(0, 0, 0)
            }
        };
        let admit_per_second = 100;
        let mut prev: Option<(QueueStatus, Reveal)> = None;
        let mut worst_behind = 0;
        for refresh in 0..8 {
            let at = t0 + 8_000 + refresh * 1_000;
            let now = status_at(at);
            assert_eq!(now.admit_per_second, admit_per_second);
            let r = Reveal::after(prev.as_ref().map(|(q, r)| (q, r)), &now, at, 1_000);
            for ms in (0..1_000).step_by(50) {
                let seen = r.visible(&now, at + ms);
                let revealed = keys.iter().filter(|&&k| k <= seen.now_serving).count();
                let behind = usize::try_from(status_at(at + ms).admitted).unwrap() - revealed;
                worst_behind = worst_behind.max(behind);
            }
            prev = Some((now, r));
        }
        // At most one refresh (1 s at 100/s) plus one TTL's worth hidden at the first status.
        assert!(
            worst_behind <= 200,
            "revealed up to {worst_behind} behind the origin"
        );
    }

    #[test]
    fn an_origin_that_does_not_count_admissions_is_shown_as_is() {
        let old = q(A + 500, 0, 0);
        let r = Reveal::after(None, &old, 0, 1_000);
        assert_eq!(r.visible(&old, 0), old);
    }
}
