//! Claims first: the webhook relay gives way to a burst of claims on its origin.
//!
//! A delivery costs the origin's cores about what a claim does (the call, its signature, the
//! row's statements). In the seconds of a sell-out every core is worth a claim answered, and a
//! webhook a few seconds late harms nobody: receivers take events at least once and out of
//! order anyway. So while claims of this origin are in flight (each claim request from its step
//! at the gate until it is answered, [`Takes::in_flight`]), the relay starts no new call, for up to `yield_ms` of each
//! busy spell; calls already made end and are settled as usual. A spell longer than that (a
//! giveaway claimed for minutes) gets the relay back at its full pace, so the added lag is
//! `yield_ms` at most. A moment with no claim in flight ends the spell. docs/WEBHOOKS.md,
//! "Delivery lag".

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::gate::takes::Takes;

/// When the relay may start calls (see the module documentation). Cheap to clone; the clones
/// share the current busy spell.
#[derive(Clone)]
pub struct ClaimsFirst {
    takes: Takes,
    yield_for: Duration,
    /// When the current busy spell began; `None` while no claim is in flight.
    busy_since: Arc<Mutex<Option<Instant>>>,
}

impl ClaimsFirst {
    /// Gives way to the claims of `takes` for up to `yield_for` per busy spell; a zero
    /// `yield_for` never gives way.
    pub fn new(takes: Takes, yield_for: Duration) -> Self {
        ClaimsFirst {
            takes,
            yield_for,
            busy_since: Arc::default(),
        }
    }

    /// Whether the relay may start calls now: no claim in flight, or the busy spell has lasted
    /// `yield_for` already.
    pub fn may_call(&self) -> bool {
        self.may_call_at(self.takes.in_flight(), Instant::now())
    }

    fn may_call_at(&self, claims_in_flight: usize, now: Instant) -> bool {
        let mut since = self.busy_since.lock().expect("claims first");
        if claims_in_flight == 0 || self.yield_for.is_zero() {
            *since = None;
            return true;
        }
        let began = *since.get_or_insert(now);
        now.saturating_duration_since(began) >= self.yield_for
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gives_way_for_the_first_yield_of_a_busy_spell_only() {
        let first = ClaimsFirst::new(Takes::new(), Duration::from_secs(5));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert!(first.may_call_at(0, at(0)), "idle: calls go");
        assert!(!first.may_call_at(3, at(1)), "a spell begins: give way");
        assert!(!first.may_call_at(1, at(5)), "4 s into it");
        assert!(first.may_call_at(2, at(6)), "5 s into it: full pace");
        assert!(first.may_call_at(2, at(60)), "still the same spell");
        assert!(first.may_call_at(0, at(61)), "idle ends the spell");
        assert!(!first.may_call_at(1, at(62)), "a new spell gives way again");
    }

    #[test]
    fn a_zero_yield_never_gives_way() {
        let first = ClaimsFirst::new(Takes::new(), Duration::ZERO);
        assert!(first.may_call_at(100, Instant::now()));
    }
}
