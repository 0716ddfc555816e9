//! What the outbox relays share: [`drain`] (the gift relay, [`crate::gifts::relay`]) and
//! [`jittered`] (it and the webhook relay, [`crate::webhooks::relay`], which takes and settles
//! call by call instead of by batches).

use std::future::Future;
use std::time::Duration;

/// Most batches one relay pass takes before it yields to the next tick.
pub const MAX_BATCHES_PER_PASS: usize = 16;

/// One relay pass: runs `batch` (which takes up to `size` due rows and settles them, returning
/// how many it took) again while it finds a full batch, at most [`MAX_BATCHES_PER_PASS`]
/// times. Returns the rows taken in all.
pub async fn drain<F, Fut>(size: i64, mut batch: F) -> anyhow::Result<usize>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<usize>>,
{
    let mut taken = 0;
    for _ in 0..MAX_BATCHES_PER_PASS {
        let n = batch().await?;
        taken += n;
        if (n as i64) < size {
            break;
        }
    }
    Ok(taken)
}

/// `delay` minus up to `share` of it at random (0.0..=1.0), so that rows that failed together
/// are not all due again at the same instant.
pub fn jittered(delay: Duration, share: f64) -> Duration {
    let cut = rand::random::<f64>() * share.clamp(0.0, 1.0);
    delay.mul_f64(1.0 - cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_only_shortens_and_by_at_most_its_share() {
        for _ in 0..1000 {
            let d = jittered(Duration::from_secs(10), 0.5);
            assert!(d <= Duration::from_secs(10) && d >= Duration::from_secs(5));
        }
    }
}
