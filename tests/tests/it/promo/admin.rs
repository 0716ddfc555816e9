//! Promo codes and admin writes against in-process origins over HTTP with the
//! machine's real PostgreSQL and Redis: one use per (code, order), the audited batch export
//! that needs a manager, `Idempotency-Key` on admin writes, disabling a code, and codes typed
//! in lower or mixed case.

use std::time::{Duration, Instant};

use flashgate_shared::api::promo::CodeChange;
use flashgate_shared::api::{CampaignKind, ChangeRequest, NewCampaign};
use flashgate_tests::support::{self, eventually, unique, TestOrigin};
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

/// `PATCH {path}` of a code with `{"action": action}` (a [`CodeChange`]) and `token`, no
/// idempotency key: status, JSON body and whether it was a replay.
async fn code_change(o: &TestOrigin, path: &str, token: &str, action: &str) -> (u16, Value, bool) {
    let body = CodeChange {
        action: action.into(),
    };
    o.admin_keyed(Method::PATCH, path, token, None, body).await
}

/// One admin write: method, path, `Idempotency-Key` (when given) and JSON body.
struct Write {
    method: Method,
    path: String,
    key: Option<String>,
    body: Value,
}

impl Write {
    /// A write of `body` (a wire type) to `path`.
    fn new(method: Method, path: &str, key: Option<&str>, body: impl serde::Serialize) -> Self {
        Write {
            method,
            path: path.into(),
            key: key.map(str::to_string),
            body: serde_json::to_value(body).expect("body"),
        }
    }

    /// Sends it with `token`: status, JSON body and whether it was a replay.
    async fn send(&self, o: &TestOrigin, token: &str) -> (u16, Value, bool) {
        let (method, path, body) = (self.method.clone(), &self.path, self.body.clone());
        o.admin_keyed(method, path, token, self.key.as_deref(), body)
            .await
    }

    /// Sends it twice, one after the other (as a client whose first reply was lost).
    async fn twice(&self, o: &TestOrigin, token: &str) -> [(u16, Value, bool); 2] {
        [self.send(o, token).await, self.send(o, token).await]
    }
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
    let body = support::new_batch(7, 2000);
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
    let restock = ChangeRequest::restock;
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
    let patch =
        |key: Option<&str>, body: ChangeRequest| Write::new(Method::PATCH, &path, key, body);

    // The same restock sent twice with one key (the first reply was lost).
    let [(st1, first, replayed1), (st2, second, replayed2)] =
        patch(Some(&r1), restock(3)).twice(&o, &manager).await;
    assert_eq!((st1, st2), (200, 200), "{first} {second}");
    assert_eq!((replayed1, replayed2), (false, true));
    assert_eq!(first, second);
    assert_eq!(stock(&o, c.clone()).await, 8);
    assert_eq!(audit_rows(&o, "campaign_id", &c, "restock").await.len(), 1);
    // The same key with another body: 422, nothing changes.
    let (st, reused, _) = patch(Some(&r1), restock(4)).send(&o, &manager).await;
    assert_eq!(
        (st, reused["result"].as_str()),
        (422, Some("idempotency_key_reused"))
    );
    assert_eq!(stock(&o, c.clone()).await, 8);

    // Concurrent duplicates: one applies, the others replay it or are told it is in progress.
    let dup = patch(Some(&r2), restock(2));
    let replies = join_all((0..10).map(|_| dup.send(&o, &manager))).await;
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
    for (st, body, _) in patch(None, restock(1)).twice(&o, &manager).await {
        assert_eq!(st, 200, "{body}");
    }
    assert_eq!(stock(&o, c.clone()).await, 12);

