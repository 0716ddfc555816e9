//! Reading an origin's `GET /metrics` (Prometheus text format 0.0.4) over HTTP, as Prometheus
//! does, and the format's naming rule ([`format_problems`]).

use std::collections::BTreeMap;

/// The samples of one scrape: `name{labels}` (labels as written, in the encoder's order) to
/// value.
#[derive(Debug, Clone, Default)]
pub struct Scrape(pub BTreeMap<String, f64>);

impl Scrape {
    /// `GET {base_url}/metrics`; panics unless 200 with the 0.0.4 text content type.
    pub async fn of(http: &reqwest::Client, base_url: &str) -> Self {
        Self::parse(&text_of(http, base_url).await)
    }

    /// The samples of an exposition text (comment lines skipped).
    pub fn parse(text: &str) -> Self {
        Scrape(
            text.lines()
                .filter(|l| !l.starts_with('#') && !l.is_empty())
                .filter_map(|l| {
                    let (k, v) = l.rsplit_once(' ')?;
                    Some((k.to_string(), v.parse().ok()?))
                })
                .collect(),
        )
    }

    /// The value of the sample `name` whose labels include every `key="value"` of `labels`;
    /// summed over the samples that match (0 when none does).
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.0
            .iter()
            .filter(|(k, _)| {
                let (n, l) = k.split_once('{').unwrap_or((k.as_str(), ""));
                n == name
                    && labels
                        .iter()
                        .all(|(lk, lv)| l.contains(&format!("{lk}=\"{lv}\"")))
            })
            .map(|(_, v)| v)
            .sum()
    }

    /// [`Scrape::sum`] as a whole number (counts).
    pub fn count(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.sum(name, labels).round() as u64
    }

    /// Whether any sample of `name` has `label="value"`.
    pub fn has(&self, name: &str, (lk, lv): (&str, &str)) -> bool {
        let (prefix, want) = (format!("{name}{{"), format!("{lk}=\"{lv}\""));
        self.0
            .keys()
            .any(|k| k.starts_with(&prefix) && k.contains(&want))
    }
}

/// `GET {base_url}/metrics` as text; panics unless 200 with the 0.0.4 text content type
/// (`text/plain; version=0.0.4`).
pub async fn text_of(http: &reqwest::Client, base_url: &str) -> String {
    let res = http
        .get(format!("{base_url}/metrics"))
        .send()
        .await
        .expect("scrape");
    assert_eq!(res.status(), 200);
    let ct = res.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    res.text().await.expect("body")
}

/// What breaks the naming rule of the 0.0.4 text format in `text` (empty when none), one
/// finding per line, as `promtool check metrics` would name it: a family's `# HELP` and
/// `# TYPE` lines name its samples (a counter's end in `_total`; a histogram's samples add
/// `_bucket`, `_sum` or `_count`), every family has both lines, before its samples; a help
/// text ends with at most one period.
pub fn format_problems(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut helped: Option<&str> = None;
    let mut family: Option<(&str, &str)> = None;
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            if help.is_empty() || help.ends_with("..") {
                problems.push(format!("{name}: help text {help:?}"));
            }
            helped = Some(name);
            family = None;
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            if helped != Some(name) {
                problems.push(format!("{name}: no help text before its type"));
            }
            if kind == "counter" && !name.ends_with("_total") {
                problems.push(format!("{name}: a counter named without _total"));
            }
            family = Some((name, kind));
        } else if line.starts_with('#') {
            problems.push(format!("unexpected line {line:?}"));
        } else {
            let sample = line.split(['{', ' ']).next().unwrap_or(line);
            let Some((name, kind)) = family else {
                problems.push(format!("{sample}: a sample of no announced family"));
                continue;
            };
            let own = match kind {
                "histogram" => ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|s| sample.strip_suffix(s) == Some(name)),
                "summary" => {
                    sample == name
                        || ["_sum", "_count"]
                            .iter()
                            .any(|s| sample.strip_suffix(s) == Some(name))
                }
                _ => sample == name,
            };
            if !own {
                problems.push(format!(
                    "{sample}: a sample under the family {name} ({kind})"
                ));
            }
        }
    }
    problems
}
