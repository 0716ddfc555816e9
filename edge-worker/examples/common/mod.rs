//! What the host programs of `scripts/profile-edge` share: the isolate's settings, a campaign
//! index holding their campaign, and customer tokens.

use flashgate_edge_worker::config::EdgeConfig;
use flashgate_edge_worker::index::{self, IndexSlot};
use flashgate_shared::campaign_index::CampaignIndex;
use flashgate_shared::token::{mint, CustomerClaims};

/// The customer-token secret (HS256) of the programs' isolate.
const SECRET: &str = "profile-edge-secret-of-at-least-32-bytes";

/// The isolate's settings: its origin (never called) and the customer-token secret.
pub fn settings() -> EdgeConfig {
    EdgeConfig::from_lookup(|name| {
        Some(match name {
            "FLASHGATE_ORIGIN_URL" => "http://127.0.0.1:9".to_string(),
            "FLASHGATE_CUSTOMER_TOKEN_SECRET" => SECRET.to_string(),
            _ => return None,
        })
    })
    .expect("settings")
}

/// A campaign index fetched at `now_ms` that holds `campaign` (and one other).
pub fn index_of(campaign: &str, now_ms: i64) -> IndexSlot {
    let mut index = IndexSlot::default();
    let body = CampaignIndex::from_ids([campaign, "other-campaign"]).encode();
    index.finish(
        index::Fetched::from_origin(200, Some("\"i1\""), &body, false),
        now_ms,
    );
    index
}

/// `Authorization` values of `n` customers (`customer-0`, …), each token valid for an hour
/// after `now_ms`.
pub fn bearer_headers(n: usize, now_ms: i64) -> Vec<String> {
    (0..n.max(1))
        .map(|i| {
            let claims = CustomerClaims {
                sub: format!("customer-{i}"),
                exp: (now_ms / 1000 + 3_600).into(),
                nbf: None,
            };
            format!("Bearer {}", mint(&claims, SECRET.as_bytes()))
        })
        .collect()
}
