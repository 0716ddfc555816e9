//! The one way the origin fills its `moka` caches from PostgreSQL (campaign rows, promo code
//! rules): single-flight per key, a failed read cached for nobody.

use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use moka::future::Cache;

/// The value of `key`, from `cache` when present and not expired, else from `load` (run once
/// for all the requests that ask at the same time). Errors: the PostgreSQL error of `load`;
/// the waiters that shared it get a copy of its text (answered as 503 `unavailable`).
pub async fn get_or_load<K, V>(
    cache: &Cache<K, V>,
    key: K,
    load: impl Future<Output = sqlx::Result<V>>,
) -> sqlx::Result<V>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    cache
        .try_get_with(key, load)
        .await
        .map_err(|e| Arc::try_unwrap(e).unwrap_or_else(|e| sqlx::Error::Protocol(e.to_string())))
}
