//! The stampede's history (`--history`, `flashgate_tests::history`): the writer every attempt is
//! recorded with, and the end-of-run `/claims/mine` lookups.

use std::collections::HashSet;
use std::sync::Arc;

use super::db::Facts;
use super::report::TryOutcome;
use super::{customer_id, Args};
use flashgate_tests::history::writer::{HistoryWriter, Recorder};

/// The history file of `--history`, when given, created before anything else happens so that
/// a path that cannot be written stops the run before a campaign is made. Errors: the file
/// cannot be created.
pub(super) fn open(args: &Args) -> anyhow::Result<Option<Arc<HistoryWriter>>> {
    args.history
        .as_deref()
        .map(HistoryWriter::create)
        .transpose()
}

/// The recorder of `campaign` into the history file, when there is one.
pub(super) fn recorder(file: Option<Arc<HistoryWriter>>, campaign: &str) -> Option<Recorder> {
    file.map(|w| Recorder::new(w, campaign))
}

/// The end-of-run `/claims/mine` lookups of `--history` ([`flashgate_tests::history::lookups`]), then
/// the history file is closed. Errors: the history could not be written.
pub(super) async fn lookups(
    http: &reqwest::Client,
    args: &Args,
    recorder: &Recorder,
    outcomes: &[TryOutcome],
    facts: Option<&Facts>,
    auth: &[String],
) -> anyhow::Result<()> {
    let tried: HashSet<String> = outcomes
        .iter()
        .filter(|o| o.sent_us.is_some())
        .map(|o| customer_id(o.customer))
        .collect();
    let won: HashSet<String> = outcomes
        .iter()
        .filter(|o| o.status == 201)
        .map(|o| customer_id(o.customer))
        .collect();
    let with_claims: Option<HashSet<String>> = facts.map(|f| f.claims.values().cloned().collect());
    let who = flashgate_tests::history::lookups::who(&tried, &won, with_claims.as_ref());
    let auth_of = |c: &str| {
        let i = c.strip_prefix('c')?.parse::<usize>().ok()?;
        auth.get(i).cloned()
    };
    let looked = flashgate_tests::history::lookups::record_all(
        http,
        &args.target,
        recorder,
        &who,
        auth_of,
        args.in_flight_cap(),
    )
    .await;
    let written = recorder.writer().finish()?;
    eprintln!(
        "stampede: history of {written} operations ({looked} lookups) written to {}",
        recorder.writer().path().display()
    );
    Ok(())
}
