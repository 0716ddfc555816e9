//! Benchmark of the origin's claim path. All legs run in one process, one after
//! another, on the same machine and services, and print figures and ratios:
//!
//! 1. durable claims/s: the grouped commit ([`flashgate_origin::claims::commit::Committer`])
//!    vs. one claim per transaction on the campaign row ("the hot row"), and vs. the same rows
//!    loaded by `COPY` into the same tables (the schema's limit on this machine, [`copy`];
//!    `--durable-only` runs this leg alone);
//! 2. winners/s end to end over HTTP: the origin with grouped commits vs. the same origin with
//!    `FLASHGATE_COMMIT_BATCH_MAX=1`, and against the durable grouped rate of leg 1, at the
//!    HTTP clients' concurrency and at the durable leg's (`--commit-clients` winners in flight);
//! 3. sold-out answers/s over HTTP vs. an axum handler returning a constant JSON body;
//!    with p50/p99 latency for every HTTP leg;
//! 4. winners/s over HTTP with a webhook endpoint subscribed to `claim.held` (an in-process
//!    receiver answering 204; the relay delivers meanwhile, giving way to the claims for
//!    `FLASHGATE_BENCH_WEBHOOK_RELAY_YIELD_MS`, default the origin's) vs. without one, in
//!    `--rounds` rounds whose order alternates, with each round's ratio and the median
//!    ([`rounds`]), and the time the relay took to deliver the leg's events;
//!    `--webhooks-only` runs this leg alone;
//! 5. winners/s over HTTP on a campaign of 10 variants vs. a plain one, in rounds the same
//!    way ([`variants`]; `--variants-only` runs this leg alone).
//!
//! Run: `cargo run --release -p flashgate-bench --bin bench_origin -- --seconds 5`.

mod calibration;
mod copy;
mod measure;
mod rounds;
mod variants;
mod webhooks;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use flashgate_origin::claims::commit::{Committer, NewClaim};
use flashgate_origin::db::Db;
use flashgate_origin::metrics::AnsweredFrom;
use flashgate_origin::reply::Outcome;
use flashgate_shared::api::CampaignKind;
use flashgate_tests::support::scrape::Scrape;
use flashgate_tests::support::{ensure_database, test_config, token_for, unique, TestOrigin};
use hdrhistogram::Histogram;
use measure::{for_secs, Leg};
use sqlx::PgPool;

/// Commit workers and the most claims per transaction of leg 1b's committer (the origin's
/// defaults), and the shape of leg 1c's transactions.
const COMMIT_WORKERS: usize = 4;
const COMMIT_BATCH: usize = 512;

/// The allocator the `flashgate` binary ships (origin/src/main.rs): the origin runs in this
/// process, so its figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Seconds per leg.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Concurrent HTTP clients.
    #[arg(long, default_value_t = 64)]
    http_clients: usize,
    /// Concurrent database clients of the hot-row leg.
    #[arg(long, default_value_t = 16)]
    db_clients: usize,
    /// Concurrent submitters of the grouped-commit leg.
    #[arg(long, default_value_t = 512)]
    commit_clients: usize,
    /// PgBouncer (transaction pooling) in front of the same database: the grouped-commit leg
    /// runs again through it, with the origin's pooler settings (`FLASHGATE_DB_POOLER=transaction`).
    #[arg(long, env = "FLASHGATE_BENCH_PGBOUNCER_URL")]
    pgbouncer_url: Option<String>,
    /// Serve only the constant JSON handler of leg 3 (the baseline) on this address, until
    /// killed, and run no leg: `scripts/profile-origin` counts its instructions per request
    /// under callgrind.
    #[arg(long, value_name = "HOST:PORT")]
    serve_constant: Option<std::net::SocketAddr>,
    /// Run only leg 4 (winners/s with and without a webhook endpoint).
    #[arg(long)]
    webhooks_only: bool,
    /// Run only leg 5 (winners/s with 10 variants and without).
    #[arg(long)]
    variants_only: bool,
    /// Run only leg 1 (durable claims/s: the hot row, the grouped commit, `COPY`).
    #[arg(long)]
    durable_only: bool,
    /// Rounds of legs 4 and 5 (each a leg without the feature and one with it, their order
    /// alternating from round to round); their median ratio is the figure.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    #[command(flatten)]
    calibration: calibration::Out,
}

/// The baseline of leg 3: an axum router answering `POST /const` with a constant JSON body.
fn constant_handler() -> axum::Router {
    axum::Router::new().route(
        "/const",
        axum::routing::post(|| async {
            (
                [("content-type", "application/json")],
                r#"{"result":"sold_out"}"#,
            )
        }),
    )
}

