//! A large giveaway to its sell-out, straight at one origin over HTTP (the origin runs in this
//! process), then gate takes/s on one key against 16 shards on a Redis Cluster. Prints:
//! claims/s, the time to sell out, peak RSS of this process (origin + load generator), Redis
//! memory per unit and per winner, PostgreSQL size (table + indexes of `claims` and
//! `ledger`) per claim, the units the gate still had when the first `sold_out` was
//! answered (must be 0), and the p99 of a Redis `PING` probe before and across the sell-out.
//!
//! Run through `scripts/bench-giveaway` (it starts a private Redis and the cluster).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use flashgate_bench::stampede::progress::Progress;
use flashgate_origin::gate;
use flashgate_origin::gate::Gate;
use flashgate_origin::redis_conn::RedisConn;
use flashgate_tests::support::{claim_at, TestOrigin};
use hdrhistogram::Histogram;

#[derive(Parser)]
struct Args {
    /// Units of the giveaway.
    #[arg(long, default_value_t = 1_000_000)]
    units: i64,
    /// Shards of its gate.
    #[arg(long, default_value_t = 16)]
    shards: i64,
    /// Concurrent HTTP clients.
    #[arg(long, default_value_t = 128)]
    clients: usize,
    /// A Redis Cluster (`redis+cluster://…`) for the takes/s leg; skipped when absent.
    #[arg(long)]
    cluster_url: Option<String>,
    /// Seconds per leg of takes/s.
    #[arg(long, default_value_t = 5)]
    take_seconds: u64,
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn used_memory(r: &mut Gate) -> i64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(r)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

async fn pg_bytes(db: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT (pg_total_relation_size('claims') + pg_total_relation_size('ledger'))::bigint",
    )
    .fetch_one(db)
    .await
    .unwrap_or(0)
}

/// Pings Redis every 2 ms on its own connection until `stop`; latencies in µs, split at the
/// moment `sold` turns true.
async fn ping_probe(
    mut r: Gate,
    stop: Arc<AtomicBool>,
    sold: Arc<AtomicBool>,
) -> (Histogram<u64>, Histogram<u64>) {
    let mut before = Histogram::<u64>::new(3).unwrap();
    let mut across = Histogram::<u64>::new(3).unwrap();
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let _: String = redis::cmd("PING").query_async(&mut r).await.unwrap();
        let us = t.elapsed().as_micros() as u64;
        if sold.load(Ordering::Relaxed) {
            &mut across
        } else {
            &mut before
        }
        .record(us.max(1))
        .unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    (before, across)
}

