//! The origin's Redis handle: one Redis server or a Redis Cluster behind the same type.
//!
//! [`RedisConn`] implements [`redis::aio::ConnectionLike`] and `Clone`, so every command,
//! pipeline and script of the origin runs unchanged on either:
//! - **one Redis** — `REDIS_URL=redis://host:port/db` (or `rediss://`): the redis crate's
//!   [`ConnectionManager`], which reconnects by itself;
//! - **a Redis Cluster** — `REDIS_URL=redis+cluster://host:port,host:port` (or
//!   `rediss+cluster://`; optional `user:password@` before the list, applied to every node; no
//!   database number other than 0, the only one a cluster has), or
//!   `FLASHGATE_REDIS_CLUSTER_NODES=host:port,host:port`, which overrides the list (scheme and
//!   credentials still come from `REDIS_URL`). The redis crate's async cluster client
//!   ([`redis::cluster_async::ClusterConnection`]) learns the slot map from any seed node,
//!   follows `MOVED`/`ASK` redirects and refreshes its map after a failover
//!   (Redis Cluster specification: <https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/>).
//!
//! Both get the same bounds: 2,000 ms to connect, 2,000 ms per answer, 2 retries (on a
//! cluster 50–500 ms apart). While Redis (or the slots of a failed primary, until its replica
//! takes over) cannot answer, commands fail with a [`redis::RedisError`], which the HTTP layer
//! answers 503 with `Retry-After`; nothing is taken from a gate that did not answer, so nothing
//! is oversold.
//!
//! On a cluster, every multi-key script and `MULTI` block must keep its keys in one hash slot:
//! a campaign's gate keys share the hash tag `{campaign}`, a code's flags `{CODE}`; the guess
//! buckets of a try are spent one key at a time. docs/SCALING.md lists the slot layout.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo};
use redis::{ErrorKind, RedisError, RedisResult};
use tokio::time::{timeout_at, Instant};

/// Time to open a connection to a Redis server or cluster node, in milliseconds.
pub const CONNECT_TIMEOUT_MS: u64 = 2_000;
/// Time to wait for one answer, in milliseconds.
pub const RESPONSE_TIMEOUT_MS: u64 = 2_000;
/// Retries of a command after a connection error (and, on a cluster, after a redirect or a
/// `TRYAGAIN`/`CLUSTERDOWN` answer).
pub const RETRIES: u32 = 2;

/// The environment variable naming Redis Cluster seed nodes (`host:port,host:port`).
pub const CLUSTER_NODES_ENV: &str = "FLASHGATE_REDIS_CLUSTER_NODES";

/// Shortest wait before a cluster command is retried, in milliseconds (the crate's default,
/// 1,280 ms, would hold a claim for seconds on a slot that has no primary).
pub const CLUSTER_MIN_RETRY_WAIT_MS: u64 = 50;
/// Longest wait before a cluster command is retried, in milliseconds.
pub const CLUSTER_MAX_RETRY_WAIT_MS: u64 = 500;

/// Where the origin's Redis is, as read from `REDIS_URL` and `FLASHGATE_REDIS_CLUSTER_NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One Redis server: its URL, as given.
    Single(String),
    /// A Redis Cluster: one `redis://[user:password@]host:port` (or `rediss://`) URL per seed
    /// node.
    Cluster(Vec<String>),
}

fn config_error(detail: String) -> RedisError {
    RedisError::from((ErrorKind::InvalidClientConfig, "bad Redis address", detail))
}

