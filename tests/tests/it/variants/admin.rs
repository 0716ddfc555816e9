//! Managing the variants of a campaign against a real origin over HTTP, real PostgreSQL and real
//! Redis: creation with variants, `PUT /admin/v1/campaigns/{id}/variants/{variant}` (audited,
//! idempotent, followed by the gate), and the bad inputs, each a documented 4xx that changes
//! nothing.

use flashgate_origin::cli::admin::{run, AdminArgs, AdminCommand};
use flashgate_origin::secret::Secret;
use flashgate_shared::api::{NewVariant, MAX_VARIANTS};
use flashgate_tests::support::variants::{
    claim_variant, create_variant_sale, gate_variant_remaining, variant_remaining, variant_sale,
};
use flashgate_tests::support::{assert_reconciled, unique, TestOrigin};
use reqwest::Method;
use serde_json::{json, Value};

/// `PUT …/variants/{v}` of `c` with the manager token and `body`; status, body, replayed.
async fn put(
    o: &TestOrigin,
    c: &str,
    v: &str,
    key: Option<&str>,
    body: Value,
) -> (u16, Value, bool) {
    let path = format!("/admin/v1/campaigns/{c}/variants/{v}");
    let token = o.manager_token().to_string();
    o.admin_keyed(Method::PUT, &path, &token, key, body).await
}

/// `POST /admin/v1/campaigns` with `body`; status and body.
async fn create(o: &TestOrigin, body: Value) -> (u16, Value) {
    let token = o.manager_token().to_string();
    o.admin(
        Method::POST,
        "/admin/v1/campaigns",
        Some(&token),
        Some(body),
    )
    .await
}

/// Rows of `c`'s audit trail with `action`.
async fn audited(o: &TestOrigin, c: &str, action: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM admin_audit WHERE campaign_id = $1 AND action = $2")
        .bind(c)
        .bind(action)
        .fetch_one(&o.db)
        .await
        .unwrap()
}

