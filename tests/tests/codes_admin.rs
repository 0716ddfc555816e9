//! Promo codes and admin writes against in-process origins over HTTP with the
//! machine's real PostgreSQL and Redis: one use per (code, order), the audited batch export
//! that needs a manager, `Idempotency-Key` on admin writes, and disabling a code.

use std::time::{Duration, Instant};

use flashgate_tests::support::eventually;
use flashgate_tests::support::{unique, TestOrigin};
use futures::future::join_all;
use reqwest::Method;
use serde_json::{json, Value};

async fn audit_rows(o: &TestOrigin, column: &str, subject: &str, action: &str) -> Vec<Value> {
    sqlx::query_scalar(&format!(
        "SELECT jsonb_build_object('actor', actor, 'params', params, 'before', before,
                                   'after', after)
           FROM admin_audit WHERE {column} = $1 AND action = $2 ORDER BY seq"
    ))
    .bind(subject)
    .bind(action)
    .fetch_all(&o.db)
    .await
    .expect("audit rows")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_code_is_used_once_per_order_whatever_the_key() {
    let o = TestOrigin::start().await;
    let code = o.shared_code(10, false).await;
    let ana = unique("ana");
    let order = unique("o-77");
    let (st, first) = o.use_code(&code, &ana, &order, "key-a").await;
    assert_eq!(st, 201, "{first}");
    let (st, second) = o.use_code(&code, &ana, &order, "key-b").await;
    assert_eq!(
        (st, second),
        (409, json!({"result": "already_used", "use": first["use"]}))
    );
    assert_eq!(o.uses_left(&code).await, 9);
    // The first key still replays the first use; another order may use the code.
    let (st, again) = o.use_code(&code, &ana, &order, "key-a").await;
    assert_eq!((st, &again), (201, &first));
    let (st, other) = o.use_code(&code, &ana, &unique("o-78"), "key-c").await;
    assert_eq!(st, 201, "{other}");
    assert_eq!(o.uses_left(&code).await, 8);
    // The database refuses a second held use of the same (code, order) by itself.
    let dup = sqlx::query(
        "INSERT INTO coupon_uses (id, code, customer_id, order_ref, cart_total, discount, status,
             once_per_customer, held_until, idempotency_key, request_fp)
         VALUES ('u_dup', $1, 'someone-else', $2, 6000, 600, 'held', false, now(), 'k', 'fp')",
    )
    .bind(&code)
    .bind(&order)
    .execute(&o.db)
    .await
    .expect_err("unique (code, order) over held and used uses");
    assert_eq!(
        dup.as_database_error().and_then(|e| e.code()).as_deref(),
        Some("23505")
    );
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_uses_of_one_code_and_order_with_different_keys_give_exactly_one_201() {
    let o = TestOrigin::start().await;
    for round in 0..5 {
        let code = o.shared_code(10, false).await;
        let ana = unique("ana");
        let order = unique("o-77");
        let replies = join_all((0..12).map(|i| {
            let (o, code, ana, order) = (&o, code.clone(), ana.clone(), order.clone());
            async move {
                o.use_code(&code, &ana, &order, &format!("k{round}-{i}"))
                    .await
            }
        }))
        .await;
        let won: Vec<&Value> = replies
            .iter()
            .filter(|(st, _)| *st == 201)
            .map(|(_, b)| b)
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {replies:?}");
        for (st, body) in replies.iter().filter(|(st, _)| *st != 201) {
            assert_eq!(*st, 409, "{body}");
            assert_eq!(body["result"], "already_used", "{body}");
            assert_eq!(body["use"], won[0]["use"], "{body}");
        }
        assert_eq!(o.uses_left(&code).await, 9);
        let held: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM coupon_uses WHERE code = $1 AND order_ref = $2
               AND status IN ('held', 'used')",
        )
        .bind(&code)
        .bind(&order)
        .fetch_one(&o.db)
        .await
        .unwrap();
        assert_eq!(held, 1);
    }
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exporting_a_batch_needs_a_manager_and_writes_an_audit_row() {
    let o = TestOrigin::start().await;
    let manager = o.manager_token().to_string();
    let body = json!({"count": 7, "amount_off": 2000, "currency": "USD",
                      "ends_at": chrono::Utc::now() + chrono::Duration::days(1)});
    let (st, batch, _) = o
        .admin_keyed(
            Method::POST,
            "/admin/v1/codes/batches",
            &manager,
            None,
            body,
        )
        .await;
    assert_eq!(st, 201, "{batch}");
    let (id, csv) = (
        batch["id"].as_str().unwrap(),
        batch["csv"].as_str().unwrap(),
    );
    let get = |token: String| {
        let (http, url) = (o.http.clone(), format!("{}{csv}", o.url));
        async move {
            let res = http.get(url).bearer_auth(token).send().await.unwrap();
            (res.status().as_u16(), res.text().await.unwrap())
        }
    };
    let (st, text) = get(o.viewer_token().to_string()).await;
    assert_eq!(st, 403, "{text}");
    let refused: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(refused["result"], "forbidden");
    assert!(refused["message"].as_str().unwrap().contains("manager"));
    assert!(audit_rows(&o, "batch_id", id, "export").await.is_empty());

    let (st, text) = get(manager).await;
    assert_eq!(st, 200);
    assert_eq!(text.lines().count(), 1 + 7);
    let rows = audit_rows(&o, "batch_id", id, "export").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["actor"], "admin");
    assert_eq!(rows[0]["params"], json!({"count": 7}));
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restock_sent_twice_with_one_key_adds_once_and_audits_once() {
    let o = TestOrigin::start().await;
    let manager = o.manager_token().to_string();
    let c = o.campaign("sale", 5).await;
    let path = format!("/admin/v1/campaigns/{c}");
    // Keys are kept a day per admin principal: fresh ones per run.
    let [r1, r2, c1, b1, n1] = ["r-1", "r-2", "c-1", "b-1", "n-1"].map(unique);
    let restock = |add: i64| json!({"action": "restock", "add": add});
    let stock = |o: &TestOrigin, c: String| {
        let db = o.db.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT stock FROM campaigns WHERE id = $1")
                .bind(c)
                .fetch_one(&db)
                .await
                .unwrap()
        }
    };

    // The same restock sent twice with one key (the first reply was lost).
    let mut replies = Vec::new();
    for _ in 0..2 {
        let (st, body, replayed) = o
            .admin_keyed(Method::PATCH, &path, &manager, Some(&r1), restock(3))
            .await;
        assert_eq!(st, 200, "{body}");
        replies.push((body, replayed));
    }
    assert_eq!((replies[0].1, replies[1].1), (false, true));
    assert_eq!(replies[0].0, replies[1].0);
    assert_eq!(stock(&o, c.clone()).await, 8);
    assert_eq!(audit_rows(&o, "campaign_id", &c, "restock").await.len(), 1);
    // The same key with another body: 422, nothing changes.
    let (st, reused, _) = o
        .admin_keyed(
            Method::PATCH,
            &path,
            &manager,
            Some(r1.as_str()),
            restock(4),
        )
        .await;
    assert_eq!(
        (st, reused["result"].as_str()),
        (422, Some("idempotency_key_reused"))
    );
    assert_eq!(stock(&o, c.clone()).await, 8);

    // Concurrent duplicates: one applies, the others replay it or are told it is in progress.
    let replies = join_all((0..10).map(|_| {
        o.admin_keyed(
            Method::PATCH,
            &path,
            &manager,
            Some(r2.as_str()),
            restock(2),
        )
    }))
    .await;
    for (st, body, _) in &replies {
        assert!(
            *st == 200 || (*st == 409 && body["result"] == "in_progress"),
            "{st} {body}"
        );
    }
    let fresh = replies.iter().filter(|(st, _, r)| *st == 200 && !r).count();
    assert_eq!(fresh, 1, "{replies:?}");
    assert_eq!(stock(&o, c.clone()).await, 10);
    assert_eq!(audit_rows(&o, "campaign_id", &c, "restock").await.len(), 2);

    // Without the header, writes behave as before: each one applies.
    for _ in 0..2 {
        let (st, _, _) = o
            .admin_keyed(Method::PATCH, &path, &manager, None, restock(1))
            .await;
        assert_eq!(st, 200);
    }
    assert_eq!(stock(&o, c.clone()).await, 12);

    // The other admin writes replay too: creating a code, a batch, a campaign.
    let code = unique("K").replace('-', "").to_uppercase();
    let new_code = json!({"code": code, "percent_off": 500, "currency": "EUR", "limit": 3,
                          "ends_at": chrono::Utc::now() + chrono::Duration::hours(1)});
    for replay in [false, true] {
        let (st, _, r) = o
            .admin_keyed(
                Method::POST,
                "/admin/v1/codes",
                &manager,
                Some(c1.as_str()),
                new_code.clone(),
            )
            .await;
        assert_eq!((st, r), (201, replay));
    }
    let new_batch = json!({"count": 2, "amount_off": 100, "currency": "EUR",
                           "ends_at": chrono::Utc::now() + chrono::Duration::hours(1)});
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (st, b, _) = o
            .admin_keyed(
                Method::POST,
                "/admin/v1/codes/batches",
                &manager,
                Some(b1.as_str()),
                new_batch.clone(),
            )
            .await;
        assert_eq!(st, 201, "{b}");
        ids.push(b["id"].clone());
    }
    assert_eq!(ids[0], ids[1]);
    let id = unique("camp");
    let new_campaign = json!({"id": id, "name": "N", "kind": "sale", "stock": 4,
        "starts_at": chrono::Utc::now(), "ends_at": chrono::Utc::now() + chrono::Duration::hours(1)});
    for replay in [false, true] {
        let (st, _, r) = o
            .admin_keyed(
                Method::POST,
                "/admin/v1/campaigns",
                &manager,
                Some(n1.as_str()),
                new_campaign.clone(),
            )
            .await;
        assert_eq!((st, r), (201, replay));
    }
    assert_eq!(audit_rows(&o, "campaign_id", &id, "create").await.len(), 1);
    // Keys are per admin principal, and a viewer cannot write with one.
    let (st, _, _) = o
        .admin_keyed(
            Method::PATCH,
            &path,
            o.viewer_token(),
            Some(r1.as_str()),
            restock(3),
        )
        .await;
    assert_eq!(st, 403);
    o.stop().await;
}

