//! `flashgate plan`, the real binary: the seeds' two sales as JSON with the figures the model
//! gives by hand (docs/SCALING.md, "Capacity plan"), the table for people, a calibration file,
//! and bad input ending in exit 2 with the option named.
//!
//! The binary is `target/<profile>/flashgate`, next to this test's `deps/` directory: `cargo
//! test --workspace` builds it; with `cargo test -p flashgate-tests`, build it first (`cargo
//! build -p flashgate-origin --bin flashgate`).

use std::process::Output;

use flashgate_origin::cli::exit;
use flashgate_tests::support::{flashgate_bin, unique};
use serde_json::Value;

fn plan(args: &[&str]) -> Output {
    std::process::Command::new(flashgate_bin())
        .arg("plan")
        .args(args)
        .env_clear()
        .output()
        .expect("flashgate runs")
}

/// Runs `flashgate plan <args> --json`, expects exit 0, returns the plan.
fn plan_json(args: &[&str]) -> Value {
    let out = plan(&[args, &["--json"]].concat());
    assert_eq!(
        out.status.code(),
        Some(exit::OK),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the plan is JSON")
}

fn num(v: &Value, path: &str) -> f64 {
    let mut at = v;
    for part in path.split('.') {
        at = &at[part];
    }
    at.as_f64()
        .unwrap_or_else(|| panic!("{path} is not a number: {at}"))
}

fn close(got: f64, want: f64, tolerance: f64, what: &str) {
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: got {got}, want {want} ± {tolerance}"
    );
}

/// Expects exit 2 and one `error:` line naming `needle`.
fn refused(args: &[&str], needle: &str) {
    let out = plan(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(exit::USAGE), "{args:?}: {stderr}");
    assert!(stderr.contains(needle), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?} printed a plan");
}

#[test]
fn the_flash_sale_of_the_seed() {
    // 1,000,000 buyers for 1,000 units, front-loaded over 60 s, 2 tries each.
    let p = plan_json(&["--visitors", "1000000", "--stock", "1000"]);
    close(num(&p, "origin.winners.total"), 1_000.0, 1e-6, "winners");
    close(num(&p, "postgres.claims.total"), 1_000.0, 1e-6, "claims");
    // t_so = F⁻¹(1,000 / 1,000,000), F the burst of mean 15 s.
    let t_so = -15.0 * (1.0 - 0.001 * (1.0 - (-4.0f64).exp())).ln();
    close(num(&p, "times.sell_out_seconds"), t_so, 1e-9, "sell-out");
    // The 2,000 taps before the sell-out all reach the origins: 1,000 winners, 1,000 replays.
    close(
        num(&p, "origin.other_claim_answers.total"),
        1_000.0,
        1e-6,
        "replays",
    );
    // Every tap is answered once, at the edge or at an origin.
    let answered = num(&p, "edge.sold_out_answers.total") + num(&p, "edge.claims_forwarded.total");
    close(answered, 2_000_000.0, 1e-3, "taps");
    assert!(num(&p, "edge.claims_forwarded.total") / 2_000_000.0 < 0.01);
    assert_eq!(num(&p, "origin.origins_needed"), 1.0);
    // 2,048 B of the campaign + 1,000 winners × 710 B; kept 600 s + 24 h after the end.
    close(
        num(&p, "redis.bytes_during_sale"),
        712_048.0,
        1e-6,
        "memory",
    );
    close(
        num(&p, "redis.kept_after_end_seconds"),
        87_000.0,
        1e-9,
        "kept",
    );
    assert_eq!(num(&p, "redis.bytes_after_grace"), 0.0);
    assert!(p["queue"].is_null());
}

