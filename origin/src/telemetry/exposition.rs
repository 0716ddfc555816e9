//! The Prometheus text exposition format (version 0.0.4), which `GET /metrics` serves: what
//! Prometheus scrapes and what `promtool check metrics` reads.
//!
//! The `prometheus-client` crate encodes OpenMetrics only, where a counter's family is named
//! without `_total` (`# TYPE flashgate_claims counter`, samples `flashgate_claims_total`). In
//! the 0.0.4 format the `# HELP` and `# TYPE` lines name the samples themselves, so a counter's
//! family is announced with `_total`; read as 0.0.4, the OpenMetrics text has counters without
//! help text and families without samples. [`from_openmetrics`] rewrites the encoder's output
//! into 0.0.4: counter families take `_total`, `# UNIT` and `# EOF` lines go (0.0.4 has
//! neither), and OpenMetrics' `unknown` type is 0.0.4's `untyped`.

/// The `Content-Type` of the 0.0.4 text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `text` (OpenMetrics, as `prometheus_client::encoding::text::encode_registry` writes it: one
/// `# HELP` line, then one `# TYPE` line, then the samples, per family) in the 0.0.4 format.
pub fn from_openmetrics(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 256);
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let Some(help) = line.strip_prefix("# HELP ") else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let (name, help) = help.split_once(' ').unwrap_or((help, ""));
        let kind = lines
            .peek()
            .and_then(|l| l.strip_prefix("# TYPE "))
            .and_then(|t| t.split_once(' '))
            .filter(|(n, _)| *n == name)
            .map(|(_, kind)| kind);
        let Some(kind) = kind else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        lines.next();
        let (name, kind) = match kind {
            "counter" if !name.ends_with("_total") => (format!("{name}_total"), kind),
            "unknown" => (name.to_string(), "untyped"),
            _ => (name.to_string(), kind),
        };
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_families_are_named_as_their_samples() {
        let om = "# HELP fg_claims Claim answers.\n# TYPE fg_claims counter\n\
                  fg_claims_total{result=\"claimed\"} 3\n\
                  # HELP fg_wait_seconds Wait.\n# TYPE fg_wait_seconds histogram\n\
                  # UNIT fg_wait_seconds seconds\n\
                  fg_wait_seconds_sum 0.5\nfg_wait_seconds_count 1\n\
                  # HELP fg_left Units left.\n# TYPE fg_left gauge\nfg_left 2\n# EOF\n";
        assert_eq!(
            from_openmetrics(om),
            "# HELP fg_claims_total Claim answers.\n# TYPE fg_claims_total counter\n\
             fg_claims_total{result=\"claimed\"} 3\n\
             # HELP fg_wait_seconds Wait.\n# TYPE fg_wait_seconds histogram\n\
             fg_wait_seconds_sum 0.5\nfg_wait_seconds_count 1\n\
             # HELP fg_left Units left.\n# TYPE fg_left gauge\nfg_left 2\n"
        );
    }
}
