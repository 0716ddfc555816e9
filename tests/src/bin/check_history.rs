//! `check_history`: checks a stampede's history (`stampede --history FILE`) against the final
//! PostgreSQL state, per campaign (docs/HISTORY.md).
//!
//! Exit status: 0 when every check passed, 1 when a check failed, 2 on bad input (an
//! unreadable file, a bad line, a campaign missing from PostgreSQL, PostgreSQL unreachable).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use flashgate_tests::history::check::{check_file, Options, DEFAULT_SOLD_OUT_GRACE_MS};

/// Flags of `check_history`.
#[derive(Debug, Parser)]
#[command(
    name = "check_history",
    about = "Checks every answer of a stampede's history against the final PostgreSQL state"
)]
struct Args {
    /// The history file (JSON lines, `stampede --history`).
    history: PathBuf,
    /// PostgreSQL of the origin whose campaigns the history names.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// The false-sold-out bound, ms: a `sold_out` answered while units stayed free to the end
    /// fails once it comes this long after the units were free. Default: the documented
    /// staleness of a unit coming back (status TTL 1 s + 2 × campaign cache 100 ms + one round
    /// trip).
    /// At most 86,400,000 (a day).
    #[arg(long, default_value_t = DEFAULT_SOLD_OUT_GRACE_MS,
          value_parser = clap::value_parser!(u64).range(0..=86_400_000))]
    sold_out_grace_ms: u64,
    /// Also write the result as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if e.use_stderr() => {
            let _ = e.print();
            return ExitCode::from(2);
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("check_history: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let options = Options {
        sold_out_grace_ms: args.sold_out_grace_ms,
    };
    let outcome = match runtime.block_on(check_file(&args.history, &args.database_url, options)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("check_history: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", outcome.render());
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&outcome).expect("the outcome serialises");
        if let Err(e) = std::fs::write(path, json + "\n") {
            eprintln!("check_history: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if outcome.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