impl RedisTarget {
    /// Reads the target from `redis_url` and the optional `cluster_nodes` override
    /// (`host:port,host:port`). Errors (kind `InvalidClientConfig`): an empty node list, a node
    /// without a port, or a cluster URL naming a database other than 0.
    /// An empty or blank `cluster_nodes` counts as not given.
    pub fn parse(redis_url: &str, cluster_nodes: Option<&str>) -> RedisResult<Self> {
        let cluster_nodes = cluster_nodes.filter(|n| !n.trim().is_empty());
        let (scheme, rest) = redis_url.split_once("://").unwrap_or(("redis", ""));
        let node_scheme = match scheme {
            "redis+cluster" => "redis",
            "rediss+cluster" => "rediss",
            _ if cluster_nodes.is_none() => return Ok(RedisTarget::Single(redis_url.to_string())),
            "rediss" => "rediss",
            _ => "redis",
        };
        // `[user:password@]hosts[/db]`; credentials apply to every node.
        let (auth, hosts) = match rest.rsplit_once('@') {
            Some((auth, hosts)) => (format!("{auth}@"), hosts),
            None => (String::new(), rest),
        };
        let (hosts, db) = hosts.split_once('/').unwrap_or((hosts, ""));
        if !matches!(db, "" | "0") {
            return Err(config_error(format!(
                "a Redis Cluster has database 0 only, REDIS_URL names database {db}"
            )));
        }
        let list = cluster_nodes.unwrap_or(hosts);
        let nodes: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| match n.rsplit_once(':') {
                Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                    Ok(format!("{node_scheme}://{auth}{n}"))
                }
                _ => Err(config_error(format!("cluster node {n:?} is not host:port"))),
            })
            .collect::<RedisResult<_>>()?;
        if nodes.is_empty() {
            return Err(config_error("no Redis Cluster node given".into()));
        }
        Ok(RedisTarget::Cluster(nodes))
    }
}

/// A cheap, cloneable handle to the origin's Redis: one server or a cluster (see the module
/// documentation). Use it wherever a `redis::aio::ConnectionLike` is taken.
#[derive(Clone)]
pub enum RedisConn {
    /// One Redis server, reconnecting by itself.
    Single(ConnectionManager),
    /// A Redis Cluster, routing each command to the node that serves its keys' slot.
    Cluster(ClusterConnection),
}

impl RedisConn {
    /// Connects to `target` with the origin's timeouts and retries. Errors: the address is
    /// invalid, or no server (no seed node, on a cluster) answered in time.
    pub async fn connect(target: &RedisTarget) -> RedisResult<Self> {
        match target {
            RedisTarget::Single(url) => {
                let client = redis::Client::open(url.as_str())?;
                let manager = ConnectionManager::new_with_config(
                    client,
                    ConnectionManagerConfig::new()
                        .set_connection_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS))
                        .set_response_timeout(Duration::from_millis(RESPONSE_TIMEOUT_MS))
                        .set_number_of_retries(RETRIES as usize),
                )
                .await?;
                Ok(RedisConn::Single(manager))
            }
            RedisTarget::Cluster(nodes) => {
                let client = ClusterClientBuilder::new(nodes.clone())
                    .connection_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS))
                    .response_timeout(Duration::from_millis(RESPONSE_TIMEOUT_MS))
                    .retries(RETRIES)
                    .min_retry_wait(CLUSTER_MIN_RETRY_WAIT_MS)
                    .max_retry_wait(CLUSTER_MAX_RETRY_WAIT_MS)
                    .build()?;
                Ok(RedisConn::Cluster(client.get_async_connection().await?))
            }
        }
    }

    /// [`RedisTarget::parse`] then [`RedisConn::connect`].
    pub async fn open(redis_url: &str, cluster_nodes: Option<&str>) -> RedisResult<Self> {
        Self::connect(&RedisTarget::parse(redis_url, cluster_nodes)?).await
    }

    /// For command-line tools that take only a Redis URL: [`RedisConn::open`] with the node
    /// override read from the environment variable [`CLUSTER_NODES_ENV`], as `serve` reads it.
    pub async fn open_for_tool(redis_url: &str) -> RedisResult<Self> {
        let nodes = std::env::var(CLUSTER_NODES_ENV).ok();
        Self::open(redis_url, nodes.as_deref()).await
    }

    /// True on a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisConn::Cluster(_))
    }
}

/// How many Redis servers answered a `PING` (on a cluster, of its primaries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reach {
    /// Every one answered.
    All,
    /// Some answered, some did not (a cluster primary is down or failing over).
    Some,
    /// None answered.
    None,
}

