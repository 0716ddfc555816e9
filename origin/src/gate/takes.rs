//! This origin's takes in flight, and its lease: what lets a pending take be settled in
//! seconds instead of after [`crate::repair::settle::STALE_TAKE_MS`].
//!
//! A take's pending holder is `p:<origin>-<16 hex>`: it names the origin that took it. While
//! the claim request that made it runs, the token is in this origin's in-flight set
//! ([`InFlight`], removed when the request ends, whatever way it ends). Each origin also keeps
//! a lease in Redis, `fg:origin:<origin>:lease`, refreshed every [`LEASE_REFRESH`] with a
//! lifetime of [`LEASE_TTL_MS`]. So a pending take is settled by PostgreSQL
//! ([`super::settle`]) as soon as either
//! - it is this origin's and no request of this origin holds it any more (a Redis reply lost
//!   in a failover, a confirmation or give-back that failed, a write a promoted replica lost),
//!   or
//! - its origin's lease has lapsed (the origin died or lost Redis for longer than the lease).
//!
//! Tokens without an origin (`p:<16 hex>`, from [`super::pending_token`]) and the takes of an
//! origin whose lease is alive but that left them pending (a commit taking that long) are
//! settled after [`crate::repair::settle::STALE_TAKE_MS`] as before. docs/ARCHITECTURE.md,
//! "Orphaned takes", gives the bounds.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::PENDING_PREFIX;

/// Lifetime of an origin's lease in Redis, in milliseconds.
pub const LEASE_TTL_MS: u64 = 3_000;

/// How often an origin refreshes its lease.
pub const LEASE_REFRESH: Duration = Duration::from_millis(1_000);

/// The Redis key of `origin`'s lease.
pub fn lease_key(origin: &str) -> String {
    format!("fg:origin:{origin}:lease")
}

/// The origin named in a pending holder `p:<origin>-<hex>`; `None` for a claim id or a token
/// without an origin.
pub fn owner(holder: &str) -> Option<&str> {
    let rest = holder.strip_prefix(PENDING_PREFIX)?;
    let (origin, _) = rest.split_once('-')?;
    (!origin.is_empty()).then_some(origin)
}

/// This origin's id and the pending tokens its claim requests hold. Cheap to clone (one
/// `Arc`); the service state owns one.
#[derive(Clone)]
pub struct Takes {
    inner: Arc<Inner>,
}

struct Inner {
    origin: String,
    live: Mutex<HashSet<String>>,
}

impl Default for Takes {
    fn default() -> Self {
        Self::new()
    }
}

impl Takes {
    /// A registry with a fresh random origin id (12 hex digits) and nothing in flight.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                origin: format!("{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff),
                live: Mutex::default(),
            }),
        }
    }

    /// This origin's id, as written in its tokens and its lease key.
    pub fn origin(&self) -> &str {
        &self.inner.origin
    }

    /// A request's in-flight tokens, starting with one fresh token; every token it hands out
    /// stays in flight until it is dropped.
    pub fn begin(&self) -> InFlight {
        let mut flight = InFlight {
            takes: self.clone(),
            tokens: Vec::with_capacity(1),
        };
        flight.renew();
        flight
    }

    /// Whether a request of this origin still holds `token`.
    pub fn is_live(&self, token: &str) -> bool {
        self.inner.live.lock().expect("takes").contains(token)
    }

    /// How many tokens are in flight.
    pub fn in_flight(&self) -> usize {
        self.inner.live.lock().expect("takes").len()
    }
}

/// The pending tokens of one claim request (see [`Takes::begin`]). Dropping it (the request
/// ended, returned, failed or panicked) takes them out of flight, so any of them still
/// pending in Redis is settled by the next pass.
pub struct InFlight {
    takes: Takes,
    tokens: Vec<String>,
}

impl InFlight {
    /// The newest token.
    pub fn token(&self) -> &str {
        self.tokens.last().map(String::as_str).unwrap_or_default()
    }

    /// A fresh token for another take of the same request (the earlier ones stay in flight).
    pub fn renew(&mut self) -> &str {
        let token = format!(
            "{PENDING_PREFIX}{}-{:016x}",
            self.takes.origin(),
            rand::random::<u64>()
        );
        self.takes
            .inner
            .live
            .lock()
            .expect("takes")
            .insert(token.clone());
        self.tokens.push(token);
        self.token()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut live = self.takes.inner.live.lock().expect("takes");
        for t in &self.tokens {
            live.remove(t);
        }
    }
}

/// Writes `origin`'s lease (`SET … PX` [`LEASE_TTL_MS`]).
pub async fn renew_lease(redis: &mut super::Gate, origin: &str) -> redis::RedisResult<()> {
    redis::cmd("SET")
        .arg(lease_key(origin))
        .arg(1)
        .arg("PX")
        .arg(LEASE_TTL_MS)
        .query_async(redis)
        .await
}

/// Removes `origin`'s lease (at shutdown, once its requests are done), so the other origins
/// settle whatever it left at once.
pub async fn drop_lease(redis: &mut super::Gate, origin: &str) -> redis::RedisResult<()> {
    redis::cmd("DEL")
        .arg(lease_key(origin))
        .query_async(redis)
        .await
}

/// Whether `origin`'s lease is alive.
pub async fn lease_alive(redis: &mut super::Gate, origin: &str) -> redis::RedisResult<bool> {
    redis::cmd("EXISTS")
        .arg(lease_key(origin))
        .query_async(redis)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_origin_and_stays_live_until_dropped() {
        let takes = Takes::new();
        let mut flight = takes.begin();
        let first = flight.token().to_string();
        assert_eq!(owner(&first), Some(takes.origin()));
        let second = flight.renew().to_string();
        assert_ne!(first, second);
        assert!(takes.is_live(&first) && takes.is_live(&second));
        assert_eq!(takes.in_flight(), 2);
        drop(flight);
        assert!(!takes.is_live(&first) && !takes.is_live(&second));
        assert_eq!(takes.in_flight(), 0);
    }

    #[test]
    fn claim_ids_and_old_tokens_have_no_owner() {
        assert_eq!(owner("p:0123456789abcdef"), None);
        assert_eq!(owner("c_2Zx9"), None);
        assert_eq!(owner("p:-abc"), None);
        assert_eq!(owner("p:abc-0123"), Some("abc"));
    }

    #[test]
    fn two_registries_have_two_origins() {
        assert_ne!(Takes::new().origin(), Takes::new().origin());
    }
}
