//! Admission among the customers still there, and the second wave: which tickets the cursor
//! passed while they were away ([`QueueStatus::skipped`]), the ones admitted again when they
//! came back ([`QueueStatus::returned`]), and what a sold-out poll says while units may still
//! come back (docs/WAITING-ROOM.md, "Presence" and "The second wave").

use super::{Grant, Outlook, QueueStatus};

/// Default `presence_window_seconds`: a ticket not seen (polled, or joined) for this long is
/// skipped by admission.
pub const DEFAULT_PRESENCE_WINDOW_SECONDS: u32 = 30;
/// Default `second_wave_admission_ttl_seconds`: an admission's lifetime once the campaign has
/// sold out once.
pub const DEFAULT_SECOND_WAVE_TTL_SECONDS: u32 = 60;
/// `Retry-After` of a `sold_out` poll while units may come back (`outlook: may_return`),
/// seconds: the page keeps polling at this pace.
pub const SECOND_WAVE_RETRY_AFTER_S: u32 = 15;
/// Most skipped sequence numbers a status lists (the lowest ones; see docs/WAITING-ROOM.md for
/// what happens past it).
pub const MAX_SKIPPED_LISTED: usize = 4_096;

impl QueueStatus {
    /// True when the cursor passed `seq` while its ticket was away and has not admitted it
    /// since: not admitted, whatever `now_serving` says.
    pub fn is_skipped(&self, seq: u64) -> bool {
        self.skipped.binary_search(&seq).is_ok()
    }

    /// When `seq` was admitted again after it had been skipped (Unix ms), within the admission
    /// TTL; `None` otherwise.
    pub fn returned_ms(&self, seq: u64) -> Option<i64> {
        self.returned.iter().find(|g| g.n == seq).map(|g| g.at_ms)
    }

    /// The outlook of a sold-out poll: `may_return` while holds are outstanding (`held_until`
    /// set: a hold may expire or be released), else `final`.
    pub fn sold_out_outlook(&self) -> Outlook {
        if self.held_until.is_some() {
            Outlook::MayReturn
        } else {
            Outlook::Final
        }
    }
}

/// Sorts re-admissions by `n` (the origin reads them by time).
pub fn sorted_returned(mut returned: Vec<Grant>) -> Vec<Grant> {
    returned.sort_by_key(|g| g.n);
    returned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_and_returned_are_looked_up_by_sequence() {
        let q = QueueStatus {
            skipped: vec![3, 5, 9],
            returned: vec![Grant { n: 4, at_ms: 1_000 }],
            ..QueueStatus::default()
        };
        assert!(q.is_skipped(5) && !q.is_skipped(4));
        assert_eq!((q.returned_ms(4), q.returned_ms(5)), (Some(1_000), None));
        assert_eq!(q.sold_out_outlook(), Outlook::Final);
        let held = QueueStatus {
            held_until: Some(chrono::DateTime::UNIX_EPOCH),
            ..q
        };
        assert_eq!(held.sold_out_outlook(), Outlook::MayReturn);
    }
}
