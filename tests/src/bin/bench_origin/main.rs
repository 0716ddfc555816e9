//! Benchmark of the origin's claim path. All legs run in one process, one after
//! another, on the same machine and services, and print figures and ratios:
//!
//! 1. durable claims/s: the grouped commit ([`flashgate_origin::claims::commit::Committer`])
//!    vs. one claim per transaction on the campaign row ("the hot row");
//! 2. winners/s end to end over HTTP: the origin with grouped commits vs. the same origin with
//!    `FLASHGATE_COMMIT_BATCH_MAX=1`, and against the durable grouped rate of leg 1, at the
//!    HTTP clients' concurrency and at the durable leg's (`--commit-clients` winners in flight);
//! 3. sold-out answers/s over HTTP vs. an axum handler returning a constant JSON body;
//!    with p50/p99 latency for every HTTP leg;
//! 4. winners/s over HTTP with a webhook endpoint subscribed to `claim.held` (an in-process
//!    receiver answering 204; the relay delivers meanwhile) vs. without one, alternated
//!    (without, with, without) so that drift shows (`--webhooks-only` runs this leg alone).
//!
//! Run: `cargo run --release -p flashgate-tests --bin bench_origin -- --seconds 5`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use flashgate_origin::claims::commit::{Committer, NewClaim};
use flashgate_origin::db::Db;
use flashgate_origin::metrics::AnsweredFrom;
use flashgate_origin::reply::Outcome;
use flashgate_shared::api::CampaignKind;
use flashgate_tests::support::{ensure_database, test_config, token_for, unique, TestOrigin};
use hdrhistogram::Histogram;
use sqlx::PgPool;

mod calibration;

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

struct Leg {
    name: String,
    run: Run,
    hist: Option<Histogram<u64>>,
}

impl Leg {
    fn rate(&self) -> f64 {
        self.run.ops as f64 / self.run.secs
    }
    /// The machine's busy CPU time per operation of the leg, in core-microseconds (every
    /// process: this one, PostgreSQL, Redis), when /proc/stat could be read.
    fn cpu_us_per_op(&self) -> Option<f64> {
        let ops = self.run.ops.max(1) as f64;
        self.run.busy_core_secs.map(|b| b * 1e6 / ops)
    }
    /// [`ByProcess`] per operation, in core-microseconds.
    fn by_process_us_per_op(&self) -> Option<ByProcess> {
        let ops = self.run.ops.max(1) as f64;
        self.run.by_process.map(|b| ByProcess {
            this: b.this * 1e6 / ops,
            postgres: b.postgres * 1e6 / ops,
            redis: b.redis * 1e6 / ops,
        })
    }
    fn print(&self) {
        let cpu = self
            .cpu_us_per_op()
            .map(|us| format!("   cpu/op {us:>5.0} us"))
            .unwrap_or_default();
        match &self.hist {
            Some(h) => println!(
                "{:<48} {:>10.0} /s   p50 {:>7.2} ms   p99 {:>7.2} ms   max {:>7.2} ms{cpu}",
                self.name,
                self.rate(),
                h.value_at_quantile(0.5) as f64 / 1000.0,
                h.value_at_quantile(0.99) as f64 / 1000.0,
                h.max() as f64 / 1000.0
            ),
            None => println!("{:<48} {:>10.0} /s{cpu}", self.name, self.rate()),
        }
    }
}

/// What [`for_secs`] measured.
struct Run {
    ops: u64,
    secs: f64,
    /// Busy CPU time of the whole machine meanwhile, in core-seconds ([`busy_core_secs`]).
    busy_core_secs: Option<f64>,
    /// The part of it spent by this process, PostgreSQL and Redis ([`ByProcess`]).
    by_process: Option<ByProcess>,
}

/// Busy CPU time, in core-seconds, of the processes that share a leg: this one (the clients and
/// the origin), every `postgres` process and every `redis-server` process, from
/// `/proc/<pid>/stat` (`utime` + `stime`, proc(5), in ticks of 1/100 s). A process that starts
/// or ends during a leg counts wrongly for that leg (the PostgreSQL pool keeps its connections,
/// so the legs here start none after their first second).
#[derive(Clone, Copy, Default)]
struct ByProcess {
    this: f64,
    postgres: f64,
    redis: f64,
}

