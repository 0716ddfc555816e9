//! Polls with deadlines: a test that waits for a condition checks it every few milliseconds
//! and fails with what it was waiting for (and what it last saw) when the deadline passes.
//! Fixed sleeps stay only where the wait itself is the scenario, with a comment saying so.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often [`eventually`] and [`eventually_blocking`] check, milliseconds.
pub const POLL_STEP_MS: u64 = 20;

/// Checks `check` every [`POLL_STEP_MS`] ms until it returns `Ok(value)`, and returns the
/// value. `check` returns `Err(what it saw)` while the condition does not hold yet. Panics
/// when `deadline` (measured from the call) passes, naming `what` it was waiting for and the
/// last `Err` it got.
pub async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let end = Instant::now() + deadline;
    loop {
        match check().await {
            Ok(v) => return v,
            Err(seen) if Instant::now() >= end => {
                panic!("timed out after {deadline:?} waiting for {what}; last seen: {seen}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(POLL_STEP_MS)).await,
        }
    }
}

/// [`eventually`] for code outside the async runtime (a `Drop`, a process start): returns
/// `Some(value)` once `check` gives one, `None` when `deadline` passes first. Blocks the
/// calling thread between checks, so async code calls [`eventually`] instead.
pub fn eventually_blocking<T>(
    deadline: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    let end = Instant::now() + deadline;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(POLL_STEP_MS));
    }
}
