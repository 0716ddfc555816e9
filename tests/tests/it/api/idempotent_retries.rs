//! Retries re-serialised by the client (docs/ARCHITECTURE.md, "Idempotency"): a retry with the same
//! `Idempotency-Key` whose body is the same JSON in other bytes (white space, key order) gets
//! the first reply again; a body that differs in a value is still 422 `idempotency_key_reused`.
//! Real origin over HTTP, real PostgreSQL and Redis.

use flashgate_tests::support::{send_raw, unique, RawReply, TestOrigin};
use reqwest::Method;

async fn claim_with_body(
    o: &TestOrigin,
    campaign: &str,
    token: &str,
    key: &str,
    body: &str,
) -> RawReply {
    send_raw(
        &o.http,
        Method::POST,
        &format!("{}/api/v1/campaigns/{campaign}/claims", o.url),
        Some(token),
        &[
            ("content-type", "application/json".into()),
            ("idempotency-key", key.into()),
        ],
        body.to_string(),
    )
    .await
}

async fn use_with_body(o: &TestOrigin, code: &str, token: &str, key: &str, body: &str) -> RawReply {
    send_raw(
        &o.http,
        Method::POST,
        &format!("{}/api/v1/codes/{code}/use", o.url),
        Some(token),
        &[
            ("content-type", "application/json".into()),
            ("idempotency-key", key.into()),
            ("cf-connecting-ip", "10.9.8.7".into()),
        ],
        body.to_string(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_retried_with_equal_json_in_other_bytes_replays_the_first_reply() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 5).await;
    let ana = unique("ana");
    let token = o.token(&ana);
    let first = claim_with_body(&o, &c, &token, "K", "{}").await;
    assert_eq!(first.status, 201, "{}", first.body);
    for retry in ["{ }", " {\n}\r\n", "{\t}"] {
        let again = claim_with_body(&o, &c, &token, "K", retry).await;
        assert_eq!(again.status, 201, "retry {retry:?}: {}", again.body);
        assert_eq!(
            again.body, first.body,
            "retry {retry:?} replays the first reply"
        );
    }
    // Still one claim and one unit taken.
    assert_eq!(o.claim_rows(&c, &[]).await, 1);
    assert_eq!(o.remaining(&c).await, 4);
    // The same key on another campaign is another request: refused, nothing taken there.
    let other = o.campaign("sale", 5).await;
    let reused = claim_with_body(&o, &other, &token, "K", "{ }").await;
    assert_eq!(reused.status, 422, "{}", reused.body);
    assert_eq!(reused.body["result"], "idempotency_key_reused");
    assert_eq!(o.claim_rows(&other, &[]).await, 0);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_use_retried_with_reordered_keys_replays_and_another_value_is_key_reused() {
    let o = TestOrigin::start().await;
    let code = o.shared_code(10, true).await;
    let token = o.token(&unique("bea"));
    let first = use_with_body(
        &o,
        &code,
        &token,
        "U1",
        r#"{"order":"o-1","cart_total":6000}"#,
    )
    .await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.body["discount"], 600);
    let reordered = use_with_body(
        &o,
        &code,
        &token,
        "U1",
        "{ \"cart_total\" : 6000 ,\n  \"order\" : \"o-1\" }",
    )
    .await;
    assert_eq!(reordered.status, 201, "{}", reordered.body);
    assert_eq!(
        reordered.body, first.body,
        "the first reply again, same use"
    );
    let changed = use_with_body(
        &o,
        &code,
        &token,
        "U1",
        r#"{"cart_total":6001,"order":"o-1"}"#,
    )
    .await;
    assert_eq!(changed.status, 422, "{}", changed.body);
    assert_eq!(changed.body["result"], "idempotency_key_reused");
    let uses: i64 = sqlx::query_scalar("SELECT count(*) FROM coupon_uses WHERE code = $1")
        .bind(&code)
        .fetch_one(&o.db)
        .await
        .expect("count uses");
    assert_eq!(uses, 1, "one use however the retries were written");
    o.stop().await;
}