async fn giveaway(args: &Args) {
    let o = TestOrigin::start().await;
    let mut r = Gate::new(flashgate_tests::support::redis_conn().await);
    let (mem0, pg0) = (used_memory(&mut r).await, pg_bytes(&o.db).await);
    let c = o
        .sharded_campaign("giveaway", args.units, args.shards)
        .await;
    let mem_loaded = used_memory(&mut r).await;
    let (stop, sold) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let probe = tokio::spawn(ping_probe(r.clone(), stop.clone(), sold.clone()));
    let next = Arc::new(AtomicU64::new(0));
    let unsold_at_first = Arc::new(AtomicU64::new(u64::MAX));
    // Planned: one try per unit (each client's last try is its sold_out); every try is a new
    // customer, so every 201 is a winner.
    let progress = Progress::new("giveaway", args.units as u64, 0);
    let reporter = progress.report(Duration::from_secs(5));
    let started = Instant::now();
    let workers: Vec<_> = (0..args.clients)
        .map(|w| {
            let (http, url) = (o.http.clone(), o.url.clone());
            let (next, sold, unsold, c) = (
                next.clone(),
                sold.clone(),
                unsold_at_first.clone(),
                c.clone(),
            );
            let config = o.config.clone();
            let mut r = r.clone();
            let progress = progress.clone();
            tokio::spawn(async move {
                let mut won = 0u64;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let who = format!("b{w}-{i}");
                    let token = flashgate_tests::support::token_for(&config, &who);
                    progress.sent();
                    let (s, b) = claim_at(&http, &url, &token, &c, "k").await;
                    progress.answered(0, false, s == 201);
                    match s {
                        201 => won += 1,
                        409 if b["result"] == "sold_out" => {
                            if !sold.swap(true, Ordering::SeqCst) {
                                let left: i64 = gate::shard_states(&mut r, &c)
                                    .await
                                    .unwrap()
                                    .iter()
                                    .map(|s| s.remaining)
                                    .sum();
                                unsold.store(left.max(0) as u64, Ordering::SeqCst);
                            }
                            return won;
                        }
                        _ => {}
                    }
                }
            })
        })
        .collect();
    let mut winners = 0u64;
    for w in workers {
        winners += w.await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    reporter.finish().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let (before, across) = probe.await.unwrap();
    let mem1 = used_memory(&mut r).await;
    let pg1 = pg_bytes(&o.db).await;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM claims WHERE campaign_id = $1")
        .bind(&c)
        .fetch_one(&o.db)
        .await
        .unwrap();
    let report = o.reconcile(&c).await;
    println!(
        "giveaway of {} units, {} gate shards, {} clients",
        args.units, args.shards, args.clients
    );
    println!("  winners (201)                 {winners}  (claim rows {rows})");
    println!("  time to sell out              {secs:.2} s");
    println!(
        "  claims/s                      {:.0}",
        winners as f64 / secs
    );
    println!(
        "  peak RSS (origin + clients)   {} MiB",
        peak_rss_kib() / 1024
    );
    println!(
        "  Redis bytes per unit (loaded) {:.1}",
        (mem_loaded - mem0) as f64 / args.units as f64
    );
    println!(
        "  Redis bytes per winner        {:.1}",
        (mem1 - mem_loaded) as f64 / winners.max(1) as f64
    );
    println!(
        "  PostgreSQL bytes per claim    {:.0}",
        (pg1 - pg0) as f64 / rows.max(1) as f64
    );
    println!(
        "  units unsold at first sold_out {}",
        unsold_at_first.load(Ordering::SeqCst)
    );
    println!("  reconcile ok                  {}", report["ok"]);
    let q = |h: &Histogram<u64>| h.value_at_quantile(0.99) as f64 / 1000.0;
    println!(
        "  PING p99 before sell-out      {:.2} ms ({} probes)",
        q(&before),
        before.len()
    );
    println!(
        "  PING p99 across sell-out      {:.2} ms ({} probes, max {:.2} ms)",
        q(&across),
        across.len(),
        across.max() as f64 / 1000.0
    );
    o.stop().await;
}

/// Takes/s straight at the gate of a campaign of `shards` shards set up by hand (units never
/// run out), from `clients` tasks for `secs`.
async fn takes(r: &Gate, shards: u16, clients: usize, secs: u64) -> f64 {
    let c = flashgate_tests::support::unique("bench-take");
    let mut w = r.clone();
    for s in 0..shards {
        let k = gate::Keys::shard(&c, s);
        let _: () = redis::pipe()
            .set(&k.remaining, i64::MAX / 4)
            .set(&k.loaded, "bench")
            .query_async(&mut w)
            .await
            .unwrap();
    }
    let _: () = redis::cmd("SET")
        .arg(gate::Keys::of(&c).shards)
        .arg(shards)
        .query_async(&mut w)
        .await
        .unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(secs);
    let tasks: Vec<_> = (0..clients)
        .map(|t| {
            let (mut r, c, done) = (r.clone(), c.clone(), done.clone());
            tokio::spawn(async move {
                let mut i = 0u64;
                while Instant::now() < until {
                    let who = format!("t{t}-{i}");
                    let took = gate::take(&mut r, &c, &who, &gate::pending_token())
                        .await
                        .unwrap();
                    assert_eq!(took, gate::Take::Taken);
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / secs as f64
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    giveaway(&args).await;
    if let Some(url) = &args.cluster_url {
        let r = Gate::new(RedisConn::open(url, None).await.expect("cluster"));
        let one = takes(&r, 1, 64, args.take_seconds).await;
        let sixteen = takes(&r, 16, 64, args.take_seconds).await;
        println!(
            "gate takes/s on the cluster (64 tasks, {} s each)",
            args.take_seconds
        );
        println!("  one key (1 shard)             {one:.0}");
        println!(
            "  16 shards                     {sixteen:.0}  ({:.2}x)",
            sixteen / one
        );
    }
}
