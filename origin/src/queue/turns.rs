//! The waiting room's join turns: a bounded number of joins of this origin in their Redis
//! step at once.

use std::sync::Arc;

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::error::ApiError;

/// Most joins of one origin in their Redis step at once. Thousands of joins sent to Redis at
/// once on the one multiplexed connection wait there behind each other, and on a loaded
/// machine the last ones pass the connection's response timeout (2 s) and fail 503 although
/// Redis would have answered; in line here instead, each one's Redis step is short.
pub const JOIN_CONCURRENCY: usize = 32;
/// Longest wait for a turn, ms; past it the join answers 503 + `Retry-After` (the origin is
/// truly overloaded: more joins than it can place in this time). Longer than the edge's
/// origin timeout (5 s by default) on purpose: a join is idempotent per customer, so one that
/// completes after the edge gave up (503 + `Retry-After` from the edge) is not lost work, her
/// retry gets the place it made (200).
pub const JOIN_WAIT_MS: u64 = 10_000;

/// This origin's turns for the joins' Redis step: at most [`JOIN_CONCURRENCY`] at once, the
/// others waiting in arrival order (a fair semaphore) for up to [`JOIN_WAIT_MS`]. Cheap to
/// clone; every clone shares the same turns.
#[derive(Debug, Clone)]
pub struct JoinTurns(Arc<Semaphore>);

impl Default for JoinTurns {
    fn default() -> Self {
        JoinTurns(Arc::new(Semaphore::new(JOIN_CONCURRENCY)))
    }
}

impl JoinTurns {
    /// Waits for a turn; the turn ends when the permit is dropped. 503 when none came within
    /// [`JOIN_WAIT_MS`].
    pub async fn take(&self) -> Result<SemaphorePermit<'_>, ApiError> {
        let wait = std::time::Duration::from_millis(JOIN_WAIT_MS);
        tokio::time::timeout(wait, self.0.acquire())
            .await
            .map_err(|_| ApiError::Unavailable(format!("no join turn within {JOIN_WAIT_MS} ms")))?
            .map_err(|_| ApiError::Unavailable("joins are closed".into()))
    }
}
