//! `--write-calibration FILE`: the capacity plan's calibration (`flashgate plan --calibration
//! FILE`, docs/SCALING.md "Capacity plan") with the per-operation costs this run measured; the
//! fields it does not measure keep the built-in calibration's values.

use std::path::PathBuf;

use flashgate_origin::plan::Calibration;

use super::Leg;

/// The option, flattened into the benchmark's arguments.
#[derive(clap::Args)]
pub struct Out {
    /// Write the capacity plan's calibration JSON, from this run's CPU per operation, to FILE.
    #[arg(long, value_name = "FILE")]
    pub write_calibration: Option<PathBuf>,
}

/// The built-in calibration with this run's figures: a winner's CPU by process (this process
/// = the origin and its HTTP clients; PostgreSQL; Redis, per command) and the machine's CPU
/// per sold-out answer. `None` when `/proc` could not be read.
fn measured(winners: &Leg, sold_out: &Leg, seconds: u64) -> Option<Calibration> {
    let w = winners.by_process_us_per_op()?;
    let mut c = Calibration::default();
    c.source = format!(
        "bench_origin, {seconds} s legs, {:.0} winners/s and {:.0} sold-out answers/s on this \
         machine; the other fields from the built-in calibration",
        winners.rate(),
        sold_out.rate()
    );
    c.origin_core_us_per_winner = w.this;
    c.postgres_core_us_per_claim = w.postgres;
    c.redis_core_us_per_op = w.redis / c.redis_ops_per_winner;
    c.origin_core_us_per_sold_out = sold_out.cpu_us_per_op()?;
    c.check().ok()?;
    Some(c)
}

/// Writes the calibration when `--write-calibration` was given; says what it did.
pub fn write(out: &Out, winners: &Leg, sold_out: &Leg, seconds: u64) {
    let Some(path) = &out.write_calibration else {
        return;
    };
    match measured(winners, sold_out, seconds) {
        Some(c) => {
            let text = serde_json::to_string_pretty(&c).expect("a calibration serialises");
            match std::fs::write(path, text + "\n") {
                Ok(()) => println!("calibration written to {}", path.display()),
                Err(e) => eprintln!("cannot write {}: {e}", path.display()),
            }
        }
        None => eprintln!("no calibration written: the CPU per operation could not be read"),
    }
}
