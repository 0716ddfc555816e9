//! The plan as a table for people: numbers grouped by thousands (`200,000`), units in the
//! headers and labels.

use std::fmt::Write as _;

use super::output::{Plan, Rate};
use super::{Arrival, Kind};

/// `x` rounded for reading: whole numbers grouped by thousands (`1,234,567`); below 10, one or
/// two decimals (`2.5`, `0.12`).
pub fn number(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x.abs() < 10.0 && x.fract().abs() > 1e-9 {
        let decimals = if x.abs() < 1.0 { 2 } else { 1 };
        return format!("{x:.decimals$}");
    }
    let whole = x.round().abs() as u128;
    let digits = whole.to_string();
    let mut out = String::new();
    for (k, ch) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if x.round() < 0.0 {
        out.insert(0, '-');
    }
    out
}

/// Bytes as `1,283,048 B (1.2 MiB)`.
pub fn bytes(b: f64) -> String {
    let units = [
        ("KiB", 1024.0),
        ("MiB", 1024.0 * 1024.0),
        ("GiB", 1024.0f64.powi(3)),
    ];
    let big = units.iter().rev().find(|(_, size)| b >= *size);
    match big {
        Some((unit, size)) => format!("{} B ({:.1} {unit})", number(b), b / size),
        None => format!("{} B", number(b)),
    }
}

/// Seconds as `3.50 s`, `1,234 s (20.6 min)` from 100 s on, `87,000 s (24.2 h)` from an hour.
pub fn seconds(s: f64) -> String {
    if s >= 3_600.0 {
        format!("{} s ({:.1} h)", number(s), s / 3_600.0)
    } else if s >= 100.0 {
        format!("{} s ({:.1} min)", number(s), s / 60.0)
    } else {
        format!("{s:.2} s")
    }
}

const LABEL: usize = 34;

fn rate_row(out: &mut String, label: &str, r: &Rate) {
    let _ = writeln!(
        out,
        "  {label:<LABEL$} {:>16} {:>18}",
        number(r.peak_per_second),
        number(r.total)
    );
}

fn value_row(out: &mut String, label: &str, value: &str) {
    let _ = writeln!(out, "  {label:<LABEL$} {value}");
}

fn header(out: &mut String, title: &str) {
    let _ = writeln!(
        out,
        "\n{title:<w$} {:>16} {:>18}",
        "peak (per s)",
        "total",
        w = LABEL + 2
    );
}

