//! Reads what the checker compares: a history file ([`read_history`]) and the final state of
//! its campaigns in PostgreSQL ([`read_record`]).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::BufRead;
use std::path::Path;

use chrono::{DateTime, Utc};
use sqlx::postgres::PgPoolOptions;
use sqlx::Row;

use super::record::Operation;

/// Input the checker cannot use (exit 2): an unreadable file, a bad line, a campaign missing
/// from PostgreSQL, PostgreSQL unreachable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// Reads the history at `path`: every non-blank line an [`Operation`]. Errors name the file and
/// the line (1-based): a line that is not an operation, or one that breaks the format
/// ([`format_fault`]); an empty history is an error too (nothing to check).
pub fn read_history(path: &Path) -> Result<Vec<Operation>, BadInput> {
    let file = std::fs::File::open(path)
        .map_err(|e| BadInput(format!("cannot read the history {}: {e}", path.display())))?;
    let mut ops = Vec::new();
    let mut seqs = HashSet::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| {
            BadInput(format!(
                "{}: line {}: cannot read: {e}",
                path.display(),
                i + 1
            ))
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let op = serde_json::from_str::<Operation>(&line).map_err(|e| {
            BadInput(format!(
                "{}: line {}: not a history operation: {e}",
                path.display(),
                i + 1
            ))
        })?;
        let fault = format_fault(&op).or_else(|| {
            (!seqs.insert((op.campaign.clone(), op.seq)))
                .then(|| format!("seq {} of campaign {} appears twice", op.seq, op.campaign))
        });
        if let Some(fault) = fault {
            return Err(BadInput(format!(
                "{}: line {}: {fault}",
                path.display(),
                i + 1
            )));
        }
        ops.push(op);
    }
    if ops.is_empty() {
        return Err(BadInput(format!(
            "{}: no operation in the history",
            path.display()
        )));
    }
    Ok(ops)
}

/// What makes one well-typed line a bad operation, if anything: a claim request (`claim`,
/// `retry`, `replay`) without its idempotency key, an answer before its request
/// (`answered_at` < `sent_at`), or an attempt with neither a status nor a transport error.
/// [`super::record`] documents the format.
pub fn format_fault(op: &Operation) -> Option<String> {
    if op.op.is_claim() && op.key.as_deref().is_none_or(str::is_empty) {
        return Some(format!("a {} without its idempotency key", op.op.as_str()));
    }
    if op.answered_at < op.sent_at {
        return Some("answered_at is before sent_at".into());
    }
    if op.status.is_none() && op.error.is_none() {
        return Some("neither a status nor a transport error".into());
    }
    None
}

/// One claim row as PostgreSQL has it at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRow {
    pub id: String,
    pub customer: String,
    /// `held`, `paid`, `released`, `expired`, `issued` or `redeemed`.
    pub status: String,
    pub created_at: DateTime<Utc>,
    /// The last change; for a `released` or `expired` claim, when its unit went back.
    pub updated_at: DateTime<Utc>,
    /// The variant it took (`None` on a campaign without variants).
    pub variant: Option<String>,
}

impl ClaimRow {
    /// True when the claim holds a unit ([`flashgate_shared::api::ClaimStatus::ACTIVE`]).
    pub fn is_active(&self) -> bool {
        flashgate_shared::api::ClaimStatus::active_names().contains(&self.status.as_str())
    }
}

/// One campaign's final state.
#[derive(Debug, Clone)]
pub struct CampaignRecord {
    pub id: String,
    pub stock: i64,
    pub remaining: i64,
    pub starts_at: DateTime<Utc>,
    /// Every claim of the campaign, by id.
    pub claims: BTreeMap<String, ClaimRow>,
    /// The campaign's variants: id → stock (empty without variants).
    pub variants: BTreeMap<String, i64>,
}

/// The final state of every campaign of a history, by id.
pub type Record = BTreeMap<String, CampaignRecord>;

/// The campaigns a history names, sorted.
pub fn campaigns_of(ops: &[Operation]) -> BTreeSet<String> {
    ops.iter().map(|o| o.campaign.clone()).collect()
}

