//! The stampede report as text: the summary, latencies, timeline and checks a run prints.

use super::*;

impl Report {
    /// The report for humans.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1} ms"));
        let _ = writeln!(
            s,
            "flashgate stampede: campaign {} ({}, stock {}) via {}",
            self.run.campaign, self.run.kind, self.run.stock, self.run.target
        );
        let p = &self.plan;
        let _ = writeln!(
            s,
            "plan        {} tries by {} customers over {:.1} s, front-loaded; double taps {} same key + {} new key; {} repeat tries; {} loop, {} in flight at most; seed {}",
            self.tries,
            p.customers,
            self.run.window_ms as f64 / 1000.0,
            p.double_same_key,
            p.double_new_key,
            p.repeat,
            if self.run.open_loop { "open" } else { "closed" },
            self.run.concurrency,
            self.run.seed
        );
        let _ = writeln!(
            s,
            "sent        {} tries ({} not sent) by {} distinct customers at {} tries/s (edge runtime: {}); retries: {} after 503/transport error, {} after in_progress; send lag p50 {:.1} ms, p99 {:.1} ms; {} waited for a free slot",
            self.tries_sent,
            self.tries_not_sent,
            self.distinct_customers,
            self.send_rate_per_s,
            self.run.edge_runtime.as_deref().unwrap_or("unknown"),
            self.retries_unavailable,
            self.retries_in_progress,
            self.send_lag_p50_ms,
            self.send_lag_p99_ms,
            self.tries_held_by_cap
        );
        let _ = writeln!(
            s,
            "outcomes    {:<24}{:>10}{:>10}{:>10}{:>10}",
            "result", "edge", "origin", "unknown", "total"
        );
        for (result, by) in &self.outcomes {
            let g = |k: &str| by.get(k).copied().unwrap_or(0);
            let _ = writeln!(
                s,
                "            {:<24}{:>10}{:>10}{:>10}{:>10}",
                result,
                g("edge"),
                g("origin"),
                g("unknown"),
                by.values().sum::<u64>()
            );
        }
        let g = |k: &str| self.by_answerer.get(k).copied().unwrap_or(0);
        let _ = writeln!(
            s,
            "            {:<24}{:>10}{:>10}{:>10}{:>10}",
            "all sent",
            g("edge"),
            g("origin"),
            g("unknown"),
            self.tries_sent
        );
        let _ = writeln!(
            s,
            "winners     {} customers, {} distinct claim ids",
            self.winners, self.winning_claim_ids
        );
        let _ = writeln!(
            s,
            "timeline    sold out (first sold_out answer) at {}; last 201 at {}; last answer at {}",
            opt(self.sell_out_ms),
            opt(self.last_claimed_ms),
            opt(self.last_answer_ms)
        );
        let share = self
            .edge_share_after_sell_out
            .map_or("-".to_string(), |v| format!("{:.2} %", v * 100.0));
        let _ = writeln!(
            s,
            "after sell-out  {} of {} tries of customers without a claim answered by the edge: {} \
             ({} taps of winners forwarded to the origin by design){}",
            self.edge_answered_after_sell_out,
            self.tries_after_sell_out,
            share,
            self.winner_tries_after_sell_out,
            if self.variants.is_some() {
                "; counted from the first variant's sell-out, each variant's own below"
            } else {
                ""
            }
        );
        let _ = writeln!(
            s,
            "latency     {:<10}{:>10}{:>10}{:>10}{:>10}{:>10}",
            "answerer", "responses", "p50 ms", "p95 ms", "p99 ms", "max ms"
        );
        for (who, l) in &self.latency {
            let _ = writeln!(
                s,
                "            {:<10}{:>10}{:>10.2}{:>10.2}{:>10.2}{:>10.2}",
                who, l.responses, l.p50_ms, l.p95_ms, l.p99_ms, l.max_ms
            );
        }
        if let Some(v) = &self.variants {
            variants::render(v, &mut s);
        }
        if let Some(q) = &self.queue {
            q.render(&mut s);
        }
        if let Some(l) = &self.lost_reply {
            let _ = writeln!(
                s,
                "lost reply  {} of {} winners retried with the same key after the sell-out: {} got their 201 back, {} answered by the edge",
                l.retried, l.winners, l.got_their_201, l.answered_by_edge
            );
        }
        for (what, sample) in &self.unexpected_samples {
            let _ = writeln!(s, "unexpected  {what}: {}", sample.replace('\n', " "));
        }
        let _ = writeln!(s, "checks");
        for c in &self.checks {
            let _ = writeln!(s, "  [{}] {}: {}", c.status.label(), c.name, c.detail);
        }
        let skipped = match self.checks_skipped {
            0 => String::new(),
            n => format!(" ({n} checks skipped, not passed)"),
        };
        let _ = writeln!(
            s,
            "result      {}{skipped}",
            if self.passed { "PASS" } else { "FAIL" }
        );
        s
    }
}
