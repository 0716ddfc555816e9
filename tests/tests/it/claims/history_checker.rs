//! The history checker (`check_history`) against a real history: two small stampedes recorded
//! against a real origin, PostgreSQL and Redis (one campaign sells out, one keeps units). The
//! clean history passes; a doctored copy (or a doctored row) per check fails exactly that check
//! and counts the failure. The binary is run once per exit status (0, 1, 2).

use std::path::{Path, PathBuf};
use std::process::Command;

use chrono::Duration;
use clap::Parser;
use flashgate_bench::stampede::{run_stampede, Args};
use flashgate_tests::history::check::{check, Options, CHECKS};
use flashgate_tests::history::lookups;
use flashgate_tests::history::outcome::Outcome;
use flashgate_tests::history::read::{campaigns_of, read_history, read_record, Record};
use flashgate_tests::history::record::{OpKind, Operation};
use flashgate_tests::history::writer::{HistoryWriter, Recorder};
use flashgate_tests::support::{own_services, test_config, unique, OwnServices, TestOrigin};
use serde_json::json;

/// A recorded run: the origin on services of its own (the checks doctor its rows: a campaign
/// with more `remaining` than its stock would stop every sweeper of a shared database), the
/// two campaigns (sold out, with units left) and their history.
struct Recorded {
    own: OwnServices,
    o: TestOrigin,
    dir: PathBuf,
    sold_out: String,
    units_left: String,
    history: Vec<Operation>,
}

/// Runs a recorded stampede of `customers` customers and `tries` tries on a new campaign of
/// `stock` units; returns the campaign id and its history.
async fn stampede(
    o: &TestOrigin,
    dir: &Path,
    stock: i64,
    customers: u32,
    tries: u32,
    extra: &[&str],
) -> (String, Vec<Operation>) {
    let path = dir.join(format!("{}.jsonl", unique("history")));
    let secret = String::from_utf8(o.customer_secret()).expect("a text secret");
    let db = o
        .config
        .migration_database_url
        .clone()
        .unwrap_or_else(|| o.config.database_url.clone());
    let (stock, customers, tries) = (stock.to_string(), customers.to_string(), tries.to_string());
    let mut argv = vec![
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
        "--stock",
        &stock,
        "--customers",
        &customers,
        "--tries",
        &tries,
        "--window",
        "0.3",
        "--concurrency",
        "4",
        "--min-edge-share",
        "0",
        "--progress-seconds",
        "0",
        "--history",
        path.to_str().expect("a text path"),
    ];
    argv.extend_from_slice(extra);
    let args = Args::parse_from(argv);
    let report = run_stampede(&args).await.expect("the stampede runs");
    assert!(
        report.passed,
        "the stampede's own checks:\n{}",
        report.render()
    );
    let history = read_history(&path).expect("the history reads back");
    (report.run.campaign.clone(), history)
}

