//! Databases of their own for tests that must not see the campaigns other tests leave in the
//! suite database (the origin's `/readyz` and its start-up gate load read every live campaign),
//! and [`own_services`] for an origin that must not act on the other tests' campaigns.

use std::sync::atomic::{AtomicU64, Ordering};

use flashgate_origin::config::Config;
use sqlx::postgres::PgConnectOptions;
use sqlx::ConnectOptions;

use super::direct_database_url;
use super::own_redis::{own_redis_db, OwnRedisDb};

/// A new, empty database next to the test database (on the direct server), named
/// `<test database>_<tag>_<process id>_<n>` (`n` counts this process's databases): its name and
/// connection options. Dropped by [`drop_db`].
pub async fn fresh_db(tag: &str) -> (String, PgConnectOptions) {
    static N: AtomicU64 = AtomicU64::new(0);
    let base: PgConnectOptions = direct_database_url().parse().expect("URL parses");
    let name = format!(
        "{}_{tag}_{}_{}",
        base.get_database().unwrap_or("flashgate"),
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let mut admin = base
        .clone()
        .database("postgres")
        .connect()
        .await
        .expect("admin");
    sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .execute(&mut admin)
        .await
        .expect("drop");
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut admin)
        .await
        .expect("create");
    (name.clone(), base.database(&name))
}

/// Drops database `name` made by [`fresh_db`] (errors ignored: a test's clean-up).
pub async fn drop_db(name: &str) {
    let base: PgConnectOptions = direct_database_url().parse().expect("URL parses");
    let mut admin = base.database("postgres").connect().await.expect("admin");
    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .execute(&mut admin)
        .await;
}

/// An origin's configuration on services of its own ([`own_services`]), the name of its
/// database and its Redis database (given back when dropped).
pub struct OwnServices {
    pub config: Config,
    pub db_name: String,
    pub redis: OwnRedisDb,
}

impl OwnServices {
    /// The URL of its database on the server itself (not through a pooler).
    pub fn direct_url(&self) -> &str {
        self.config
            .migration_database_url
            .as_deref()
            .unwrap_or(&self.config.database_url)
    }

    /// Drops the database (the Redis database is given back when `self` is dropped).
    pub async fn release(self) {
        drop_db(&self.db_name).await;
    }
}

/// `url` with its database name replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let opts: PgConnectOptions = url.parse().expect("URL parses");
    opts.database(name).to_url_lossy().to_string()
}

/// `config` moved onto services of its own: a fresh, migrated database ([`fresh_db`], named
/// after `tag`; through the same pooler, if any) and a Redis database of its own
/// ([`own_redis_db`]).
///
/// For an origin that empties its Redis database, or must not act on the other tests'
/// campaigns: the origins of one test binary share the test database and Redis database, and an
/// origin on another Redis database would sweep their holds and admit their queues into a
/// Redis nobody else reads; an origin on another database sharing the Redis database would take
/// their gate audit's turns.
pub async fn own_services(mut config: Config, tag: &str) -> OwnServices {
    let (db_name, direct) = fresh_db(tag).await;
    flashgate_origin::migrate::run(&direct)
        .await
        .expect("migrates");
    config.database_url = with_database(&config.database_url, &db_name);
    config.migration_database_url = config
        .migration_database_url
        .map(|u| with_database(&u, &db_name));
    let redis = own_redis_db().await;
    config.redis_url = redis.url().to_string();
    OwnServices {
        config,
        db_name,
        redis,
    }
}
