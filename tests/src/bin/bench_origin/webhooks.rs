//! Leg 4: the cost of a webhook endpoint on the claim path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use flashgate_tests::support::TestOrigin;

use super::{winners_over_http, Args};

/// Leg 4: winners/s without a webhook endpoint, with one subscribed to `claim.held` (its
/// receiver an in-process axum handler answering 204), and without again.
pub async fn webhooks_leg(o: &TestOrigin, args: &Args) {
    println!(
        "## 4. winners/s over HTTP with and without a webhook endpoint ({} clients)",
        args.http_clients
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let received = Arc::new(AtomicU64::new(0));
    let count = received.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let count = count.clone();
            async move {
                count.fetch_add(1, Ordering::Relaxed);
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    let before = winners_over_http(o, args.http_clients, args.seconds, "no endpoint").await;
    before.print();
    let (endpoint, _) = flashgate_tests::webhooks::register(
        o,
        &format!("http://127.0.0.1:{port}/hook"),
        &["claim.held"],
    )
    .await;
    let with = winners_over_http(o, args.http_clients, args.seconds, "an endpoint").await;
    with.print();
    flashgate_tests::webhooks::unregister(o, &endpoint).await;
    let after = winners_over_http(o, args.http_clients, args.seconds, "no endpoint, again").await;
    after.print();
    let base = (before.rate() + after.rate()) / 2.0;
    println!(
        "ratio with an endpoint / without (mean of the two legs around it): {:.2}x (target >= 0.9x); \
         deliveries received during and after the leg: {}\n",
        with.rate() / base,
        received.load(Ordering::Relaxed)
    );
}
