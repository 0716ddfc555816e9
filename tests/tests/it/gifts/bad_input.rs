//! Bad input to the gift API gets the documented 4xx and changes nothing: a malformed MSISDN,
//! an unknown campaign, a missing key, a huge body, wrong tokens and roles, bad admin values.
//! Also the members PUT: idempotent, `{added, already}`.

use flashgate_tests::gifts::{self, campaign, fulfil, key, members, msisdn, row_counts};
use reqwest::Method;
use serde_json::{json, Value};

async fn post(
    o: &flashgate_tests::support::TestOrigin,
    path: &str,
    token: Option<&str>,
    key: Option<&str>,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let mut req = o
        .http
        .post(format!("{}{path}", o.url))
        .header("content-type", content_type)
        .body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(k) = key {
        req = req.header("idempotency-key", k);
    }
    let res = req.send().await.unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

/// One fulfilment request of the bad-input table.
struct Req {
    path: String,
    token: Option<String>,
    key: Option<&'static str>,
    content_type: &'static str,
    body: Vec<u8>,
}

#[tokio::test]
async fn bad_fulfilment_requests_get_a_4xx_and_change_nothing() {
    let (o, c, m) = gifts::one_member_one_a_day().await;
    let before = row_counts(&o, &c).await;
    let service = o.config.service_token.expose().to_string();
    let path = format!("/api/v1/gift-campaigns/{c}/fulfilments");
    let body = |m: &str| serde_json::to_vec(&json!({ "msisdn": m })).unwrap();
    // Each case is a good request with one thing broken, and the status and result it gets.
    let good = || Req {
        path: path.clone(),
        token: Some(service.clone()),
        key: Some("k1"),
        content_type: "application/json",
        body: body(&m),
    };
    let campaign_path = |id: &str| format!("/api/v1/gift-campaigns/{id}/fulfilments");
    let huge = json!({"msisdn": m, "pad": "x".repeat(100_000)});
    // (answer, result, request)
    #[rustfmt::skip]
    let cases: Vec<(u16, &str, Req)> = vec![
        (401, "unauthorized", Req { token: None, ..good() }),
        (403, "forbidden", Req { token: Some(o.manager_token().to_string()), ..good() }),
        (400, "invalid_idempotency_key", Req { key: None, ..good() }),
        (415, "unsupported_media_type", Req { content_type: "text/plain", ..good() }),
        (413, "payload_too_large", Req { body: serde_json::to_vec(&huge).unwrap(), ..good() }),
        (400, "invalid_json", Req { body: b"{".to_vec(), ..good() }),
        (422, "validation_failed", Req { body: b"{}".to_vec(), ..good() }),
        (422, "validation_failed", Req { body: body("+201000000001"), ..good() }),
        (422, "validation_failed", Req { body: body("2010"), ..good() }),
        (422, "validation_failed", Req { body: body("2010000000011234"), ..good() }),
        (422, "validation_failed", Req { body: body("20100000000a"), ..good() }),
        (404, "not_found", Req { path: campaign_path("NO_SUCH_CAMPAIGN"), ..good() }),
        (404, "not_found", Req { path: campaign_path("bad%20id"), ..good() }),
    ];
    for (i, (status, result, r)) in cases.into_iter().enumerate() {
        let (s, b) = post(
            &o,
            &r.path,
            r.token.as_deref(),
            r.key,
            r.content_type,
            r.body,
        )
        .await;
        assert_eq!(
            (s, b["result"].as_str()),
            (status, Some(result)),
            "case {i}: {b}"
        );
        assert!(b["message"].is_string(), "case {i}: {b}");
    }
    assert_eq!(row_counts(&o, &c).await, before, "nothing was written");
    // The eligibility preview refuses a malformed or missing msisdn.
    for q in ["msisdn=12", "", "msisdn=%2B201000000001"] {
        let res = o
            .http
            .get(format!(
                "{}/api/v1/gift-campaigns/{c}/eligibility?{q}",
                o.url
            ))
            .bearer_auth(&service)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 422, "{q}");
    }
    // Unknown fulfilment ids.
    for id in ["nope", "00000000-0000-0000-0000-000000000000"] {
        let res = o
            .http
            .get(format!("{}/api/v1/fulfilments/{id}", o.url))
            .bearer_auth(&service)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 404);
    }
    // A good request still works afterwards.
    assert_eq!(fulfil(&o, &c, &key(), &m).await.status, 201);
    o.stop().await;
}

