//! Reading an origin's `GET /metrics` (OpenMetrics text) over HTTP, as Prometheus does.

use std::collections::BTreeMap;

/// The samples of one scrape: `name{labels}` (labels as written, in the encoder's order) to
/// value.
#[derive(Debug, Clone, Default)]
pub struct Scrape(pub BTreeMap<String, f64>);

impl Scrape {
    /// `GET {base_url}/metrics`; panics unless 200 with the OpenMetrics content type.
    pub async fn of(http: &reqwest::Client, base_url: &str) -> Self {
        let res = http
            .get(format!("{base_url}/metrics"))
            .send()
            .await
            .expect("scrape");
        assert_eq!(res.status(), 200);
        let ct = res.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
        Self::parse(&res.text().await.expect("body"))
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
