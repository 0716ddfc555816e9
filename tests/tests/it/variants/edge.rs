//! Variants through the edge worker in workerd in front of a real origin: a sold-out variant is
//! answered `409 {"result":"sold_out","variant":…}` at the edge while another variant of the
//! same campaign still sells through the origin.

use std::time::Duration;

use flashgate_tests::support::variants::{create_variant_sale, variant_remaining};
use flashgate_tests::support::{
    edge_with, eventually, get, send_claim, status_url, unique, ClaimReq, EdgeRuntime,
    EdgeSettings, Reply, TestOrigin,
};
use serde_json::json;

/// A claim of `variant` by `customer` with `key`, sent to the edge at `base`.
async fn claim(
    o: &TestOrigin,
    base: &str,
    c: &str,
    customer: &str,
    key: &str,
    variant: &str,
) -> Reply {
    let mut req = ClaimReq::good(o, customer, key);
    req.body = json!({ "variant": variant }).to_string().into_bytes();
    send_claim(&o.http, base, c, &req, false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sold_out_variant_is_answered_at_the_edge_while_another_sells() {
    let o = TestOrigin::start_signed().await;
    let c = create_variant_sale(&o, &[("41", 2), ("42", 30)], 600, 1).await;
    let e = edge_with(
        &o.url,
        EdgeSettings {
            runtime: EdgeRuntime::Workerd,
            ..EdgeSettings::default()
        },
    );
    // The status through the edge lists the variants.
    let status = get(&o.http, &status_url(&e.url, &c)).await.json();
    assert_eq!(status["variants"][0]["id"], "41", "{status}");

    // Variant 41 sells out through the edge (the origin decides), and a third claim on it is
    // the origin's variant sold_out, which the edge learns.
    let winners: Vec<String> = (0..2).map(|_| unique("w")).collect();
    let mut first = Vec::new();
    for w in &winners {
        let r = claim(&o, &e.url, &c, w, "k", "41").await;
        assert_eq!(
            (r.status, r.json()["claim"]["variant"].clone()),
            (201, json!("41"))
        );
        first.push(r.json());
    }
    assert_eq!(variant_remaining(&o, &c, "41").await, 0);
    let sold = json!({"result": "sold_out", "variant": "41"});
    let what = "the edge to answer variant 41's sold_out itself";
    eventually(what, Duration::from_secs(10), || async {
        let r = claim(&o, &e.url, &c, &unique("late"), "k", "41").await;
        assert_eq!((r.status, r.json()), (409, sold.clone()));
        if r.by == "edge" {
            Ok(())
        } else {
            Err(format!("answered by {}", r.by))
        }
    })
    .await;

    // Now: every late claim on 41 is answered at the edge; 42 still sells at the origin.
    let before = o.claim_requests();
    let (mut at_edge, tries) = (0, 40);
    for i in 0..tries {
        let r = claim(&o, &e.url, &c, &unique("late"), &format!("k{i}"), "41").await;
        assert_eq!((r.status, r.json()), (409, sold.clone()));
        at_edge += usize::from(r.by == "edge");
    }
    println!("variant 41 sold out: {at_edge} of {tries} late claims answered at the edge");
    assert!(
        at_edge * 100 >= tries * 95,
        "{at_edge} of {tries} at the edge"
    );
    // A winner's retry of variant 41 (same key) still gets her first reply, from the origin.
    let r = claim(&o, &e.url, &c, &winners[0], "k", "41").await;
    assert_eq!((r.status, r.by.as_str()), (201, "origin"), "{:?}", r.json());
    assert_eq!(r.json(), first[0]);
    let r = claim(&o, &e.url, &c, &unique("buyer"), "k", "42").await;
    assert_eq!((r.status, r.by.as_str()), (201, "origin"), "{:?}", r.json());
    assert_eq!(r.json()["claim"]["variant"], "42");
    assert!(o.claim_requests() - before <= (tries - at_edge) as u64 + 2);
    assert_eq!(variant_remaining(&o, &c, "41").await, 0);
    assert_eq!(variant_remaining(&o, &c, "42").await, 29);
    o.stop().await;
}
