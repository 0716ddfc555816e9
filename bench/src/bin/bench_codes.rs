//! Benchmark of one-time code batches, against the estimate of a plain row-by-row load: about
//! 200 seconds for a million codes at 5,000 rows a second.
//!
//! All legs run in one process against the same PostgreSQL, alternating, `--rounds` times:
//! - `plain COPY, bare table`: COPY of `--count` pre-made rows of the same width (a 12-symbol
//!   code, two bigints; in key order, as a batch sends them) into a table without keys or
//!   indexes — the floor, without the unique key a batch must have;
//! - `plain COPY, same table shape`: the same rows into a copy of `coupon_codes` (primary key,
//!   rules index, checks) — what saving alone costs;
//! - `batch`: [`flashgate_origin::promo::batch::generate`] end to end: draw from the CSPRNG,
//!   drop repeats, COPY into `coupon_codes`, commit.
//!
//! The tables are emptied (TRUNCATE) and a CHECKPOINT taken before each leg. Uses its own
//! database (`BENCH_DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/flashgate_bench`,
//! created when missing). Run: `cargo run --release -p flashgate-bench --bin bench_codes`.

use std::time::{Duration, Instant};

use clap::Parser;
use flashgate_origin::db::Db;
use flashgate_origin::promo::batch;
use flashgate_tests::support::one_time_rules;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

#[derive(Parser)]
struct Args {
    /// Codes per leg.
    #[arg(long, default_value_t = 1_000_000)]
    count: usize,
    /// Rounds of all legs.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// PostgreSQL URL of the benchmark database.
    #[arg(
        long,
        env = "BENCH_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/flashgate_bench"
    )]
    database_url: String,
}

/// The row-by-row estimate: 1,000,000 rows at 5,000 rows a second, in seconds.
const ESTIMATE_SECONDS: f64 = 200.0;

async fn exec(db: &PgPool, sql: &str) {
    sqlx::raw_sql(sql).execute(db).await.expect(sql);
}

async fn plain_copy(db: &PgPool, table: &str, data: &[u8]) -> Duration {
    exec(db, &format!("TRUNCATE {table}")).await;
    exec(db, "CHECKPOINT").await;
    let started = Instant::now();
    let mut tx = db.begin().await.unwrap();
    let mut copy = tx
        .copy_in_raw(&format!(
            "COPY {table} (code, rules_id, uses_left) FROM STDIN"
        ))
        .await
        .unwrap();
    for chunk in data.chunks(1 << 20) {
        copy.send(chunk).await.unwrap();
    }
    copy.finish().await.unwrap();
    tx.commit().await.unwrap();
    started.elapsed()
}

async fn one_batch(db: &PgPool, count: usize, drawing: &mut Vec<Duration>) -> Duration {
    exec(
        db,
        "TRUNCATE coupon_codes; TRUNCATE coupon_batches, coupon_rules",
    )
    .await;
    exec(db, "CHECKPOINT").await;
    let rules = one_time_rules(2000);
    let started = Instant::now();
    let b = batch::generate(&Db::from(db.clone()), &rules, count)
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(b.count as usize, count);
    drawing.push(b.drawn_in);
    took
}

fn line(name: &str, count: usize, runs: &[Duration]) -> f64 {
    let best = runs.iter().min().copied().unwrap_or_default().as_secs_f64();
    let all: Vec<String> = runs
        .iter()
        .map(|d| format!("{:.2}", d.as_secs_f64()))
        .collect();
    println!(
        "{name:<34} best {best:>6.2} s  {:>10.0} rows/s   runs [{}] s",
        count as f64 / best,
        all.join(", ")
    );
    best
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    flashgate_tests::support::ensure_database(&args.database_url).await;
    let db = PgPoolOptions::new()
        .max_connections(2)
        .connect(&args.database_url)
        .await
        .expect("connect");
    flashgate_origin::migrate::run(&db.connect_options())
        .await
        .expect("migrate");
    exec(
        &db,
        "DROP TABLE IF EXISTS bench_plain_bare, bench_plain_keyed;
         CREATE TABLE bench_plain_bare (code text, rules_id bigint, uses_left bigint,
                                        version bigint DEFAULT 0);
         CREATE TABLE bench_plain_keyed (LIKE coupon_codes INCLUDING ALL);",
    )
    .await;
    // The plain legs' rows, made before timing: same width as a batch's (12 symbols, ids),
    // in key order like a batch's.
    let mut codes: Vec<String> = (0..args.count)
        .map(|_| flashgate_origin::giveaway::draw::draw_code())
        .collect();
    codes.sort_unstable();
    let mut data = Vec::with_capacity(args.count * 20);
    for code in &codes {
        data.extend_from_slice(code.as_bytes());
        data.extend_from_slice(b"\t1\t1\n");
    }
    println!(
        "one-time code batch benchmark: {} codes per leg, {} rounds, PostgreSQL {}",
        args.count,
        args.rounds,
        sqlx::query_scalar::<_, String>("SHOW server_version")
            .fetch_one(&db)
            .await
            .unwrap()
    );
    let (mut bare, mut keyed, mut batches, mut drawing) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.rounds {
        bare.push(plain_copy(&db, "bench_plain_bare", &data).await);
        keyed.push(plain_copy(&db, "bench_plain_keyed", &data).await);
        batches.push(one_batch(&db, args.count, &mut drawing).await);
    }
    let bare = line("plain COPY, bare table", args.count, &bare);
    let keyed = line("plain COPY, same table shape", args.count, &keyed);
    let batch = line("batch (draw + dedupe + COPY)", args.count, &batches);
    line("  of which draw + dedupe + sort", args.count, &drawing);
    let estimate = ESTIMATE_SECONDS * args.count as f64 / 1_000_000.0;
    println!("estimate (5,000 rows/s)            {estimate:>6.2} s");
    println!(
        "ratio batch / plain COPY (same shape) {:.2}x   (target <= 2x)",
        batch / keyed
    );
    println!("ratio batch / plain COPY (bare)       {:.2}x", batch / bare);
    println!(
        "ratio estimate / batch                {:.0}x faster than the estimate",
        estimate / batch
    );
    exec(
        &db,
        "DROP TABLE bench_plain_bare, bench_plain_keyed; TRUNCATE coupon_codes;
         TRUNCATE coupon_batches, coupon_rules",
    )
    .await;
}
