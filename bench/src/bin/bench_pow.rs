//! What a bot pays for a waiting room with a proof-of-work challenge, against what the edge pays
//! to check it: `--joins` customers (default 1,000, one bot's accounts) each get a challenge at
//! `--difficulty` (default the campaign default, [`pow::DEFAULT_DIFFICULTY`] bits) and solve it
//! the way the waiting page does (counting up from 0, [`pow::solve`]); each solution is then
//! checked as the edge checks a join ([`pow::check`]: one HMAC, one SHA-256).
//!
//! Prints the bot's total hash work (hashes, against the expected `joins × 2^difficulty`), its
//! time on one core of this machine and the rate, then the edge's check time per join and the
//! ratio of the two. Single-threaded on purpose: a bot's cost is its hashes; divide by the cores
//! it owns. Run: `cargo run --release -p flashgate-bench --bin bench_pow`.

use std::time::Instant;

use clap::Parser;
use flashgate_shared::pow;

#[derive(Parser)]
struct Args {
    /// Joins the bot makes (one challenge each, for a customer of its own).
    #[arg(long, default_value_t = 1_000)]
    joins: u32,
    /// Leading zero bits each solution needs.
    #[arg(long, default_value_t = pow::DEFAULT_DIFFICULTY)]
    difficulty: u8,
}

/// The edge's secret of this run (any 32 bytes: the bench checks its own challenges).
const SECRET: &[u8] = b"bench-pow secret, 32 bytes long!";
/// The challenges' issue time, seconds since the Unix epoch (fixed: nothing expires).
const NOW_S: i64 = 1_800_000_000;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        (1..=pow::MAX_DIFFICULTY).contains(&args.difficulty),
        "--difficulty must be 1 to {}",
        pow::MAX_DIFFICULTY
    );
    let challenges: Vec<(String, String)> = (0..args.joins)
        .map(|i| {
            let customer = format!("bot-{i}");
            let mut nonce = [0u8; 16];
            nonce[..4].copy_from_slice(&i.to_be_bytes());
            let c = pow::new_challenge("drop", &customer, nonce, args.difficulty, NOW_S, 120);
            (customer, pow::issue(SECRET, &c))
        })
        .collect();

    let t0 = Instant::now();
    let mut solutions = Vec::with_capacity(challenges.len());
    let mut hashes: u64 = 0;
    for (_, s) in &challenges {
        let n = pow::solve(s, args.difficulty, u64::MAX)
            .ok_or_else(|| anyhow::anyhow!("no solution below u64::MAX"))?;
        hashes += n + 1;
        solutions.push(n.to_string());
    }
    let solve_s = t0.elapsed().as_secs_f64();

    let t1 = Instant::now();
    for ((customer, s), n) in challenges.iter().zip(&solutions) {
        pow::check(SECRET, s, n, "drop", customer, NOW_S)
            .map_err(|e| anyhow::anyhow!("a solution was refused: {e:?}"))?;
    }
    let check_us = t1.elapsed().as_secs_f64() * 1e6 / f64::from(args.joins);

    let joins = f64::from(args.joins);
    let expected = joins * 2f64.powi(i32::from(args.difficulty));
    let per_join_ms = solve_s * 1e3 / joins;
    println!(
        "bot: {} joins at difficulty {} bits: {hashes} hashes in all ({:.0} a join; expected about {expected:.0} in all, ratio {:.2})",
        args.joins,
        args.difficulty,
        hashes as f64 / joins,
        hashes as f64 / expected
    );
    println!(
        "bot: {solve_s:.1} s on one core ({per_join_ms:.1} ms a join, {:.2} million hashes/s)",
        hashes as f64 / solve_s / 1e6
    );
    println!(
        "edge: {check_us:.1} µs a join to check its solution; the bot spends {:.0}× that",
        per_join_ms * 1e3 / check_us
    );
    Ok(())
}