    // The other admin writes replay too: creating a code, a batch, a campaign.
    let in_an_hour = chrono::Utc::now() + chrono::Duration::hours(1);
    let code = unique("K").replace('-', "").to_uppercase();
    let mut new_code = support::new_code(&code, 3);
    new_code.offer.currency = "EUR".into();
    new_code.offer.percent_off = Some(500);
    let new_batch = support::new_batch(2, 100);
    let [(st1, batch1, _), (st2, batch2, _)] = Write::new(
        Method::POST,
        "/admin/v1/codes/batches",
        Some(&b1),
        new_batch,
    )
    .twice(&o, &manager)
    .await;
    assert_eq!((st1, st2), (201, 201), "{batch1} {batch2}");
    assert_eq!(batch1["id"], batch2["id"]);
    let id = unique("camp");
    let new_campaign = NewCampaign {
        id: id.clone(),
        name: "N".into(),
        kind: CampaignKind::Sale,
        stock: 4,
        starts_at: chrono::Utc::now(),
        ends_at: in_an_hour,
        hold_seconds: None,
        hold_extension_seconds: None,
        gate_shards: None,
        waiting_room: None,
        access: None,
        draw: None,
        variants: None,
    };
    for write in [
        Write::new(Method::POST, "/admin/v1/codes", Some(&c1), new_code),
        Write::new(Method::POST, "/admin/v1/campaigns", Some(&n1), new_campaign),
    ] {
        let replies = write.twice(&o, &manager).await;
        let replays = replies.map(|(st, _, r)| (st, r));
        assert_eq!(replays, [(201, false), (201, true)], "{}", write.path);
    }
    assert_eq!(audit_rows(&o, "campaign_id", &id, "create").await.len(), 1);
    // Keys are per admin principal, and a viewer cannot write with one.
    let (st, _, _) = patch(Some(&r1), restock(3))
        .send(&o, o.viewer_token())
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

    let (st, reply, _) = code_change(&a, &path, &manager, "disable").await;
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
    let (st, reply, _) = code_change(&a, &path, &manager, "disable").await;
    assert_eq!((st, &reply["changed"]), (200, &json!(false)));

    let (st, reply, _) = code_change(&a, &path, &manager, "enable").await;
    assert_eq!((st, &reply["code"]["disabled_at"]), (200, &Value::Null));
    until_check(&b, &code, &bob, 200).await;
    let (st, body) = b.use_code(&code, &bob, &unique("o"), "k2").await;
    assert_eq!(st, 201, "{body}");
    let rows = audit_rows(&a, "code", &code, "disable").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["actor"], "admin");
    assert_eq!(audit_rows(&a, "code", &code, "enable").await.len(), 1);

    // Bad input: unknown action 422, unknown code 404, a viewer 403; nothing changes.
    let (st, body, _) = code_change(&a, &path, &manager, "delete").await;
    assert_eq!(
        (st, body["result"].as_str()),
        (422, Some("validation_failed"))
    );
    let (st, body, _) = code_change(&a, "/admin/v1/codes/NOSUCHCODE42", &manager, "disable").await;
    assert_eq!((st, body["result"].as_str()), (404, Some("not_found")));
    let (st, body, _) = code_change(&a, &path, a.viewer_token(), "disable").await;
    assert_eq!((st, body["result"].as_str()), (403, Some("forbidden")));
    assert_eq!(b.check_code(&code, &ana).await.0, 200);
    a.stop().await;
    b.stop().await;
}

/// Codes are typed by people: a promo code created, read, checked and used in lower or mixed
/// case is the one upper-case code, as docs/API.md says next to the code rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codes_are_case_insensitive_as_documented() {
    let doc = std::fs::read_to_string(support::repo_root().join("docs/API.md")).expect("API.md");
    let rule = doc
        .split("\n\n")
        .find(|p| p.contains("code `[A-Z0-9]{1,64}`"))
        .expect("the paragraph of the text rules");
    assert!(rule.contains("case-insensitive"), "{rule}");
    let o = TestOrigin::start().await;
    let upper = support::fresh_code_name("LC");
    let lower = upper.to_lowercase();
    let mixed: String = upper
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if i % 2 == 0 {
                c.to_ascii_lowercase()
            } else {
                c
            }
        })
        .collect();
    let r = o.create_code(&support::new_code(&lower, 5)).await;
    assert_eq!(
        (r.status, r.body["code"].as_str()),
        (201, Some(upper.as_str())),
        "{}",
        r.body
    );
    let (s, b) = o.admin_code(&mixed).await;
    assert_eq!((s, b["code"].as_str()), (200, Some(upper.as_str())), "{b}");
    let shopper = o.shopper();
    let r = o.check(&shopper, &format!(" {lower} "), 6000).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (s, used) = o.use_code(&mixed, &unique("ana"), &unique("o"), "k").await;
    assert_eq!(s, 201, "{used}");
    assert_eq!(o.uses_left(&upper).await, 4);
    o.stop().await;
}