/// The plan as the table `flashgate plan` prints.
pub fn table(p: &Plan) -> String {
    let i = &p.inputs;
    let mut out = String::new();
    let arrival = match i.arrival {
        Arrival::Uniform => "uniform",
        Arrival::Burst => "burst",
    };
    let kind = match i.kind {
        Kind::Sale => format!(
            "sale, holds of {} s, {} % paid",
            number(i.hold_seconds),
            number(i.paid_share * 100.0)
        ),
        Kind::Giveaway => "giveaway".to_string(),
    };
    let room = match i.admit_per_second {
        Some(r) => format!("waiting room admitting {} per s", number(r)),
        None => "no waiting room".to_string(),
    };
    let _ = writeln!(
        out,
        "flashgate plan: {} visitors over {} ({arrival}), {} tries each; stock {} in {} \
         variant(s); {kind}; {room}",
        number(i.visitors as f64),
        seconds(i.arrival_seconds),
        number(i.tries_per_visitor),
        number(i.stock as f64),
        number(f64::from(i.variants))
    );
    let _ = writeln!(out, "calibration: {}", p.calibration_source);
    if i.admit_per_second.is_none() {
        let fixed: Vec<String> = [
            i.edge_cores.map(|e| format!("edge {} core(s)", number(e))),
            i.origins.map(|o| format!("{} origin(s)", number(o as f64))),
            i.clients
                .map(|n| format!("{} closed-loop clients", number(n as f64))),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !fixed.is_empty() {
            let _ = writeln!(
                out,
                "fixed capacity: {}; the taps queue for it",
                fixed.join(", ")
            );
        }
    }

    let e = &p.edge;
    header(&mut out, "edge (requests)");
    rate_row(&mut out, "status reads", &e.status);
    rate_row(&mut out, "joins", &e.joins);
    rate_row(&mut out, "polls", &e.polls);
    rate_row(&mut out, "sold-out answers", &e.sold_out_answers);
    rate_row(&mut out, "claims forwarded to origins", &e.claims_forwarded);
    let util = number(i.target_utilisation * 100.0);
    value_row(
        &mut out,
        &format!("cores at peak ({util} % busy)"),
        &number(e.cores_needed),
    );
    value_row(&mut out, "isolates assumed", &number(e.isolates as f64));

    let o = &p.origin;
    header(&mut out, "origins (requests)");
    rate_row(&mut out, "winning claims", &o.winners);
    rate_row(&mut out, "sold-out answers", &o.sold_out_answers);
    rate_row(
        &mut out,
        "other claim answers (replays)",
        &o.other_claim_answers,
    );
    rate_row(&mut out, "claims, all", &o.claims);
    rate_row(&mut out, "join reports", &o.join_reports);
    rate_row(&mut out, "presence reports", &o.presence_reports);
    rate_row(&mut out, "status fetches", &o.status_fetches);
    value_row(&mut out, "busy cores at peak", &number(o.peak_busy_cores));
    value_row(
        &mut out,
        &format!(
            "origins needed ({} cores, {util} %)",
            number(i.cores_per_origin)
        ),
        &number(o.origins_needed as f64),
    );

    let r = &p.redis;
    header(&mut out, "redis");
    rate_row(&mut out, "commands", &r.ops);
    value_row(&mut out, "busy cores at peak", &number(r.peak_busy_cores));
    if i.admit_per_second.is_some() {
        let over = if r.peak_queue_slot_busy_cores > 1.0 {
            " (over one core: a Redis primary cannot keep up)"
        } else {
            ""
        };
        value_row(
            &mut out,
            "queue slot {c} primary, cores",
            &format!("{}{over}", number(r.peak_queue_slot_busy_cores)),
        );
    }
    value_row(
        &mut out,
        "memory per queued visitor",
        &bytes(r.bytes_per_queued_visitor),
    );
    value_row(&mut out, "memory per winner", &bytes(r.bytes_per_winner));
    value_row(
        &mut out,
        "memory per campaign",
        &bytes(r.bytes_per_campaign),
    );
    value_row(
        &mut out,
        "memory at the end of the sale",
        &bytes(r.bytes_during_sale),
    );
    value_row(
        &mut out,
        "memory after the sale",
        &format!(
            "{}, for {} after the end (hold + grace)",
            bytes(r.bytes_after_sale),
            seconds(r.kept_after_end_seconds)
        ),
    );
    value_row(
        &mut out,
        "memory after the grace",
        &bytes(r.bytes_after_grace),
    );

    let g = &p.postgres;
    header(&mut out, "postgresql");
    rate_row(&mut out, "durable claims", &g.claims);
    rate_row(&mut out, "grouped commits", &g.commits);
    value_row(
        &mut out,
        "claims per commit at peak",
        &number(g.claims_per_commit_at_peak),
    );
    value_row(&mut out, "busy cores at peak", &number(g.peak_busy_cores));

    let t = &p.times;
    let _ = writeln!(out, "\ntimes (from the first arrival)");
    value_row(
        &mut out,
        "sell-out (first sold_out)",
        &t.sell_out_seconds
            .map(seconds)
            .unwrap_or_else(|| "never: fewer visitors than units".into()),
    );
    if let Some(q) = &p.queue {
        value_row(
            &mut out,
            "queue wait p50 / p95",
            &format!(
                "{} / {}",
                seconds(q.wait_p50_seconds),
                seconds(q.wait_p95_seconds)
            ),
        );
        value_row(&mut out, "longest queue (visitors)", &number(q.peak_length));
    }
    if t.second_wave_units > 0.0 {
        let again = t
            .second_sell_out_seconds
            .map(|s| format!("sold again by {}", seconds(s)))
            .unwrap_or_else(|| "not sold again: the crowd has gone (restock)".into());
        value_row(
            &mut out,
            "second wave (unpaid holds)",
            &format!(
                "{} units back from {}; {again}",
                number(t.second_wave_units),
                t.second_wave_from_seconds.map(seconds).unwrap_or_default()
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(number(200_000.0), "200,000");
        assert_eq!(number(1_234_567.4), "1,234,567");
        assert_eq!(number(999.6), "1,000");
        assert_eq!(number(2.0), "2");
        assert_eq!(number(2.54), "2.5");
        assert_eq!(number(0.123), "0.12");
        assert_eq!(number(-1_500.0), "-1,500");
        assert_eq!(bytes(712_048.0), "712,048 B (695.4 KiB)");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(seconds(3.5), "3.50 s");
        assert_eq!(seconds(87_000.0), "87,000 s (24.2 h)");
    }

    #[test]
    fn the_table_names_every_kind() {
        let p = super::super::plan(&super::super::Inputs::default(), &Default::default());
        let t = table(&p);
        for label in [
            "200,000 visitors",
            "sold-out answers",
            "claims forwarded to origins",
            "origins needed (2 cores, 60 %)",
            "grouped commits",
            "memory after the grace",
            "sell-out (first sold_out)",
        ] {
            assert!(t.contains(label), "{label} missing from:\n{t}");
        }
    }
}
