//! Support for the gift fulfilment tests: an origin with the movable campaign clock, campaign
//! and segment fixtures through the admin API, fulfilment calls returning the exact bytes, and
//! the test clock (`gift_test_clock`, read only with `FLASHGATE_GIFT_TEST_CLOCK`).

use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{test_config, unique, TestOrigin};

/// A fixed instant inside every test campaign, where tests set the clock.
pub fn t0() -> DateTime<Utc> {
    "2026-06-11T12:00:00Z".parse().expect("valid time")
}

/// An origin with the test clock on.
pub async fn gift_origin() -> TestOrigin {
    let mut config = test_config();
    config.gifts.gift_test_clock = true;
    TestOrigin::start_with(config).await
}

/// A fresh MSISDN (12 digits, unique in this process and unlikely across processes).
pub fn msisdn() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let pid = u64::from(std::process::id()) % 10_000;
    let t = (Utc::now().timestamp_micros() as u64 / 1000) % 1_000;
    format!("2{pid:04}{t:03}{:04}", n % 10_000)
}

/// A fresh key.
pub fn key() -> String {
    unique("k")
}

/// A test segment: id, gift amount (EGP minor units), cap rules `(max, per_days)`.
pub type SegmentSpec<'a> = (&'a str, i64, &'a [(i32, i32)]);

