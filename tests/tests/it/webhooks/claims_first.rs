//! Claims first: the webhook relay starts no call while a claim of its origin is in flight
//! (within `FLASHGATE_WEBHOOK_RELAY_YIELD_MS` of the busy spell), and sends what waited once
//! the claim has ended. A real origin over HTTP, PostgreSQL, Redis and the reference receiver,
//! on services of its own (another test's origin would relay the deliveries otherwise).

use std::time::Duration;

use flashgate_tests::support::{
    claim_at, eventually, own_services, test_config, unique, TestOrigin,
};
use flashgate_tests::webhooks::{register, unregister, Receiver};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_waits_while_a_claim_is_in_flight_and_delivers_once_it_ends() {
    let own = own_services(test_config(), "claims_first").await;
    let mut config = own.config.clone();
    config.webhooks.webhook_relay_yield_ms = 60_000;
    let o = TestOrigin::start_with(config).await;
    let r = Receiver::start().await;
    let (endpoint, secret) = register(&o, &r.url(), &["claim.paid"]).await;
    r.secrets(&[&secret]).await;
    let (a, b) = (o.held_sale(2, 600).await, o.held_sale(2, 600).await);
    let (s, held) = o.claim(&a, &unique("ana"), &unique("k")).await;
    assert_eq!(s, 201, "{held}");

    // A claim of campaign b stays in flight: its commit waits for b's row, which another
    // transaction holds.
    let mut lock = o.db.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM campaigns WHERE id = $1 FOR UPDATE")
        .bind(&b)
        .execute(&mut *lock)
        .await
        .unwrap();
    let stuck = {
        let (url, token, b) = (o.url.clone(), o.token(&unique("bob")), b.clone());
        tokio::spawn(async move {
            claim_at(&reqwest::Client::new(), &url, &token, &b, &unique("k")).await
        })
    };
    let takes = o.origin.state.takes.clone();
    eventually("bob's claim in flight", Duration::from_secs(10), || async {
        (takes.in_flight() > 0)
            .then_some(())
            .ok_or_else(|| "none in flight".to_string())
    })
    .await;

    // Ana pays: her `claim.paid` is due at once, and the relay looks every 200 ms, but it
    // gives way to the claim in flight.
    let (s, paid) = o.pay(held["claim"]["id"].as_str().unwrap()).await;
    assert_eq!(s, 200, "{paid}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(takes.in_flight(), 1, "bob's claim was in flight all along");
    assert!(r.received(&a).await.is_empty(), "nothing sent meanwhile");

    // The claim ends; the event goes out.
    lock.rollback().await.unwrap();
    let (s, body) = stuck.await.unwrap();
    assert_eq!(s, 201, "{body}");
    let got = r.delivered(&a, 1).await;
    assert_eq!(got.len(), 1);
    unregister(&o, &endpoint).await;
    o.stop().await;
    own.release().await;
}
