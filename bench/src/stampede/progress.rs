//! A live progress line for long load runs (the stampede, the 1M-unit giveaway): tries sent of
//! planned, answers per second, the edge's share of the answers, winners so far, elapsed and
//! ETA. On a terminal (stderr) it is an `indicatif` bar redrawn four times a second; otherwise
//! (a log file, CI) a plain line every `every` seconds, so a log shows the run is alive. The
//! counters are atomics the senders bump ([`Progress::sent`], [`Progress::answered`]).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The counters of one run.
#[derive(Debug)]
pub struct Progress {
    /// What the run is (the line's prefix: `stampede`, `giveaway`).
    label: String,
    /// Tries planned (0: not known in advance; the line then shows no ratio or ETA).
    planned: u64,
    sent: AtomicU64,
    answered: AtomicU64,
    by_edge: AtomicU64,
    winners: AtomicU64,
    /// Per customer: already counted as a winner (a replayed 201 of a double tap is not a
    /// second winner). Empty: every 201 counts (each try its own customer).
    won: Vec<AtomicBool>,
    started: Instant,
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Snapshot {
    pub sent: u64,
    pub answered: u64,
    pub by_edge: u64,
    pub winners: u64,
    /// Since the run started.
    pub elapsed: Duration,
}

impl Progress {
    /// Counters of a run of `planned` tries (0 when not known) by `customers` customers
    /// numbered from 0 (0: each try is its own customer), all at 0, started now.
    pub fn new(label: &str, planned: u64, customers: usize) -> Arc<Self> {
        Arc::new(Progress {
            label: label.to_string(),
            planned,
            won: (0..customers).map(|_| AtomicBool::new(false)).collect(),
            sent: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            by_edge: AtomicU64::new(0),
            winners: AtomicU64::new(0),
            started: Instant::now(),
        })
    }

    /// One try sent (its first attempt).
    pub fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// One try of `customer` answered for good (after its retries): by the edge or not, a
    /// 201 or not. A customer's first 201 makes her a winner.
    pub fn answered(&self, customer: u32, by_edge: bool, claimed: bool) {
        self.answered.fetch_add(1, Ordering::Relaxed);
        if by_edge {
            self.by_edge.fetch_add(1, Ordering::Relaxed);
        }
        let first = match self.won.get(customer as usize) {
            Some(won) => !won.swap(true, Ordering::Relaxed),
            None => true,
        };
        if claimed && first {
            self.winners.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counters now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            sent: self.sent.load(Ordering::Relaxed),
            answered: self.answered.load(Ordering::Relaxed),
            by_edge: self.by_edge.load(Ordering::Relaxed),
            winners: self.winners.load(Ordering::Relaxed),
            elapsed: self.started.elapsed(),
        }
    }

    /// Answers/s between `prev` and `now`, the edge's share of all answers and the winners:
    /// the message part of the line (`2,130 answers/s · edge 93.1 % · 1,000 winners`).
    pub fn message(prev: &Snapshot, now: &Snapshot) -> String {
        let dt = now.elapsed.saturating_sub(prev.elapsed).as_secs_f64();
        let rate = if dt > 0.0 {
            now.answered.saturating_sub(prev.answered) as f64 / dt
        } else {
            0.0
        };
        let edge = if now.answered == 0 {
            0.0
        } else {
            100.0 * now.by_edge as f64 / now.answered as f64
        };
        format!(
            "{} answers/s · edge {edge:.1} % · {} winners",
            thousands(rate.round() as u64),
            thousands(now.winners)
        )
    }

