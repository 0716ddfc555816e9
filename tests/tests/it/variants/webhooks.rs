//! Webhooks of a campaign with variants, against the reference-library receiver
//! (scripts/webhook-receiver), a real origin over HTTP, real PostgreSQL and Redis: every claim
//! event's `data` names the variant the claim took (held, paid, released), the campaign's
//! `campaign.sold_out` comes once every variant is sold out, and a campaign without variants
//! sends no `variant`.

use flashgate_shared::api::{PayRequest, ReleaseRequest};
use flashgate_tests::support::variants::{claim_variant, create_variant_sale};
use flashgate_tests::support::{unique, TestOrigin};
use flashgate_tests::webhooks::{register, unregister, Receiver, ALL_TYPES};
use serde_json::Value;

/// Claims `variant` of `c` for a new customer; the claim id.
async fn claim(o: &TestOrigin, c: &str, variant: &str) -> String {
    let token = o.token(&unique("wv"));
    let (s, b) = claim_variant(&o.http, &o.url, &token, c, &unique("k"), Some(variant)).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["claim"]["variant"], variant, "{b}");
    b["claim"]["id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_claim_event_names_its_variant() {
    let o = TestOrigin::start().await;
    let r = Receiver::start().await;
    let (endpoint, secret) = register(&o, &r.url(), ALL_TYPES).await;
    r.secrets(&[&secret]).await;
    let c = create_variant_sale(&o, &[("41", 1), ("42", 2)], 600, 1).await;
    let a = claim(&o, &c, "41").await;
    let b = claim(&o, &c, "42").await;
    let x = claim(&o, &c, "42").await;
    let service = o.config.service_token.expose().to_string();
    let pay = PayRequest {
        payment_ref: "psp-41".into(),
    };
    assert_eq!(o.claim_action(&a, "pay", &service, &pay).await.0, 200);
    let release = ReleaseRequest {
        reason: Some("customer_cancelled".into()),
    };
    assert_eq!(
        o.claim_action(&b, "release", &service, &release).await.0,
        200
    );

    let got = r.delivered(&c, 6).await;
    let mut seen: Vec<(String, String, Value)> = got
        .values()
        .map(|e| {
            assert_eq!(e.verified, vec![0], "the library verified {}", e.id);
            (
                e.event["type"].as_str().unwrap().to_string(),
                e.event["object_id"].as_str().unwrap().to_string(),
                e.event["data"].clone(),
            )
        })
        .collect();
    seen.sort_by(|p, q| (&p.0, &p.1).cmp(&(&q.0, &q.1)));
    let want_variant = |id: &str| {
        if id == a {
            "41"
        } else {
            "42"
        }
    };
    let mut kinds = Vec::new();
    for (kind, object, data) in &seen {
        kinds.push(kind.as_str());
        if kind.starts_with("claim.") {
            assert_eq!(data["variant"], want_variant(object), "{kind} {data}");
            assert_eq!(data["claim_id"], object.as_str());
        } else {
            assert!(data.get("variant").is_none(), "{kind} {data}");
        }
    }
    let mut want = vec![
        "campaign.sold_out",
        "claim.held",
        "claim.held",
        "claim.held",
        "claim.paid",
        "claim.released",
    ];
    want.sort();
    kinds.sort();
    assert_eq!(kinds, want);
    let paid = seen.iter().find(|s| s.0 == "claim.paid").unwrap();
    assert_eq!(
        (paid.1.as_str(), &paid.2["payment_ref"]),
        (a.as_str(), &Value::from("psp-41"))
    );
    let released = seen.iter().find(|s| s.0 == "claim.released").unwrap();
    assert_eq!(released.1, b);
    assert!(seen.iter().any(|s| s.0 == "claim.held" && s.1 == x));

    // Without variants: no `variant` in a claim event.
    let plain = o.campaign("sale", 2).await;
    let (s, body) = o.claim(&plain, &unique("wp"), "k").await;
    assert_eq!(s, 201, "{body}");
    let got = r.delivered(&plain, 1).await;
    let held = got.values().next().unwrap();
    assert_eq!(held.event["type"], "claim.held");
    assert!(
        held.event["data"].get("variant").is_none(),
        "{}",
        held.event
    );
    unregister(&o, &endpoint).await;
    o.stop().await;
}
