//! `flashgate plan`: the capacity plan of a sale ([`crate::plan`]) as a table, or as JSON with
//! `--json`. Bad input or an unreadable calibration: one line `error: …` on stderr, exit 2.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::cli::exit;
use crate::plan::{self, Arrival, Calibration, Inputs, Kind};

/// Options of `flashgate plan`. Defaults: the origin's and the edge's documented defaults.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct PlanArgs {
    /// Distinct visitors who try.
    #[arg(long)]
    pub visitors: u64,
    /// Seconds over which they arrive.
    #[arg(long, default_value_t = 60.0)]
    pub arrival_seconds: f64,
    /// The arrival curve: `uniform`, or `burst` (front-loaded like the stampede generator).
    #[arg(long, value_enum, default_value_t = ArrivalArg::Burst)]
    pub arrival: ArrivalArg,
    /// Claim taps (join taps with a waiting room) per visitor: double taps and retries.
    #[arg(long, default_value_t = 2.0)]
    pub tries_per_visitor: f64,
    /// Units for sale, all variants together.
    #[arg(long)]
    pub stock: u64,
    /// Variants (one campaign each; stock and crowd split evenly).
    #[arg(long, default_value_t = 1)]
    pub variants: u32,
    /// `sale` (winners hold their unit until they pay) or `giveaway` (no holds).
    #[arg(long, value_enum, default_value_t = KindArg::Sale)]
    pub kind: KindArg,
    /// Hold time of a sale's winners, seconds (the campaign's `hold_seconds`).
    #[arg(long, default_value_t = flashgate_shared::api::campaigns::DEFAULT_HOLD_SECONDS as f64)]
    pub hold_seconds: f64,
    /// Share of winners who pay, 0..=1 (the others' units come back: the second wave).
    #[arg(long, default_value_t = 1.0)]
    pub paid_share: f64,
    /// Put a waiting room in front (needs --admit-per-second).
    #[arg(long, requires = "admit_per_second")]
    pub waiting_room: bool,
    /// The waiting room's admit_per_second, of each variant's campaign (implies --waiting-room).
    #[arg(long)]
    pub admit_per_second: Option<f64>,
    /// The edge's FLASHGATE_STATUS_TTL_MS.
    #[arg(long, default_value_t = 1000)]
    pub status_ttl_ms: u64,
    /// A waiting visitor's poll interval, seconds (default: the poll's Retry-After, eta / 2
    /// within 1..=30 s).
    #[arg(long)]
    pub poll_seconds: Option<f64>,
    /// Campaign status reads per visitor (the product page).
    #[arg(long, default_value_t = 1.0)]
    pub status_reads_per_visitor: f64,
    /// Cores of one origin.
    #[arg(long, default_value_t = 2.0)]
    pub cores_per_origin: f64,
    /// CPU share each machine is planned to (0 < u <= 1).
    #[arg(long, default_value_t = 0.6)]
    pub target_utilisation: f64,
    /// Edge isolates holding the campaign (default: one per edge core the plan needs).
    #[arg(long)]
    pub edge_isolates: Option<u64>,
    /// Cores the edge has, when fixed (a local workerd: 1): the taps queue for them. Default:
    /// as many as the crowd needs. Without a waiting room only.
    #[arg(long)]
    pub edge_cores: Option<f64>,
    /// Origins the sale runs on, when fixed (--cores-per-origin each): the taps queue for
    /// them. Default: as many as the crowd needs. Without a waiting room only.
    #[arg(long)]
    pub origins: Option<u64>,
    /// Connections of a closed-loop load generator (each waits for its answer): at most this
    /// many taps in flight. Default: an open crowd. Without a waiting room only.
    #[arg(long)]
    pub clients: Option<u64>,
    /// The origin's FLASHGATE_ENDED_KEYS_GRACE_SECONDS.
    #[arg(long, default_value_t = 86_400.0)]
    pub ended_keys_grace_seconds: f64,
    /// A calibration JSON file (docs/SCALING.md, "Capacity plan") instead of the built-in one.
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--arrival`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ArrivalArg {
    Uniform,
    Burst,
}

/// `--kind`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum KindArg {
    Sale,
    Giveaway,
}

impl PlanArgs {
    /// The model's inputs (unchecked).
    pub fn inputs(&self) -> Inputs {
        Inputs {
            visitors: self.visitors,
            arrival_seconds: self.arrival_seconds,
            arrival: match self.arrival {
                ArrivalArg::Uniform => Arrival::Uniform,
                ArrivalArg::Burst => Arrival::Burst,
            },
            tries_per_visitor: self.tries_per_visitor,
            stock: self.stock,
            variants: self.variants,
            kind: match self.kind {
                KindArg::Sale => Kind::Sale,
                KindArg::Giveaway => Kind::Giveaway,
            },
            hold_seconds: self.hold_seconds,
            paid_share: self.paid_share,
            admit_per_second: self.admit_per_second,
            status_ttl_seconds: self.status_ttl_ms as f64 / 1000.0,
            poll_seconds: self.poll_seconds,
            status_reads_per_visitor: self.status_reads_per_visitor,
            cores_per_origin: self.cores_per_origin,
            target_utilisation: self.target_utilisation,
            edge_isolates: self.edge_isolates,
            ended_keys_grace_seconds: self.ended_keys_grace_seconds,
            edge_cores: self.edge_cores,
            origins: self.origins,
            clients: self.clients,
        }
    }
}

/// The calibration of `path`, or the built-in one; the error is the line to print.
pub fn calibration(path: Option<&PathBuf>) -> Result<Calibration, String> {
    let Some(path) = path else {
        return Ok(Calibration::default());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read calibration {}: {e}", path.display()))?;
    Calibration::parse(&text).map_err(|e| format!("calibration {}: {e}", path.display()))
}

/// Runs `flashgate plan`; returns the exit code ([`exit::OK`], or [`exit::USAGE`] for bad
/// input or calibration).
pub fn run(args: &PlanArgs) -> i32 {
    let inputs = args.inputs();
    if let Err(e) = inputs.check() {
        eprintln!("error: {e}");
        return exit::USAGE;
    }
    let calibration = match calibration(args.calibration.as_ref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    let p = plan::plan(&inputs, &calibration);
    let text = if args.json {
        match serde_json::to_string_pretty(&p) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("error: the plan as JSON: {e}");
                return exit::USAGE;
            }
        }
    } else {
        plan::report::table(&p).trim_end_matches('\n').to_string()
    };
    exit::print_or_code(&text)
}
