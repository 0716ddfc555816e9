//! Variants through the edge worker in workerd in front of a real origin: a sold-out variant is
//! answered `409 {"result":"sold_out","variant":…}` at the edge while another variant of the
//! same campaign still sells through the origin; and issue 35's concurrency scenario (10
//! variants of 20, 3,000 customers sending 3 claims each on random variants) through the edge.

use std::time::Duration;

use clap::Parser;
use flashgate_bench::stampede::{run_stampede, Args};
use flashgate_tests::support::variants::{
    create_variant_sale, gate_variant_remaining, variant_remaining,
};
use flashgate_tests::support::{
    assert_reconciled, direct_database_url, edge_with, eventually, get, send_claim, status_url,
    unique, ClaimReq, EdgeRuntime, EdgeSettings, Reply, TestOrigin,
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

/// Issue 35's "Done when", concurrency, through the edge: a campaign of 10 variants of 20
/// units (`v0` .. `v9`) on a gate of `shards` shards, 3,000 customers each sending exactly 3
/// claims, each claim with its own idempotency key naming a variant picked at random, all over
/// 1 s with 200 on the wire at once (the `stampede` generator, `--tries-per-customer 3`),
/// through the edge worker in workerd; then the read-back and the reconciliation. For every
/// variant: claims = min(stock, demand), none past its stock, `remaining = stock − claims`,
/// and the edge answered at least 95 % of the tries naming it sent after it sold out (winners'
/// taps apart); every customer holds at most one active claim. scripts/test runs the 4-shard
/// one again on a Redis Cluster.
async fn through_the_edge(shards: u16) {
    let o = TestOrigin::start_signed().await;
    let e = edge_with(
        &o.url,
        EdgeSettings {
            runtime: EdgeRuntime::Workerd,
            ..EdgeSettings::default()
        },
    );
    let secret = String::from_utf8(o.customer_secret()).unwrap();
    let db = direct_database_url();
    #[rustfmt::skip]
    let args = Args::parse_from([
        "stampede", "--target", &e.url, "--origin", &o.url, "--edge-runtime", "workerd",
        "--token-secret", &secret, "--admin-token", o.manager_token(), "--database-url", &db,
        "--variants", "10", "--stock", "200", "--customers", "3000",
        "--tries-per-customer", "3", "--window", "1", "--concurrency", "200",
        "--min-edge-share", "0.95", "--progress-seconds", "0", "--seed", "35",
        "--gate-shards", &shards.to_string(),
    ]);
    let report = run_stampede(&args).await.expect("the stampede runs");
    let text = report.render();
    println!("{text}");
    assert!(report.passed, "{text}");
    assert_eq!(
        (report.tries_sent, report.distinct_customers),
        (9_000, 3_000),
        "every customer sent her 3 claims: {text}"
    );
    let lines = report.variants.as_ref().expect("the per-variant lines");
    assert_eq!(lines.len(), 10, "{text}");
    for l in lines {
        let want = 20.min(l.demand as i64);
        assert_eq!(
            (l.stock, l.claims, l.remaining),
            (Some(20), Some(want), Some(20 - want)),
            "claims of {} = min(stock, demand): {text}",
            l.id
        );
        let share = l.edge_share_after_sold_out;
        assert!(
            share.is_some_and(|s| s >= 0.95),
            "the edge's share after {} sold out: {share:?}: {text}",
            l.id
        );
    }
    let c = report.run.campaign.clone();
    let most: i64 = sqlx::query_scalar(
        "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM claims
          WHERE campaign_id = $1 AND status IN ('held', 'paid') GROUP BY customer_id) x",
    )
    .bind(&c)
    .fetch_one(&o.db)
    .await
    .unwrap();
    assert_eq!(most, 1, "the most active claims one customer holds");
    let rep = assert_reconciled(&o, &c).await;
    assert_eq!(rep.variants.len(), 10);
    for v in &rep.variants {
        let line = lines
            .iter()
            .find(|l| l.id == v.id)
            .expect("a line per variant");
        assert_eq!(
            (Some(v.active), Some(v.remaining)),
            (line.claims, line.remaining),
            "{v:?}"
        );
        // The gate's count of the variant, summed over its shards, agrees.
        let gate = gate_variant_remaining(&o, &c, &v.id, shards).await;
        assert_eq!(Some(gate), line.remaining, "the gate's count of {}", v.id);
    }
    drop(e);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_variants_of_20_and_3000_customers_with_3_claims_each_through_the_edge_one_shard() {
    through_the_edge(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_variants_of_20_and_3000_customers_with_3_claims_each_through_the_edge_four_shards() {
    through_the_edge(4).await;
}
