//! Leg 5: winners/s over HTTP on a campaign of 10 variants vs. a plain campaign, in alternated
//! rounds ([`super::rounds`]); each leg on a new campaign of 10,000,000 units, the origin's
//! default hold and gate shards (`--variants-only` runs this leg alone).

use std::sync::Arc;

use flashgate_tests::support::variants::variant_sale;
use flashgate_tests::support::{token_for, unique, TestOrigin};

use super::measure::Leg;
use super::{http_leg, rounds, winners_over_http, Args};

/// Variants of the leg's campaign, and each one's stock (their sum is the plain one's).
const VARIANTS: usize = 10;
const STOCK_EACH: i64 = 1_000_000;

/// Winners over HTTP on a new campaign of [`VARIANTS`] variants: request `i` is a new customer
/// claiming variant `i % VARIANTS`.
async fn variant_winners(o: &TestOrigin, clients: usize, secs: u64) -> Leg {
    let ids: Vec<String> = (0..VARIANTS).map(|i| format!("v{i}")).collect();
    let spec: Vec<(&str, i64)> = ids.iter().map(|v| (v.as_str(), STOCK_EACH)).collect();
    let mut body = variant_sale(&spec, 600, 1);
    (body.hold_seconds, body.gate_shards) = (None, None);
    o.create(&body).await;
    let url = format!("{}/api/v1/campaigns/{}/claims", o.url, body.id);
    let run = unique("v");
    let tokens: Arc<Vec<String>> = Arc::new(
        (0..200_000)
            .map(|i| token_for(&o.config, &format!("{run}-{i}")))
            .collect(),
    );
    let bodies: Arc<Vec<String>> = Arc::new(
        ids.iter()
            .map(|v| format!(r#"{{"variant":"{v}"}}"#))
            .collect(),
    );
    http_leg(
        format!("winners over HTTP, {VARIANTS} variants"),
        clients,
        secs,
        201,
        move |h, i| {
            h.post(&url)
                .bearer_auth(&tokens[i as usize % tokens.len()])
                .header("idempotency-key", format!("k{i}"))
                .header("content-type", "application/json")
                .body(bodies[i as usize % VARIANTS].clone())
        },
    )
    .await
}

/// Leg 5 (see the module doc); prints the legs and the ratio.
pub async fn variants_leg(o: &TestOrigin, args: &Args) {
    println!(
        "## 5. winners/s over HTTP, {VARIANTS} variants vs. none ({} clients)",
        args.http_clients
    );
    let (clients, secs) = (args.http_clients, args.seconds);
    let ratios = rounds::alternate(
        args.rounds,
        async |_| winners_over_http(o, clients, secs, "no variants").await,
        async |_| variant_winners(o, clients, secs).await,
    )
    .await;
    println!(
        "ratio {VARIANTS} variants / none, median of {} rounds: {:.2}x (target >= 0.9x; rounds {})\n",
        ratios.len(),
        rounds::median(&ratios),
        rounds::listed(&ratios)
    );
}