impl ByProcess {
    fn read() -> Option<Self> {
        let own = std::process::id().to_string();
        let mut out = Self::default();
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state …`: the name may hold spaces, so the fields start after its
            // last `)`; `utime` and `stime` (fields 14 and 15) are the 12th and 13th there.
            let Some((head, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let comm = head.split_once('(').map_or("", |(_, c)| c);
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let tick = |i: usize| fields.get(i).and_then(|t| t.parse::<u64>().ok());
            let secs = (tick(11).unwrap_or(0) + tick(12).unwrap_or(0)) as f64 / 100.0;
            if pid == own {
                out.this += secs;
            } else if comm == "postgres" {
                out.postgres += secs;
            } else if comm.starts_with("redis-server") {
                out.redis += secs;
            }
        }
        Some(out)
    }

    fn since(self, before: Self) -> Self {
        Self {
            this: self.this - before.this,
            postgres: self.postgres - before.postgres,
            redis: self.redis - before.redis,
        }
    }
}

/// The machine's busy CPU time since boot, in core-seconds: the first line of /proc/stat
/// (proc(5)) less `idle` and `iowait`, in `USER_HZ` ticks of 1/100 s (Linux's value on every
/// common architecture). `None` off Linux. Other work on the machine counts too: run the bench
/// on an idle machine.
fn busy_core_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let busy: u64 = ticks
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, t)| t)
        .sum();
    Some(busy as f64 / 100.0)
}

async fn stock_campaign(o: &TestOrigin, stock: i64) -> String {
    o.campaign("sale", stock).await
}

/// Runs `clients` loops of `round(client, i)` (`i` counts each loop's rounds from 1) for
/// `secs`; returns the rounds finished and the seconds taken (until every loop stopped).
async fn for_secs<F, Fut>(clients: usize, secs: u64, round: F) -> Run
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let round = Arc::new(round);
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let busy_at_start = busy_core_secs();
    let by_process_at_start = ByProcess::read();
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|w| {
            let (round, stop, ops) = (round.clone(), stop.clone(), ops.clone());
            tokio::spawn(async move {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    round(w, i).await;
                    ops.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("task");
    }
    Run {
        ops: ops.load(Ordering::Relaxed),
        secs: start.elapsed().as_secs_f64(),
        busy_core_secs: busy_at_start.zip(busy_core_secs()).map(|(a, b)| b - a),
        by_process: by_process_at_start
            .zip(ByProcess::read())
            .map(|(a, b)| b.since(a)),
    }
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
    let committer = Committer::start(db.clone(), 4, 512, Default::default());
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
    Leg {
        name: format!("grouped commit, {clients} submitters"),
        run,
        hist: None,
    }
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
    let config = test_config();
    ensure_database(&config.database_url).await;
    let o = TestOrigin::start_with(config.clone()).await;
    let db = o.db.clone();
    if args.webhooks_only {
        webhooks_leg(&o, &args).await;
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
        "ratio grouped / hot row: {:.1}x (target >= 10x)\n",
        grp.rate() / hot.rate()
    );
    if let Some(url) = &args.pgbouncer_url {
        through_pooler(&o, url, &args, &grp).await;
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
    cpu_bound(&grp, &wide, &baseline);
    calibration::write(&args.calibration, &wide, &sold_out, args.seconds);
    let m = &o.origin.state.metrics;
    println!(
        "\nsold-out answers from memory: {}, from the Redis gate: {}",
        m.claims_of(Outcome::SoldOut, AnsweredFrom::Memory),
        m.claims_of(Outcome::SoldOut, AnsweredFrom::Gate)
    );
    println!();
    webhooks_leg(&o, &args).await;
    o.stop().await;
}

/// Prints what the machine's CPU allows winners over HTTP: each winner is one HTTP exchange
/// (at least the constant handler's CPU per request, client side included) plus one durable
/// commit (the grouped leg's CPU per claim), and on a machine where the client, the origin,
/// Redis and PostgreSQL share the same cores, winners/s cannot pass
/// `cores / (exchange + commit)`; against the durable rate (`cores / commit`) that is
/// `commit / (exchange + commit)`.
fn cpu_bound(durable: &Leg, winners: &Leg, exchange: &Leg) {
    let (Some(commit), Some(http), Some(winner)) = (
        durable.cpu_us_per_op(),
        exchange.cpu_us_per_op(),
        winners.cpu_us_per_op(),
    ) else {
        return;
    };
    println!(
        "\nCPU per operation (the whole machine, core-us): winner {winner:.0} = HTTP exchange \
         {http:.0} + durable commit {commit:.0} + the rest (token, gate, claim logic) {:.0}",
        winner - http - commit
    );
    println!(
        "bound of winners over HTTP / durable grouped from CPU alone: {:.2}x \
         (commit / (exchange + commit), every process on the same cores)",
        commit / (http + commit)
    );
    let (Some(d), Some(w)) = (
        durable.by_process_us_per_op(),
        winners.by_process_us_per_op(),
    ) else {
        return;
    };
    println!(
        "by process (core-us per operation): durable commit: this process {:.0}, PostgreSQL \
         {:.0}, Redis {:.0}; winner: this process (clients and origin) {:.0}, PostgreSQL {:.0}, \
         Redis {:.0}",
        d.this, d.postgres, d.redis, w.this, w.postgres, w.redis
    );
    println!(
        "bound with the gate's Redis work as measured: {:.2}x (commit / (exchange + commit + \
         Redis {:.0}))",
        commit / (http + commit + w.redis),
        w.redis
    );
}

/// Leg 4: winners/s without a webhook endpoint, with one subscribed to `claim.held` (its
/// receiver an in-process axum handler answering 204), and without again.
async fn webhooks_leg(o: &TestOrigin, args: &Args) {
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