#[test]
fn the_giveaway_of_the_seed_through_the_waiting_room() {
    // 50,000,000 users for 6,000,000 coupons over 10 minutes, admitting 20,000 a second.
    let p = plan_json(&[
        "--visitors",
        "50000000",
        "--stock",
        "6000000",
        "--kind",
        "giveaway",
        "--arrival-seconds",
        "600",
        "--tries-per-visitor",
        "1.3",
        "--waiting-room",
        "--admit-per-second",
        "20000",
    ]);
    close(num(&p, "origin.winners.total"), 6_000_000.0, 1.0, "winners");
    // The first joins enter the line 3 s after they are made (ADMIT_LAG_MS); the edge shows
    // 6,000,000 / 20,000 = 300 s of admissions from then on, the last claim TTL 1 s + half a
    // poll after it.
    close(num(&p, "times.sell_out_seconds"), 304.5, 0.1, "sell-out");
    // Claims at the origins keep to the rate (one second's burst at most).
    assert!(num(&p, "origin.winners.peak_per_second") <= 2.0 * 20_000.0);
    close(num(&p, "edge.joins.total"), 65_000_000.0, 1.0, "joins");
    // 2,048 + 6,000,000 × 710 + 50,000,000 × (117.7 + 117.7) bytes: an arrival key and a
    // presence entry per joiner.
    close(
        num(&p, "redis.bytes_during_sale"),
        2_048.0 + 4_260_000_000.0 + 11_770_000_000.0,
        1.0,
        "memory",
    );
    let p50 = num(&p, "queue.wait_p50_seconds");
    let p95 = num(&p, "queue.wait_p95_seconds");
    assert!(p50 > 4.5 && p50 < p95 && p95 < 304.5, "{p50} {p95}");
    assert!(num(&p, "origin.origins_needed") >= 2.0);
}

