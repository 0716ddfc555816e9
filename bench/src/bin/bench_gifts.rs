//! Gift fulfilment throughput, straight at one origin over HTTP (the origin runs in this
//! process, over `DATABASE_URL`): fulfilments/s for `--subscribers` distinct subscribers (one
//! request each, `--clients` at once), then for one hot subscriber hit by `--hot` concurrent
//! requests with distinct keys (one grant, the rest `cap_reached`), then another hit by as
//! many with one key (one grant, the rest replays). After each leg: the
//! advisory-lock wait p50/p99 as the origin measured it (its histogram buckets: the figure
//! printed is the upper bound of the bucket holding that quantile) and the replay rate.
//!
//! `cargo run --release -p flashgate-bench --bin bench_gifts`

use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use flashgate_tests::gifts::{campaign, fulfil, gift_origin, key, members, msisdn};
use futures::stream::{self, StreamExt};

#[derive(Parser)]
struct Args {
    /// Distinct subscribers of the first leg (one fulfilment each).
    #[arg(long, default_value_t = 10_000)]
    subscribers: usize,
    /// Concurrent HTTP clients of the first leg.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Concurrent requests for the hot subscriber.
    #[arg(long, default_value_t = 100)]
    hot: usize,
}

/// (count, p50 bound, p99 bound) in ms from the origin's lock-wait histogram text.
fn lock_wait(metrics: &str) -> (u64, f64, f64) {
    let buckets: Vec<(f64, u64)> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("flashgate_advisory_lock_wait_seconds_bucket{le=\""))
        .filter_map(|l| {
            let (le, n) = l.split_once("\"} ")?;
            Some((le.parse::<f64>().unwrap_or(f64::INFINITY), n.parse().ok()?))
        })
        .collect();
    let count = buckets.last().map_or(0, |b| b.1);
    let q = |p: f64| {
        let want = (count as f64 * p).ceil() as u64;
        buckets
            .iter()
            .find(|(_, n)| *n >= want)
            .map_or(f64::INFINITY, |(le, _)| le * 1e3)
    };
    (count, q(0.5), q(0.99))
}

fn delta(before: &str, after: &str) -> String {
    // Rebuild a histogram of the leg alone: bucket counts after minus before.
    let read = |m: &str| -> Vec<(String, u64)> {
        m.lines()
            .filter(|l| l.starts_with("flashgate_advisory_lock_wait_seconds_bucket"))
            .filter_map(|l| {
                let (k, v) = l.rsplit_once(' ')?;
                Some((k.to_string(), v.parse().ok()?))
            })
            .collect()
    };
    read(after)
        .into_iter()
        .zip(read(before))
        .map(|((k, a), (_, b))| format!("{k} {}\n", a - b))
        .collect()
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let o = Arc::new(gift_origin().await);
    let c = campaign(&o, &[("s1", 2_000, &[(1, 1)])]).await;
    let subscribers: Vec<String> = (0..args.subscribers).map(|_| msisdn()).collect();
    for chunk in subscribers.chunks(100_000) {
        members(&o, &c, "s1", chunk).await;
    }
    let (hot, hot_key) = (msisdn(), msisdn());
    members(&o, &c, "s1", &[hot.clone(), hot_key.clone()]).await;
    let metrics = |o: &flashgate_tests::support::TestOrigin| o.origin.state.metrics.render();

    let m0 = metrics(&o);
    let started = Instant::now();
    let granted = stream::iter(subscribers.iter())
        .map(|m| {
            let (o, c) = (o.clone(), c.clone());
            async move { fulfil(&o, &c, &key(), m).await.status }
        })
        .buffer_unordered(args.clients)
        .filter(|s| std::future::ready(*s == 201))
        .count()
        .await;
    let secs = started.elapsed().as_secs_f64();
    let m1 = metrics(&o);
    let (n, p50, p99) = lock_wait(&delta(&m0, &m1));
    println!(
        "distinct subscribers: {granted} grants of {} in {secs:.2} s = {:.0} fulfilments/s ({} clients); lock wait p50 ≤ {p50} ms, p99 ≤ {p99} ms over {n} locks",
        args.subscribers,
        granted as f64 / secs,
        args.clients
    );

    let started = Instant::now();
    let replies = futures::future::join_all((0..args.hot).map(|_| {
        let (o, c, hot) = (o.clone(), c.clone(), hot.clone());
        async move { fulfil(&o, &c, &key(), &hot).await.status }
    }))
    .await;
    let secs = started.elapsed().as_secs_f64();
    let m2 = metrics(&o);
    let (n, p50, p99) = lock_wait(&delta(&m1, &m2));
    let grants = replies.iter().filter(|s| **s == 201).count();
    let capped = replies.iter().filter(|s| **s == 409).count();
    println!(
        "one hot subscriber: {} requests in {secs:.3} s = {:.0} fulfilments/s; {grants} granted, {capped} cap_reached; lock wait p50 ≤ {p50} ms, p99 ≤ {p99} ms over {n} locks",
        args.hot,
        args.hot as f64 / secs
    );
    let replays = futures::future::join_all((0..args.hot).map(|_| {
        let (o, c, hot) = (o.clone(), c.clone(), hot_key.clone());
        async move { fulfil(&o, &c, "bench-same-key", &hot).await.status }
    }))
    .await;
    let m3 = metrics(&o);
    let rate = m3
        .lines()
        .find_map(|l| l.strip_prefix("flashgate_gift_replay_ratio "))
        .unwrap_or("?");
    println!(
        "one hot subscriber, one key × {}: {} answered 201 (the grant or its replay); replay ratio since start {rate}",
        args.hot,
        replays.iter().filter(|s| **s == 201).count()
    );
    match Arc::try_unwrap(o) {
        Ok(o) => o.stop().await,
        Err(_) => eprintln!("origin still shared; not stopped cleanly"),
    }
}
