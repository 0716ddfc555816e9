//! `flashgate draw verify`: recomputes a published draw from its JSON (the body of
//! `GET /api/v1/campaigns/{id}/draw`, or its `result` object alone) with the rules of
//! [`flashgate_shared::draw`]: the status's `commitment` against the result's, the seed against
//! the commitment, the entry list against its digest, the order, the winners. Prints one line
//! `ok: …` and exits 0 when it holds; one line `error: …` on stderr and exit 1 when it does not;
//! exit 2 when the file cannot be read, is not a draw's JSON, or is the status of a draw that
//! has no result yet.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use flashgate_shared::draw::{verify, DrawResult};

use crate::cli::exit;

/// `flashgate draw …`.
#[derive(Debug, Args)]
pub struct DrawArgs {
    #[command(subcommand)]
    pub command: DrawCommand,
}

/// The subcommands of `flashgate draw`.
#[derive(Debug, Subcommand)]
pub enum DrawCommand {
    /// Recompute a published draw and check it against what was published.
    Verify {
        /// The published JSON (the draw's status with its `result`, or the `result` alone);
        /// `-` reads standard input.
        file: PathBuf,
    },
}

/// A published draw as read: its result and, when the file is the draw's whole status, the
/// status's own `commitment` (published from creation on, which the result's must be).
struct Published {
    result: DrawResult,
    status_commitment: Option<serde_json::Value>,
}

/// Reads the result out of a draw status (`{"state", "commitment", "result": {…}, …}`) or a
/// bare result. A status without a result (not drawn yet) is refused, saying so.
fn parse(text: &str) -> Result<Published, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let not_drawn = |v: &serde_json::Value| {
        let state = match &v["state"] {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        format!("the draw has no result yet (state {state})")
    };
    let (inner, status_commitment) = match v.get("result") {
        Some(r) if r.is_object() => (r.clone(), v.get("commitment").cloned()),
        Some(_) => return Err(not_drawn(&v)),
        None if v.get("state").is_some() => return Err(not_drawn(&v)),
        None => (v, None),
    };
    let result = serde_json::from_value(inner).map_err(|e| format!("not a draw result: {e}"))?;
    Ok(Published {
        result,
        status_commitment,
    })
}

/// Checks a published draw: the status's commitment is the result's, and the result holds
/// ([`verify`]).
fn check(p: &Published) -> Result<(), String> {
    if let Some(c) = &p.status_commitment {
        if c.as_str() != Some(p.result.commitment.as_str()) {
            return Err(format!(
                "the status's commitment does not match the result's ({c} against \"{}\")",
                p.result.commitment
            ));
        }
    }
    verify(&p.result).map_err(|e| e.to_string())
}

/// Runs `flashgate draw …`; returns the exit code.
pub fn run(args: &DrawArgs) -> i32 {
    let DrawCommand::Verify { file } = &args.command;
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", file.display());
            return exit::USAGE;
        }
    };
    let published = match parse(&text) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    let result = &published.result;
    match check(&published) {
        Ok(()) => {
            let line = format!(
                "ok: draw of {} verified: {} entries, {} winners, {} on the waitlist; \
                 SHA-256(seed) matches the commitment {}",
                result.campaign,
                result.entry_count,
                result.winners.len(),
                result.waitlist.len(),
                result.commitment
            );
            match exit::print_line(&line) {
                Ok(()) => exit::OK,
                Err(_) => exit::UNREACHABLE,
            }
        }
        Err(e) => {
            eprintln!(
                "error: the draw of {} does not verify: {e}",
                result.campaign
            );
            exit::FAULT
        }
    }
}
