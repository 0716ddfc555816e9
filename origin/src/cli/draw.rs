//! `flashgate draw verify`: recomputes a published draw from its JSON (the body of
//! `GET /api/v1/campaigns/{id}/draw`, or its `result` object alone) with the rules of
//! [`flashgate_shared::draw`]: the seed against the commitment, the entry list against its
//! digest, the order, the winners. Prints one line `ok: …` and exits 0 when it holds; one line
//! `error: …` on stderr and exit 1 when it does not; exit 2 when the file cannot be read or is
//! not a draw's JSON.

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

/// Reads the result out of a draw status (`{"result": {…}}`) or a bare result.
fn parse(text: &str) -> Result<DrawResult, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let inner = match v.get("result") {
        Some(r) if r.is_object() => r.clone(),
        Some(_) => return Err("the draw has no result yet (not drawn)".into()),
        None => v,
    };
    serde_json::from_value(inner).map_err(|e| format!("not a draw result: {e}"))
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
    let result = match parse(&text) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    match verify(&result) {
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
