//! The capacity plan (`flashgate plan`): from a sale's crowd (visitors, their arrival curve,
//! their tries), its stock, holds and waiting room, and the per-operation costs of a
//! [`Calibration`], what the edge, the origins, Redis and PostgreSQL must carry, second by
//! second, and how many origins of a given size that takes. Pure: no I/O, no clock; the same
//! inputs give the same plan. Formulas: [`model`] and docs/SCALING.md, "Capacity plan".

pub mod calibration;
pub mod model;
pub mod output;
pub mod report;

pub use calibration::Calibration;
pub use model::plan;
pub use output::Plan;

/// How the visitors' first taps spread over the arrival window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// Evenly over the window: `F(t) = t / A`.
    Uniform,
    /// Front-loaded as the stampede generator plays it: a truncated exponential of mean `A / 4`,
    /// `F(t) = (1 − e^(−t/τ)) / (1 − e^(−A/τ))`, `τ = A / 4` (a third of the taps in the first
    /// tenth of the window).
    Burst,
}

/// What is sold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A sale: each winner holds her unit for `hold_seconds` until she pays.
    Sale,
    /// A giveaway: a win is final, no holds.
    Giveaway,
}

/// The sale to plan for. Rates are per second, times in seconds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Inputs {
    /// Distinct visitors who try (≥ 1).
    pub visitors: u64,
    /// Length of the arrival window, seconds (> 0, ≤ 86,400).
    pub arrival_seconds: f64,
    /// Shape of the arrivals over the window.
    pub arrival: Arrival,
    /// Claim taps (or join taps, with a waiting room) per visitor, ≥ 1: double taps and
    /// retries included.
    pub tries_per_visitor: f64,
    /// Units for sale, all variants together (≥ 1).
    pub stock: u64,
    /// Variants of the product (≥ 1): one campaign each, the stock and the crowd split evenly.
    pub variants: u32,
    /// Sale or giveaway.
    pub kind: Kind,
    /// How long a winner's hold lasts, seconds (sales; ≥ 0).
    pub hold_seconds: f64,
    /// Share of the winners who pay within their hold, 0..=1; the others' units come back when
    /// their holds expire (the second wave).
    pub paid_share: f64,
    /// The waiting room's `admit_per_second` of each variant's campaign; `None` without one.
    pub admit_per_second: Option<f64>,
    /// The edge's status freshness (`FLASHGATE_STATUS_TTL_MS` / 1000), seconds (> 0).
    pub status_ttl_seconds: f64,
    /// A waiting customer's poll interval in seconds; `None`: the poll's own `Retry-After`
    /// (`eta / 2`, 1..=30 s).
    pub poll_seconds: Option<f64>,
    /// Campaign status reads per visitor (the product page), ≥ 0.
    pub status_reads_per_visitor: f64,
    /// Cores of one origin (> 0).
    pub cores_per_origin: f64,
    /// CPU share each machine may be planned to, 0 < u ≤ 1.
    pub target_utilisation: f64,
    /// Edge isolates holding the campaign; `None`: one per edge core the plan needs.
    pub edge_isolates: Option<u64>,
    /// `FLASHGATE_ENDED_KEYS_GRACE_SECONDS`: how long the ended campaign's Redis keys stay.
    pub ended_keys_grace_seconds: f64,
    /// Cores the edge has, when fixed (one local workerd: 1); `None`: as many as the crowd
    /// needs (the plan sizes them). Fixed, the taps queue for them (model, `bounded`).
    pub edge_cores: Option<f64>,
    /// Origins the sale runs on, when fixed (`cores_per_origin` each, all of it usable);
    /// `None`: as many as the crowd needs.
    pub origins: Option<u64>,
    /// Connections of a closed-loop load generator (each waits for its answer before the
    /// next try): at most this many taps in flight, each forwarded one for a round trip;
    /// `None`: an open crowd.
    pub clients: Option<u64>,
}

impl Default for Inputs {
    /// 200,000 visitors front-loaded over 60 s, 2 tries each, stock 1,000, one variant, a sale
    /// with the default 600 s holds all paid, no waiting room, the documented defaults for the
    /// rest (status TTL 1 s, 24 h key grace), origins of 2 cores planned to 60 %.
    fn default() -> Self {
        Inputs {
            visitors: 200_000,
            arrival_seconds: 60.0,
            arrival: Arrival::Burst,
            tries_per_visitor: 2.0,
            stock: 1_000,
            variants: 1,
            kind: Kind::Sale,
            hold_seconds: flashgate_shared::api::campaigns::DEFAULT_HOLD_SECONDS as f64,
            paid_share: 1.0,
            admit_per_second: None,
            status_ttl_seconds: 1.0,
            poll_seconds: None,
            status_reads_per_visitor: 1.0,
            cores_per_origin: 2.0,
            target_utilisation: 0.6,
            edge_isolates: None,
            ended_keys_grace_seconds: 86_400.0,
            edge_cores: None,
            origins: None,
            clients: None,
        }
    }
}

