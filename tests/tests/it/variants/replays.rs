//! Winners' retries through the edge worker in workerd when the variants of a campaign sell out
//! one after another: the edge's winners filter of the campaign was fetched when the first
//! variant sold out, and a winner of a variant that sold out after that retries with her key
//! (her 201 was lost). She gets her first reply from the origin, and a claim naming that
//! variant from anyone else is still `409 sold_out` at the edge; so when the last variant
//! sells out and the campaign with it (docs/EDGE.md, "Winners' retries after the sell-out").

use std::time::Duration;

use flashgate_tests::support::variants::create_variant_sale;
use flashgate_tests::support::{
    edge_with, eventually, send_claim, unique, ClaimReq, EdgeRuntime, EdgeSettings, Reply,
    TestOrigin,
};
use serde_json::{json, Value};

/// A claim of `variant` by `customer` with `key`, sent to the edge at `base`.
async fn claim(o: &TestOrigin, base: &str, c: &str, customer: &str, key: &str, v: &str) -> Reply {
    let mut req = ClaimReq::good(o, customer, key);
    req.body = json!({ "variant": v }).to_string().into_bytes();
    send_claim(&o.http, base, c, &req, false).await
}

/// `v` sells out to a new winner through the edge, and the edge learns it (a late claim's
/// fresh `409` from the origin) until it answers a late claim naming `v` itself. Returns the
/// winner and her first reply.
async fn sell_out(o: &TestOrigin, base: &str, c: &str, v: &str) -> (String, Value) {
    let winner = unique("w");
    let r = claim(o, base, c, &winner, "k", v).await;
    assert_eq!(r.status, 201, "{v}: {:?}", r.json());
    let what = format!("the edge to answer {v}'s sold_out itself");
    eventually(&what, Duration::from_secs(10), || async {
        let r = claim(o, base, c, &unique("late"), "k", v).await;
        assert_eq!(
            (r.status, r.json()["result"].clone()),
            (409, json!("sold_out"))
        );
        if r.by == "edge" {
            Ok(())
        } else {
            Err(format!("answered by {}", r.by))
        }
    })
    .await;
    (winner, r.json())
}

/// Claims naming `v` from customers who hold nothing: all `409 sold_out`, almost all at the
/// edge (the filter lets about 0.4 % of non-winners through, to the origin's `409`).
async fn late_claims_answered_at_the_edge(o: &TestOrigin, base: &str, c: &str, v: &str) {
    let (tries, mut at_edge) = (10, 0);
    for i in 0..tries {
        let r = claim(o, base, c, &unique("late"), &format!("k{i}"), v).await;
        assert_eq!(r.status, 409, "{v}: {:?}", r.json());
        assert_eq!(r.json()["result"], "sold_out", "{v}");
        at_edge += usize::from(r.by == "edge");
    }
    assert!(
        at_edge >= tries - 1,
        "{v}: {at_edge} of {tries} at the edge"
    );
}

/// Each winner (customer, first reply, variant) retries with her key and gets her first
/// reply from the origin; late claims naming her variant are still answered at the edge.
async fn retries_get_their_201(
    o: &TestOrigin,
    base: &str,
    c: &str,
    winners: &[(String, Value, &str)],
    when: &str,
) {
    for (w, first, v) in winners {
        let r = claim(o, base, c, w, "k", v).await;
        let what = format!("{v}'s winner's retry{when}");
        assert_eq!(
            (r.status, r.by.as_str()),
            (201, "origin"),
            "{what}: {:?}",
            r.json()
        );
        assert_eq!(&r.json(), first, "{what}: her first reply");
        late_claims_answered_at_the_edge(o, base, c, v).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_winner_of_a_variant_that_sold_out_after_the_filter_was_fetched_gets_her_201() {
    let o = TestOrigin::start_signed().await;
    let c = create_variant_sale(&o, &[("a", 1), ("b", 1), ("c", 1)], 600, 1).await;
    // A status TTL longer than the test: the isolate learns each sell-out from the origin's
    // answers, and a filter it fetched stays fresh by its age for the whole test.
    let e = edge_with(
        &o.url,
        EdgeSettings {
            ttl_ms: 30_000,
            max_stale_ms: 60_000,
            runtime: EdgeRuntime::Workerd,
            ..EdgeSettings::default()
        },
    );
    // `a` sells out: its late claims make the isolate fetch the winners filter.
    let (wa, first_a) = sell_out(&o, &e.url, &c, "a").await;
    // `b` sells out after that fetch; then `c`, the last, and the campaign with it.
    let (wb, first_b) = sell_out(&o, &e.url, &c, "b").await;
    let sold = [(wa, first_a, "a"), (wb, first_b, "b")];
    retries_get_their_201(&o, &e.url, &c, &sold, "").await;
    let (wc, first_c) = sell_out(&o, &e.url, &c, "c").await;
    let [a, b] = sold;
    let when = " after the campaign sold out";
    retries_get_their_201(&o, &e.url, &c, &[a, b, (wc, first_c, "c")], when).await;
    drop(e);
    o.stop().await;
}
