//! Reconciliation (`GET /admin/v1/campaigns/{id}/reconcile`, `flashgate reconcile`) against a
//! real origin, PostgreSQL and Redis: clean after normal traffic, and reporting faults injected
//! on purpose behind the origin's back.

use flashgate_tests::support::{database_url, redis_url, TestOrigin};
use reqwest::Method;
use serde_json::Value;

/// `n` new customers claim `c` at once; returns their claim ids in order (all must win).
async fn claims(o: &TestOrigin, c: &str, n: usize) -> Vec<String> {
    let won = o.winners(c, n).await;
    won.iter()
        .map(|w| w["id"].as_str().unwrap().to_string())
        .collect()
}

fn faults(r: &Value) -> String {
    r["faults"].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_campaigns_reconcile_and_bad_callers_are_refused() {
    let o = TestOrigin::start().await;
    let sale = o.campaign("sale", 5).await;
    let giveaway = o.campaign("giveaway", 4).await;
    claims(&o, &sale, 3).await;
    claims(&o, &giveaway, 4).await;

    let r = o.reconcile(&sale).await;
    assert_eq!(r["ok"], true, "{r:#}");
    assert_eq!(
        (r["stock"].as_i64(), r["remaining"].as_i64()),
        (Some(5), Some(2))
    );
    assert_eq!(
        (r["active"].as_i64(), r["ledger_active"].as_i64()),
        (Some(3), Some(3))
    );
    assert_eq!(r["claims"]["held"], 3);
    assert_eq!(
        (r["oversold"].as_i64(), r["stranded"].as_i64()),
        (Some(0), Some(0))
    );
    assert_eq!(r["gate"]["remaining"], 2);
    assert_eq!(r["gate"]["holders"], 3);
    assert_eq!(r["faults"], serde_json::json!([]));
    let r = o.reconcile(&giveaway).await;
    assert_eq!(r["ok"], true, "{r:#}");
    assert_eq!(r["claims"]["issued"], 4);
    assert_eq!(r["gate"]["sold_out_flag"], true);

    let path = format!("/admin/v1/campaigns/{sale}/reconcile");
    let (s, b) = o.admin(Method::GET, &path, None, None).await;
    assert_eq!((s, b["result"].as_str()), (401, Some("unauthorized")));
    let (s, b) = o.admin(Method::GET, &path, Some("wrong"), None).await;
    assert_eq!((s, b["result"].as_str()), (403, Some("forbidden")));
    let token = o.manager_token().to_string();
    for bad in ["no-such-campaign", "NOT_A_SLUG"] {
        let path = format!("/admin/v1/campaigns/{bad}/reconcile");
        let (s, b) = o.admin(Method::GET, &path, Some(&token), None).await;
        assert_eq!((s, b["result"].as_str()), (404, Some("not_found")), "{bad}");
    }
    // The CLI's function agrees, with one exit code per meaning: clean, unknown campaign,
    // services unreachable.
    use flashgate_origin::cli::exit;
    let cli = |db: String, redis: String, c: String| async move {
        flashgate_origin::cli::reconcile::run(
            &db,
            flashgate_origin::config::DbPooler::None,
            &redis,
            &c,
        )
        .await
    };
    assert_eq!(
        cli(database_url(), redis_url(), sale.clone()).await,
        exit::OK
    );
    assert_eq!(
        cli(database_url(), redis_url(), "no-such-campaign".into()).await,
        exit::NOT_FOUND
    );
    let nowhere = "postgres://postgres@127.0.0.1:9/none".to_string();
    assert_eq!(
        cli(nowhere, redis_url(), sale.clone()).await,
        exit::UNREACHABLE
    );
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_row_deleted_behind_its_back_is_reported_stranded() {
    let o = TestOrigin::start().await;
    for kind in ["sale", "giveaway"] {
        let c = o.campaign(kind, 5).await;
        let ids = claims(&o, &c, 3).await;
        assert_eq!(o.reconcile(&c).await["ok"], true);

        sqlx::query("DELETE FROM claims WHERE id = $1")
            .bind(&ids[0])
            .execute(&o.db)
            .await
            .unwrap();
        let r = o.reconcile(&c).await;
        assert_eq!(r["ok"], false, "{r:#}");
        assert_eq!(r["stranded"], 1, "{}", faults(&r));
        assert_eq!(r["oversold"], 0);
        assert_eq!(
            (r["active"].as_i64(), r["ledger_active"].as_i64()),
            (Some(2), Some(3))
        );
        assert_eq!(r["ledger_orphans"], 1);
        assert_eq!(
            r["gate"]["stale_holders"], 1,
            "her gate holder names the lost claim"
        );
        let text = faults(&r);
        assert!(
            text.contains("stranded") && text.contains("ledger"),
            "{text}"
        );
        let code = flashgate_origin::cli::reconcile::run(
            &database_url(),
            flashgate_origin::config::DbPooler::None,
            &redis_url(),
            &c,
        )
        .await;
        assert_eq!(
            code,
            flashgate_origin::cli::exit::FAULT,
            "the CLI reports the fault too"
        );
    }
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversold_and_gate_drift_are_reported() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 4).await;
    claims(&o, &c, 2).await;

    // A unit handed back twice in PostgreSQL: remaining 3 with 2 active of 4 → 1 oversold.
    sqlx::query("UPDATE campaigns SET remaining = remaining + 1 WHERE id = $1")
        .bind(&c)
        .execute(&o.db)
        .await
        .unwrap();
    let r = o.reconcile(&c).await;
    assert_eq!(
        (r["oversold"].as_i64(), r["ok"].as_bool()),
        (Some(1), Some(false)),
        "{r:#}"
    );
    sqlx::query("UPDATE campaigns SET remaining = remaining - 1 WHERE id = $1")
        .bind(&c)
        .execute(&o.db)
        .await
        .unwrap();
    assert_eq!(o.reconcile(&c).await["ok"], true);

    // The gate lost a unit: PostgreSQL has 2 remaining, the gate 1 → 1 stranded.
    let mut redis = o.origin.state.redis.clone();
    let key = flashgate_origin::gate::Keys::of(&c).remaining;
    let _: i64 = redis::cmd("DECR")
        .arg(&key)
        .query_async(&mut redis)
        .await
        .unwrap();
    let r = o.reconcile(&c).await;
    assert_eq!(
        (r["stranded"].as_i64(), r["ok"].as_bool()),
        (Some(1), Some(false)),
        "{r:#}"
    );
    assert!(faults(&r).contains("gate"));
    // The gate has a unit too many: not oversold (PostgreSQL decides) but a fault.
    let _: i64 = redis::cmd("INCRBY")
        .arg(&key)
        .arg(2)
        .query_async(&mut redis)
        .await
        .unwrap();
    let r = o.reconcile(&c).await;
    assert_eq!(
        (r["stranded"].as_i64(), r["oversold"].as_i64()),
        (Some(0), Some(0))
    );
    assert_eq!(r["ok"], false);
    o.stop().await;
}
