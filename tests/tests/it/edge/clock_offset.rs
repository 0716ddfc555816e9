//! The edge's fault-injection clock offset (`FLASHGATE_TEST_CLOCK_OFFSET_MS`, what
//! `scripts/chaos clock-skew` shifts the edge by) in the real runtime: the built worker inside
//! workerd via Miniflare, in front of a real signed origin over real PostgreSQL and Redis.
//! An edge 2 s ahead or behind claims as one on time (the origin allows the edge signature
//! 60 s either way, the customer token has 30 s of leeway); an edge 2 minutes off either way
//! signs with its shifted clock, so the origin refuses its claims, and one 2 minutes ahead
//! sees a token with a minute left as expired. A bad offset makes the edge misconfigured.

use flashgate_shared::token::{mint, CustomerClaims};
use flashgate_tests::support::{
    edge_claim, gate_remaining, send_claim, unique, ClaimReq, TestEdge, TestOrigin,
    TEST_EDGE_SECRET,
};

/// The built worker in front of `o`, signing with [`TEST_EDGE_SECRET`], its clock shifted by
/// `offset` (the binding's text).
fn edge_off_by(o: &TestOrigin, offset: &str) -> TestEdge {
    TestEdge::start(
        &o.url,
        &[
            ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.into()),
            ("FLASHGATE_TEST_CLOCK_OFFSET_MS", offset.into()),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_edge_2_s_off_claims_and_one_2_min_off_is_refused_by_its_shifted_clock() {
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", 10).await;
    // 2 s off either way claims as on time; 120 s off either way, the edge signs the forwarded
    // claim 120 s away from the origin's clock: refused, no unit taken.
    for (offset, status, result) in [
        ("-2000", 201, "claimed"),
        ("+2000", 201, "claimed"),
        ("120000", 403, "forbidden"),
        ("-120000", 403, "forbidden"),
    ] {
        let e = edge_off_by(&o, offset);
        let r = edge_claim(&o, &e.url, &c, &unique("cust"), &unique("key")).await;
        let got = (r.status, r.by.as_str(), r.json()["result"].clone());
        assert_eq!(got, (status, "origin", result.into()), "{offset}");
        drop(e);
    }
    assert_eq!(gate_remaining(&o, &c).await, Some(8));
    // A token with a minute left, on an edge 120 s ahead: expired on the edge's clock (past
    // the 30 s leeway), refused before the origin is asked.
    let e = edge_off_by(&o, "120000");
    let customer = unique("cust");
    let claims = CustomerClaims {
        sub: customer,
        exp: (chrono::Utc::now().timestamp() + 60).into(),
        nbf: None,
    };
    let token = mint(&claims, &o.customer_secret());
    let r = send_claim(
        &o.http,
        &e.url,
        &c,
        &ClaimReq::with_token(&token, "k-1"),
        false,
    )
    .await;
    assert_eq!((r.status, r.by.as_str()), (401, "edge"), "{:?}", r.json());
    drop(e);
    assert_eq!(gate_remaining(&o, &c).await, Some(8));
    // Not a number of ms: every request is the documented 503, nothing is guessed.
    let e = edge_off_by(&o, "2s");
    let r = edge_claim(&o, &e.url, &c, &unique("cust"), &unique("key")).await;
    assert_eq!((r.status, r.by.as_str()), (503, "edge"), "{:?}", r.json());
    assert_eq!(
        r.json()["message"],
        "the edge is misconfigured; its operator has to fix a setting"
    );
    drop(e);
    o.stop().await;
}
