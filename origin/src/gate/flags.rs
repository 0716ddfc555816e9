//! This origin's memory of sold-out flags, so that losers after the sell-out are answered
//! without Redis (and without PostgreSQL).
//!
//! When a take comes back `sold_out`, the origin remembers the flag for `ttl` (config
//! `FLASHGATE_CAMPAIGN_CACHE_MS`), together with a snapshot of the campaign's winners, taken
//! once per flag generation. While the memory is fresh, a claim from a customer who is not a
//! winner is answered `sold_out` at once; a winner still goes to Redis, so her retry gets her
//! first reply. After `ttl` the next claim asks Redis again, and while it does (one claim at a
//! time, for at most one more `ttl`) the others are still answered from memory, instead of a
//! burst of every claim in flight going to Redis; its `sold_out` makes the memory fresh again.
//! That is how this origin learns that units came back (expired holds, releases, restock) — at
//! most `2 × ttl` late.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Gate;

#[derive(Clone)]
struct Seen {
    at: Instant,
    generation: i64,
    /// Customers holding a unit when the flag was set; `None` until loaded (or when the
    /// campaign has more winners than the snapshot bound).
    winners: Option<Arc<HashSet<String>>>,
    /// True while this origin loads the snapshot of this generation (one load at a time).
    loading: bool,
    /// True once a claim went to ask Redis after `ttl` (one at a time; see the module
    /// documentation); cleared by its `sold_out` ([`SoldOutFlags::note`]).
    asking: bool,
}

impl Seen {
    /// Whether a claim from a customer who is not a winner is answered from memory, and
    /// whether it is the one that asks Redis (`ask`: made the asker when none is asking).
    fn answers(&mut self, ttl: Duration, ask: bool) -> bool {
        let age = self.at.elapsed();
        if age < ttl {
            return true;
        }
        if age >= ttl * 2 {
            return false;
        }
        if self.asking || !ask {
            return self.asking;
        }
        self.asking = true;
        false
    }
}

/// See the module documentation.
pub struct SoldOutFlags {
    ttl: Duration,
    max_winners: usize,
    seen: Mutex<HashMap<String, Seen>>,
}

/// What this origin's memory says about a claim.
#[derive(Debug, PartialEq, Eq)]
pub enum Local {
    /// Fresh flag and she is not a winner: answer `sold_out` now.
    SoldOut,
    /// Ask Redis.
    AskGate,
}

