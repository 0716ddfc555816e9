//! Redis databases of their own, for the tests whose origin must not share the test Redis
//! database (a test that empties it, or an origin on a PostgreSQL database of its own: see
//! [`super::own_services`]). A database is claimed with the owner key the scripts' dev stacks
//! use (scripts/lib/services.sh), so a test never takes a clone's database, nor one another
//! test holds: it takes an empty database nobody owns, or one a test gave back (or left when
//! its process ended), emptied first.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{redis_is_cluster, redis_url, redis_url_with_db};

/// The key naming a Redis database's owner (`SVC_REDIS_OWNER_KEY` of scripts/lib/services.sh).
const OWNER_KEY: &str = "flashgate:dev:owner";

/// The owner value a test writes: `flashgate-test:<process id>:<claim number>`.
const TEST_OWNER: &str = "flashgate-test:";

/// The owner value of a database a test gave back.
const GIVEN_BACK: &str = "flashgate-test:free";

/// The databases tried, in order: 0 to 3 are left to others, as the dev stacks leave them.
const CANDIDATES: std::ops::RangeInclusive<u8> = 4..=15;

/// How long a claim waits for a database to be given back before it fails.
const CLAIM_WAIT: Duration = Duration::from_secs(120);

/// Takes database `KEYS[1]`'s ownership for `ARGV[2]` if its owner is still `ARGV[1]` (empty:
/// none, and then only an empty database), emptying it first.
const TAKE: &str = r"
local owner = redis.call('GET', KEYS[1])
if ARGV[1] == '' then
  if owner or redis.call('DBSIZE') > 0 then return 0 end
elseif owner ~= ARGV[1] then
  return 0
else
  redis.call('FLUSHDB')
end
redis.call('SET', KEYS[1], ARGV[2])
return 1";

/// `FLUSHDB`, the owner key `KEYS[1]` kept.
const FLUSH_KEEPING_OWNER: &str = r"
local owner = redis.call('GET', KEYS[1])
redis.call('FLUSHDB')
if owner then redis.call('SET', KEYS[1], owner) end
return 0";

/// Gives the database back, emptied, owned by `ARGV[2]`, if `ARGV[1]` still owns it. (Still
/// owned: an origin left running by a panicking test may write into it afterwards.)
const GIVE_BACK: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('FLUSHDB')
  redis.call('SET', KEYS[1], ARGV[2])
end
return 0";

/// Empties the database of `r` as `FLUSHDB` does, keeping its owner key (else another test
/// could claim it while its owner still uses it).
pub(super) async fn flush_keeping_owner(r: &mut flashgate_origin::redis_conn::RedisConn) {
    let _: i64 = redis::cmd("EVAL")
        .arg(FLUSH_KEEPING_OWNER)
        .arg(1)
        .arg(OWNER_KEY)
        .query_async(r)
        .await
        .expect("FLUSHDB");
}

/// A Redis database this test owns until it is dropped; on a Redis Cluster (database 0 only)
/// the shared test URL, owned by nobody.
pub struct OwnRedisDb {
    url: String,
    owner: Option<String>,
}

impl OwnRedisDb {
    /// Its URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for OwnRedisDb {
    fn drop(&mut self) {
        let Some(owner) = &self.owner else { return };
        // Synchronous, so it runs on a panic too.
        let given = redis::Client::open(self.url.as_str())
            .and_then(|c| c.get_connection())
            .and_then(|mut c| {
                redis::cmd("EVAL")
                    .arg(GIVE_BACK)
                    .arg(1)
                    .arg(OWNER_KEY)
                    .arg(owner)
                    .arg(GIVEN_BACK)
                    .query::<i64>(&mut c)
            });
        if let Err(e) = given {
            eprintln!("giving back the Redis database {}: {e}", self.url);
        }
    }
}

/// The database number of the test Redis URL (0 when it names none).
fn test_db() -> u8 {
    redis_url()
        .rsplit_once('/')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

/// Whether `owner` is a test's that gave it back or whose process is gone.
fn left_by_a_test(owner: &str) -> bool {
    if owner == GIVEN_BACK {
        return true;
    }
    let Some(pid) = owner
        .strip_prefix(TEST_OWNER)
        .and_then(|rest| rest.split(':').next())
    else {
        return false;
    };
    pid != std::process::id().to_string()
        && cfg!(target_os = "linux")
        && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Claims a Redis database of this test's own on the test Redis server (not the test
/// database, not 0 to 3), waiting up to two minutes for one to be given back; see the module
/// documentation. On a Redis Cluster: the shared test URL.
pub async fn own_redis_db() -> OwnRedisDb {
    if redis_is_cluster() {
        return OwnRedisDb {
            url: redis_url(),
            owner: None,
        };
    }
    static CLAIMS: AtomicU64 = AtomicU64::new(0);
    let me = format!(
        "{TEST_OWNER}{}:{}",
        std::process::id(),
        CLAIMS.fetch_add(1, Ordering::Relaxed)
    );
    let started = Instant::now();
    loop {
        for db in CANDIDATES.filter(|d| *d != test_db()) {
            let url = redis_url_with_db(db);
            let client = redis::Client::open(url.as_str()).expect("the Redis URL parses");
            let mut conn = client
                .get_multiplexed_async_connection()
                .await
                .expect("connect to the test Redis");
            let owner: Option<String> = redis::cmd("GET")
                .arg(OWNER_KEY)
                .query_async(&mut conn)
                .await
                .expect("GET the owner");
            let expected = match owner.as_deref() {
                None => "",
                Some(o) if left_by_a_test(o) => o,
                Some(_) => continue,
            };
            let taken: i64 = redis::cmd("EVAL")
                .arg(TAKE)
                .arg(1)
                .arg(OWNER_KEY)
                .arg(expected)
                .arg(&me)
                .query_async(&mut conn)
                .await
                .expect("claim the database");
            if taken == 1 {
                return OwnRedisDb {
                    url,
                    owner: Some(me),
                };
            }
        }
        assert!(
            started.elapsed() < CLAIM_WAIT,
            "no Redis database of 4 to 15 free for a test: each is owned (key {OWNER_KEY}) or \
             holds keys"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
