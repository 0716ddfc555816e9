//! Answers per campaign per second, kept in this origin's memory for the last
//! [`WINDOW_SECONDS`]: the `sold_out` series of `GET /admin/v1/campaigns/{id}/series`, which
//! the dashboard draws. Claims and remaining come from PostgreSQL ([`crate::admin::series`]);
//! a sold-out answer leaves no row there (most are answered from memory, which is why they are
//! cheap), so this origin counts the ones it gave.
//!
//! Recording costs one read lock on the campaign map and one short per-campaign lock; the map
//! holds only campaigns that were answered (each one checked to exist before its answer), and
//! a campaign's first answer drops the campaigns with none in the window (9.6 KB each).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

/// Seconds of history kept per campaign (ten minutes).
pub const WINDOW_SECONDS: usize = 600;

/// One campaign's counts: slot `second % WINDOW_SECONDS` holds `(second, count)`; a slot whose
/// second is older than the one asked for counts 0. `newest`: the latest second recorded.
struct Ring(Vec<(i64, u64)>, i64);

impl Ring {
    fn new() -> Self {
        Ring(vec![(i64::MIN, 0); WINDOW_SECONDS], i64::MIN)
    }

    fn slot(second: i64) -> usize {
        // `rem_euclid` of a positive modulus is in 0..WINDOW_SECONDS.
        second.rem_euclid(WINDOW_SECONDS as i64) as usize
    }

    fn add(&mut self, second: i64) {
        self.1 = self.1.max(second);
        let slot = &mut self.0[Self::slot(second)];
        if slot.0 != second {
            *slot = (second, 0);
        }
        slot.1 += 1;
    }

    fn get(&self, second: i64) -> u64 {
        let slot = self.0[Self::slot(second)];
        if slot.0 == second {
            slot.1
        } else {
            0
        }
    }
}

/// Counts of one kind of answer (the origin keeps one for `sold_out`) per campaign and per
/// second (Unix seconds, UTC).
#[derive(Default)]
pub struct AnswerSeries {
    campaigns: RwLock<HashMap<String, Arc<Mutex<Ring>>>>,
}

impl AnswerSeries {
    /// Counts one answer for `campaign` at Unix second `second`.
    pub fn record(&self, campaign: &str, second: i64) {
        let ring = {
            let map = self
                .campaigns
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            map.get(campaign).cloned()
        };
        let ring = match ring {
            Some(r) => r,
            None => {
                let mut map = self
                    .campaigns
                    .write()
                    .unwrap_or_else(PoisonError::into_inner);
                map.entry(campaign.to_string())
                    .or_insert_with(|| Arc::new(Mutex::new(Ring::new())))
                    .clone()
            }
        };
        ring.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(second);
    }

    /// Counts one answer for `campaign` now.
    pub fn record_now(&self, campaign: &str) {
        self.record(campaign, chrono::Utc::now().timestamp());
    }

    /// The counts of `campaign` for the `len` seconds from Unix second `from` on; 0 for a
    /// second with none, or older than [`WINDOW_SECONDS`] before `newest` (the current second).
    pub fn counts(&self, campaign: &str, from: i64, len: usize, newest: i64) -> Vec<u64> {
        let map = self
            .campaigns
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(ring) = map.get(campaign) else {
            return vec![0; len];
        };
        let ring = ring.lock().unwrap_or_else(PoisonError::into_inner);
        let oldest = newest - WINDOW_SECONDS as i64 + 1;
        (0..len as i64)
            .map(|i| from + i)
            .map(|s| if s < oldest { 0 } else { ring.get(s) })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_second_and_forgets_past_the_window() {
        let s = AnswerSeries::default();
        for _ in 0..3 {
            s.record("a", 1_000);
        }
        s.record("a", 1_002);
        s.record("b", 1_001);
        assert_eq!(s.counts("a", 999, 5, 1_003), vec![0, 3, 0, 1, 0]);
        assert_eq!(s.counts("b", 999, 5, 1_003), vec![0, 0, 1, 0, 0]);
        assert_eq!(s.counts("none", 999, 2, 1_003), vec![0, 0]);
        // The slot of 1_000 is reused by 1_000 + WINDOW_SECONDS: the new second starts at 0.
        let later = 1_000 + WINDOW_SECONDS as i64;
        s.record("a", later);
        assert_eq!(s.counts("a", later, 1, later), vec![1]);
        assert_eq!(s.counts("a", 1_000, 1, later), vec![0]);
        // 1_002 is 598 s older than `later`: still kept; a window later it counts 0.
        assert_eq!(s.counts("a", 1_002, 1, later), vec![1]);
        assert_eq!(
            s.counts("a", 1_002, 1, 1_002 + WINDOW_SECONDS as i64),
            vec![0]
        );
    }
}