/// How long every origin may take to refuse a code disabled through another one.
const DISABLE_BOUND: Duration = Duration::from_secs(1);

/// Polls `o`'s check of `code` until it answers `status` with `reason` (when given); returns
/// how long that took, or panics at `DISABLE_BOUND`.
async fn until_check(o: &TestOrigin, code: &str, who: &str, status: u16) -> Duration {
    let started = Instant::now();
    let what = format!("the check of {code} to answer {status}");
    eventually(&what, DISABLE_BOUND, || async {
        let (st, body) = o.check_code(code, who).await;
        let reason_ok = status != 422 || body["reason"] == "disabled";
        if st == status && reason_ok {
            Ok(started.elapsed())
        } else {
            Err(format!("{st} {body}"))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_disabled_through_one_origin_is_refused_by_another_within_the_bound() {
    let (a, b) = (TestOrigin::start().await, TestOrigin::start().await);
    let manager = a.manager_token().to_string();
    let code = a.shared_code(10, true).await;
    let (ana, bob) = (unique("ana"), unique("bob"));
    assert_eq!(b.check_code(&code, &ana).await.0, 200);
    let path = format!("/admin/v1/codes/{code}");

    let (st, reply, _) = a
        .admin_keyed(
            Method::PATCH,
            &path,
            &manager,
            None,
            json!({"action": "disable"}),
        )
        .await;
    assert_eq!(st, 200, "{reply}");
    assert_eq!(reply["changed"], true);
    assert!(reply["code"]["disabled_at"].is_string());
    assert_eq!(reply["audit"]["action"], "disable");
    let took = until_check(&b, &code, &ana, 422).await;
    println!("disabled seen by the other origin after {took:?}");
    let (st, body) = b.use_code(&code, &ana, &unique("o"), "k1").await;
    assert_eq!(
        (st, body),
        (
            422,
            json!({"result": "not_applicable", "reason": "disabled"})
        )
    );
    assert_eq!(a.uses_left(&code).await, 10);
    // Disabling again changes nothing and writes no audit row.
    let (st, reply, _) = a
        .admin_keyed(
            Method::PATCH,
            &path,
            &manager,
            None,
            json!({"action": "disable"}),
        )
        .await;
    assert_eq!((st, &reply["changed"]), (200, &json!(false)));

    let (st, reply, _) = a
        .admin_keyed(
            Method::PATCH,
            &path,
            &manager,
            None,
            json!({"action": "enable"}),
        )
        .await;
    assert_eq!((st, &reply["code"]["disabled_at"]), (200, &Value::Null));
    until_check(&b, &code, &bob, 200).await;
    let (st, body) = b.use_code(&code, &bob, &unique("o"), "k2").await;
    assert_eq!(st, 201, "{body}");
    let rows = audit_rows(&a, "code", &code, "disable").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["actor"], "admin");
    assert_eq!(audit_rows(&a, "code", &code, "enable").await.len(), 1);

    // Bad input: unknown action 422, unknown code 404, a viewer 403; nothing changes.
    let (st, body, _) = a
        .admin_keyed(
            Method::PATCH,
            &path,
            &manager,
            None,
            json!({"action": "delete"}),
        )
        .await;
    assert_eq!(
        (st, body["result"].as_str()),
        (422, Some("validation_failed"))
    );
    let (st, body, _) = a
        .admin_keyed(
            Method::PATCH,
            "/admin/v1/codes/NOSUCHCODE42",
            &manager,
            None,
            json!({"action": "disable"}),
        )
        .await;
    assert_eq!((st, body["result"].as_str()), (404, Some("not_found")));
    let (st, body, _) = a
        .admin_keyed(
            Method::PATCH,
            &path,
            a.viewer_token(),
            None,
            json!({"action": "disable"}),
        )
        .await;
    assert_eq!((st, body["result"].as_str()), (403, Some("forbidden")));
    assert_eq!(b.check_code(&code, &ana).await.0, 200);
    a.stop().await;
    b.stop().await;
}