impl RedisConn {
    /// Sends `PING` to the server, or to every primary of a cluster, and waits for answers
    /// until `deadline`. A server that has not answered by then counts as not answering.
    pub async fn reach(&self, deadline: Instant) -> Reach {
        match self {
            RedisConn::Single(c) => {
                let mut c = c.clone();
                match timeout_at(deadline, redis::cmd("PING").query_async::<String>(&mut c)).await {
                    Ok(Ok(_)) => Reach::All,
                    _ => Reach::None,
                }
            }
            RedisConn::Cluster(c) => {
                let ping = |policy: ResponsePolicy| {
                    let mut c = c.clone();
                    async move {
                        let route = RoutingInfo::MultiNode((
                            MultipleNodeRoutingInfo::AllMasters,
                            Some(policy),
                        ));
                        let cmd = redis::cmd("PING");
                        matches!(
                            timeout_at(deadline, c.route_command(&cmd, route)).await,
                            Ok(Ok(_))
                        )
                    }
                };
                let (all, any) = tokio::join!(
                    ping(ResponsePolicy::AllSucceeded),
                    ping(ResponsePolicy::OneSucceeded)
                );
                match (all, any) {
                    (true, _) => Reach::All,
                    (false, true) => Reach::Some,
                    (false, false) => Reach::None,
                }
            }
        }
    }
}

/// Implements [`ConnectionLike`] for a type by handing every call to the connection its
/// patterns bind: `connection_like_via!(T: pattern => binding, …)`, each pattern matching
/// `self` (a variant, or a struct with the connection in a field). The one place the trait's
/// three methods are forwarded, for [`RedisConn`] and the gate's handle.
macro_rules! connection_like_via {
    ($ty:ty: $($pattern:pat => $conn:ident),+ $(,)?) => {
        impl ::redis::aio::ConnectionLike for $ty {
            fn req_packed_command<'a>(
                &'a mut self,
                cmd: &'a ::redis::Cmd,
            ) -> ::redis::RedisFuture<'a, ::redis::Value> {
                match self {
                    $($pattern => ::redis::aio::ConnectionLike::req_packed_command($conn, cmd),)+
                }
            }

            fn req_packed_commands<'a>(
                &'a mut self,
                pipeline: &'a ::redis::Pipeline,
                offset: usize,
                count: usize,
            ) -> ::redis::RedisFuture<'a, Vec<::redis::Value>> {
                match self {
                    $($pattern => ::redis::aio::ConnectionLike::req_packed_commands(
                        $conn, pipeline, offset, count,
                    ),)+
                }
            }

            fn get_db(&self) -> i64 {
                match self {
                    $($pattern => ::redis::aio::ConnectionLike::get_db($conn),)+
                }
            }
        }
    };
}
pub(crate) use connection_like_via;

connection_like_via!(RedisConn: RedisConn::Single(c) => c, RedisConn::Cluster(c) => c);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_urls_stay_single() {
        for url in [
            "redis://127.0.0.1:6379/2",
            "rediss://h:6380",
            "unix:///tmp/r.sock",
        ] {
            assert_eq!(
                RedisTarget::parse(url, None).unwrap(),
                RedisTarget::Single(url.into())
            );
        }
    }

    #[test]
    fn cluster_urls_name_every_node() {
        assert_eq!(
            RedisTarget::parse("redis+cluster://127.0.0.1:7000,127.0.0.1:7001", None).unwrap(),
            RedisTarget::Cluster(vec![
                "redis://127.0.0.1:7000".into(),
                "redis://127.0.0.1:7001".into()
            ])
        );
        assert_eq!(
            RedisTarget::parse("rediss+cluster://u:pw@a:1,b:2/0", None).unwrap(),
            RedisTarget::Cluster(vec!["rediss://u:pw@a:1".into(), "rediss://u:pw@b:2".into()])
        );
    }

    #[test]
    fn the_node_list_overrides_the_url() {
        assert_eq!(
            RedisTarget::parse(
                "redis://127.0.0.1:6379",
                Some("10.0.0.1:7000, 10.0.0.2:7000")
            )
            .unwrap(),
            RedisTarget::Cluster(vec![
                "redis://10.0.0.1:7000".into(),
                "redis://10.0.0.2:7000".into()
            ])
        );
    }

    #[test]
    fn bad_cluster_addresses_are_refused() {
        for (url, nodes) in [
            ("redis+cluster://a:1/3", None),
            ("redis+cluster://", None),
            ("redis+cluster://a", None),
            ("redis+cluster://a:notaport", None),
            ("redis://x", Some(" , ")),
        ] {
            let e = RedisTarget::parse(url, nodes).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidClientConfig, "{url} {nodes:?}");
        }
    }
}
