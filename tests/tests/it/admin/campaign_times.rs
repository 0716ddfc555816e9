//! The admin API's rule on campaign ends (docs/ADMIN.md "Times"), against a real origin over
//! HTTP, PostgreSQL and Redis: every write that sets an `ends_at` (creating a campaign or a
//! gift campaign, a change's `ends_at`) refuses one that is not in the future with 422 naming
//! the field, and writes nothing: no row, no audit row, no gate in Redis.

use chrono::{DateTime, Duration, Utc};
use flashgate_shared::api::ChangeRequest;
use flashgate_tests::support::{gate_keys_present, unique, TestOrigin};
use reqwest::Method;
use serde_json::{json, Value};

/// 422 `validation_failed` whose message names `ends_at`.
fn assert_names_ends_at(status: u16, body: &Value) {
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["result"], "validation_failed", "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("ends_at"), "{body}");
}

/// Rows naming `id` in `table` (column `column`).
async fn rows(o: &TestOrigin, table: &str, column: &str, id: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table} WHERE {column} = $1"))
        .bind(id)
        .fetch_one(&o.db)
        .await
        .unwrap()
}

/// `POST /admin/v1/campaigns` (manager token) of sale `id` of 5 units from `starts_at` to
/// `ends_at`: the answer's status and body.
async fn create(
    o: &TestOrigin,
    id: &str,
    starts_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
) -> (u16, Value) {
    let body = json!({"id": id, "name": "late sale", "kind": "sale", "stock": 5,
                      "starts_at": starts_at, "ends_at": ends_at});
    o.admin(
        Method::POST,
        "/admin/v1/campaigns",
        Some(o.manager_token()),
        Some(body),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_created_already_ended_is_refused_naming_ends_at() {
    let o = TestOrigin::start().await;
    let now = Utc::now();
    for ends_at in [now - Duration::hours(1), now - Duration::seconds(1)] {
        let c = unique("ended");
        let (s, b) = create(&o, &c, now - Duration::hours(2), ends_at).await;
        assert_names_ends_at(s, &b);
        assert_eq!(rows(&o, "campaigns", "id", &c).await, 0);
        assert_eq!(rows(&o, "admin_audit", "campaign_id", &c).await, 0);
        assert_eq!(gate_keys_present(&o, &c).await, Vec::<String>::new());
    }
    // The same campaign ending in an hour is created, and its gate loaded (what the empty
    // lists above would have shown).
    let c = unique("live");
    let (s, b) = create(&o, &c, now - Duration::hours(2), now + Duration::hours(1)).await;
    assert_eq!(s, 201, "{b}");
    assert!(!gate_keys_present(&o, &c).await.is_empty());
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_moved_into_the_past_is_refused_naming_ends_at() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 3).await;
    let ends_at = || async {
        let at: DateTime<Utc> = sqlx::query_scalar("SELECT ends_at FROM campaigns WHERE id = $1")
            .bind(&c)
            .fetch_one(&o.db)
            .await
            .unwrap();
        at
    };
    let ends_before = ends_at().await;
    let audited = rows(&o, "admin_audit", "campaign_id", &c).await;
    let (s, b) = o
        .change(
            &c,
            ChangeRequest::ends_at(Utc::now() - Duration::seconds(30)),
        )
        .await;
    assert_names_ends_at(s, &b);
    assert_eq!(ends_at().await, ends_before);
    assert_eq!(rows(&o, "admin_audit", "campaign_id", &c).await, audited);
    assert_eq!(o.status(&c).await["state"], "active");
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gift_campaign_created_already_ended_is_refused_naming_ends_at() {
    let o = TestOrigin::start().await;
    let id = unique("GIFT").replace('-', "_");
    let ended = json!(Utc::now() - Duration::minutes(1));
    let (s, b) = flashgate_tests::gifts::create_campaign(&o, &id, ended).await;
    assert_names_ends_at(s, &b);
    assert_eq!(rows(&o, "gift_campaigns", "id", &id).await, 0);
    o.stop().await;
}