async fn stock_campaign(o: &TestOrigin, stock: i64) -> String {
    o.campaign("sale", stock).await
}

/// Leg 1a: one claim per transaction, `clients` at once, for `secs`.
async fn hot_row(db: &PgPool, campaign: &str, clients: usize, secs: u64) -> Leg {
    let (db, c) = (db.clone(), campaign.to_string());
    let run = for_secs(clients, secs, move |w, i| {
        let (db, c) = (db.clone(), c.clone());
        async move {
            let mut tx = db.begin().await.expect("begin");
            let took = sqlx::query("UPDATE campaigns SET remaining = remaining - 1 WHERE id = $1 AND remaining > 0")
                .bind(&c)
                .execute(&mut *tx)
                .await
                .expect("update");
            assert_eq!(took.rows_affected(), 1, "bench stock ran out");
            sqlx::query(
                "INSERT INTO claims (id, campaign_id, customer_id, status, held_until, idempotency_key, request_fp)
                 VALUES ($1, $2, $3, 'held', now() + interval '10 minutes', 'k', 'fp')",
            )
            .bind(flashgate_origin::claims::store::new_claim_id())
            .bind(&c)
            .bind(format!("hot-{w}-{i}"))
            .execute(&mut *tx)
            .await
            .expect("insert");
            tx.commit().await.expect("commit");
        }
    })
    .await;
    Leg {
        name: format!("hot row: 1 claim/tx, {clients} clients"),
        run,
        hist: None,
    }
}

/// Leg 1b: claims submitted to the grouped committer by `clients` at once.
async fn grouped(db: &Db, campaign: &str, clients: usize, secs: u64) -> Leg {
    let metrics = Arc::new(flashgate_origin::metrics::Metrics::new());
    let committer = Committer::start(db.clone(), COMMIT_WORKERS, COMMIT_BATCH, metrics.clone());
    let c = campaign.to_string();
    let run = for_secs(clients, secs, move |w, i| {
        let claim = NewClaim {
            id: flashgate_origin::claims::store::new_claim_id(),
            campaign_id: c.clone(),
            customer_id: format!("grp-{w}-{i}"),
            kind: CampaignKind::Sale,
            hold_seconds: Some(600),
            code: None,
            idempotency_key: "k".into(),
            request_fp: "fp".into(),
            variant: None,
        };
        let committer = committer.clone();
        async move {
            match committer.commit(claim).await.expect("commit") {
                flashgate_origin::claims::commit::Outcome::Committed(_) => {}
                other => panic!("unexpected outcome {other:?}"),
            }
        }
    })
    .await;
    let batches = Scrape::parse(&metrics.render());
    let claims = batches.sum("flashgate_commit_batch_size_sum", &[]);
    let commits = batches.sum("flashgate_commit_batch_size_count", &[]);
    let leg = Leg {
        name: format!("grouped commit, {clients} submitters"),
        run,
        hist: None,
    };
    if commits > 0.0 {
        let split = leg
            .by_process_us_per_op()
            .map(|b| {
                format!(
                    "; core-us per claim: this process {:.0}, PostgreSQL {:.0}",
                    b.this, b.postgres
                )
            })
            .unwrap_or_default();
        println!(
            "  ({commits:.0} transactions, {:.1} claims each on average{split})",
            claims / commits
        );
    }
    leg
}

/// An HTTP leg: `clients` loops sending requests built by `make(i)` for `secs`; counts replies
/// with status `want`.
async fn http_leg<F>(name: String, clients: usize, secs: u64, want: u16, make: F) -> Leg
where
    F: Fn(&reqwest::Client, u64) -> reqwest::RequestBuilder + Send + Sync + 'static,
{
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .expect("client");
    // One histogram per client (its lock is never contended), merged at the end.
    let hists: Arc<Vec<Mutex<Histogram<u64>>>> = Arc::new(
        (0..clients)
            .map(|_| Mutex::new(Histogram::new(3).expect("histogram")))
            .collect(),
    );
    let counter = Arc::new(AtomicU64::new(0));
    let per_client = hists.clone();
    let run = for_secs(clients, secs, move |w, _| {
        let i = counter.fetch_add(1, Ordering::Relaxed);
        let req = make(&http, i);
        let hists = per_client.clone();
        async move {
            let t0 = Instant::now();
            let res = req.send().await.expect("request");
            let status = res.status().as_u16();
            let _ = res.bytes().await;
            let took = t0.elapsed().as_micros() as u64;
            hists[w].lock().expect("hist").record(took).ok();
            assert_eq!(status, want, "unexpected status in leg");
        }
    })
    .await;
    let mut hist = Histogram::<u64>::new(3).expect("histogram");
    for h in hists.iter() {
        hist.add(&*h.lock().expect("hist")).expect("merge");
    }
    Leg {
        name,
        run,
        hist: Some(hist),
    }
}

