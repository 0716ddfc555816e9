//! Campaigns with variants: creating one, claiming a variant, and reading a variant's count in
//! PostgreSQL and in the gate (the keys from the origin's own [`Keys`]).

use chrono::{Duration, Utc};
use flashgate_origin::gate::Keys;
use flashgate_shared::api::{CampaignKind, NewCampaign, NewVariant};
use serde_json::Value;

use super::{unique, TestOrigin};

/// The creation body of an active sale (started a minute ago, ends in an hour) with
/// `variants` (id, stock), holds of `hold_seconds` and `shards` gate shards.
pub fn variant_sale(variants: &[(&str, i64)], hold_seconds: i64, shards: i64) -> NewCampaign {
    let id = unique("var");
    let now = Utc::now();
    NewCampaign {
        id: id.clone(),
        name: format!("Campaign {id}"),
        kind: CampaignKind::Sale,
        stock: 0,
        starts_at: now - Duration::minutes(1),
        ends_at: now + Duration::hours(1),
        hold_seconds: Some(hold_seconds),
        hold_extension_seconds: None,
        gate_shards: Some(shards),
        waiting_room: None,
        variants: Some(
            variants
                .iter()
                .map(|(v, stock)| NewVariant {
                    id: v.to_string(),
                    name: format!("Size {v}"),
                    stock: *stock,
                })
                .collect(),
        ),
        access: None,
        draw: None,
    }
}

/// Creates [`variant_sale`] on `o`; returns its id.
pub async fn create_variant_sale(
    o: &TestOrigin,
    variants: &[(&str, i64)],
    hold_seconds: i64,
    shards: i64,
) -> String {
    let body = variant_sale(variants, hold_seconds, shards);
    o.create(&body).await;
    body.id
}

/// Sends a claim of `variant` (`None`: the body `{}`) for the customer of `token` with key
/// `key`; returns status and JSON body.
pub async fn claim_variant(
    http: &reqwest::Client,
    base_url: &str,
    token: &str,
    campaign: &str,
    key: &str,
    variant: Option<&str>,
) -> (u16, Value) {
    let body = match variant {
        Some(v) => serde_json::json!({ "variant": v }),
        None => serde_json::json!({}),
    };
    let res = http
        .post(format!("{base_url}/api/v1/campaigns/{campaign}/claims"))
        .bearer_auth(token)
        .header("idempotency-key", key)
        .json(&body)
        .send()
        .await
        .expect("claim");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// `campaign_variants.remaining` of variant `v` of `c` in PostgreSQL.
pub async fn variant_remaining(o: &TestOrigin, c: &str, v: &str) -> i64 {
    sqlx::query_scalar("SELECT remaining FROM campaign_variants WHERE campaign_id = $1 AND id = $2")
        .bind(c)
        .bind(v)
        .fetch_one(&o.db)
        .await
        .expect("variant remaining")
}

/// The gate's count of variant `v` of `c`: the sum over its `shards` shards.
pub async fn gate_variant_remaining(o: &TestOrigin, c: &str, v: &str, shards: u16) -> i64 {
    let mut r = o.origin.state.redis.clone();
    let mut sum = 0;
    for s in 0..shards {
        let n: Option<i64> = redis::cmd("GET")
            .arg(Keys::shard(c, s).variant(v))
            .query_async(&mut r)
            .await
            .expect("gate variant");
        sum += n.unwrap_or(0);
    }
    sum
}
