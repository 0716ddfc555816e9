//! Databases of their own for tests that must not see the campaigns other tests leave in the
//! suite database (the origin's `/readyz` and its start-up gate load read every live campaign).

use sqlx::postgres::PgConnectOptions;
use sqlx::ConnectOptions;

use super::direct_database_url;

/// A new, empty database next to the test database (on the direct server), named
/// `<test database>_<tag>_<process id>`: its name and connection options. Dropped by
/// [`drop_db`].
pub async fn fresh_db(tag: &str) -> (String, PgConnectOptions) {
    let base: PgConnectOptions = direct_database_url().parse().expect("URL parses");
    let name = format!(
        "{}_{tag}_{}",
        base.get_database().unwrap_or("flashgate"),
        std::process::id()
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
