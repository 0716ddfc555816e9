//! The origin against TLS-only PostgreSQL and Redis (managed services): `sslmode=verify-full`
//! with the CA named by `sslrootcert`, and `rediss://` trusting the CA through `SSL_CERT_FILE`.
//! The claim path works over both; a server certificate that does not verify against the
//! trusted CA is refused at start-up with an error naming the service.
//!
//! Needs the services `scripts/test-tls` starts (a throwaway CA made with openssl, an own
//! PostgreSQL with `ssl=on` and only `hostssl` entries, `redis-server --tls-port`), given as
//! FLASHGATE_TEST_TLS_DATABASE_URL, FLASHGATE_TEST_TLS_REDIS_URL and FLASHGATE_TEST_TLS_OTHER_CA
//! (a CA that signed nothing); hence ignored in a plain `cargo test`.

use chrono::{Duration, Utc};
use flashgate_origin::server;
use flashgate_tests::support::{test_config, unique, TestOrigin};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run scripts/test-tls"))
}

fn tls_config() -> flashgate_origin::config::Config {
    let mut config = test_config();
    config.database_url = env("FLASHGATE_TEST_TLS_DATABASE_URL");
    config.migration_database_url = None;
    config.db_pooler = flashgate_origin::config::DbPooler::None;
    config.redis_url = env("FLASHGATE_TEST_TLS_REDIS_URL");
    config.redis_cluster_nodes = None;
    config
}

#[tokio::test]
#[ignore = "needs TLS services: scripts/test-tls"]
async fn claims_work_over_tls_to_postgres_and_redis() {
    let origin = TestOrigin::start_with(tls_config()).await;
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&origin.db)
        .await
        .expect("pg_stat_ssl");
    assert!(ssl, "the test's own connection is encrypted too");
    let c = unique("tls");
    let now = Utc::now();
    origin
        .create_campaign(
            &c,
            "sale",
            2,
            now - Duration::seconds(1),
            now + Duration::hours(1),
            Some(600),
        )
        .await;
    let mut won = 0;
    for k in 0..3 {
        let (status, body) = origin
            .claim(&c, &format!("tls-{k}"), &format!("key-{k}"))
            .await;
        if status == 201 {
            won += 1;
        } else {
            assert_eq!(body["result"], "sold_out", "{status} {body}");
        }
    }
    assert_eq!(won, 2, "stock 2 over TLS: 2 winners");
    assert_eq!(origin.claim_rows(&c, &["held"]).await, 2);
    origin.stop().await;
}

#[tokio::test]
#[ignore = "needs TLS services: scripts/test-tls (SSL_CERT_FILE = the other CA)"]
async fn a_postgres_certificate_from_an_untrusted_ca_is_refused_at_startup() {
    // sqlx trusts the system's roots (SSL_CERT_FILE included) plus sslrootcert: the script
    // runs this test with SSL_CERT_FILE naming the other CA.
    let mut config = tls_config();
    let url = config.database_url.clone();
    let (head, _) = url
        .split_once("sslrootcert=")
        .expect("the URL names sslrootcert");
    config.database_url = format!("{head}sslrootcert={}", env("FLASHGATE_TEST_TLS_OTHER_CA"));
    let err = match server::spawn(config).await {
        Ok(_) => panic!("an origin must refuse a certificate that does not verify"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("cannot connect to PostgreSQL"), "{err}");
    assert!(
        err.to_lowercase().contains("certificate") || err.to_lowercase().contains("issuer"),
        "the error says why: {err}"
    );
}

#[tokio::test]
#[ignore = "needs TLS services: scripts/test-tls"]
async fn a_plain_connection_to_a_tls_only_postgres_is_refused() {
    let mut config = tls_config();
    let url = config.database_url.clone();
    let (head, _) = url.split_once('?').expect("the URL has parameters");
    config.database_url = format!("{head}?sslmode=disable");
    let err = match server::spawn(config).await {
        Ok(_) => panic!("pg_hba allows TLS only"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("cannot connect to PostgreSQL"), "{err}");
}

#[tokio::test]
#[ignore = "needs TLS services: scripts/test-tls (SSL_CERT_FILE = the other CA)"]
async fn a_redis_certificate_from_an_untrusted_ca_is_refused_at_startup() {
    // PostgreSQL trusts the CA through sslrootcert; Redis trusts SSL_CERT_FILE, which the
    // script points at the other CA for this test.
    let err = match server::spawn(tls_config()).await {
        Ok(_) => panic!("an origin must refuse a Redis certificate that does not verify"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("cannot connect to Redis"), "{err}");
}
