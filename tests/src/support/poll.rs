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

/// [`eventually`] for a repair that a test measures: waits the same way, prints how long `what`
/// took (`<what>: after <n> ms`), and returns that time. The deadline is the bound the test
/// waits for, never a timing assertion of its own.
pub async fn eventually_timed<F, Fut>(what: &str, deadline: Duration, check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let started = Instant::now();
    eventually(what, deadline, check).await;
    let took = started.elapsed();
    println!("{what}: after {} ms", took.as_millis());
    took
}

/// [`eventually`] for code that cannot be async (a `Drop`, a process start): returns
/// `Some(value)` once `check` gives one, `None` when `deadline` passes first. On a tokio
/// multi-thread runtime it runs inside `block_in_place`, so the runtime moves its other tasks
/// off this thread while it waits.
pub fn eventually_blocking<T>(
    deadline: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    let mut poll = move || {
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
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(poll)
        }
        _ => poll(),
    }
}

/// Polls `GET {base_url}/api/v1/campaigns/{campaign}` (an origin or an edge) until the
/// body's `state` is `state` (`active`, `sold_out`, ...), for at most 10 s; returns the time
/// since `since`. Panics with the last body at the deadline.
pub async fn until_state(
    http: &reqwest::Client,
    base_url: &str,
    campaign: &str,
    state: &str,
    since: Instant,
) -> Duration {
    let url = format!("{base_url}/api/v1/campaigns/{campaign}");
    let what = format!("{url} to show state {state}");
    eventually(&what, Duration::from_secs(10), || async {
        let b: serde_json::Value = match http.get(&url).send().await {
            Ok(r) => r.json().await.unwrap_or_default(),
            Err(e) => return Err(e.to_string()),
        };
        if b["state"] == state {
            Ok(since.elapsed())
        } else {
            Err(b.to_string())
        }
    })
    .await
}
