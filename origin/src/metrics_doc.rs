//! The origin's metrics as a Markdown table, rendered from the registry that `GET /metrics`
//! serves (the origin's [`crate::telemetry::metrics::Metrics`] with the gift metrics of
//! [`crate::gifts::metrics::GiftMetrics`] and the webhook metrics of
//! [`crate::webhooks::metrics::WebhookMetrics`] registered in it, as [`crate::state`] builds
//! it), so
//! docs/OPERATIONS.md cannot drift from the code: a test compares the page's generated section
//! with [`metrics_table`] and fails when they differ
//! (`FLASHGATE_BLESS=1 cargo test -p flashgate-origin --lib metrics_doc` rewrites it).

use crate::gifts::metrics::GiftMetrics;
use crate::reply::Outcome;
use crate::telemetry::metrics::{
    AnsweredFrom, CampaignLabels, KeyStateLabels, LiveFigures, Metrics, OpLabels,
};
use crate::webhooks::metrics::{CallResult, WebhookMetrics};
use std::time::Duration;

/// The line before the generated table in docs/OPERATIONS.md.
pub const BEGIN_MARKER: &str =
    "<!-- generated from the metrics registry by metrics_doc::metrics_table; do not edit -->";
/// The line after it.
pub const END_MARKER: &str = "<!-- end of generated metrics -->";

/// One family of the exposition: its name (as its samples are named), type, help text and
/// the names of its labels (`le` and `quantile` left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    pub name: String,
    pub kind: String,
    pub help: String,
    pub labels: Vec<String>,
}

/// The origin's registry with one series of each labelled family, so that every family shows
/// its label names (a family keyed by labels has no sample until a series exists).
fn sample_registry() -> Metrics {
    let mut metrics = Metrics::new();
    GiftMetrics::default().register(metrics.registry_mut());
    let webhooks = WebhookMetrics::default();
    webhooks.register(metrics.registry_mut());
    webhooks.call("e", CallResult::Delivered, Some(Duration::ZERO));
    metrics.request("/api/v1/campaigns/{id}/claims", "claimed", Duration::ZERO);
    metrics.claim(Outcome::Claimed, AnsweredFrom::Gate);
    metrics
        .gate_op
        .get_or_create(&OpLabels { op: "take" })
        .observe(0.0);
    metrics.guess_refused("customer");
    metrics.set_live(&[LiveFigures {
        campaign: "c".into(),
        remaining: 0,
        held: 0,
        queue: Some((0, 0)),
    }]);
    metrics
        .queue_stalled
        .get_or_create(&CampaignLabels {
            campaign: "c".into(),
        })
        .set(0);
    metrics
        .redis_campaign_keys
        .get_or_create(&KeyStateLabels { state: "live" })
        .set(0);
    metrics.edge_answers([("sold_out", 0)]);
    metrics
}

/// The families of a 0.0.4 exposition, in order: each `# HELP` / `# TYPE` pair and the label
/// names of its samples.
pub fn families(exposition: &str) -> Vec<Family> {
    let mut out: Vec<Family> = Vec::new();
    let mut lines = exposition.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let kind = lines
                .peek()
                .and_then(|l| l.strip_prefix("# TYPE "))
                .and_then(|t| t.split_once(' '))
                .map(|(_, k)| k.to_string())
                .unwrap_or_default();
            out.push(Family {
                name: name.to_string(),
                kind,
                help: help.trim_end_matches('.').to_string(),
                labels: Vec::new(),
            });
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (Some(family), Some(open)) = (out.last_mut(), line.find('{')) else {
            continue;
        };
        for label in label_names(&line[open + 1..]) {
            if label != "le" && label != "quantile" && !family.labels.contains(&label) {
                family.labels.push(label);
            }
        }
    }
    out
}

/// The label names of a sample's label set, `text` starting just after its `{`: each
/// `name="value"` up to the closing `}`, values read with their escapes (a value may hold `{`,
/// `}` or `,`, as route templates do).
fn label_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some((name, after)) = rest.split_once("=\"") {
        names.push(name.trim_start_matches(',').trim().to_string());
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &after[end..];
        if rest.starts_with('}') || rest.is_empty() {
            break;
        }
    }
    names
}

/// One Markdown table, one row per metric family in registration order:
/// `| metric | type | labels | meaning |`. The meaning is the family's help text.
pub fn metrics_table() -> String {
    let families = families(&sample_registry().render());
    let mut out = String::from("| metric | type | labels | meaning |\n| --- | --- | --- | --- |\n");
    for f in families {
        let labels = if f.labels.is_empty() {
            "–".to_string()
        } else {
            f.labels
                .iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            f.name,
            f.kind,
            labels,
            f.help.replace('|', "\\|")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_page_lists_every_metric_as_registered() {
        crate::config_doc::check_section(
            "docs/OPERATIONS.md",
            BEGIN_MARKER,
            END_MARKER,
            &metrics_table(),
            "metrics_doc",
        );
    }

    #[test]
    fn every_family_has_a_sample_so_its_labels_are_known() {
        let exposition = sample_registry().render();
        for f in families(&exposition) {
            let sampled = exposition.lines().any(|l| {
                ["", "_bucket", "_sum", "_count"].iter().any(|suffix| {
                    l.strip_prefix(f.name.as_str())
                        .and_then(|rest| rest.strip_prefix(suffix))
                        .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
                })
            });
            assert!(
                sampled,
                "{} has no sample: give it one series in metrics_doc::sample_registry",
                f.name
            );
            assert!(!f.help.is_empty(), "{} has no help text", f.name);
        }
    }

    #[test]
    fn families_read_names_types_and_label_names() {
        let text = "# HELP fg_x_total Xs by y.\n# TYPE fg_x_total counter\n\
                    fg_x_total{y=\"/a/{id}/b\",z=\"q\\\"}\"} 1\n\
                    # HELP fg_t_seconds T.\n# TYPE fg_t_seconds histogram\n\
                    fg_t_seconds_bucket{le=\"0.5\"} 0\nfg_t_seconds_count 0\n";
        let got = families(text);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].name, "fg_x_total");
        assert_eq!(got[0].kind, "counter");
        assert_eq!(got[0].help, "Xs by y");
        assert_eq!(got[0].labels, vec!["y".to_string(), "z".to_string()]);
        assert!(got[1].labels.is_empty());
        assert_eq!(got[1].kind, "histogram");
    }
}