#[test]
fn the_table_is_for_people() {
    let out = plan(&["--visitors", "1000000", "--stock", "1000"]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let text = String::from_utf8_lossy(&out.stdout);
    for part in [
        "1,000,000 visitors",
        "peak (per s)",
        "origins needed (2 cores, 60 %)",
        "712,048 B (695.4 KiB)",
        "sell-out (first sold_out)",
    ] {
        assert!(text.contains(part), "{part} missing:\n{text}");
    }
}

#[test]
fn a_calibration_file_replaces_the_built_in_one() {
    let mut c: Value =
        serde_json::from_str(flashgate_origin::plan::calibration::DEFAULT_JSON).unwrap();
    c["origin_core_us_per_winner"] = 1_200.0.into();
    c["source"] = "test".into();
    let path = std::env::temp_dir().join(format!("{}.json", unique("calibration")));
    std::fs::write(&path, c.to_string()).unwrap();
    let args = [
        "--visitors",
        "100000",
        "--stock",
        "100000",
        "--arrival",
        "uniform",
    ];
    let base = plan_json(&args);
    let slow = plan_json(&[&args[..], &["--calibration", path.to_str().unwrap()]].concat());
    assert_eq!(slow["calibration_source"], "test");
    // 100,000 visitors evenly over 60 s all win: 1,667 winners a second × 120 or 1,200 µs.
    let winners = num(&base, "origin.winners.peak_per_second");
    let added = num(&slow, "origin.peak_busy_cores") - num(&base, "origin.peak_busy_cores");
    close(added, winners * 1_080.0 / 1e6, 1e-6, "cores");

    // Values just inside "above 0" or huge would overflow the figures (an `inf`, a saturated
    // count): the calibration's bounds refuse them.
    for (field, bad) in [
        ("edge_polls_per_core_second", 1e-300),
        ("redis_bytes_per_winner", 1e308),
    ] {
        let kept = c[field].clone();
        c[field] = bad.into();
        std::fs::write(&path, c.to_string()).unwrap();
        refused(
            &[&args[..], &["--calibration", path.to_str().unwrap()]].concat(),
            field,
        );
        c[field] = kept;
    }
    c["edge_forward_share_after_sold_out"] = 2.0.into();
    std::fs::write(&path, c.to_string()).unwrap();
    refused(
        &[&args[..], &["--calibration", path.to_str().unwrap()]].concat(),
        "edge_forward_share_after_sold_out",
    );
    std::fs::write(&path, "{not json").unwrap();
    refused(
        &[&args[..], &["--calibration", path.to_str().unwrap()]].concat(),
        "calibration",
    );
    std::fs::remove_file(&path).unwrap();
    refused(
        &[&args[..], &["--calibration", path.to_str().unwrap()]].concat(),
        "cannot read calibration",
    );
}

/// A fixed capacity below the crowd's rate queues the taps: the same crowd sells out later
/// and no faster than the capacity answers; one above it changes nothing.
#[test]
fn a_fixed_capacity_queues_the_taps() {
    let crowd = [
        "--visitors",
        "100000",
        "--stock",
        "1000",
        "--arrival-seconds",
        "10",
    ];
    let open = plan_json(&crowd);
    let ample = plan_json(&[&crowd[..], &["--origins", "1000", "--clients", "100000000"]].concat());
    let small = plan_json(&[&crowd[..], &["--edge-cores", "1", "--clients", "16"]].concat());
    let sell_out = |p: &Value| num(p, "times.sell_out_seconds");
    close(
        sell_out(&ample),
        sell_out(&open),
        1e-3,
        "ample capacity, sell-out",
    );
    assert!(
        sell_out(&small) > 2.0 * sell_out(&open),
        "16 clients on one edge core: sell-out {} vs the open crowd's {}",
        sell_out(&small),
        sell_out(&open)
    );
    let peak = num(&small, "origin.claims.peak_per_second");
    assert!(
        peak < num(&open, "origin.claims.peak_per_second"),
        "the queue spreads the origins' busiest second: {peak}"
    );
    assert!(
        String::from_utf8_lossy(&plan(&[&crowd[..], &["--clients", "16"]].concat()).stdout)
            .contains("fixed capacity: 16 closed-loop clients"),
        "the table names the fixed capacity"
    );
}

#[test]
fn bad_input_exits_2_naming_the_option() {
    refused(&["--visitors", "0", "--stock", "10"], "--visitors");
    refused(&["--visitors", "-5", "--stock", "10"], "--visitors");
    refused(
        &["--visitors", "10", "--stock", "10", "--paid-share", "1.5"],
        "--paid-share",
    );
    refused(
        &["--visitors", "10", "--stock", "10", "--hold-seconds", "-1"],
        "--hold-seconds",
    );
    refused(
        &[
            "--visitors",
            "10",
            "--stock",
            "10",
            "--arrival-seconds",
            "0",
        ],
        "--arrival-seconds",
    );
    refused(
        &[
            "--visitors",
            "10",
            "--stock",
            "10",
            "--target-utilisation",
            "2",
        ],
        "--target-utilisation",
    );
    refused(
        &["--visitors", "10", "--stock", "10", "--waiting-room"],
        "--admit-per-second",
    );
    refused(&["--visitors", "10"], "--stock");
    // A fixed capacity: out of range, or beside a waiting room (whose pace sets the load).
    for (option, value) in [
        ("--edge-cores", "0"),
        ("--origins", "0"),
        ("--clients", "0"),
    ] {
        refused(
            &["--visitors", "1000", "--stock", "100", option, value],
            option,
        );
        refused(
            &[
                "--visitors",
                "1000",
                "--stock",
                "100",
                "--waiting-room",
                "--admit-per-second",
                "50",
                option,
                "4",
            ],
            option,
        );
    }
    // Inside the old "above 0" but small enough to saturate every count.
    for (option, value) in [
        ("--target-utilisation", "1e-300"),
        ("--cores-per-origin", "1e-300"),
        ("--arrival-seconds", "1e-300"),
        ("--ended-keys-grace-seconds", "1e300"),
    ] {
        refused(
            &["--visitors", "1000", "--stock", "100", option, value],
            option,
        );
    }
    refused(
        &["--visitors", "18446744073709551615", "--stock", "10"],
        "--visitors",
    );
}

/// Output that cannot be written: a full device is an error (exit 5, one `error:` line, no
/// panic); a reader that went away (`| head`) is not.
#[test]
fn stdout_that_cannot_be_written() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = std::process::Command::new(flashgate_bin())
        .args(["plan", "--visitors", "1000000", "--stock", "1000"])
        .stdout(full)
        .output()
        .expect("flashgate runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(exit::UNREACHABLE), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: writing to stdout: "), "{err}");

    let mut child = std::process::Command::new(flashgate_bin())
        .args(["plan", "--visitors", "1000000", "--stock", "1000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("flashgate runs");
    drop(child.stdout.take()); // the reader is gone before the first byte
    let out = child.wait_with_output().expect("flashgate ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(exit::OK), "{err}");
    assert!(err.is_empty(), "{err}");
}
