//! Giveaway coupons redeemed in store (`POST /api/v1/coupons/{code}/redeem`) against a real
//! origin, PostgreSQL and Redis: single use under concurrent redeems, the POS idempotency key,
//! bad input, and the coupon with its QR payload. Reads the database back and reconciles.

use flashgate_shared::api::RedeemRequest;
use flashgate_tests::support::stop_reconciled;
use flashgate_tests::support::{unique, TestOrigin};
use futures::future::join_all;
use serde_json::Value;

/// `n` new customers claim giveaway `c` at once; returns their coupon codes.
async fn coupons(o: &TestOrigin, c: &str, n: usize) -> Vec<String> {
    let won = o.winners(c, n).await;
    won.iter()
        .map(|w| w["code"].as_str().unwrap().to_string())
        .collect()
}

/// Redeems `code` with POS key `key` (and the service token); returns status and raw body.
async fn redeem(o: &TestOrigin, code: &str, key: &str) -> (u16, String) {
    let res = o
        .http
        .post(format!("{}/api/v1/coupons/{code}/redeem", o.url))
        .bearer_auth(o.config.service_token.expose())
        .header("idempotency-key", key)
        .json(&RedeemRequest {
            store: Some("store-17".into()),
        })
        .send()
        .await
        .expect("redeem");
    (res.status().as_u16(), res.text().await.expect("body"))
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).expect("JSON body")
}

async fn row(o: &TestOrigin, code: &str) -> (String, Option<chrono::DateTime<chrono::Utc>>) {
    sqlx::query_as("SELECT status, redeemed_at FROM claims WHERE code = $1")
        .bind(code)
        .fetch_one(&o.db)
        .await
        .expect("coupon row")
}