/// Whether campaign `c` exists in PostgreSQL.
async fn exists(o: &TestOrigin, c: &str) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM campaigns WHERE id = $1)")
        .bind(c)
        .fetch_one(&o.db)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn creation_with_variants_sums_their_stock_and_refuses_bad_lists() {
    let o = TestOrigin::start().await;
    let c = create_variant_sale(&o, &[("41", 3), ("42", 5)], 600, 2).await;
    let status = o.status(&c).await;
    assert_eq!(status["stock"], 8, "{status}");
    assert_eq!(o.remaining(&c).await, 8);
    assert_eq!(variant_remaining(&o, &c, "42").await, 5);
    assert_eq!(gate_variant_remaining(&o, &c, "41", 2).await, 3);

    // Each bad list is a 422 naming `variants`, and no campaign is created.
    let body = |variants: Value, stock: i64| {
        let mut b = serde_json::to_value(variant_sale(&[], 600, 1)).unwrap();
        b["variants"] = variants;
        b["stock"] = json!(stock);
        b
    };
    let many: Vec<NewVariant> = (0..=MAX_VARIANTS)
        .map(|i| NewVariant {
            id: format!("v{i}"),
            name: format!("V{i}"),
            stock: 1,
        })
        .collect();
    let bad = [
        (
            json!([{"id": "41", "name": "a", "stock": 1}, {"id": "41", "name": "b", "stock": 1}]),
            0,
        ),
        (
            json!([{"id": "41", "name": "a", "stock": -1}, {"id": "42", "name": "b", "stock": 2}]),
            0,
        ),
        (json!([{"id": "Big", "name": "a", "stock": 1}]), 0),
        (json!([{"id": "41", "name": "a", "stock": 2}]), 3),
        (json!([]), 0),
        (serde_json::to_value(&many).unwrap(), 0),
    ];
    for (variants, stock) in bad {
        let b = body(variants.clone(), stock);
        let id = b["id"].as_str().unwrap().to_string();
        let (s, reply) = create(&o, b).await;
        assert_eq!(
            (s, reply["result"].as_str()),
            (422, Some("validation_failed")),
            "{variants}: {reply}"
        );
        assert!(reply["message"].as_str().unwrap().contains("variants") || stock != 0);
        assert!(!exists(&o, &id).await, "{variants}: created anyway");
    }
    // Exactly the bound is accepted.
    let b = body(serde_json::to_value(&many[..MAX_VARIANTS]).unwrap(), 0);
    let (s, reply) = create(&o, b).await;
    assert_eq!(s, 201, "{reply}");
    assert_eq!(reply["stock"], json!(MAX_VARIANTS));
    // Closed at once: the gate audit of later tests need not visit it.
    let (s, closed) = o
        .change(reply["id"].as_str().unwrap(), json!({"action": "close"}))
        .await;
    assert_eq!(s, 200, "{closed}");
    // A restock of a campaign with variants is refused: its stock changes per variant.
    let (s, reply) = o.change(&c, json!({"action": "restock", "add": 2})).await;
    assert_eq!(
        (s, reply["result"].as_str()),
        (409, Some("conflict")),
        "{reply}"
    );
    assert_eq!(o.remaining(&c).await, 8);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_variant_is_added_and_changed_audited_idempotent_and_followed_by_the_gate() {
    let o = TestOrigin::start().await;
    let c = create_variant_sale(&o, &[("41", 1), ("42", 2)], 600, 1).await;
    let (ana, ben) = (unique("ana"), unique("ben"));
    let claim = |p: &str, key: &str, v: &'static str| {
        let (http, url, token, c) = (o.http.clone(), o.url.clone(), o.token(p), c.clone());
        let key = key.to_string();
        async move { claim_variant(&http, &url, &token, &c, &key, Some(v)).await }
    };

    // Added, with an Idempotency-Key: the retry replays it, one audit row.
    let body = json!({"name": "Size 43", "stock": 4});
    let key = format!("add-43-{c}");
    let (s, first, replayed) = put(&o, &c, "43", Some(&key), body.clone()).await;
    assert_eq!((s, replayed), (200, false), "{first}");
    assert_eq!(first["changed"], true);
    assert_eq!(first["gate"], "updated");
    assert_eq!(
        first["variant"],
        json!({"id": "43", "name": "Size 43", "stock": 4, "remaining": 4, "state": "active"})
    );
    assert_eq!(first["audit"]["action"], "set_variant");
    let (s, again, replayed) = put(&o, &c, "43", Some(&key), body.clone()).await;
    assert_eq!((s, replayed), (200, true));
    assert_eq!(again, first);
    assert_eq!(audited(&o, &c, "set_variant").await, 1);
    assert_eq!(o.remaining(&c).await, 7);
    assert_eq!(gate_variant_remaining(&o, &c, "43", 1).await, 4);
    let (s, b) = claim(&ana, "a1", "43").await;
    assert_eq!(
        (s, b["claim"]["variant"].as_str()),
        (201, Some("43")),
        "{b}"
    );
    // The same again without a key: unchanged, nothing written.
    let (s, same, _) = put(&o, &c, "43", None, body).await;
    assert_eq!((s, &same["changed"]), (200, &json!(false)), "{same}");
    assert_eq!(audited(&o, &c, "set_variant").await, 1);

    // Variant 41 sells out, then gets one more unit: the gate follows and it sells again.
    let (s, _) = claim(&ben, "b1", "41").await;
    assert_eq!(s, 201);
    let cid = unique("cid");
    let (s, b) = claim(&cid, "c1", "41").await;
    assert_eq!(
        (s, b),
        (409, json!({"result": "sold_out", "variant": "41"}))
    );
    let (s, b, _) = put(&o, &c, "41", None, json!({"name": "Size 41", "stock": 2})).await;
    assert_eq!((s, &b["variant"]["remaining"]), (200, &json!(1)), "{b}");
    let (s, b) = claim(&cid, "c2", "41").await;
    assert_eq!(
        (s, b["claim"]["variant"].as_str()),
        (201, Some("41")),
        "{b}"
    );

    // Lowered: 42 goes from 2 to 1 unit, the gate too.
    let (s, b, _) = put(&o, &c, "42", None, json!({"name": "Size 42", "stock": 1})).await;
    assert_eq!((s, &b["variant"]["stock"]), (200, &json!(1)), "{b}");
    assert_eq!(gate_variant_remaining(&o, &c, "42", 1).await, 1);
    assert_eq!(o.remaining(&c).await, 4);
    let stock: i64 = sqlx::query_scalar("SELECT stock FROM campaigns WHERE id = $1")
        .bind(&c)
        .fetch_one(&o.db)
        .await
        .unwrap();
    let sum: i64 = sqlx::query_scalar(
        "SELECT sum(stock)::bigint FROM campaign_variants WHERE campaign_id = $1",
    )
    .bind(&c)
    .fetch_one(&o.db)
    .await
    .unwrap();
    assert_eq!((stock, sum), (7, 7));
    assert_reconciled(&o, &c).await;
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_variant_changes_are_refused_and_change_nothing() {
    let o = TestOrigin::start().await;
    let c = create_variant_sale(&o, &[("41", 2)], 600, 1).await;
    let p = unique("ana");
    let token = o.token(&p);
    let (s, _) = claim_variant(&o.http, &o.url, &token, &c, "k", Some("41")).await;
    assert_eq!(s, 201);
    let plain = o.campaign("sale", 3).await;

    let cases = [
        (
            c.as_str(),
            "41",
            json!({"name": "Size 41", "stock": 0}),
            409,
            "conflict",
        ),
        (
            c.as_str(),
            "41",
            json!({"name": "Size 41", "stock": -1}),
            422,
            "validation_failed",
        ),
        (
            c.as_str(),
            "Big",
            json!({"name": "Big", "stock": 1}),
            422,
            "validation_failed",
        ),
        (
            c.as_str(),
            "41",
            json!({"name": "", "stock": 3}),
            422,
            "validation_failed",
        ),
        (
            c.as_str(),
            "41",
            json!({"stock": 3}),
            422,
            "validation_failed",
        ),
        (
            plain.as_str(),
            "41",
            json!({"name": "a", "stock": 1}),
            409,
            "conflict",
        ),
        (
            "no-such-campaign",
            "41",
            json!({"name": "a", "stock": 1}),
            404,
            "not_found",
        ),
    ];
    for (camp, v, body, status, result) in cases {
        let (s, b, _) = put(&o, camp, v, None, body.clone()).await;
        assert_eq!(
            (s, b["result"].as_str()),
            (status, Some(result)),
            "{body}: {b}"
        );
    }
    assert_eq!(audited(&o, &c, "set_variant").await, 0);
    assert_eq!(variant_remaining(&o, &c, "41").await, 1);
    assert_eq!(o.remaining(&c).await, 1);
    assert_eq!(o.remaining(&plain).await, 3);
    // The last stocked variant down to 0 would leave the campaign no stock: a 422 naming
    // `stock`, not the database's refusal.
    let lone = create_variant_sale(&o, &[("x", 2), ("y", 0)], 600, 1).await;
    let (s, b, _) = put(&o, &lone, "x", None, json!({"name": "X", "stock": 0})).await;
    assert_eq!(
        (s, b["result"].as_str()),
        (422, Some("validation_failed")),
        "{b}"
    );
    assert!(
        b["message"].as_str().unwrap_or("").starts_with("stock:"),
        "{b}"
    );
    assert_eq!(variant_remaining(&o, &lone, "x").await, 2);
    assert_eq!(audited(&o, &lone, "set_variant").await, 0);

    // Ended: no change at all.
    let (s, b) = o.change(&c, json!({"action": "close"})).await;
    assert_eq!(s, 200, "{b}");
    let (s, b, _) = put(&o, &c, "41", None, json!({"name": "Size 41", "stock": 5})).await;
    assert_eq!((s, b["result"].as_str()), (409, Some("conflict")), "{b}");
    let (s, b, _) = put(&o, &c, "44", None, json!({"name": "Size 44", "stock": 5})).await;
    assert_eq!((s, b["result"].as_str()), (409, Some("conflict")), "{b}");
    assert_eq!(audited(&o, &c, "set_variant").await, 0);
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM campaign_variants WHERE campaign_id = $1")
            .bind(&c)
            .fetch_one(&o.db)
            .await
            .unwrap();
    assert_eq!(count, 1);
    o.stop().await;
}

/// `flashgate admin create --variant …` and `flashgate admin variant …` reach the admin API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_creates_with_variants_and_sets_one() {
    let o = TestOrigin::start().await;
    let id = unique("cli");
    let args = |command| AdminArgs {
        origin_url: o.url.clone(),
        token: Some(Secret::new(o.manager_token())),
        idempotency_key: None,
        command,
    };
    let create = AdminCommand::Create {
        id: id.clone(),
        name: "Sneakers".into(),
        kind: flashgate_shared::api::CampaignKind::Sale,
        stock: None,
        starts_at: None,
        ends_at: chrono::Utc::now() + chrono::Duration::hours(1),
        hold_seconds: None,
        gate_shards: None,
        variants: vec![
            NewVariant {
                id: "41".into(),
                name: "Size 41".into(),
                stock: 2,
            },
            NewVariant {
                id: "42".into(),
                name: "Size 42".into(),
                stock: 3,
            },
        ],
        access: Default::default(),
    };
    assert_eq!(run(args(create)).await, 0);
    assert_eq!(o.remaining(&id).await, 5);
    let set = AdminCommand::Variant {
        campaign: id.clone(),
        variant: "43".into(),
        name: "Size 43".into(),
        stock: 1,
    };
    assert_eq!(run(args(set)).await, 0);
    assert_eq!(o.remaining(&id).await, 6);
    assert_eq!(variant_remaining(&o, &id, "43").await, 1);
    o.stop().await;
}
