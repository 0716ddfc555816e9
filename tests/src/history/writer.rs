//! Writes a history file: one [`Operation`] per line, numbered in the order they are written.
//! Shared by every task of a run (a mutex around a buffered file); a write error is kept and
//! reported by [`HistoryWriter::finish`], so the run itself goes on.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context};
use chrono::{DateTime, Utc};

use super::record::{body_value, OpKind, Operation};

/// A history file being written.
#[derive(Debug)]
pub struct HistoryWriter {
    path: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    out: BufWriter<File>,
    next_seq: u64,
    error: Option<String>,
}

impl HistoryWriter {
    /// Creates (or truncates) the file at `path`. Errors: the file cannot be created.
    pub fn create(path: &Path) -> anyhow::Result<Arc<Self>> {
        let file = File::create(path)
            .with_context(|| format!("cannot create the history file {}", path.display()))?;
        Ok(Arc::new(HistoryWriter {
            path: path.to_path_buf(),
            state: Mutex::new(State {
                out: BufWriter::new(file),
                next_seq: 1,
                error: None,
            }),
        }))
    }

    /// Appends `op` with the next sequence number (its own `seq` is replaced).
    pub fn write(&self, mut op: Operation) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.error.is_some() {
            return;
        }
        op.seq = s.next_seq;
        s.next_seq += 1;
        let line = serde_json::to_string(&op).expect("an operation serialises");
        if let Err(e) = writeln!(s.out, "{line}") {
            s.error = Some(e.to_string());
        }
    }

    /// Flushes the file; returns the number of operations written. Errors: any write failed.
    pub fn finish(&self) -> anyhow::Result<u64> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.error.is_none() {
            if let Err(e) = s.out.flush() {
                s.error = Some(e.to_string());
            }
        }
        match &s.error {
            Some(e) => Err(anyhow!("writing the history {}: {e}", self.path.display())),
            None => Ok(s.next_seq - 1),
        }
    }

    /// Where the history goes.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The writer of one campaign's operations.
#[derive(Debug, Clone)]
pub struct Recorder {
    writer: Arc<HistoryWriter>,
    campaign: String,
}

/// An answer (or its absence) as it arrived.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// HTTP status; `None` for a transport error.
    pub status: Option<u16>,
    /// The transport error, when `status` is `None`.
    pub error: Option<String>,
    /// `Retry-After`, `Flashgate-Answered-By`, and `Idempotent-Replayed: true`.
    pub retry_after: Option<String>,
    pub answered_by: Option<String>,
    pub replayed: bool,
    /// The body bytes.
    pub body: Vec<u8>,
}

impl Answer {
    /// The headers a line keeps, read from `resp` (the body is set separately).
    pub fn from_headers(resp: &reqwest::Response) -> Self {
        let h = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        Answer {
            status: Some(resp.status().as_u16()),
            retry_after: h(reqwest::header::RETRY_AFTER.as_str()),
            answered_by: h(flashgate_shared::ANSWERED_BY_HEADER),
            replayed: h(flashgate_shared::REPLAYED_HEADER).as_deref() == Some("true"),
            ..Answer::default()
        }
    }

    /// A transport error: no status, no body.
    pub fn failed(error: impl std::fmt::Display) -> Self {
        Answer {
            error: Some(error.to_string()),
            ..Answer::default()
        }
    }
}

impl Recorder {
    /// Records operations on `campaign` into `writer`.
    pub fn new(writer: Arc<HistoryWriter>, campaign: &str) -> Self {
        Recorder {
            writer,
            campaign: campaign.to_string(),
        }
    }

    /// Writes one operation: `op` by `customer` with `key`, sent at `sent_at`, answered now.
    pub fn record(
        &self,
        op: OpKind,
        customer: &str,
        key: Option<&str>,
        sent_at: DateTime<Utc>,
        answer: Answer,
    ) {
        let body = if answer.status.is_some() {
            body_value(&answer.body)
        } else {
            serde_json::Value::Null
        };
        self.writer.write(Operation {
            seq: 0,
            op,
            campaign: self.campaign.clone(),
            customer: customer.to_string(),
            key: key.map(str::to_string),
            sent_at,
            answered_at: Utc::now(),
            status: answer.status,
            error: answer.error,
            retry_after: answer.retry_after,
            answered_by: answer.answered_by,
            replayed: answer.replayed,
            body,
        });
    }

    /// The file's writer.
    pub fn writer(&self) -> &Arc<HistoryWriter> {
        &self.writer
    }

    /// The campaign recorded.
    pub fn campaign(&self) -> &str {
        &self.campaign
    }
}
