//! Migrations as their own step, the schema check of `serve`, and what a transaction pooler
//! needs: origins started at once migrate once; `FLASHGATE_MIGRATE=false` refuses an old
//! schema with a clear message; a panicking background pass is logged and the loop goes on;
//! `/readyz` stays ready (run through PgBouncer by the pooler leg of scripts/test).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flashgate_origin::migrate::{self, SchemaTooOld};
use flashgate_origin::server;
use flashgate_tests::support::{
    drop_db, eventually, fresh_db, own_services, test_config, TestOrigin,
};
use sqlx::{ConnectOptions, PgPool};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn migrations_started_at_once_apply_each_version_once() {
    let (name, options) = fresh_db("migr_race").await;
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let o = options.clone();
            tokio::spawn(async move { migrate::run(&o).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for r in runs {
        outcomes.push(r.await.expect("joins").expect("migrates"));
    }
    let all: Vec<i64> = migrate::migrator().iter().map(|m| m.version).collect();
    let appliers: Vec<_> = outcomes.iter().filter(|o| !o.applied.is_empty()).collect();
    assert_eq!(appliers.len(), 1, "exactly one run applies: {outcomes:?}");
    assert_eq!(appliers[0].applied, all);
    for o in &outcomes {
        assert_eq!(o.current, migrate::required_version());
    }
    let db = PgPool::connect_with(options).await.expect("pool");
    let rows: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT version, count(*) FROM _sqlx_migrations WHERE success GROUP BY version ORDER BY version",
    )
    .fetch_all(&db)
    .await
    .expect("bookkeeping");
    assert_eq!(rows, all.iter().map(|v| (*v, 1)).collect::<Vec<_>>());
    db.close().await;
    drop_db(&name).await;
}

#[tokio::test]
async fn serve_without_migrating_refuses_an_old_schema_then_starts_once_migrated() {
    let (name, options) = fresh_db("migr_old").await;
    let url = options.to_url_lossy().to_string();
    let mut config = test_config();
    config.database_url = url.clone();
    config.migration_database_url = None;
    config.db_pooler = flashgate_origin::config::DbPooler::None;
    config.migrate = false;

    let err = match server::spawn(config.clone()).await {
        Ok(_) => panic!("an origin must refuse an empty schema with FLASHGATE_MIGRATE=false"),
        Err(e) => e,
    };
    let old = err.downcast_ref::<SchemaTooOld>().expect("SchemaTooOld");
    assert_eq!(old.current, 0);
    assert_eq!(old.required, migrate::required_version());
    let text = err.to_string();
    assert!(text.contains("older than this origin needs"), "{text}");
    assert!(text.contains("flashgate migrate"), "{text}");
    let tables: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            .fetch_one(&mut options.connect().await.expect("conn"))
            .await
            .expect("count");
    assert_eq!(tables, 0, "the refused start changed nothing");

    let done = migrate::run(&options).await.expect("migrates");
    assert_eq!(done.current, migrate::required_version());
    let origin = server::spawn(config)
        .await
        .expect("starts on the current schema");
    origin.shutdown().await.expect("stops");
    drop_db(&name).await;
}

#[tokio::test]
async fn a_panicking_background_pass_is_logged_and_the_loop_goes_on() {
    let origin = TestOrigin::start().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let stop = CancellationToken::new();
    let counted = runs.clone();
    server::tasks::spawn_every(
        &origin.origin.state,
        &stop,
        Duration::from_millis(10),
        "test pass",
        move |_, _| {
            let counted = counted.clone();
            async move {
                if counted.fetch_add(1, Ordering::SeqCst) % 2 == 0 {
                    panic!("driver blew up");
                }
                Ok(0)
            }
        },
    );
    eventually(
        "five passes, three of them panicking",
        Duration::from_secs(10),
        || {
            let n = runs.load(Ordering::SeqCst);
            async move {
                if n >= 5 {
                    Ok(())
                } else {
                    Err(format!("{n} passes"))
                }
            }
        },
    )
    .await;
    // The origin still answers.
    let res = origin
        .http
        .get(format!("{}/healthz", origin.url))
        .send()
        .await
        .expect("healthz");
    assert_eq!(res.status(), 200);
    stop.cancel();
    origin.stop().await;
}

#[tokio::test]
async fn readyz_stays_ready_under_concurrent_probes() {
    // A database (and Redis database) of its own (reached the way DATABASE_URL is: through the
    // pooler in the pooler leg) with three live campaigns whose gates readyz checks on every probe: the
    // suite database holds the campaigns of every earlier test, some with gates in another
    // Redis (the cluster leg), which would measure those tests rather than the pooler.
    let own = own_services(test_config(), "readyz").await;
    let origin = TestOrigin::start_with(own.config.clone()).await;
    for stock in [5, 50, 500] {
        origin.campaign("sale", stock).await;
    }
    eventually("ready", Duration::from_secs(20), || async {
        let r = origin
            .http
            .get(format!("{}/readyz", origin.url))
            .send()
            .await;
        match r {
            Ok(r) if r.status() == 200 => Ok(()),
            Ok(r) => Err(r.text().await.unwrap_or_default()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    // Once ready, 20 rounds of 16 concurrent probes (what several balancers do) all say ready.
    for _ in 0..20 {
        let probes = (0..16).map(|_| origin.http.get(format!("{}/readyz", origin.url)).send());
        for r in futures::future::join_all(probes).await {
            let r = r.expect("readyz answers");
            let status = r.status();
            assert_eq!(status, 200, "{}", r.text().await.unwrap_or_default());
        }
    }
    origin.stop().await;
    own.release().await;
}
