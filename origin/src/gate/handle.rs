//! [`Gate`]: the handle every gate operation runs on — the origin's Redis handle plus what the
//! gate learned through it (each campaign's shard count).
//!
//! It is owned by the service state and cloned into each task (a clone shares the learned
//! counts), so there is no process-wide state: two origins in one process (as in the tests)
//! each keep their own. It implements [`redis::aio::ConnectionLike`], so any Redis command, pipeline or
//! script runs on it as on a [`RedisConn`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::redis_conn::RedisConn;

/// The gate's handle: a [`RedisConn`] and the shard counts read through it. Cheap to clone.
#[derive(Clone)]
pub struct Gate {
    redis: RedisConn,
    /// Shard count per campaign id, as its gate load wrote it. A campaign's count never
    /// changes (fixed at creation), so an entry never goes stale; one small entry per campaign
    /// this handle served.
    counts: Arc<Mutex<HashMap<String, u16>>>,
}

impl Gate {
    /// A gate handle over `redis`, with nothing learned yet.
    pub fn new(redis: RedisConn) -> Self {
        Self {
            redis,
            counts: Arc::default(),
        }
    }

    /// The Redis handle underneath (a clone).
    pub fn redis(&self) -> RedisConn {
        self.redis.clone()
    }

    /// The shard count of campaign `c` learned earlier, if any.
    pub(super) fn known_count(&self, c: &str) -> Option<u16> {
        self.counts.lock().expect("shard counts").get(c).copied()
    }

    /// Remembers that campaign `c` has `n` shards.
    pub(super) fn learn_count(&self, c: &str, n: u16) {
        self.counts
            .lock()
            .expect("shard counts")
            .insert(c.to_string(), n);
    }
}

crate::redis_conn::connection_like_via!(Gate: Gate { redis, .. } => redis);
