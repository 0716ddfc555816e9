//! The grouped commit against real PostgreSQL: a batch that a unique index refuses in part is
//! written again without the refused claims, and the campaign check of migration 0025 (once per
//! statement, in place of a foreign key) refuses what the key refused.

use std::sync::Arc;
use std::time::Duration;

use flashgate_origin::claims::commit::{Committer, NewClaim, Outcome};
use flashgate_origin::claims::store::new_claim_id;
use flashgate_origin::db::Db;
use flashgate_origin::telemetry::metrics::Metrics;
use flashgate_shared::api::CampaignKind;
use flashgate_tests::support::scrape::Scrape;
use flashgate_tests::support::TestOrigin;
use futures::future::join_all;

fn claim(campaign: &str, kind: CampaignKind, customer: &str, code: Option<&str>) -> NewClaim {
    NewClaim {
        id: new_claim_id(),
        campaign_id: campaign.to_string(),
        customer_id: customer.to_string(),
        kind,
        hold_seconds: (kind == CampaignKind::Sale).then_some(600),
        code: code.map(str::to_string),
        idempotency_key: format!("k-{customer}"),
        request_fp: format!("fp-{customer}"),
        variant: None,
    }
}

/// Holds the campaign row locked (as a batch in flight does) while `claims` are submitted to a
/// committer of one worker, so that they queue and are taken as one batch once it is released.
/// Returns their outcomes in order and the number of batches the committer wrote (1, or 2 when
/// the worker took the first claims before the others were queued).
async fn as_one_batch(o: &TestOrigin, c: &str, claims: Vec<NewClaim>) -> (Vec<Outcome>, u64) {
    let metrics = Arc::new(Metrics::new());
    let committer = Committer::start(Db::from(o.db.clone()), 1, 512, metrics.clone());
    let mut lock = o.db.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM campaigns WHERE id = $1 FOR UPDATE")
        .bind(c)
        .execute(&mut *lock)
        .await
        .unwrap();
    let n = claims.len();
    let pending = tokio::spawn({
        let committer = committer.clone();
        async move {
            join_all(claims.into_iter().map(|x| {
                let committer = committer.clone();
                async move { committer.commit(x).await.expect("commit") }
            }))
            .await
        }
    });
    // The first claim's batch waits for the lock; the others queue behind it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    lock.rollback().await.unwrap();
    let outcomes = pending.await.unwrap();
    assert_eq!(outcomes.len(), n);
    let batches = Scrape::parse(&metrics.render()).count("flashgate_commit_batch_size_count", &[]);
    (outcomes, batches)
}