    /// The plain line (no terminal): `stampede: 12,345 of 60,000 tries sent (20.6 %) · 2,130
    /// answers/s · edge 93.1 % · 1,000 winners · 6.0 s elapsed, ETA 23 s`.
    pub fn line(&self, prev: &Snapshot, now: &Snapshot) -> String {
        let secs = now.elapsed.as_secs_f64();
        let sent = if self.planned == 0 {
            format!("{} tries sent", thousands(now.sent))
        } else {
            format!(
                "{} of {} tries sent ({:.1} %)",
                thousands(now.sent),
                thousands(self.planned),
                100.0 * now.sent as f64 / self.planned as f64
            )
        };
        let eta = match (self.planned, now.sent) {
            (0, _) | (_, 0) => String::new(),
            (planned, sent) => format!(
                ", ETA {:.0} s",
                secs * planned.saturating_sub(sent) as f64 / sent as f64
            ),
        };
        format!(
            "{}: {sent} · {} · {secs:.1} s elapsed{eta}",
            self.label,
            Self::message(prev, now)
        )
    }

    /// Starts showing the progress until [`Reporter::finish`]: a bar when stderr is a terminal,
    /// else a plain line every `every` (none when `every` is zero).
    pub fn report(self: &Arc<Self>, every: Duration) -> Reporter {
        let stop = Arc::new(AtomicBool::new(false));
        let terminal = std::io::stderr().is_terminal();
        let (me, flag) = (self.clone(), stop.clone());
        let task = tokio::spawn(async move {
            if terminal {
                me.draw_bar(&flag).await;
            } else if !every.is_zero() {
                me.print_lines(&flag, every).await;
            }
        });
        Reporter { stop, task }
    }

    async fn draw_bar(&self, stop: &AtomicBool) {
        let bar = ProgressBar::with_draw_target(
            (self.planned > 0).then_some(self.planned),
            ProgressDrawTarget::stderr_with_hz(4),
        );
        let style = ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} tries sent · {msg} · {elapsed_precise} / ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(self.label.clone());
        let mut prev = self.snapshot();
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = self.snapshot();
            bar.set_position(now.sent);
            // The rate over the last second or so, not over 250 ms (steadier to read).
            bar.set_message(Self::message(&prev, &now));
            if now.elapsed.saturating_sub(prev.elapsed) >= Duration::from_secs(1) {
                prev = now;
            }
        }
        bar.finish_and_clear();
    }

    async fn print_lines(&self, stop: &AtomicBool, every: Duration) {
        let mut prev = self.snapshot();
        let mut next = Instant::now() + every;
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if Instant::now() >= next {
                let now = self.snapshot();
                eprintln!("{}", self.line(&prev, &now));
                prev = now;
                next += every;
            }
        }
    }
}

/// Shows a run's progress until [`Reporter::finish`].
pub struct Reporter {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Reporter {
    /// Stops the bar (cleared) or the lines; the run's report follows.
    pub async fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        // A reporter that panicked only loses its line.
        let _ = self.task.await;
    }
}

/// `n` with a comma every three digits (`12,345`).
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_sent_of_planned_rate_edge_share_winners_and_eta() {
        let p = Progress::new("stampede", 60_000, 20_000);
        for i in 0..12_345u32 {
            p.sent();
            if i < 10_000 {
                p.answered(i % 10_000, i % 10 != 0, i < 1_000);
            }
        }
        // A double tap's replayed 201 is not a second winner.
        p.answered(999, false, true);
        p.answered(999, false, true);
        let now = p.snapshot();
        assert_eq!(
            (now.sent, now.answered, now.by_edge, now.winners),
            (12_345, 10_002, 9_000, 1_000)
        );
        let prev = Snapshot {
            answered: 4_002,
            elapsed: Duration::from_secs(3),
            ..now
        };
        let now = Snapshot {
            elapsed: Duration::from_secs(6),
            ..now
        };
        assert_eq!(
            p.line(&prev, &now),
            "stampede: 12,345 of 60,000 tries sent (20.6 %) · 2,000 answers/s · edge 90.0 % \
             · 1,000 winners · 6.0 s elapsed, ETA 23 s"
        );
        let open = Progress::new("giveaway", 0, 0);
        let zero = open.snapshot();
        assert_eq!(
            open.line(
                &zero,
                &Snapshot {
                    elapsed: Duration::from_secs(2),
                    ..zero
                }
            ),
            "giveaway: 0 tries sent · 0 answers/s · edge 0.0 % · 0 winners · 2.0 s elapsed"
        );
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
