//! This origin's memory of sold-out flags, so that losers after the sell-out are answered
//! without Redis (and without PostgreSQL).
//!
//! When a take comes back `sold_out`, the origin remembers the flag for `ttl` (config
//! `FLASHGATE_CAMPAIGN_CACHE_MS`), together with a snapshot of the campaign's winners, taken
//! once per flag generation. While the memory is fresh, a claim from a customer who is not a
//! winner is answered `sold_out` at once; a winner still goes to Redis, so her retry gets her
//! first reply. After `ttl` the next claim asks Redis again: that is how this origin learns
//! that units came back (expired holds, releases, restock) — at most `ttl` late.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::redis_conn::RedisConn;

use super::Keys;

#[derive(Clone)]
struct Seen {
    at: Instant,
    generation: i64,
    /// Customers holding a unit when the flag was set; `None` until loaded (or when the
    /// campaign has more winners than the snapshot bound).
    winners: Option<Arc<HashSet<String>>>,
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

    /// Decides from memory alone.
    pub fn check(&self, c: &str, customer: &str) -> Local {
        let seen = self.seen.lock().expect("flags lock");
        match seen.get(c) {
            Some(s) if s.at.elapsed() < self.ttl => match &s.winners {
                Some(w) if !w.contains(customer) => Local::SoldOut,
                _ => Local::AskGate,
            },
            _ => Local::AskGate,
        }
    }

    /// Records a `sold_out` take of generation `generation`. Returns true when a winners
    /// snapshot for this generation is still needed (the caller loads it with
    /// [`SoldOutFlags::load_winners`], off the request path).
    pub fn note(&self, c: &str, generation: i64) -> bool {
        let mut seen = self.seen.lock().expect("flags lock");
        let now = Instant::now();
        match seen.get_mut(c) {
            Some(s) if s.generation == generation => {
                s.at = now;
                s.winners.is_none()
            }
            _ => {
                seen.insert(
                    c.to_string(),
                    Seen {
                        at: now,
                        generation,
                        winners: None,
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

    /// Loads the winners snapshot of `c` for `generation` from Redis, unless there are more
    /// than the bound. Winners can only change after the flag clears, which starts a new
    /// generation, so a snapshot stays right for its generation.
    pub async fn load_winners(
        &self,
        redis: &mut RedisConn,
        c: &str,
        generation: i64,
    ) -> redis::RedisResult<()> {
        let k = Keys::of(c);
        let n: usize = redis::cmd("HLEN")
            .arg(&k.holders)
            .query_async(redis)
            .await?;
        if n > self.max_winners {
            return Ok(());
        }
        let winners: HashSet<String> = redis::cmd("HKEYS")
            .arg(&k.holders)
            .query_async(redis)
            .await?;
        let mut seen = self.seen.lock().expect("flags lock");
        if let Some(s) = seen.get_mut(c) {
            if s.generation == generation {
                s.winners = Some(Arc::new(winners));
            }
        }
        Ok(())
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
        f.seen.lock().unwrap().get_mut("c").unwrap().winners =
            Some(Arc::new(["win".to_string()].into_iter().collect()));
        assert_eq!(f.check("c", "ana"), Local::SoldOut);
        assert_eq!(f.check("c", "win"), Local::AskGate);
        assert!(!f.note("c", 1));
        // A new generation drops the old snapshot.
        assert!(f.note("c", 2));
        assert_eq!(f.check("c", "ana"), Local::AskGate);
        // With a fresh snapshot of the new generation, a non-winner is answered locally...
        f.seen.lock().unwrap().get_mut("c").unwrap().winners =
            Some(Arc::new(["win".to_string()].into_iter().collect()));
        assert_eq!(f.check("c", "ana"), Local::SoldOut);
        // ...until the flag is older than the ttl (aged here rather than slept for): then the
        // same claim asks the gate again, although the snapshot is still there.
        let aged = Instant::now()
            .checked_sub(Duration::from_millis(60))
            .expect("the clock is past 60 ms");
        f.seen.lock().unwrap().get_mut("c").unwrap().at = aged;
        assert!(f.seen.lock().unwrap()["c"].winners.is_some());
        assert_eq!(f.check("c", "ana"), Local::AskGate);
    }
}