async fn recorded() -> Recorded {
    let own = own_services(test_config(), "history").await;
    let o = TestOrigin::start_with(own.config.clone()).await;
    let dir = std::env::temp_dir().join(unique("history-checker"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // Sells out: 3 units, 12 customers; every winner retries her key after the sell-out.
    let (sold_out, mut history) = stampede(&o, &dir, 3, 12, 20, &["--lost-reply", "1"]).await;
    // Keeps units: 10 units, 4 customers.
    let (units_left, more) = stampede(&o, &dir, 10, 4, 6, &[]).await;
    history.extend(more);
    Recorded {
        own,
        o,
        dir,
        sold_out,
        units_left,
        history,
    }
}

impl Recorded {
    async fn record(&self) -> Record {
        read_record(self.own.direct_url(), &campaigns_of(&self.history))
            .await
            .expect("the record reads")
    }

    /// The first 201 on `campaign` whose key got no other decided answer.
    fn lone_201(&self, campaign: &str) -> usize {
        let keyed = |k: &Option<String>| self.history.iter().filter(|o| o.key == *k).count();
        self.history
            .iter()
            .position(|o| o.campaign == campaign && o.status == Some(201) && keyed(&o.key) == 1)
            .expect("a 201 with a key used once")
    }

    /// An operation on `campaign` by `customer`, sent `after` the last one of the history.
    fn op(&self, kind: OpKind, campaign: &str, customer: &str, after: Duration) -> Operation {
        let last = self
            .history
            .iter()
            .map(|o| o.answered_at)
            .max()
            .expect("ops");
        Operation {
            seq: 0,
            op: kind,
            campaign: campaign.to_string(),
            customer: customer.to_string(),
            key: Some(unique("doctored-key")),
            sent_at: last + after,
            answered_at: last + after + Duration::milliseconds(2),
            status: Some(409),
            error: None,
            retry_after: None,
            answered_by: Some("origin".into()),
            replayed: false,
            body: json!({"result": "sold_out"}),
        }
    }
}

/// Asserts that exactly check `name` failed, on `campaign`, `failed` times.
fn only(outcome: &Outcome, campaign: &str, name: &str, failed: u64) {
    let text = outcome.render();
    assert!(!outcome.passed, "{text}");
    assert_eq!(outcome.failed_checks(), [name], "{text}");
    let r = outcome.check(campaign, name).expect("the check ran");
    assert_eq!(r.failed, failed, "{text}");
    assert!(r.checked >= failed && !r.examples.is_empty(), "{text}");
    assert!(text.contains(&format!("FAIL ({name})")), "{text}");
}

fn run(history: &[Operation], record: &Record) -> Outcome {
    check(history, record, Options::default()).expect("the campaigns are in the record")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_history_passes_and_each_doctored_one_fails_its_check() {
    let r = recorded().await;
    let record = r.record().await;
    let (a, b) = (r.sold_out.as_str(), r.units_left.as_str());

    let clean = run(&r.history, &record);
    assert!(clean.passed, "{}", clean.render());
    let names: Vec<&str> = clean.campaigns[0].checks.iter().map(|c| c.name).collect();
    assert_eq!(names, CHECKS);
    // Every winner's 201 was checked, the winners' retries were checked against their 201,
    // and the sold-out campaign answered sold_out without a false window.
    let created = |c: &str| {
        r.history
            .iter()
            .filter(|o| o.campaign == c && o.status == Some(201))
            .count() as u64
    };
    assert_eq!(
        clean.check(a, "201_names_claim").unwrap().checked,
        created(a)
    );
    assert!(
        created(a) >= 3 * 2,
        "3 winners' 201s and their retries' 201s"
    );
    assert_eq!(clean.check(a, "claims_told").unwrap().checked, 3);
    assert!(clean.check(a, "replays_identical").unwrap().checked >= 3);
    assert!(clean.check(a, "false_sold_out").unwrap().checked > 0);
    assert_eq!(clean.check(b, "claims_told").unwrap().checked, 4);
    assert!(clean
        .campaigns
        .iter()
        .all(|c| c.sold_out_windows.is_empty()));
    let ops = r.history.len() as u64;
    assert_eq!(
        clean.check(a, "contract").unwrap().checked + clean.check(b, "contract").unwrap().checked,
        ops
    );

    // oversold: the record says one unit fewer than was sold.
    let mut rec = record.clone();
    let c = rec.get_mut(a).unwrap();
    c.stock = c.claims.len() as i64 - 1;
    only(&run(&r.history, &rec), a, "oversold", 1);

    // one_active_claim: a second active claim of a winner, which she found by a lookup.
    let mut rec = record.clone();
    let mut h = r.history.clone();
    let c = rec.get_mut(b).unwrap();
    let mut twin = c.claims.values().next().unwrap().clone();
    twin.id = "c_doctoredtwin".into();
    c.claims.insert(twin.id.clone(), twin.clone());
    let mut found = r.op(OpKind::Lookup, b, &twin.customer, Duration::seconds(1));
    (found.key, found.status) = (None, Some(200));
    found.body = json!({"result": "claimed", "claim": {"id": twin.id, "status": "held"}});
    h.push(found);
    only(&run(&h, &rec), b, "one_active_claim", 1);

    // 201_names_claim: a 201 that said a status the claim never had.
    let mut h = r.history.clone();
    let i = r.lone_201(b);
    h[i].body["claim"]["status"] = json!("issued");
    only(&run(&h, &record), b, "201_names_claim", 1);

    // false_sold_out: sold_out answered 10 s after the last claim while 6 units stay unsold.
    let mut h = r.history.clone();
    h.push(r.op(OpKind::Claim, b, "c0000003", Duration::seconds(10)));
    let out = run(&h, &record);
    only(&out, b, "false_sold_out", 1);
    let w = &out
        .campaigns
        .iter()
        .find(|c| c.campaign == b)
        .unwrap()
        .sold_out_windows;
    assert_eq!(
        (w.len(), w[0].free_units, w[0].sold_outs),
        (1, 6, 1),
        "{w:?}"
    );
    assert!(w[0].length_ms >= 10_000, "{w:?}");
    // Within the bound it passes: the same answer with a bound of a minute.
    let minute = Options {
        sold_out_grace_ms: 60_000,
    };
    let relaxed = check(&h, &record, minute).unwrap();
    assert!(relaxed.passed, "{}", relaxed.render());
    assert_eq!(
        relaxed
            .campaigns
            .iter()
            .find(|c| c.campaign == b)
            .unwrap()
            .sold_out_windows
            .len(),
        1
    );

    // replays_identical: a winner's key answered already_claimed after its 201.
    let mut h = r.history.clone();
    let first = h[r.lone_201(b)].clone();
    let mut again = r.op(OpKind::Replay, b, &first.customer, Duration::seconds(1));
    again.key = first.key.clone();
    again.body = json!({"result": "already_claimed", "claim": first.body["claim"]});
    h.push(again);
    only(&run(&h, &record), b, "replays_identical", 1);
    // ... and sold_out while her claim holds its unit; once the record shows the claim ended
    // before that retry was sent, the edge's sold_out is the campaign's answer and passes.
    let mut h = r.history.clone();
    let mut late = r.op(OpKind::Retry, b, &first.customer, Duration::seconds(1));
    late.key = first.key.clone();
    (late.status, late.body) = (Some(409), json!({"result": "sold_out"}));
    let sent = late.sent_at;
    h.push(late);
    // With the bound of a minute: the doctored retry comes a second after the history's last
    // answer, which on a loaded machine is already past the default bound since b's units were
    // left free (1,671 ms once), and false_sold_out would fail beside the check at stake.
    only(
        &check(&h, &record, minute).unwrap(),
        b,
        "replays_identical",
        1,
    );
    let mut ended = record.clone();
    let claim = ended
        .get_mut(b)
        .and_then(|c| c.claims.get_mut(first.claim_id().unwrap()))
        .expect("her claim is in the record");
    (claim.status, claim.updated_at) = ("expired".into(), sent - Duration::milliseconds(1));
    let out = run(&h, &ended);
    assert_eq!(
        out.check(b, "replays_identical").unwrap().failed,
        0,
        "{}",
        out.render()
    );

    // contract: a 500, and a 503 without Retry-After.
    let mut h = r.history.clone();
    let mut broken = r.op(OpKind::Claim, b, "c0000001", Duration::seconds(1));
    (broken.status, broken.body) = (Some(500), json!({"result": "internal", "message": "x"}));
    h.push(broken.clone());
    broken.key = Some(unique("doctored-key"));
    (broken.status, broken.body) = (Some(503), json!({"result": "unavailable", "message": "x"}));
    h.push(broken);
    only(&run(&h, &record), b, "contract", 2);

    // claims_told: a claim row nobody was told about (an acknowledged-but-lost winner) ...
    let lost = unique("lost-winner");
    sqlx::query(
        "INSERT INTO claims (id, campaign_id, customer_id, status, held_until, idempotency_key, request_fp) \
         VALUES ($1, $2, $3, 'held', now() + interval '10 minutes', 'lost-key', 'lost-fp')",
    )
    .bind(format!("c_{}", lost.replace('-', "")))
    .bind(b)
    .bind(&lost)
    .execute(&r.o.db)
    .await
    .expect("a doctored claim row");
    let record = r.record().await;
    only(&run(&r.history, &record), b, "claims_told", 1);
    // ... which passes once her recorded /claims/mine lookup returned it.
    let path = r.dir.join("lookups.jsonl");
    let rec = Recorder::new(HistoryWriter::create(&path).unwrap(), b);
    let token = |c: &str| Some(format!("Bearer {}", r.o.token(c)));
    let looked = lookups::record_all(
        &r.o.http,
        &r.o.url,
        &rec,
        std::slice::from_ref(&lost),
        token,
        1,
    )
    .await;
    assert_eq!((looked, rec.writer().finish().unwrap()), (1, 1));
    let mut h = r.history.clone();
    h.extend(read_history(&path).unwrap());
    let out = run(&h, &record);
    assert!(out.passed, "{}", out.render());
    assert_eq!(out.check(b, "claims_told").unwrap().checked, 5);

    let _ = std::fs::remove_dir_all(&r.dir);
    r.o.stop().await;
    r.own.release().await;
}

/// Writes `ops` as a history file.
fn write(path: &Path, ops: &[Operation]) {
    let lines: Vec<String> = ops
        .iter()
        .map(|o| serde_json::to_string(o).unwrap())
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").expect("history written");
}

fn check_history(r: &Recorded, path: &Path, json: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_check_history"))
        .arg(path)
        .arg("--json")
        .arg(json)
        .env("DATABASE_URL", r.own.direct_url())
        .output()
        .expect("check_history runs");
    (
        out.status.code().expect("an exit status"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_exits_0_1_and_2() {
    let r = recorded().await;
    let (path, json) = (r.dir.join("history.jsonl"), r.dir.join("result.json"));

    write(&path, &r.history);
    let (code, out, err) = check_history(&r, &path, &json);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("history check: PASS"), "{out}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(
        (
            v["passed"].as_bool(),
            v["campaigns"].as_array().map(Vec::len)
        ),
        (Some(true), Some(2))
    );
    assert_eq!(v["sold_out_grace_ms"], 1_500);

    let mut h = r.history.clone();
    let mut broken = h.last().unwrap().clone();
    broken.seq = h.iter().map(|o| o.seq).max().unwrap() + 1;
    broken.key = Some(unique("doctored-key"));
    (broken.status, broken.body) = (Some(500), json!({"result": "internal", "message": "x"}));
    h.push(broken);
    write(&path, &h);
    let (code, out, err) = check_history(&r, &path, &json);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("FAIL (contract)"), "{out}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["passed"], false);

    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"seq\": \"not an operation\"}\n");
    std::fs::write(&path, text).unwrap();
    let (code, out, err) = check_history(&r, &path, &json);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains(&format!("line {}", h.len() + 1)), "{err}");

    let (code, _, err) = check_history(&r, &r.dir.join("missing.jsonl"), &json);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot read the history"), "{err}");

    let _ = std::fs::remove_dir_all(&r.dir);
    r.o.stop().await;
    r.own.release().await;
}
