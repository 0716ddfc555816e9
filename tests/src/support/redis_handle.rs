//! The test Redis through the origin's own handle ([`RedisConn`]): one server, or a Redis
//! Cluster when `REDIS_URL` is `redis+cluster://host:port,...` (or
//! `FLASHGATE_REDIS_CLUSTER_NODES` is set). Every test that talks to Redis itself goes through
//! [`redis_conn`], so the same test runs against both.

use flashgate_origin::config::Config;
use flashgate_origin::gate::Keys;
use flashgate_origin::redis_conn::{RedisConn, RedisTarget, CLUSTER_NODES_ENV};

/// `FLASHGATE_REDIS_CLUSTER_NODES` of the test run, if set and not blank.
pub fn cluster_nodes() -> Option<String> {
    std::env::var(CLUSTER_NODES_ENV)
        .ok()
        .filter(|n| !n.trim().is_empty())
}

/// True when the test Redis is a Redis Cluster.
pub fn redis_is_cluster() -> bool {
    matches!(
        RedisTarget::parse(&super::redis_url(), cluster_nodes().as_deref()),
        Ok(RedisTarget::Cluster(_))
    )
}

/// A handle on the Redis of `config` (its URL and cluster nodes), as the origin opens it.
pub async fn redis_of(config: &Config) -> RedisConn {
    RedisConn::open(&config.redis_url, config.redis_cluster_nodes.as_deref())
        .await
        .expect("connect to the test Redis")
}

/// A handle on the test Redis.
pub async fn redis_conn() -> RedisConn {
    redis_of(&super::test_config()).await
}

/// Makes Redis lose its state the way a restart without persistence does, for a test that
/// owns the Redis database of `config` ([`super::own_services`]): `FLUSHDB` on one Redis (the
/// database's owner key kept, see [`super::own_redis_db`]). A Redis Cluster has database 0 only, shared by every test, and `FLUSHDB` there would
/// reach one node only; so on a cluster the keys this test owns are deleted instead: the gate
/// keys of `campaigns` and the Redis keys in `other_keys` (idempotency records, ...). Prints
/// which variant ran.
pub async fn lose_redis_state(config: &Config, campaigns: &[&str], other_keys: &[String]) {
    let mut r = redis_of(config).await;
    if !r.is_cluster() {
        assert_ne!(
            config.redis_url,
            super::redis_url(),
            "the test Redis database is every test's: give this origin one of its own"
        );
        super::own_redis::flush_keeping_owner(&mut r).await;
        return;
    }
    println!(
        "Redis Cluster: no FLUSHDB (database 0 is shared and FLUSHDB reaches one node); \
         deleting the gate keys of {} campaign(s) and {} other key(s) this test owns",
        campaigns.len(),
        other_keys.len()
    );
    for c in campaigns {
        let shards: Option<u16> = ::redis::cmd("GET")
            .arg(Keys::of(c).shards)
            .query_async(&mut r)
            .await
            .unwrap();
        for s in 0..shards.unwrap_or(1) {
            let k = Keys::shard(c, s);
            // One shard's keys share its hash tag: one slot, one DEL.
            let _: i64 = ::redis::cmd("DEL")
                .arg(&[
                    k.loaded,
                    k.loading,
                    k.remaining,
                    k.holders,
                    k.pending,
                    k.sold_out,
                    k.sold_out_gen,
                    k.shards,
                    k.returned,
                ])
                .query_async(&mut r)
                .await
                .unwrap();
        }
    }
    for key in other_keys {
        let _: i64 = ::redis::cmd("DEL")
            .arg(key)
            .query_async(&mut r)
            .await
            .unwrap();
    }
}