impl SoldOutFlags {
    /// Flags remembered for `ttl`; winner snapshots of at most `max_winners` customers.
    pub fn new(ttl: Duration, max_winners: usize) -> Self {
        SoldOutFlags {
            ttl,
            max_winners,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Decides from memory alone. Past `ttl`, the first claim that is not a winner's is the
    /// one that asks Redis (module documentation).
    pub fn check(&self, c: &str, customer: &str) -> Local {
        let mut seen = self.seen.lock().expect("flags lock");
        match seen.get_mut(c) {
            Some(s) if s.winners.as_ref().is_some_and(|w| !w.contains(customer)) => {
                if s.answers(self.ttl, true) {
                    Local::SoldOut
                } else {
                    Local::AskGate
                }
            }
            _ => Local::AskGate,
        }
    }

    /// True when this origin's memory of `c` holds its winners snapshot and answers from
    /// memory now, so that [`SoldOutFlags::check`] answers every customer but the winners
    /// `sold_out`, unless the memory turns stale in between. Changes nothing. A cheap look
    /// (one lock, one map read) before any of the request is checked: the sold-out fast path
    /// ([`crate::http::fast`]) asks it first.
    pub fn answers_locally(&self, c: &str) -> bool {
        let mut seen = self.seen.lock().expect("flags lock");
        seen.get_mut(c)
            .is_some_and(|s| s.winners.is_some() && s.answers(self.ttl, false))
    }

    /// Records a `sold_out` take of generation `generation`. Returns true when a winners
    /// snapshot for this generation is needed and no load of it is under way: the caller then
    /// loads it with [`SoldOutFlags::load_winners`], off the request path. Single-flight: until
    /// that load ends, every other `sold_out` of the same generation returns false, so a burst
    /// of sold-out answers reads the holders from Redis once per origin per generation.
    pub fn note(&self, c: &str, generation: i64) -> bool {
        let mut seen = self.seen.lock().expect("flags lock");
        let now = Instant::now();
        match seen.get_mut(c) {
            Some(s) if s.generation == generation => {
                s.at = now;
                s.asking = false;
                let start = s.winners.is_none() && !s.loading;
                s.loading |= start;
                start
            }
            _ => {
                seen.insert(
                    c.to_string(),
                    Seen {
                        at: now,
                        generation,
                        winners: None,
                        loading: true,
                        asking: false,
                    },
                );
                true
            }
        }
    }

    /// Forgets campaign `c` (units came back through this origin).
    pub fn clear(&self, c: &str) {
        self.seen.lock().expect("flags lock").remove(c);
    }

    /// Loads the winners snapshot of `c` for `generation` from Redis (every shard), unless
    /// there are more than the bound. Winners can only change after the flag clears, which
    /// starts a new generation, so a snapshot stays right for its generation. Ends the load
    /// [`SoldOutFlags::note`] started, whatever the outcome (a failed load may start again).
    pub async fn load_winners(
        &self,
        redis: &mut Gate,
        c: &str,
        generation: i64,
    ) -> redis::RedisResult<()> {
        let result = super::winners(redis, c, self.max_winners).await;
        let mut seen = self.seen.lock().expect("flags lock");
        let Some(s) = seen.get_mut(c).filter(|s| s.generation == generation) else {
            return result.map(|_| ());
        };
        s.loading = false;
        result.map(|w| s.winners = w.map(Arc::new))
    }

    /// True while this origin loads a winners snapshot of `c`.
    pub fn loading(&self, c: &str) -> bool {
        self.seen
            .lock()
            .expect("flags lock")
            .get(c)
            .is_some_and(|s| s.loading)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_locally_only_with_a_fresh_flag_and_a_snapshot() {
        let f = SoldOutFlags::new(Duration::from_millis(50), 10);
        assert_eq!(f.check("c", "ana"), Local::AskGate);
        assert!(f.note("c", 1));
        // No snapshot yet: still ask the gate.
        assert_eq!(f.check("c", "ana"), Local::AskGate);
        assert!(!f.answers_locally("c"));
        f.seen.lock().unwrap().get_mut("c").unwrap().winners =
            Some(Arc::new(["win".to_string()].into_iter().collect()));
        assert!(f.answers_locally("c"));
        assert!(!f.answers_locally("other"));
        assert_eq!(f.check("c", "ana"), Local::SoldOut);
        assert_eq!(f.check("c", "win"), Local::AskGate);
        assert!(!f.note("c", 1));
        // Single-flight: while a load of generation 3 is under way, no second one starts.
        assert!(f.note("c", 3));
        assert!(!f.note("c", 3));
        assert!(f.loading("c"));
        f.seen.lock().unwrap().get_mut("c").unwrap().loading = false;
        assert!(
            f.note("c", 3),
            "a load that ended without a snapshot may start again"
        );
        // A new generation drops the old snapshot.
        assert!(f.note("c", 2));
        assert_eq!(f.check("c", "ana"), Local::AskGate);
        // With a fresh snapshot of the new generation, a non-winner is answered locally...
        f.seen.lock().unwrap().get_mut("c").unwrap().winners =
            Some(Arc::new(["win".to_string()].into_iter().collect()));
        assert_eq!(f.check("c", "ana"), Local::SoldOut);
        // ...until the flag is older than the ttl (aged here rather than slept for): then one
        // claim asks the gate again, although the snapshot is still there, while the others
        // are still answered from memory...
        let aged = |ms| {
            let at = Instant::now().checked_sub(Duration::from_millis(ms));
            f.seen.lock().unwrap().get_mut("c").unwrap().at = at.expect("the clock is past it");
        };
        aged(60);
        assert!(f.seen.lock().unwrap()["c"].winners.is_some());
        assert!(!f.answers_locally("c"), "nobody asks yet");
        assert_eq!(f.check("c", "ana"), Local::AskGate);
        assert!(f.answers_locally("c"));
        assert_eq!(f.check("c", "bea"), Local::SoldOut);
        assert_eq!(f.check("c", "win"), Local::AskGate);
        // ...its sold_out makes the memory fresh again...
        assert!(!f.note("c", 2));
        assert_eq!(f.check("c", "ana"), Local::SoldOut);
        // ...and with no answer within one more ttl, every claim asks.
        aged(60);
        assert_eq!(f.check("c", "ana"), Local::AskGate);
        aged(101);
        assert!(!f.answers_locally("c"));
        assert_eq!(f.check("c", "bea"), Local::AskGate);
        assert_eq!(f.check("c", "ana"), Local::AskGate);
    }
}
