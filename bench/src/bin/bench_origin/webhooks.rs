//! Leg 4: the cost of a webhook endpoint on the claim path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use flashgate_tests::support::TestOrigin;

use super::{rounds, winners_over_http, Args};

/// Leg 4: winners/s without a webhook endpoint and with one subscribed to `claim.held` (its
/// receiver an in-process axum handler answering 204; registered for its leg, deleted once
/// every event of the leg is delivered, which is timed), in alternated rounds ([`rounds`]).
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
    let hook = format!("http://127.0.0.1:{port}/hook");
    let (clients, secs) = (args.http_clients, args.seconds);
    let ratios = rounds::alternate(
        args.rounds,
        async |_| winners_over_http(o, clients, secs, "no endpoint").await,
        async |_| {
            let (endpoint, _) =
                flashgate_tests::webhooks::register(o, &hook, &["claim.held"]).await;
            let before = received.load(Ordering::Relaxed);
            let leg = winners_over_http(o, clients, secs, "an endpoint").await;
            let during = received.load(Ordering::Relaxed) - before;
            let drained = drain(o, &endpoint).await;
            let events = received.load(Ordering::Relaxed) - before;
            println!(
                "    its {events} events: {during} delivered during the leg, the last {} s after it",
                drained.map_or("(not all in 120)".into(), |d| format!("{:.1}", d.as_secs_f64()))
            );
            unregister(o, &endpoint).await;
            leg
        },
    )
    .await;
    println!(
        "ratio with an endpoint / without, median of {} rounds: {:.2}x (target >= 0.9x; rounds \
         {}); deliveries received during and after the legs: {}\n",
        ratios.len(),
        rounds::median(&ratios),
        rounds::listed(&ratios),
        received.load(Ordering::Relaxed)
    );
}

/// Waits until endpoint `id` has no pending delivery (every event of its leg delivered, before
/// the next leg starts), at most 120 s; returns how long that took, `None` past the bound.
async fn drain(o: &TestOrigin, id: &str) -> Option<std::time::Duration> {
    let started = std::time::Instant::now();
    let id = uuid::Uuid::parse_str(id).expect("endpoint id");
    while started.elapsed() < std::time::Duration::from_secs(120) {
        let pending: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending'",
        )
        .bind(id)
        .fetch_one(&o.db)
        .await
        .expect("pending deliveries");
        if pending == 0 {
            return Some(started.elapsed());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    None
}

/// Deletes endpoint `id`, again after a 503: its deliveries go with it while the relay is
/// still settling some of them, and PostgreSQL may cancel one of the two (a deadlock).
async fn unregister(o: &TestOrigin, id: &str) {
    for _ in 0..20 {
        let (s, body) = o
            .admin(
                reqwest::Method::DELETE,
                &format!("/admin/v1/webhooks/endpoints/{id}"),
                Some(o.manager_token()),
                None,
            )
            .await;
        match s {
            204 => return,
            503 => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
            _ => panic!("endpoint not deleted: {s} {body}"),
        }
    }
    panic!("endpoint not deleted after 20 tries");
}
