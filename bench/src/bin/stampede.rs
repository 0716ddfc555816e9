//! `stampede`: the flashgate load generator. See `stampede --help` and
//! `flashgate_bench::stampede`.
//!
//! Exit status: 0 when every check passed, 1 when a check failed, 2 when the run itself could
//! not be done (bad flags, a service down, the campaign not created).

use std::process::ExitCode;

use clap::Parser;
use flashgate_bench::stampede::{plots, run_stampede, Args};

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stampede: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let report = match runtime.block_on(run_stampede(&args)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("stampede: error: {e:#}");
            return ExitCode::from(2);
        }
    };
    print!("{}", report.render());
    if let Some(path) = &args.report {
        let json = serde_json::to_string_pretty(&report).expect("report serialises");
        if let Err(e) = std::fs::write(path, json + "\n") {
            eprintln!("stampede: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
        println!("report      written to {}", path.display());
        match plots::write_all(path, &report.timeline) {
            Ok(written) => {
                for plot in written {
                    println!("plot        written to {}", plot.display());
                }
            }
            Err(e) => {
                eprintln!("stampede: {e:#}");
                return ExitCode::from(2);
            }
        }
    }
    if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
