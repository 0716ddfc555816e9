//! What the outbox relays share ([`crate::gifts::relay`], [`crate::webhooks::relay`]).

use std::time::Duration;

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
