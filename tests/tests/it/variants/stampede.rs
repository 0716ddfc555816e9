//! `stampede --variants 10` against a real origin (PostgreSQL, Redis) over HTTP: the crowd's
//! claims name variants, every variant sells out and none past its stock (the stampede's own
//! per-variant checks), and the recorded history passes the checker (issue 38's), whose
//! `variant_oversold` looks at each variant and fails on a record where one variant has more
//! active claims than its stock.

use std::path::PathBuf;

use clap::Parser;
use flashgate_bench::stampede::{run_stampede, Args};
use flashgate_tests::history::check::{check, Options};
use flashgate_tests::history::read::{campaigns_of, read_history, read_record};
use flashgate_tests::support::{assert_reconciled, direct_database_url, unique, TestOrigin};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_variant_stampede_sells_each_variant_once_and_its_history_checks_per_variant() {
    let o = TestOrigin::start().await;
    let dir: PathBuf = std::env::temp_dir().join(unique("variants-stampede"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("history.jsonl");
    let secret = String::from_utf8(o.customer_secret()).unwrap();
    let db = direct_database_url();
    let args = Args::parse_from([
        "stampede",
        "--target",
        &o.url,
        "--origin",
        &o.url,
        "--token-secret",
        &secret,
        "--admin-token",
        o.manager_token(),
        "--database-url",
        &db,
        "--variants",
        "10",
        "--stock",
        "100",
        "--customers",
        "1500",
        "--tries",
        "2000",
        "--window",
        "0.5",
        "--concurrency",
        "32",
        "--min-edge-share",
        "0",
        "--progress-seconds",
        "0",
        "--history",
        path.to_str().unwrap(),
    ]);
    let report = run_stampede(&args).await.expect("the stampede runs");
    let text = report.render();
    println!("{text}");
    assert!(report.passed, "{text}");
    assert_eq!(
        report.winners, 100,
        "every unit of every variant sold: {text}"
    );
    for v in 0..10 {
        assert!(
            text.contains(&format!("v{v} 10/10")),
            "variant v{v}: {text}"
        );
    }
    // The per-variant lines: each variant's units read back, its demand and its sell-out.
    let lines = report.variants.as_ref().expect("the per-variant lines");
    assert_eq!(lines.len(), 10);
    for l in lines {
        assert_eq!(
            (l.stock, l.claims, l.remaining, l.winners),
            (Some(10), Some(10), Some(0), 10),
            "{text}"
        );
        assert!(l.demand >= 10 && l.sold_out_ms.is_some(), "{l:?}");
    }
    assert!(
        text.contains("[ ok ] claims = min(stock, demand) per variant"),
        "{text}"
    );
    let c = report.run.campaign.clone();
    let rep = assert_reconciled(&o, &c).await;
    assert!(rep
        .variants
        .iter()
        .all(|v| v.active == 10 && v.remaining == 0));

    // The history, checked per variant.
    let history = read_history(&path).unwrap();
    let mut record = read_record(&db, &campaigns_of(&history)).await.unwrap();
    let outcome = check(&history, &record, Options::default()).unwrap();
    println!("{}", outcome.render());
    assert!(outcome.passed, "{}", outcome.render());
    let per_variant = outcome.check(&c, "variant_oversold").unwrap();
    assert_eq!((per_variant.checked, per_variant.failed), (10, 0));
    let sold_outs = outcome.check(&c, "false_sold_out").unwrap();
    assert!(
        sold_outs.checked > 0,
        "the variants' sold_outs were checked"
    );

    // A record where variant v3 had one unit fewer: its 10 claims oversell it.
    *record.get_mut(&c).unwrap().variants.get_mut("v3").unwrap() -= 1;
    let doctored = check(&history, &record, Options::default()).unwrap();
    let r = doctored.check(&c, "variant_oversold").unwrap();
    assert_eq!(r.failed, 1, "{}", doctored.render());
    assert!(r.examples[0].contains("variant v3"), "{:?}", r.examples);
    o.stop().await;
}