#[tokio::test]
async fn bad_admin_writes_get_a_4xx_and_change_nothing() {
    let o = gifts::gift_origin().await;
    let c = campaign(&o, &[("s1", 2_000, &[(1, 1)])]).await;
    let before = row_counts(&o, &c).await;
    let (mgr, viewer) = (Some(o.manager_token()), Some(o.viewer_token()));
    let (post, patch, put) = (Method::POST, Method::PATCH, Method::PUT);
    let campaigns = "/admin/v1/gift-campaigns";
    let segments = format!("{campaigns}/{c}/segments");
    let (s1, nope) = (format!("{segments}/s1"), format!("{segments}/nope"));
    let (s1_members, nope_members) = (format!("{s1}/members"), format!("{nope}/members"));
    let gift = |amount: i64, currency: &str| json!({"amount": amount, "currency": currency});
    let new_s2 = json!({"id": "s2", "gift": gift(100, "EGP")});
    let with_caps = |caps: Value| json!({"id": "s2", "gift": gift(100, "EGP"), "caps": caps});
    let new_campaign = |id: &str, starts: &str, ends: &str| {
        json!({"id": id, "name": "x", "starts_at": format!("{starts}-01-01T00:00:00Z"),
               "ends_at": format!("{ends}-01-01T00:00:00Z")})
    };
    // (answer, method, path, token, body)
    #[rustfmt::skip]
    let cases: Vec<(u16, Method, &str, Option<&str>, Value)> = vec![
        (403, post.clone(), &segments, viewer, json!({"id": "s2", "gift": gift(1, "EGP")})),
        (401, post.clone(), &segments, None, json!({"id": "s2", "gift": gift(1, "EGP")})),
        (422, post.clone(), &segments, mgr, json!({"id": "s2", "gift": gift(0, "EGP")})),
        (422, post.clone(), &segments, mgr, json!({"id": "s2", "gift": gift(100, "egp")})),
        (422, post.clone(), &segments, mgr, with_caps(json!([{"max": 0, "per_days": 1}]))),
        (422, post.clone(), &segments, mgr,
         with_caps(json!([{"max": 1, "per_days": 1}, {"max": 2, "per_days": 1}]))),
        (422, post.clone(), &segments, mgr, json!({"id": "s 2", "gift": gift(100, "EGP")})),
        (409, post.clone(), &segments, mgr, json!({"id": "s1", "gift": gift(100, "EGP")})),
        (404, post.clone(), "/admin/v1/gift-campaigns/NOPE_X/segments", mgr, new_s2.clone()),
        (422, patch.clone(), &s1, mgr, json!({"caps": [{"max": 1, "per_days": 0}]})),
        (404, patch.clone(), &nope, mgr, json!({"caps": []})),
        (422, put.clone(), &s1_members, mgr, json!({"msisdns": ["201000000001", "+201000000002"]})),
        (422, put.clone(), &s1_members, mgr, json!({"msisdns": ["1234567"]})),
        (404, put.clone(), &nope_members, mgr, json!({"msisdns": ["201000000001"]})),
        (403, put.clone(), &s1_members, viewer, json!({"msisdns": ["201000000001"]})),
        (409, post.clone(), campaigns, mgr, new_campaign(&c, "2026", "2027")),
        (422, post.clone(), campaigns, mgr, new_campaign("BAD ID", "2026", "2027")),
        (422, post.clone(), campaigns, mgr, new_campaign("ENDS_FIRST", "2027", "2026")),
    ];
    for (i, (status, method, path, token, body)) in cases.into_iter().enumerate() {
        let (s, b) = o.admin(method, path, token, Some(body)).await;
        assert_eq!(s, status, "case {i} {path}: {b}");
        assert!(b["message"].is_string(), "case {i}: {b}");
    }
    // 100,001 members is one too many.
    let many: Vec<String> = (0..100_001u64).map(|i| format!("20{:010}", i)).collect();
    let (s, _) = o
        .admin(put, &s1_members, mgr, Some(json!({ "msisdns": many })))
        .await;
    assert_eq!(s, 422);
    assert_eq!(row_counts(&o, &c).await, before, "nothing was written");
    let none: Option<String> =
        sqlx::query_scalar("SELECT id FROM gift_campaigns WHERE id IN ('BAD ID', 'ENDS_FIRST')")
            .fetch_optional(&o.db)
            .await
            .unwrap();
    assert_eq!(none, None);
    o.stop().await;
}