async fn count(o: &TestOrigin, sql: &str, c: &str) -> i64 {
    sqlx::query_scalar(sql)
        .bind(c)
        .fetch_one(&o.db)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_with_a_customers_second_claim_writes_the_others_and_answers_hers() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 100).await;
    // Her first claim, already written (as after Redis lost her gate record).
    let first = claim(&c, CampaignKind::Sale, "dup", None);
    let first_id = first.id.clone();
    let committer = Committer::start(Db::from(o.db.clone()), 1, 512, Arc::new(Metrics::new()));
    assert!(matches!(
        committer.commit(first).await.unwrap(),
        Outcome::Committed(_)
    ));

    let mut claims: Vec<NewClaim> = (0..20)
        .map(|i| claim(&c, CampaignKind::Sale, &format!("p{i}"), None))
        .collect();
    claims.insert(7, claim(&c, CampaignKind::Sale, "dup", None));
    let (outcomes, batches) = as_one_batch(&o, &c, claims).await;
    assert!(batches <= 2, "those queued behind the lock are one batch");
    for (i, outcome) in outcomes.iter().enumerate() {
        match outcome {
            Outcome::AlreadyClaimed(row) if i == 7 => assert_eq!(row.id, first_id),
            Outcome::Committed(row) if i != 7 => {
                assert_eq!(row.customer_id, format!("p{}", i - usize::from(i > 7)))
            }
            other => panic!("claim {i}: {other:?}"),
        }
    }
    // 21 units taken, one claim, ledger row and event each; her second claim left no trace.
    assert_eq!(o.remaining(&c).await, 79);
    let claims = "SELECT count(*) FROM claims WHERE campaign_id = $1";
    assert_eq!(count(&o, claims, &c).await, 21);
    let ledger = "SELECT count(*) FROM ledger WHERE campaign_id = $1";
    assert_eq!(count(&o, ledger, &c).await, 21);
    let events =
        "SELECT count(*) FROM webhook_events WHERE campaign_id = $1 AND type = 'claim.held'";
    assert_eq!(count(&o, events, &c).await, 21);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_taken_coupon_code_in_a_batch_is_drawn_again_and_the_others_are_written() {
    let o = TestOrigin::start().await;
    let c = o.campaign("giveaway", 50).await;
    // Codes of this campaign only: the table keeps every earlier run's.
    let code = |i: usize| format!("{c}-{i}");
    let committer = Committer::start(Db::from(o.db.clone()), 1, 512, Arc::new(Metrics::new()));
    let taken = claim(&c, CampaignKind::Giveaway, "early", Some(&code(999_999)));
    let outcome = committer.commit(taken).await.unwrap();
    assert!(matches!(outcome, Outcome::Committed(_)), "{outcome:?}");

    let mut claims: Vec<NewClaim> = (0..10)
        .map(|i| claim(&c, CampaignKind::Giveaway, &format!("g{i}"), Some(&code(i))))
        .collect();
    claims[4].code = Some(code(999_999));
    let (outcomes, batches) = as_one_batch(&o, &c, claims).await;
    assert!(batches <= 2, "those queued behind the lock are one batch");
    for (i, outcome) in outcomes.iter().enumerate() {
        match outcome {
            Outcome::CodeTaken if i == 4 => {}
            Outcome::Committed(row) if i != 4 => {
                assert_eq!(row.code.as_deref(), Some(code(i).as_str()))
            }
            other => panic!("claim {i}: {other:?}"),
        }
    }
    assert_eq!(o.remaining(&c).await, 40);
    let issued = "SELECT count(*) FROM claims WHERE campaign_id = $1 AND status = 'issued'";
    assert_eq!(count(&o, issued, &c).await, 10);
    o.stop().await;
}

/// The SQLSTATE of `sql`'s error (with `$1` = `campaign`), or "ok".
async fn sqlstate(o: &TestOrigin, sql: &str, campaign: &str) -> String {
    match sqlx::query(sql).bind(campaign).execute(&o.db).await {
        Ok(_) => "ok".into(),
        Err(sqlx::Error::Database(e)) => e.code().unwrap_or_default().into_owned(),
        Err(e) => panic!("{sql}: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_no_campaign_is_refused_and_a_campaign_keeps_its_claims() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 5).await;
    let insert = "INSERT INTO claims (id, campaign_id, customer_id, status, held_until,
                                      idempotency_key, request_fp)
                  SELECT 'c_' || gen_random_uuid(), x, 'someone', 'held', now(), 'k', 'fp'
                    FROM UNNEST(ARRAY[$1, $1 || '-gone']) AS x";
    // One of the two names no campaign: the statement writes neither.
    assert_eq!(sqlstate(&o, insert, &c).await, "23503");
    let rows = "SELECT count(*) FROM claims WHERE campaign_id LIKE $1 || '%'";
    assert_eq!(count(&o, rows, &c).await, 0);
    let one = "INSERT INTO claims (id, campaign_id, customer_id, status, held_until,
                                   idempotency_key, request_fp)
               VALUES ('c_' || gen_random_uuid(), $1, 'someone', 'held', now(), 'k', 'fp')";
    assert_eq!(sqlstate(&o, one, &c).await, "ok");
    // Neither deleted nor renamed while it has a claim; its other columns still change.
    let delete = "DELETE FROM campaigns WHERE id = $1";
    assert_eq!(sqlstate(&o, delete, &c).await, "23503");
    let rename = "UPDATE campaigns SET id = $1 || '-new' WHERE id = $1";
    assert_eq!(sqlstate(&o, rename, &c).await, "23503");
    let update = "UPDATE campaigns SET remaining = remaining - 1 WHERE id = $1";
    assert_eq!(sqlstate(&o, update, &c).await, "ok");
    assert_eq!(o.remaining(&c).await, 4);
    o.stop().await;
}