/// Longest `ended_keys_grace_seconds` a plan takes: a year.
const MAX_GRACE_SECONDS: f64 = 31_536_000.0;
/// Most visitors (and units) a plan takes: beyond, counts no longer fit the figures' floats
/// exactly.
const MAX_COUNT: u64 = 1_000_000_000_000;

impl Inputs {
    /// Checks every bound; the error names the option (as `flashgate plan` spells it).
    pub fn check(&self) -> Result<(), String> {
        if self.visitors == 0 {
            return Err("--visitors must be at least 1".into());
        }
        if self.visitors > MAX_COUNT || self.stock > MAX_COUNT {
            return Err("--visitors and --stock must be at most 1000000000000".into());
        }
        if self.stock == 0 {
            return Err("--stock must be at least 1".into());
        }
        if self.variants == 0 {
            return Err("--variants must be at least 1".into());
        }
        if self.stock < u64::from(self.variants) || self.visitors < u64::from(self.variants) {
            return Err("--variants must not exceed --stock or --visitors".into());
        }
        between("arrival-seconds", self.arrival_seconds, 0.001, 86_400.0)?;
        between("tries-per-visitor", self.tries_per_visitor, 1.0, 1_000.0)?;
        between("hold-seconds", self.hold_seconds, 0.0, 86_400.0)?;
        between("paid-share", self.paid_share, 0.0, 1.0)?;
        if let Some(r) = self.admit_per_second {
            between("admit-per-second", r, 1.0, 100_000.0)?;
            let per_variant = self.stock as f64 / f64::from(self.variants);
            if per_variant / r > 7.0 * 86_400.0 {
                return Err("--stock / --admit-per-second is over a week of admissions".into());
            }
        }
        if !(self.status_ttl_seconds > 0.0 && self.status_ttl_seconds <= 3_600.0) {
            return Err("--status-ttl-ms must be between 1 and 3600000".into());
        }
        if let Some(p) = self.poll_seconds {
            if !(p > 0.0 && p <= 3_600.0) {
                return Err(format!(
                    "--poll-seconds must be above 0 and at most 3600, not {p}"
                ));
            }
        }
        between(
            "status-reads-per-visitor",
            self.status_reads_per_visitor,
            0.0,
            1_000.0,
        )?;
        between("cores-per-origin", self.cores_per_origin, 0.1, 1_024.0)?;
        between("target-utilisation", self.target_utilisation, 0.01, 1.0)?;
        if self.edge_isolates == Some(0) {
            return Err("--edge-isolates must be at least 1".into());
        }
        if let Some(e) = self.edge_cores {
            between("edge-cores", e, 0.01, 1_000_000.0)?;
        }
        if !matches!(self.origins, None | Some(1..=100_000)) {
            return Err("--origins must be between 1 and 100000".into());
        }
        if !matches!(self.clients, None | Some(1..=100_000_000)) {
            return Err("--clients must be between 1 and 100000000".into());
        }
        // The waiting room's pace sets the origins' load; a fixed capacity models only the
        // sale without one, and would be ignored silently.
        if self.admit_per_second.is_some() {
            for (name, given) in [
                ("edge-cores", self.edge_cores.is_some()),
                ("origins", self.origins.is_some()),
                ("clients", self.clients.is_some()),
            ] {
                if given {
                    return Err(format!(
                        "--{name} applies to a sale without a waiting room (drop it or \
                         --waiting-room)"
                    ));
                }
            }
        }
        between(
            "ended-keys-grace-seconds",
            self.ended_keys_grace_seconds,
            0.0,
            MAX_GRACE_SECONDS,
        )
    }
}

/// `Ok` when `v` is a number in `lo..=hi`; else the error naming `--name`.
fn between(name: &str, v: f64, lo: f64, hi: f64) -> Result<(), String> {
    if !v.is_finite() {
        Err(format!("--{name} must be a number, not {v}"))
    } else if !(lo..=hi).contains(&v) {
        Err(format!("--{name} must be between {lo} and {hi}, not {v}"))
    } else {
        Ok(())
    }
}
