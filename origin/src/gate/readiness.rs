//! How far a campaign's gate can serve, as a readiness probe (`/readyz`) finds it: each shard
//! answers with its `loaded` key, answers without it, or does not answer before the probe's
//! deadline (its Redis node is down, or its primary is failing over).

use futures::future::join_all;
use tokio::time::{timeout_at, Instant};

use super::{shard_count, Gate, Keys};

/// One gate as a probe found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateHealth {
    /// Every shard answered and is loaded.
    Loaded,
    /// Some shards are loaded and the others did not answer: customers whose shard answers
    /// are served, the others get 503 + `Retry-After` until their node is back.
    Partial,
    /// Some shard is not loaded while a load is under way (its lock is held), e.g. a campaign
    /// just created: claims get 503 + `Retry-After` until it ends.
    Loading,
    /// No shard answered (or the shard count could not be read).
    Unreachable,
    /// A shard answered without its `loaded` key and no load is under way: the gate was lost
    /// (Redis restarted empty, or was flushed) and has to be loaded again.
    Lost,
}

/// One shard as a probe found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shard {
    Loaded,
    NotLoaded,
    Unreachable,
}

/// Probes the gate of campaign `c`, waiting for Redis until `deadline` at most.
pub async fn probe(gate: &Gate, c: &str, deadline: Instant) -> GateHealth {
    let mut r = gate.clone();
    let n = match timeout_at(deadline, shard_count(&mut r, c)).await {
        Ok(Ok(Some(n))) => n,
        // Shard 0 answered without a count: the gate is not loaded.
        Ok(Ok(None)) => return missing(gate, c, deadline).await,
        _ => return GateHealth::Unreachable,
    };
    let shards = join_all((0..n).map(|s| {
        let mut r = gate.clone();
        async move {
            let mut exists = redis::cmd("EXISTS");
            exists.arg(Keys::shard(c, s).loaded);
            match timeout_at(deadline, exists.query_async::<bool>(&mut r)).await {
                Ok(Ok(true)) => Shard::Loaded,
                Ok(Ok(false)) => Shard::NotLoaded,
                _ => Shard::Unreachable,
            }
        }
    }))
    .await;
    if shards.contains(&Shard::NotLoaded) {
        return missing(gate, c, deadline).await;
    }
    match (
        shards.contains(&Shard::Loaded),
        shards.contains(&Shard::Unreachable),
    ) {
        (_, false) => GateHealth::Loaded,
        (true, true) => GateHealth::Partial,
        (false, true) => GateHealth::Unreachable,
    }
}

/// Some shard of `c` is not loaded: [`GateHealth::Loading`] while its load lock is held, else
/// [`GateHealth::Lost`] (also when the lock cannot be read: a shard answered without its gate).
async fn missing(gate: &Gate, c: &str, deadline: Instant) -> GateHealth {
    let mut r = gate.clone();
    let mut locked = redis::cmd("EXISTS");
    locked.arg(Keys::of(c).loading);
    match timeout_at(deadline, locked.query_async::<bool>(&mut r)).await {
        Ok(Ok(true)) => GateHealth::Loading,
        _ => GateHealth::Lost,
    }
}
