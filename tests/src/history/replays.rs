//! `replays_identical`: a claim request sent again with the same `Idempotency-Key` by the same
//! customer gets its first reply again, status and body (docs/API.md, "Idempotency").
//!
//! Bound are the keys whose first decided answer was a 201 `claimed`: the origin keeps that
//! reply under the key (and rebuilds it from the claim row if Redis lost it). Answers that do
//! not decide (a transport error, 5xx, 409 `in_progress`, 429) are not replies to replay. A key
//! first answered from the campaign's state (`sold_out`, `not_started`, `paused`, `ended`) is
//! not bound: those answers are not kept, so a retry after units came back may win.
//!
//! One later answer is not a replay of the 201: `sold_out` once her claim had ended (expired or
//! released, by the record, before the retry was sent). She holds no unit any more, so the
//! edge's winners filter (the current holders) no longer forwards her retry, and the edge
//! answers from the campaign's state, as to anyone (docs/HISTORY.md, "Replays").

use std::collections::BTreeMap;

use super::outcome::CheckResult;
use super::read::CampaignRecord;
use super::record::Operation;

/// True when `op` is a decided answer to a claim (one a retry with its key must get again when
/// it was a 201).
pub fn decides(op: &Operation) -> bool {
    match op.status {
        None | Some(429) | Some(500..) => false,
        Some(409) => op.result() != Some("in_progress"),
        Some(_) => true,
    }
}

/// True when `later` is a `sold_out` sent after the claim `first` (a 201) names had ended in
/// `record`.
fn after_her_claim_ended(first: &Operation, later: &Operation, record: &CampaignRecord) -> bool {
    later.status == Some(409)
        && later.result() == Some("sold_out")
        && first
            .claim_id()
            .and_then(|id| record.claims.get(id))
            .is_some_and(|c| !c.is_active() && c.updated_at <= later.sent_at)
}

/// The check; one item per decided answer after the first 201 of its key.
pub fn replays_identical(ops: &[&Operation], record: &CampaignRecord) -> CheckResult {
    let mut r = CheckResult::new("replays_identical");
    let mut by_key: BTreeMap<(&str, &str), Vec<&Operation>> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.op.is_claim() && decides(o)) {
        if let Some(key) = op.key.as_deref() {
            by_key.entry((&op.customer, key)).or_default().push(op);
        }
    }
    for answers in by_key.values_mut() {
        answers.sort_by_key(|o| (o.answered_at, o.seq));
        let first = answers[0];
        if first.status != Some(201) {
            continue;
        }
        for later in &answers[1..] {
            let differs = later.status != first.status || later.body != first.body;
            r.count(
                (differs && !after_her_claim_ended(first, later, record)).then(|| {
                    format!(
                        "{}: the key's first answer (#{}) was 201 {}, this one {} {}",
                        later.brief(),
                        first.seq,
                        first.body,
                        later.status.map_or("-".to_string(), |s| s.to_string()),
                        later.body
                    )
                }),
            );
        }
    }
    r
}
