//! The claims feed and the admin view of a campaign with variants against a real origin over
//! HTTP and real PostgreSQL: each claim carries the variant it took, in the JSON feed and in
//! the CSV export (its last column), and a campaign without variants has no `variant` in its
//! JSON and an empty last column; `GET /admin/v1/campaigns/{id}` lists each variant with its
//! state and live counts (the dashboard's variants panel), the list and a campaign without
//! variants have no `variants`.

use std::time::Duration;

use flashgate_shared::api::{PayRequest, FEED_CSV_HEADER};
use flashgate_tests::support::variants::{claim_variant, create_variant_sale};
use flashgate_tests::support::{eventually, unique, TestOrigin};
use serde_json::Value;

/// `GET path` with the viewer token: status and body text.
async fn get(o: &TestOrigin, path: &str) -> (u16, String) {
    let res = o
        .http
        .get(format!("{}{path}", o.url))
        .bearer_auth(o.viewer_token())
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.text().await.unwrap())
}

/// The JSON feed of `c` once it lists `n` claims.
async fn feed_of(o: &TestOrigin, c: &str, n: usize) -> Value {
    eventually(
        "the feed to list the claims",
        Duration::from_secs(20),
        || async {
            let (s, body) = get(o, &format!("/admin/v1/campaigns/{c}/claims")).await;
            let v: Value = serde_json::from_str(&body).map_err(|e| format!("{s} {body}: {e}"))?;
            match v["claims"].as_array() {
                Some(cs) if cs.len() == n => Ok(v),
                _ => Err(format!("{s} {body}")),
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_and_its_csv_carry_each_claims_variant() {
    let o = TestOrigin::start().await;
    let c = create_variant_sale(&o, &[("41", 3), ("42", 3)], 600, 1).await;
    let mut want = std::collections::BTreeMap::new();
    for v in ["41", "42", "42"] {
        let p = unique("p");
        let (s, b) = claim_variant(&o.http, &o.url, &o.token(&p), &c, "k", Some(v)).await;
        assert_eq!(s, 201, "{b}");
        want.insert(b["claim"]["id"].as_str().unwrap().to_string(), v);
    }
    let feed = feed_of(&o, &c, 3).await;
    for claim in feed["claims"].as_array().unwrap() {
        let id = claim["id"].as_str().unwrap();
        assert_eq!(claim["variant"], want[id], "{claim}");
    }
    let (s, csv) = get(&o, &format!("/admin/v1/campaigns/{c}/claims.csv")).await;
    assert_eq!(s, 200);
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(FEED_CSV_HEADER));
    assert!(FEED_CSV_HEADER.ends_with(",variant"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 3, "{csv}");
    for row in rows {
        let id = row.split(',').next().unwrap();
        assert!(row.ends_with(&format!(",{}", want[id])), "{row}");
    }

    // Without variants: no `variant` in the JSON, an empty last column.
    let plain = o.campaign("sale", 2).await;
    let (s, b) = o.claim(&plain, &unique("p"), "k").await;
    assert_eq!(s, 201, "{b}");
    let feed = feed_of(&o, &plain, 1).await;
    assert!(feed["claims"][0].get("variant").is_none(), "{feed}");
    let (_, csv) = get(&o, &format!("/admin/v1/campaigns/{plain}/claims.csv")).await;
    let row = csv.lines().nth(1).unwrap();
    assert_eq!(row.split(',').count(), 8, "{row}");
    assert!(row.ends_with(','), "{row}");
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_view_lists_each_variant_with_its_live_counts() {
    let o = TestOrigin::start().await;
    let c = create_variant_sale(&o, &[("41", 2), ("42", 1)], 600, 1).await;
    let mut ids = Vec::new();
    for v in ["41", "42"] {
        let token = o.token(&unique("p"));
        let (s, b) = claim_variant(&o.http, &o.url, &token, &c, "k", Some(v)).await;
        assert_eq!(s, 201, "{b}");
        ids.push(b["claim"]["id"].as_str().unwrap().to_string());
    }
    let service = o.config.service_token.expose().to_string();
    let pay = PayRequest {
        payment_ref: "psp-v".into(),
    };
    assert_eq!(o.claim_action(&ids[0], "pay", &service, &pay).await.0, 200);
    let (s, body) = get(&o, &format!("/admin/v1/campaigns/{c}")).await;
    assert_eq!(s, 200, "{body}");
    let view: Value = serde_json::from_str(&body).unwrap();
    let row = |v: &Value| {
        (
            v["id"].as_str().unwrap().to_string(),
            v["state"].as_str().unwrap().to_string(),
            [
                &v["stock"],
                &v["remaining"],
                &v["held"],
                &v["paid"],
                &v["issued"],
            ]
            .map(|n| n.as_i64().unwrap()),
        )
    };
    let rows: Vec<_> = view["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(row)
        .collect();
    assert_eq!(
        rows,
        vec![
            ("41".into(), "active".into(), [2, 1, 0, 1, 0]),
            ("42".into(), "sold_out".into(), [1, 0, 1, 0, 0]),
        ],
        "{view}"
    );
    let (_, list) = get(&o, "/admin/v1/campaigns").await;
    let list: Value = serde_json::from_str(&list).unwrap();
    let listed = list["campaigns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == c.as_str());
    assert!(listed.unwrap().get("variants").is_none(), "not in the list");
    let plain = o.campaign("sale", 2).await;
    let (_, body) = get(&o, &format!("/admin/v1/campaigns/{plain}")).await;
    let view: Value = serde_json::from_str(&body).unwrap();
    assert!(view.get("variants").is_none(), "{view}");
    o.stop().await;
}
