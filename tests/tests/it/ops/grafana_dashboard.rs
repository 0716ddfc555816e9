//! The Grafana dashboard `docs/grafana/flashgate.json`: a well-formed dashboard (panels with
//! unique ids on Grafana's 24-column grid, each query on the dashboard's Prometheus data
//! source), every metric it queries served by a real origin (PostgreSQL, Redis, HTTP) or the
//! built edge worker in workerd, and every metric the origin serves on a panel. The queries
//! themselves are run by a live Prometheus in scripts/test-prometheus.

use std::collections::{BTreeSet, HashSet};

use flashgate_tests::support::{
    eventually, repo_root, unique, TestEdge, TestOrigin, TEST_EDGE_SECRET,
};
use flashgate_tests::webhooks::{register, unregister};
use serde_json::Value;

fn dashboard() -> Value {
    let path = repo_root().join("docs/grafana/flashgate.json");
    let text = std::fs::read_to_string(&path).expect("docs/grafana/flashgate.json");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// The `flashgate_*` metric names in a PromQL expression (recording rules, `flashgate:*`, are
/// not used by the dashboard: it must work without the rules file).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut names = BTreeSet::new();
    let mut rest = expr;
    while let Some(i) = rest.find("flashgate_") {
        let before = rest[..i].chars().next_back();
        let tail = &rest[i..];
        let end = tail.find(|c: char| !ident(c)).unwrap_or(tail.len());
        if !before.is_some_and(ident) {
            names.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    names
}

/// The metric families of an exposition text (its `# TYPE` lines), each with the sample names
/// a query can use: a counter's `_total` (OpenMetrics names the family without it; 0.0.4 with it), a
/// histogram's `_bucket`, `_sum` and `_count`.
fn sample_names(text: &str) -> (BTreeSet<String>, HashSet<String>) {
    let mut families = BTreeSet::new();
    let mut samples = HashSet::new();
    for line in text.lines() {
        let Some(decl) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = decl.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        families.insert(name.to_string());
        samples.insert(name.to_string());
        match kind {
            "counter" if !name.ends_with("_total") => {
                samples.insert(format!("{name}_total"));
            }
            "histogram" => {
                for s in ["_bucket", "_sum", "_count"] {
                    samples.insert(format!("{name}{s}"));
                }
            }
            _ => {}
        }
    }
    (families, samples)
}

#[test]
fn the_dashboard_is_a_well_formed_grafana_dashboard() {
    let d = dashboard();
    assert_eq!(d["uid"], "flashgate");
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 36));
    let vars = d["templating"]["list"].as_array().expect("templating");
    let var = |name: &str| vars.iter().find(|v| v["name"] == name);
    assert_eq!(
        var("datasource").expect("datasource variable")["query"],
        "prometheus"
    );
    assert!(var("campaign").is_some());
    let panels = d["panels"].as_array().expect("panels");
    let mut ids = HashSet::new();
    let mut charts = 0;
    for p in panels {
        assert!(ids.insert(p["id"].as_u64().expect("panel id")), "{p}");
        let g = &p["gridPos"];
        let (x, w, h) = (g["x"].as_u64(), g["w"].as_u64(), g["h"].as_u64());
        let (Some(x), Some(w), Some(h)) = (x, w, h) else {
            panic!("gridPos: {p}")
        };
        assert!(g["y"].is_u64() && w >= 1 && h >= 1 && x + w <= 24, "{p}");
        assert!(p["title"].as_str().is_some_and(|t| !t.is_empty()), "{p}");
        if p["type"] == "row" {
            continue;
        }
        charts += 1;
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{p}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{p}");
        let mut refs = HashSet::new();
        for t in targets {
            assert!(refs.insert(t["refId"].as_str().expect("refId")), "{p}");
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{p}");
            let expr = t["expr"].as_str().expect("expr");
            assert!(
                !metric_names(expr).is_empty(),
                "no flashgate metric: {expr}"
            );
        }
    }
    assert!(charts >= 20, "{charts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_queries_is_served_and_every_origin_metric_is_on_it() {
    let d = dashboard();
    let mut queried = BTreeSet::new();
    for p in d["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            queried.extend(metric_names(t["expr"].as_str().expect("expr")));
        }
    }
    for v in d["templating"]["list"].as_array().expect("templating") {
        if let Some(q) = v["definition"].as_str() {
            queried.extend(metric_names(q));
        }
    }

    // A real origin with a live waiting-room sale (its queue gauges are served only then) and
    // the edge in front of it with its metrics route on; one claim through the edge.
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", 3).await;
    let (status, body) = o
        .change(
            &c,
            serde_json::json!({"waiting_room": {"admit_per_second": 5}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let token = unique("metrics-token");
    let e = TestEdge::start(
        &o.url,
        &[
            ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.into()),
            ("FLASHGATE_EDGE_METRICS_TOKEN", token.clone()),
        ],
    );
    // A webhook endpoint nobody answers (a closed port): the claim's `claim.held` gets a
    // delivery the relay tries and schedules again, so the deliveries family has a series.
    let (endpoint, _) = register(&o, "http://127.0.0.1:9/hook", &["claim.held"]).await;
    let plain = o.campaign("sale", 1).await;
    let r = flashgate_tests::support::edge_claim(&o, &e.url, &plain, &unique("ana"), "k").await;
    assert_eq!(r.status, 201, "{r:?}");
    eventually(
        "a webhook delivery attempt in the metrics",
        std::time::Duration::from_secs(30),
        || async {
            let text = o
                .http
                .get(format!("{}/metrics", o.url))
                .send()
                .await
                .map_err(|e| e.to_string())?
                .text()
                .await
                .map_err(|e| e.to_string())?;
            text.contains("flashgate_webhook_deliveries_total{")
                .then_some(())
                .ok_or_else(|| "no delivery counted yet".to_string())
        },
    )
    .await;
    let get = |url: String, bearer: Option<&str>| {
        let mut req = o.http.get(url);
        if let Some(b) = bearer {
            req = req.bearer_auth(b);
        }
        async move {
            let res = req.send().await.expect("scrape");
            assert_eq!(res.status(), 200);
            res.text().await.expect("body")
        }
    };
    let origin_text = get(format!("{}/metrics", o.url), None).await;
    let edge_text = get(format!("{}/__flashgate/metrics", e.url), Some(&token)).await;
    let (origin_families, mut served) = sample_names(&origin_text);
    let (edge_families, edge_samples) = sample_names(&edge_text);
    served.extend(edge_samples);
    assert!(
        edge_families.contains("flashgate_edge_claims_total"),
        "{edge_text}"
    );
    // Live: the sale's gauges and its waiting room's have samples.
    for g in [
        "flashgate_campaign_remaining",
        "flashgate_queue_length",
        "flashgate_queue_now_serving",
    ] {
        assert!(
            origin_text.contains(&format!("{g}{{campaign=\"{c}\"}}")),
            "{g} of {c}: {origin_text}"
        );
    }

    let missing: Vec<_> = queried.iter().filter(|n| !served.contains(*n)).collect();
    assert!(missing.is_empty(), "queried but not served: {missing:?}");
    let family_queried = |f: &str| {
        queried
            .iter()
            .any(|q| q == f || q.strip_prefix(f).is_some_and(|s| s.starts_with('_')))
    };
    let unshown: Vec<_> = origin_families
        .iter()
        .filter(|f| !family_queried(f))
        .collect();
    assert!(unshown.is_empty(), "served but on no panel: {unshown:?}");
    unregister(&o, &endpoint).await;
    drop(e);
    o.stop().await;
}

#[test]
fn metric_names_are_found_whole_and_only_at_a_name_start() {
    let names = metric_names(
        "sum(rate(flashgate_claims_total{x=\"flashgate_no\"}[1m])) / flashgate:rule + xflashgate_a",
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["flashgate_claims_total", "flashgate_no"]
    );
}
