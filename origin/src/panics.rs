//! Panics inside the origin's own tasks (a background loop's pass, a commit batch, a gate
//! load) become logged errors: the task goes on with its next piece of work and the process
//! never dies for it. A panic inside a request is answered 503 by the HTTP layer (tower-http's
//! `CatchPanic`), not here.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;

/// Runs `work`; when it panics, logs `what` with the panic's message at error level and
/// returns `None`. Only for work that leaves no shared state half-changed when it stops
/// midway: a PostgreSQL transaction dropped midway rolls back, a Redis script is atomic.
pub async fn catch<T>(what: &str, work: impl Future<Output = T>) -> Option<T> {
    match AssertUnwindSafe(work).catch_unwind().await {
        Ok(v) => Some(v),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            tracing::error!(panic = %message, "{what} panicked; carrying on");
            None
        }
    }
}