async fn redeemed_events(o: &TestOrigin, code: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM ledger l JOIN claims c ON c.id = l.claim_id
          WHERE c.code = $1 AND l.event = 'redeemed'",
    )
    .bind(code)
    .fetch_one(&o.db)
    .await
    .expect("ledger")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redeeming_one_coupon_twice_at_once_gives_one_200_and_one_409() {
    let o = TestOrigin::start().await;
    let c = o.campaign("giveaway", 20).await;
    let codes = coupons(&o, &c, 20).await;
    let run = unique("pos");
    // Every coupon redeemed by two terminals at the same moment: 40 requests at once.
    let replies = join_all(codes.iter().flat_map(|code| {
        let o = &o;
        let run = &run;
        (0..2).map(move |t| async move {
            (
                code.clone(),
                redeem(o, code, &format!("{run}-{code}-{t}")).await,
            )
        })
    }))
    .await;
    for code in &codes {
        let mine: Vec<&(u16, String)> = replies
            .iter()
            .filter(|(c, _)| c == code)
            .map(|(_, r)| r)
            .collect();
        let ok: Vec<Value> = mine
            .iter()
            .filter(|r| r.0 == 200)
            .map(|r| parse(&r.1))
            .collect();
        let again: Vec<Value> = mine
            .iter()
            .filter(|r| r.0 == 409)
            .map(|r| parse(&r.1))
            .collect();
        assert_eq!((ok.len(), again.len()), (1, 1), "{mine:?}");
        assert_eq!(ok[0]["result"], "redeemed");
        assert_eq!(ok[0]["code"], code.as_str());
        assert_eq!(again[0]["result"], "already_redeemed");
        assert_eq!(again[0]["redeemed_at"], ok[0]["redeemed_at"]);
        let (status, at) = row(&o, code).await;
        assert_eq!(status, "redeemed");
        let at: chrono::DateTime<chrono::Utc> = at.expect("redeemed_at stored");
        let replied: chrono::DateTime<chrono::Utc> =
            ok[0]["redeemed_at"].as_str().unwrap().parse().unwrap();
        assert_eq!(at, replied);
        assert_eq!(redeemed_events(&o, code).await, 1);
    }
    let actor: String = sqlx::query_scalar(
        "SELECT actor FROM ledger WHERE campaign_id = $1 AND event = 'redeemed' LIMIT 1",
    )
    .bind(&c)
    .fetch_one(&o.db)
    .await
    .unwrap();
    assert_eq!(actor, "pos:store-17");
    assert_eq!(o.claim_rows(&c, &["redeemed"]).await, 20);
    assert_eq!(o.remaining(&c).await, 0);
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_pos_key_gets_the_same_reply() {
    let o = TestOrigin::start().await;
    let c = o.campaign("giveaway", 3).await;
    let codes = coupons(&o, &c, 3).await;
    let key = unique("pos-key");
    let first = redeem(&o, &codes[0], &key).await;
    assert_eq!(first.0, 200, "{}", first.1);
    assert_eq!(redeem(&o, &codes[0], &key).await, first, "byte for byte");
    // Another key on the redeemed coupon: 409 with the first redeemed_at.
    let (s, b) = redeem(&o, &codes[0], &unique("pos-key")).await;
    assert_eq!(s, 409);
    assert_eq!(parse(&b)["redeemed_at"], parse(&first.1)["redeemed_at"]);
    // That key with another coupon: 422, and the other coupon is untouched.
    let (s, b) = redeem(&o, &codes[1], &key).await;
    assert_eq!(
        (s, parse(&b)["result"].as_str()),
        (422, Some("idempotency_key_reused"))
    );
    assert_eq!(row(&o, &codes[1]).await, ("issued".to_string(), None));
    // Ten retries of one key at once: one redeem, ten identical replies.
    let key2 = unique("pos-key");
    let replies = join_all((0..10).map(|_| redeem(&o, &codes[2], &key2))).await;
    assert_eq!(replies[0].0, 200, "{}", replies[0].1);
    assert!(replies.iter().all(|r| *r == replies[0]), "{replies:?}");
    assert_eq!(redeemed_events(&o, &codes[2]).await, 1);
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM redeem_requests WHERE idempotency_key = $1")
            .bind(&key2)
            .fetch_one(&o.db)
            .await
            .unwrap();
    assert_eq!(stored, 1);
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_redeem_requests_change_nothing() {
    let o = TestOrigin::start().await;
    let c = o.campaign("giveaway", 1).await;
    let code = coupons(&o, &c, 1).await.remove(0);
    let service = o.config.service_token.expose().to_string();
    let key = unique("bad-key");
    let send = |path_code: String,
                token: Option<String>,
                key: Option<String>,
                ctype: &'static str,
                body: &'static str| {
        let mut req = o
            .http
            .post(format!("{}/api/v1/coupons/{path_code}/redeem", o.url))
            .header("content-type", ctype)
            .body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(k) = key {
            req = req.header("idempotency-key", k);
        }
        async move {
            let res = req.send().await.expect("request");
            let s = res.status().as_u16();
            let b: Value = res.json().await.expect("JSON body");
            (s, b)
        }
    };
    let json = "application/json";
    let (svc, k) = (Some(service.clone()), Some(key.clone()));
    let cases = vec![
        (
            401,
            "unauthorized",
            send(code.clone(), None, k.clone(), json, "{}").await,
        ),
        (
            403,
            "forbidden",
            send(code.clone(), Some("nope".into()), k.clone(), json, "{}").await,
        ),
        (
            400,
            "invalid_idempotency_key",
            send(code.clone(), svc.clone(), None, json, "{}").await,
        ),
        (
            400,
            "invalid_idempotency_key",
            send(code.clone(), svc.clone(), Some("k".repeat(256)), json, "{}").await,
        ),
        (
            404,
            "not_found",
            send("ABCDEFGHJKLM".into(), svc.clone(), k.clone(), json, "{}").await,
        ),
        (
            404,
            "not_found",
            send("short".into(), svc.clone(), k.clone(), json, "{}").await,
        ),
        (
            400,
            "invalid_json",
            send(code.clone(), svc.clone(), k.clone(), json, "{").await,
        ),
        (
            422,
            "validation_failed",
            send(code.clone(), svc.clone(), k.clone(), json, r#"{"till":1}"#).await,
        ),
        (
            422,
            "validation_failed",
            send(
                code.clone(),
                svc.clone(),
                k.clone(),
                json,
                r#"{"store":"a b"}"#,
            )
            .await,
        ),
        (
            415,
            "unsupported_media_type",
            send(code.clone(), svc.clone(), k.clone(), "text/plain", "{}").await,
        ),
    ];
    for (want_s, want_r, (s, b)) in cases {
        assert_eq!((s, b["result"].as_str()), (want_s, Some(want_r)), "{b}");
        assert!(b["message"].is_string(), "{b}");
    }
    assert_eq!(row(&o, &code).await, ("issued".to_string(), None));
    assert_eq!(redeemed_events(&o, &code).await, 0);
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM redeem_requests WHERE idempotency_key = $1")
            .bind(&key)
            .fetch_one(&o.db)
            .await
            .unwrap();
    assert_eq!(stored, 0, "refused requests store no reply");
    // The key is still free: a lower-case code (normalised) without a body redeems.
    let res = o
        .http
        .post(format!(
            "{}/api/v1/coupons/{}/redeem",
            o.url,
            code.to_lowercase()
        ))
        .bearer_auth(&service)
        .header("idempotency-key", &key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(row(&o, &code).await.0, "redeemed");
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coupon_shows_its_qr_payload() {
    let o = TestOrigin::start().await;
    let c = o.campaign("giveaway", 1).await;
    let code = coupons(&o, &c, 1).await.remove(0);
    let get = |code: String, token: Option<String>| {
        let mut req = o.http.get(format!("{}/api/v1/coupons/{code}", o.url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move {
            let res = req.send().await.unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    let service = Some(o.config.service_token.expose().to_string());
    let (s, b) = get(code.clone(), service.clone()).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["qr"], format!("flashgate:coupon:{code}"));
    assert_eq!(b["status"], "issued");
    assert_eq!(b["campaign"], c.as_str());
    assert!(b["redeemed_at"].is_null());
    assert_eq!(get(code.clone(), None).await.0, 401);
    assert_eq!(get("ABCDEFGHJKLM".into(), service.clone()).await.0, 404);
    assert_eq!(redeem(&o, &code, &unique("k")).await.0, 200);
    let (_, b) = get(code.clone(), service).await;
    assert_eq!(b["status"], "redeemed");
    assert!(b["redeemed_at"].is_string());
    o.stop().await;
}