fn claim_request(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    i: u64,
) -> reqwest::RequestBuilder {
    http.post(url)
        .bearer_auth(token)
        .header("idempotency-key", format!("k{i}"))
        .header("content-type", "application/json")
        .body("{}")
}

/// Winners over HTTP: each request is a new customer on a campaign with plenty of stock.
async fn winners_over_http(o: &TestOrigin, clients: usize, secs: u64, label: &str) -> Leg {
    let c = stock_campaign(o, 10_000_000).await;
    let url = format!("{}/api/v1/campaigns/{c}/claims", o.url);
    let run = unique("w");
    // Tokens are minted ahead so the leg measures the origin, not the generator.
    let tokens: Arc<Vec<String>> = Arc::new(
        (0..200_000)
            .map(|i| token_for(&o.config, &format!("{run}-{i}")))
            .collect(),
    );
    http_leg(
        format!("winners over HTTP, {label}"),
        clients,
        secs,
        201,
        move |h, i| claim_request(h, &url, &tokens[i as usize % tokens.len()], i),
    )
    .await
}

/// Leg 1c: the grouped commit through PgBouncer with `FLASHGATE_DB_POOLER=transaction` (every
/// statement unnamed, lone statements in a transaction of their own: [`Db`]), against `direct`
/// (leg 1b, named statements, direct).
async fn through_pooler(o: &TestOrigin, url: &str, args: &Args, direct: &Leg) {
    use flashgate_origin::config::{Config, DbPooler};
    let mut config = Config::for_tests(url, "redis://unused");
    config.db_pooler = DbPooler::Transaction;
    let options = config.pg_options().expect("PgBouncer URL parses");
    let pooled = sqlx::postgres::PgPoolOptions::new()
        .max_connections(16)
        .connect_with(options)
        .await
        .expect("connect through PgBouncer");
    let c = stock_campaign(o, 10_000_000).await;
    let pooled = Db::new(pooled, DbPooler::Transaction);
    let mut bouncer = grouped(&pooled, &c, args.commit_clients, args.seconds).await;
    bouncer.name = "  same, through PgBouncer".into();
    bouncer.print();
    println!(
        "ratio through PgBouncer / direct: {:.2}x\n",
        bouncer.rate() / direct.rate()
    );
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Some(addr) = args.serve_constant {
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        axum::serve(listener, constant_handler())
            .await
            .expect("serve");
        return;
    }
    let mut config = test_config();
    // Attribution runs of leg 4: a relay interval of an hour keeps the relay idle during the
    // legs, so the ratio then counts only the delivery rows written on the claim path.
    if let Some(ms) = std::env::var("FLASHGATE_BENCH_WEBHOOK_RELAY_INTERVAL_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.webhooks.webhook_relay_interval_ms = ms;
    }
    // Leg 4 with the relay never giving way to the claims (0) or for another spell.
    if let Some(ms) = std::env::var("FLASHGATE_BENCH_WEBHOOK_RELAY_YIELD_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.webhooks.webhook_relay_yield_ms = ms;
    }
    ensure_database(&config.database_url).await;
    let o = TestOrigin::start_with(config.clone()).await;
    let db = o.db.clone();
    if args.webhooks_only {
        webhooks::webhooks_leg(&o, &args).await;
        o.stop().await;
        return;
    }
    if args.variants_only {
        variants::variants_leg(&o, &args).await;
        o.stop().await;
        return;
    }
    println!(
        "flashgate origin benchmark — {} s per leg, same process, same services\n",
        args.seconds
    );

    println!("## 1. durable claims/s (PostgreSQL, fsync on)");
    let c = stock_campaign(&o, 10_000_000).await;
    let hot = hot_row(&db, &c, args.db_clients, args.seconds).await;
    hot.print();
    let c = stock_campaign(&o, 10_000_000).await;
    let grp = grouped(&Db::from(db.clone()), &c, args.commit_clients, args.seconds).await;
    grp.print();
    println!(
        "ratio grouped / hot row: {:.1}x (target >= 10x)",
        grp.rate() / hot.rate()
    );
    let c = stock_campaign(&o, 10_000_000).await;
    let copied = copy::copy_rows(&db, &c, COMMIT_WORKERS, COMMIT_BATCH, args.seconds).await;
    copied.print();
    println!(
        "ratio grouped / COPY of the same rows: {:.2}x (target >= 0.5x)\n",
        grp.rate() / copied.rate()
    );
    if let Some(url) = &args.pgbouncer_url {
        through_pooler(&o, url, &args, &grp).await;
    }
    if args.durable_only {
        o.stop().await;
        return;
    }

    println!(
        "## 2. winners/s end to end over HTTP ({} clients)",
        args.http_clients
    );
    let batched = winners_over_http(&o, args.http_clients, args.seconds, "grouped commits").await;
    batched.print();
    let mut single = config.clone();
    single.commit_batch_max = 1;
    let o1 = TestOrigin::start_with(single).await;
    let one = winners_over_http(
        &o1,
        args.http_clients,
        args.seconds,
        "1 claim per transaction",
    )
    .await;
    one.print();
    o1.stop().await;
    println!(
        "ratio grouped / one per transaction: {:.1}x",
        batched.rate() / one.rate()
    );
    println!(
        "ratio winners over HTTP ({} clients) / durable grouped ({} submitters): {:.2}x",
        args.http_clients,
        args.commit_clients,
        batched.rate() / grp.rate()
    );
    // The same concurrency as the durable leg: as many winners in flight as submitters there.
    let wide = winners_over_http(
        &o,
        args.commit_clients,
        args.seconds,
        &format!("grouped commits, {} clients", args.commit_clients),
    )
    .await;
    wide.print();
    println!(
        "ratio winners over HTTP / durable grouped: {:.2}x (both {} in flight; target >= 0.5x)\n",
        wide.rate() / grp.rate(),
        args.commit_clients
    );

    println!(
        "## 3. sold-out answers/s over HTTP ({} clients)",
        args.http_clients
    );
    let c = stock_campaign(&o, 1).await;
    let (s, _) = o.claim(&c, &unique("bench-winner"), "k").await;
    assert_eq!(s, 201);
    let url = format!("{}/api/v1/campaigns/{c}/claims", o.url);
    let run = unique("l");
    let tokens: Arc<Vec<String>> = Arc::new(
        (0..10_000)
            .map(|i| token_for(&o.config, &format!("{run}-{i}")))
            .collect(),
    );
    // Warm up: the first sold-out answers come from Redis and load the winners snapshot.
    for i in 0..3 {
        let _ = claim_request(&o.http, &url, &tokens[i], i as u64)
            .send()
            .await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let sold_out = http_leg(
        "sold-out answers (origin claim path)".into(),
        args.http_clients,
        args.seconds,
        409,
        {
            let (url, tokens) = (url.clone(), tokens.clone());
            move |h, i| claim_request(h, &url, &tokens[i as usize % tokens.len()], i)
        },
    )
    .await;
    sold_out.print();
    // The same leg on an origin without the request metrics (histogram and access line).
    let off = TestOrigin::start_with(flashgate_origin::config::Config {
        request_metrics: false,
        ..o.config.clone()
    })
    .await;
    let off_url = format!("{}/api/v1/campaigns/{c}/claims", off.url);
    for i in 0..3 {
        let _ = claim_request(&off.http, &off_url, &tokens[i], i as u64)
            .send()
            .await;
    }
    let sold_out_off = http_leg(
        "sold-out answers, request metrics off".into(),
        args.http_clients,
        args.seconds,
        409,
        {
            let tokens = tokens.clone();
            move |h, i| claim_request(h, &off_url, &tokens[i as usize % tokens.len()], i)
        },
    )
    .await;
    sold_out_off.print();
    println!(
        "request metrics overhead: {:.1}% (on {:.0}/s vs off {:.0}/s; target < 5%)",
        (1.0 - sold_out.rate() / sold_out_off.rate()) * 100.0,
        sold_out.rate(),
        sold_out_off.rate()
    );
    off.stop().await;
    let app = constant_handler();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    let const_url = format!("http://{addr}/const");
    let baseline = http_leg(
        "constant JSON axum handler (baseline)".into(),
        args.http_clients,
        args.seconds,
        200,
        move |h, i| claim_request(h, &const_url, "x", i),
    )
    .await;
    baseline.print();
    println!(
        "ratio sold-out / constant handler: {:.2}x (target >= 0.9x)",
        sold_out.rate() / baseline.rate()
    );
    measure::cpu_bound(&grp, &wide, &baseline);
    calibration::write(&args.calibration, &wide, &sold_out, args.seconds);
    let m = &o.origin.state.metrics;
    println!(
        "\nsold-out answers from memory: {}, from the Redis gate: {}",
        m.claims_of(Outcome::SoldOut, AnsweredFrom::Memory),
        m.claims_of(Outcome::SoldOut, AnsweredFrom::Gate)
    );
    println!();
    webhooks::webhooks_leg(&o, &args).await;
    variants::variants_leg(&o, &args).await;
    o.stop().await;
}
