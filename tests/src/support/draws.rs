//! Draw campaigns (docs/DRAWS.md) at a test origin: the campaign body, entries signed as the
//! edge forwards them, the draw's status, a manager's early draw, the entries stored, and the
//! two verifiers of a published draw (`flashgate draw verify` and the Python of the docs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use chrono::{DateTime, Utc};
use flashgate_shared::api::{CampaignAccess, CampaignKind, DrawSettings, NewCampaign};
use serde_json::Value;

use super::{edge_headers, flashgate_bin, queue_config, repo_root, unique, TestOrigin};

/// An origin with an edge secret (a draw signs its winners' admission tokens with it) that
/// keeps 10,000 connections' headers waiting as long as the test needs.
pub async fn origin() -> TestOrigin {
    TestOrigin::start_with(queue_config()).await
}

pub fn secret(o: &TestOrigin) -> String {
    o.config.edge_secret.as_ref().unwrap().expose().to_string()
}

/// Sends an entry to `c` as the edge forwards it (signed with `secret`), with `token` as the
/// customer token when given.
pub async fn enter_raw(
    http: &reqwest::Client,
    url: &str,
    secret: &str,
    c: &str,
    token: Option<&str>,
) -> (u16, Value) {
    let path = format!("/api/v1/campaigns/{c}/draw/entries");
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut req = http.post(format!("{url}{path}"));
    for (k, v) in edge_headers(secret, "POST", &path, b"", auth.as_deref(), None, None) {
        req = req.header(k, v);
    }
    if let Some(a) = &auth {
        req = req.header("authorization", a);
    }
    let r = req.send().await.expect("enter");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// A draw campaign body: a sale of `stock` units whose entries are open from `open` to `close`.
pub fn draw_campaign(
    id: &str,
    stock: i64,
    open: DateTime<Utc>,
    close: DateTime<Utc>,
) -> NewCampaign {
    let now = Utc::now();
    NewCampaign {
        id: id.into(),
        name: "Raffle".into(),
        kind: CampaignKind::Sale,
        stock,
        starts_at: now - chrono::Duration::minutes(1),
        ends_at: now + chrono::Duration::hours(2),
        hold_seconds: None,
        hold_extension_seconds: None,
        gate_shards: None,
        waiting_room: None,
        access: Some(CampaignAccess::Draw),
        draw: Some(DrawSettings {
            entries_open_at: open,
            entries_close_at: close,
            buying_window_seconds: Some(3_600),
        }),
        variants: None,
    }
}

/// `POST /api/v1/campaigns/{c}/draw/entries` with `token`, signed as the edge would.
pub async fn enter_with(o: &TestOrigin, c: &str, token: &str) -> (u16, Value) {
    enter_raw(&o.http, &o.url, &secret(o), c, Some(token)).await
}

pub async fn enter(o: &TestOrigin, c: &str, customer: &str) -> (u16, Value) {
    enter_with(o, c, &o.token(customer)).await
}

/// `GET path` at the origin with an optional bearer token.
pub async fn get(o: &TestOrigin, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = o.http.get(format!("{}{path}", o.url));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.expect("get");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

pub async fn status(o: &TestOrigin, c: &str) -> (u16, Value) {
    get(o, &format!("/api/v1/campaigns/{c}/draw"), None).await
}

/// `POST /admin/v1/campaigns/{c}/draw/run` with the manager token.
pub async fn run_now(o: &TestOrigin, c: &str) -> (u16, Value) {
    let token = o.manager_token().to_string();
    o.admin(
        reqwest::Method::POST,
        &format!("/admin/v1/campaigns/{c}/draw/run"),
        Some(&token),
        None,
    )
    .await
}

pub async fn entries_in_db(o: &TestOrigin, c: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM draw_entries WHERE campaign_id = $1")
        .bind(c)
        .fetch_one(&o.db)
        .await
        .expect("count")
}

/// The Python procedure of docs/DRAWS.md, written to a file of its own in `dir`.
pub fn python_procedure(dir: &Path) -> PathBuf {
    let doc = std::fs::read_to_string(repo_root().join("docs/DRAWS.md")).expect("docs/DRAWS.md");
    let start = doc.find("```python\n").expect("a python block") + "```python\n".len();
    let len = doc[start..].find("```").expect("its end");
    let path = dir.join("verify.py");
    std::fs::write(&path, &doc[start..start + len]).expect("write verify.py");
    path
}

/// Runs `cmd`: its exit code, standard output and standard error.
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("runs");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// `flashgate draw verify <file>` and `python3 verify.py <file>` on `published`, written to a
/// file in `dir`.
pub fn verify_both(dir: &Path, published: &Value) -> [(i32, String, String); 2] {
    let file = dir.join(format!("{}.json", unique("draw")));
    std::fs::write(&file, published.to_string()).expect("write draw.json");
    let cli = run(Command::new(flashgate_bin())
        .args(["draw", "verify"])
        .arg(&file));
    let py = run(Command::new("python3")
        .arg(python_procedure(dir))
        .arg(&file));
    [cli, py]
}

/// `PATCH /admin/v1/campaigns/{c}` with `body` and the manager token.
pub async fn patch(o: &TestOrigin, c: &str, body: Value) -> (u16, Value) {
    let token = o.manager_token().to_string();
    o.admin(
        reqwest::Method::PATCH,
        &format!("/admin/v1/campaigns/{c}"),
        Some(&token),
        Some(body),
    )
    .await
}

/// The actions of campaign `c`'s audit trail, oldest first, with their actors.
pub async fn audit_trail(o: &TestOrigin, c: &str) -> Vec<(String, String)> {
    sqlx::query_as("SELECT action, actor FROM admin_audit WHERE campaign_id = $1 ORDER BY seq")
        .bind(c)
        .fetch_all(&o.db)
        .await
        .expect("audit trail")
}

/// Creates a draw of `stock` units at `o` whose entries opened a second ago and close in 30
/// minutes; returns its id, new, starting with `prefix`.
pub async fn open_draw(o: &TestOrigin, prefix: &str, stock: i64) -> String {
    let c = unique(prefix);
    let now = Utc::now();
    o.create(&draw_campaign(
        &c,
        stock,
        now - chrono::Duration::seconds(1),
        now + chrono::Duration::minutes(30),
    ))
    .await;
    c
}