/// Reads each of `campaigns` and its claims from the PostgreSQL at `database_url`. Errors:
/// PostgreSQL unreachable, a query failed, a campaign missing.
pub async fn read_record(
    database_url: &str,
    campaigns: &BTreeSet<String>,
) -> Result<Record, BadInput> {
    let db = |what: &str, e: sqlx::Error| BadInput(format!("PostgreSQL: {what}: {e}"));
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(std::time::Duration::from_secs(10))
        .connect(database_url)
        .await
        .map_err(|e| db("connecting", e))?;
    let mut record = Record::new();
    for id in campaigns {
        let row = sqlx::query(
            "SELECT stock::bigint AS stock, remaining::bigint AS remaining, starts_at \
             FROM campaigns WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&pool)
        .await
        .map_err(|e| db("reading a campaign", e))?
        .ok_or_else(|| BadInput(format!("campaign {id} of the history is not in PostgreSQL")))?;
        let get = |e| db("reading a campaign", e);
        let mut c = CampaignRecord {
            id: id.clone(),
            stock: row.try_get("stock").map_err(get)?,
            remaining: row.try_get("remaining").map_err(get)?,
            starts_at: row.try_get("starts_at").map_err(get)?,
            claims: BTreeMap::new(),
            variants: BTreeMap::new(),
        };
        let vs: Vec<(String, i64)> =
            sqlx::query_as("SELECT id, stock FROM campaign_variants WHERE campaign_id = $1")
                .bind(id)
                .fetch_all(&pool)
                .await
                .map_err(|e| db("reading the variants", e))?;
        c.variants.extend(vs);
        let rows = sqlx::query(
            "SELECT id, customer_id, status, created_at, updated_at, variant FROM claims \
             WHERE campaign_id = $1",
        )
        .bind(id)
        .fetch_all(&pool)
        .await
        .map_err(|e| db("reading the claims", e))?;
        for r in rows {
            let get = |e| db("reading a claim", e);
            let claim = ClaimRow {
                id: r.try_get("id").map_err(get)?,
                customer: r.try_get("customer_id").map_err(get)?,
                status: r.try_get("status").map_err(get)?,
                created_at: r.try_get("created_at").map_err(get)?,
                updated_at: r.try_get("updated_at").map_err(get)?,
                variant: r.try_get("variant").map_err(get)?,
            };
            c.claims.insert(claim.id.clone(), claim);
        }
        record.insert(id.clone(), c);
    }
    pool.close().await;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"seq":1,"op":"claim","campaign":"x","customer":"c1","key":"x-1-0","sent_at":"2026-12-04T15:01:03.1Z","answered_at":"2026-12-04T15:01:03.2Z","status":201,"body":{"result":"claimed"}}"#;

    /// Writes `lines` as a history and reads it back.
    fn read_lines(name: &str, lines: &[String]) -> Result<Vec<Operation>, BadInput> {
        let path = std::env::temp_dir().join(format!(
            "fg-history-read-{name}-{}.jsonl",
            std::process::id()
        ));
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let read = read_history(&path);
        let _ = std::fs::remove_file(&path);
        read
    }

    #[test]
    fn a_well_formed_history_reads() {
        let second = GOOD.replace(r#""seq":1"#, r#""seq":2"#);
        // Two stampedes' files put together: each campaign counts its own seq.
        let other = GOOD.replace(r#""campaign":"x""#, r#""campaign":"y""#);
        let read = read_lines("good", &[GOOD.into(), second, other]).unwrap();
        assert_eq!(read.len(), 3);
    }

    #[test]
    fn format_faults_name_their_line() {
        let cases = [
            ("dup", GOOD.to_string(), "seq 1 of campaign x appears twice"),
            (
                "nokey",
                GOOD.replace(r#""seq":1"#, r#""seq":2"#)
                    .replace(r#""key":"x-1-0""#, r#""key":null"#),
                "a claim without its idempotency key",
            ),
            (
                "backwards",
                GOOD.replace(r#""seq":1"#, r#""seq":2"#)
                    .replace("03.1Z", "03.9Z"),
                "answered_at is before sent_at",
            ),
            (
                "nothing",
                GOOD.replace(r#""seq":1"#, r#""seq":2"#)
                    .replace(r#""status":201"#, r#""status":null"#),
                "neither a status nor a transport error",
            ),
        ];
        for (name, line, fault) in cases {
            let err = read_lines(name, &[GOOD.into(), line]).unwrap_err();
            assert!(
                err.0.ends_with(&format!("line 2: {fault}")),
                "{name}: {err}"
            );
        }
    }
}
