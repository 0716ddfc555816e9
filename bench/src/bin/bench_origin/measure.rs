//! What a leg measured and how: its operations per second, latencies, and the CPU the machine,
//! this process, PostgreSQL and Redis spent per operation meanwhile.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

pub struct Leg {
    pub name: String,
    pub run: Run,
    pub hist: Option<Histogram<u64>>,
}

impl Leg {
    pub fn rate(&self) -> f64 {
        self.run.ops as f64 / self.run.secs
    }
    /// The machine's busy CPU time per operation of the leg, in core-microseconds (every
    /// process: this one, PostgreSQL, Redis), when /proc/stat could be read.
    pub fn cpu_us_per_op(&self) -> Option<f64> {
        let ops = self.run.ops.max(1) as f64;
        self.run.busy_core_secs.map(|b| b * 1e6 / ops)
    }
    /// [`ByProcess`] per operation, in core-microseconds.
    pub fn by_process_us_per_op(&self) -> Option<ByProcess> {
        let ops = self.run.ops.max(1) as f64;
        self.run.by_process.map(|b| ByProcess {
            this: b.this * 1e6 / ops,
            postgres: b.postgres * 1e6 / ops,
            redis: b.redis * 1e6 / ops,
        })
    }
    pub fn print(&self) {
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
pub struct Run {
    pub ops: u64,
    pub secs: f64,
    /// Busy CPU time of the whole machine meanwhile, in core-seconds ([`busy_core_secs`]).
    pub busy_core_secs: Option<f64>,
    /// The part of it spent by this process, PostgreSQL and Redis ([`ByProcess`]).
    pub by_process: Option<ByProcess>,
}

/// Busy CPU time, in core-seconds, of the processes that share a leg: this one (the clients and
/// the origin), every `postgres` process and every `redis-server` process, from
/// `/proc/<pid>/stat` (`utime` + `stime`, proc(5), in ticks of 1/100 s). A process that starts
/// or ends during a leg counts wrongly for that leg (the PostgreSQL pool keeps its connections,
/// so the legs here start none after their first second).
#[derive(Clone, Copy, Default)]
pub struct ByProcess {
    pub this: f64,
    pub postgres: f64,
    pub redis: f64,
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

/// Runs `clients` loops of `round(client, i)` (`i` counts each loop's rounds from 1) for
/// `secs`; returns the rounds finished and the seconds taken (until every loop stopped).
pub async fn for_secs<F, Fut>(clients: usize, secs: u64, round: F) -> Run
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

/// Prints what the machine's CPU allows winners over HTTP: each winner is one HTTP exchange
/// (at least the constant handler's CPU per request, client side included) plus one durable
/// commit (the grouped leg's CPU per claim), and on a machine where the client, the origin,
/// Redis and PostgreSQL share the same cores, winners/s cannot pass
/// `cores / (exchange + commit)`; against the durable rate (`cores / commit`) that is
/// `commit / (exchange + commit)`.
pub fn cpu_bound(durable: &Leg, winners: &Leg, exchange: &Leg) {
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