/// Creates a campaign running through 2026 and 2027 (so `t0` and weeks around it are inside)
/// with `segments`: `(id, amount in EGP minor units, [(max, per_days)])`; its clock is set to
/// [`t0`]. Returns its id.
pub async fn campaign(o: &TestOrigin, segments: &[SegmentSpec<'_>]) -> String {
    let id = unique("GIFT").replace('-', "_");
    let (s, b) = create_campaign(o, &id, json!("2028-01-01T00:00:00Z")).await;
    assert_eq!(s, 201, "{b}");
    for (seg, amount, caps) in segments {
        let caps: Vec<Value> = caps
            .iter()
            .map(|(m, d)| json!({"max": m, "per_days": d}))
            .collect();
        let (s, b) = o
            .admin(
                Method::POST,
                &format!("/admin/v1/gift-campaigns/{id}/segments"),
                Some(o.manager_token()),
                Some(
                    json!({"id": seg, "gift": {"amount": amount, "currency": "EGP"}, "caps": caps}),
                ),
            )
            .await;
        assert_eq!(s, 201, "{b}");
    }
    set_clock(o, &id, t0()).await;
    id
}

/// The usual start of a gift test: an origin with the test clock ([`gift_origin`]), a campaign
/// with one segment `s1` (2,000 EGP minor units, at most one grant a day) and one fresh member
/// of it. Returns the origin, the campaign id and the member's MSISDN.
pub async fn one_member_one_a_day() -> (TestOrigin, String, String) {
    let o = gift_origin().await;
    let c = campaign(&o, &[("s1", 2_000, &[(1, 1)])]).await;
    let m = msisdn();
    members(&o, &c, "s1", std::slice::from_ref(&m)).await;
    (o, c, m)
}

/// `POST /admin/v1/gift-campaigns` (manager token) of campaign `id`, from 2026-01-01 to
/// `ends_at`: the answer's status and body.
pub async fn create_campaign(o: &TestOrigin, id: &str, ends_at: Value) -> (u16, Value) {
    o.admin(
        Method::POST,
        "/admin/v1/gift-campaigns",
        Some(o.manager_token()),
        Some(
            json!({"id": id, "name": "test gifts", "starts_at": "2026-01-01T00:00:00Z",
                    "ends_at": ends_at}),
        ),
    )
    .await
}

/// Adds `msisdns` to `segment`; returns the reply body.
pub async fn members(o: &TestOrigin, campaign: &str, segment: &str, msisdns: &[String]) -> Value {
    let (s, b) = o
        .admin(
            Method::PUT,
            &format!("/admin/v1/gift-campaigns/{campaign}/segments/{segment}/members"),
            Some(o.manager_token()),
            Some(json!({ "msisdns": msisdns })),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    b
}

/// `PATCH …/segments/{segment}` with `{"caps": caps}`: status and body.
pub async fn set_caps(o: &TestOrigin, campaign: &str, segment: &str, caps: Value) -> (u16, Value) {
    o.admin(
        Method::PATCH,
        &format!("/admin/v1/gift-campaigns/{campaign}/segments/{segment}"),
        Some(o.manager_token()),
        Some(json!({ "caps": caps })),
    )
    .await
}

/// Sets the campaign clock to `at`.
pub async fn set_clock(o: &TestOrigin, campaign: &str, at: DateTime<Utc>) {
    sqlx::query(
        "INSERT INTO gift_test_clock (campaign_id, now_at) VALUES ($1, $2)
         ON CONFLICT (campaign_id) DO UPDATE SET now_at = EXCLUDED.now_at",
    )
    .bind(campaign)
    .bind(at)
    .execute(&o.db)
    .await
    .expect("set the test clock");
}

/// A fulfilment reply: status and the exact body bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raw {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Raw {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// A `method` request with the service token to `/api/v1/gift-campaigns/{campaign}/{rest}`.
fn service_call(
    o: &TestOrigin,
    method: Method,
    campaign: &str,
    rest: &str,
) -> reqwest::RequestBuilder {
    o.http
        .request(
            method,
            format!("{}/api/v1/gift-campaigns/{campaign}/{rest}", o.url),
        )
        .bearer_auth(o.config.service_token.expose())
}

/// `POST /api/v1/gift-campaigns/{campaign}/fulfilments` with the service token.
pub async fn fulfil(o: &TestOrigin, campaign: &str, key: &str, msisdn: &str) -> Raw {
    fulfil_once(o, campaign, key, msisdn).await.0
}

/// [`fulfil`], with the reply's `Retry-After` in seconds when it has one.
async fn fulfil_once(
    o: &TestOrigin,
    campaign: &str,
    key: &str,
    msisdn: &str,
) -> (Raw, Option<u64>) {
    let res = service_call(o, Method::POST, campaign, "fulfilments")
        .header("idempotency-key", key)
        .json(&json!({ "msisdn": msisdn }))
        .send()
        .await
        .expect("fulfilment request");
    let retry_after_seconds = res
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let raw = Raw {
        status: res.status().as_u16(),
        body: res.bytes().await.expect("body").to_vec(),
    };
    (raw, retry_after_seconds)
}

/// [`fulfil`] as a well-behaved client sends it: a 503 (a dependency busy: the pool's wait ran
/// out under a burst) is sent again with the same key after its `Retry-After`, up to 10 times;
/// the last reply is returned, with the number of 503s met on the way.
pub async fn fulfil_following_retry_after(
    o: &TestOrigin,
    campaign: &str,
    key: &str,
    msisdn: &str,
) -> (Raw, u32) {
    let mut unavailable = 0;
    loop {
        match fulfil_once(o, campaign, key, msisdn).await {
            (raw, Some(s)) if raw.status == 503 && unavailable < 10 => {
                unavailable += 1;
                tokio::time::sleep(std::time::Duration::from_secs(s)).await;
            }
            (raw, _) => return (raw, unavailable),
        }
    }
}

/// A manager's `POST /admin/v1/fulfilments/{id}/retry`: status and body.
pub async fn retry(o: &TestOrigin, id: &str) -> (u16, Value) {
    let path = format!("/admin/v1/fulfilments/{id}/retry");
    o.admin(Method::POST, &path, Some(o.manager_token()), None)
        .await
}

/// `GET …/eligibility?msisdn=` with the service token: status, `Cache-Control`, body.
pub async fn eligibility(o: &TestOrigin, campaign: &str, msisdn: &str) -> (u16, String, Value) {
    let res = service_call(
        o,
        Method::GET,
        campaign,
        &format!("eligibility?msisdn={msisdn}"),
    )
    .send()
    .await
    .expect("eligibility request");
    let cc = res
        .headers()
        .get("cache-control")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (
        res.status().as_u16(),
        cc,
        res.json().await.unwrap_or(Value::Null),
    )
}

/// Rows of the campaign in each gift table: ledger, requests, outbox, members, caps, audit.
pub async fn row_counts(o: &TestOrigin, campaign: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for sql in [
        "SELECT count(*) FROM gift_ledger WHERE campaign_id = $1",
        "SELECT count(*) FROM gift_requests WHERE campaign_id = $1",
        "SELECT count(*) FROM gift_outbox o JOIN gift_ledger l ON l.id = o.fulfilment_id WHERE l.campaign_id = $1",
        "SELECT count(*) FROM gift_members WHERE campaign_id = $1",
        "SELECT count(*) FROM gift_cap_rules WHERE campaign_id = $1",
        "SELECT count(*) FROM gift_audit WHERE campaign_id = $1",
        "SELECT count(*) FROM gift_segments WHERE campaign_id = $1",
    ] {
        let n: i64 = sqlx::query_scalar(sql)
            .bind(campaign)
            .fetch_one(&o.db)
            .await
            .expect("count");
        out.push(n);
    }
    out
}