/// A gift campaign's times take the admin API's forms (a zone time is the next such moment); a
/// time in none of them, or a value of the wrong type, is 422 naming the field and writes
/// nothing.
#[tokio::test]
async fn gift_campaign_times_take_the_admin_forms_and_errors_name_the_field() {
    let o = gifts::gift_origin().await;
    let mgr = Some(o.manager_token());
    let campaigns = "/admin/v1/gift-campaigns";
    let id = format!("ZONED_{}", std::process::id());
    let zoned = json!({"id": id, "name": "x", "starts_at": "2026-01-01T00:00:00Z",
                       "ends_at": "Sunday 23:59 Europe/Paris"});
    let (s, b) = o.admin(Method::POST, campaigns, mgr, Some(zoned)).await;
    assert_eq!(s, 201, "{b}");
    // Sunday 23:59 in Paris is Sunday 22:59 UTC in winter, 21:59 in summer, within a week.
    use chrono::{Datelike, Timelike};
    let ends = chrono::DateTime::parse_from_rfc3339(b["ends_at"].as_str().unwrap()).unwrap();
    let ahead = ends.signed_duration_since(chrono::Utc::now());
    assert!(
        ahead > chrono::Duration::zero() && ahead <= chrono::Duration::days(7),
        "{b}"
    );
    assert_eq!(ends.weekday(), chrono::Weekday::Sun, "{b}");
    assert!(
        [21, 22].contains(&ends.hour()) && ends.minute() == 59,
        "{b}"
    );

    let bad = json!({"id": "NOT_A_TIME", "name": "x", "starts_at": "2026-01-01T00:00:00Z",
                     "ends_at": "next week sometime"});
    let (s, b) = o.admin(Method::POST, campaigns, mgr, Some(bad)).await;
    assert_eq!(s, 422, "{b}");
    let message = b["message"].as_str().unwrap();
    assert!(
        message.contains("ends_at") && message.contains("Europe/Paris"),
        "{b}"
    );

    let wrong_type = json!({"id": "WRONG_TYPE", "name": 5, "starts_at": "2026-01-01T00:00:00Z",
                            "ends_at": "2027-01-01T00:00:00Z"});
    let (s, b) = o
        .admin(Method::POST, campaigns, mgr, Some(wrong_type))
        .await;
    assert_eq!(s, 422, "{b}");
    assert!(b["message"].as_str().unwrap().contains("`name`"), "{b}");

    let none: Option<String> = sqlx::query_scalar(
        "SELECT id FROM gift_campaigns WHERE id IN ('NOT_A_TIME', 'WRONG_TYPE')",
    )
    .fetch_optional(&o.db)
    .await
    .unwrap();
    assert_eq!(none, None);
    o.stop().await;
}

#[tokio::test]
async fn members_put_is_idempotent_and_takes_100_000_in_one_call() {
    let o = gifts::gift_origin().await;
    let c = campaign(&o, &[("s1", 2_000, &[(1, 1)]), ("s2", 5_000, &[])]).await;
    let base = msisdn();
    let all: Vec<String> = (0..100_000u64)
        .map(|i| format!("{}{:06}", &base[..6], i))
        .collect();
    let first = members(&o, &c, "s1", &all[..60_000]).await;
    assert_eq!(first, json!({"added": 60_000, "already": 0}));
    let second = members(&o, &c, "s1", &all).await;
    assert_eq!(second, json!({"added": 40_000, "already": 60_000}));
    let again = members(&o, &c, "s1", &all).await;
    assert_eq!(again, json!({"added": 0, "already": 100_000}));
    assert_eq!(row_counts(&o, &c).await[3], 100_000);
    // A subscriber of s1 cannot be put in s2 as well: 409, nothing written.
    let (s, b) = o
        .admin(
            Method::PUT,
            &format!("/admin/v1/gift-campaigns/{c}/segments/s2/members"),
            Some(o.manager_token()),
            Some(json!({"msisdns": [all[0], msisdn()]})),
        )
        .await;
    assert_eq!(s, 409, "{b}");
    assert_eq!(row_counts(&o, &c).await[3], 100_000);
    o.stop().await;
}
