//! Retries of decided claims after their admission token expired.
//!
//! A customer whose claim was decided (won, sold out, already claimed...) and whose reply was
//! lost retries with the same `Idempotency-Key`; by then her admission token may have expired.
//! Refusing her 403 would hide an answer that already exists, so a claim whose token is genuine
//! (signed, hers, this campaign's) but expired is answered from what was recorded for that key,
//! and only from it: it never reaches the gate, so it can never win a unit the queue did not
//! admit her for. The same holds for a token spent by her winning claim. A new key gets 409
//! `already_claimed` with her claim while she holds one (what the gate would answer), else
//! stays 403. The edge's side of the rule is in docs/WAITING-ROOM.md ("Retries after the
//! admission token expired").

use flashgate_shared::api::ClaimReply;

use crate::claims::{service, store};
use crate::gate;
use crate::idempotency::{self, Begin};
use crate::metrics::AnsweredFrom;
use crate::reply::{Outcome, Reply};
use crate::state::AppState;

/// The recorded answer to a retry of `customer`'s claim on `campaign` with `key` and `body`,
/// when there is one: the first reply byte for byte (Redis' idempotency record), `in_progress`
/// while the first request still runs, or her winning claim rebuilt from PostgreSQL when Redis
/// lost the record but her active claim was made with this very key and body, or 409
/// `already_claimed` with her active claim made with another key. `None` otherwise (no
/// record and no active claim, the key used with another body, or a lookup failed, logged):
/// the caller refuses 403.
pub async fn recorded_answer(
    state: &AppState,
    campaign: &str,
    customer: &str,
    key: &str,
    body: &[u8],
) -> Option<Reply> {
    let fp = idempotency::fingerprint(campaign, body);
    let mut redis = state.redis.clone();
    let mut gate = state.gate.clone();
    let record = match gate::record_key(&mut gate, campaign, customer, key).await {
        Ok(record) => record,
        Err(e) => {
            tracing::warn!(error = %e, "gate unreadable; expired admission refused");
            return None;
        }
    };
    let found = match &record {
        Some(record) => idempotency::peek_at(&mut redis, record, &fp).await,
        None => Ok(None),
    };
    match found {
        Ok(Some(Begin::Replay(reply))) => {
            state.metrics.idempotency_replays.inc();
            state.metrics.claim(Outcome::Replay, AnsweredFrom::Gate);
            return Some(reply);
        }
        Ok(Some(Begin::InProgress)) => {
            state.metrics.in_progress.inc();
            state.metrics.claim(Outcome::InProgress, AnsweredFrom::Gate);
            return Some(Reply::claim(&ClaimReply::InProgress));
        }
        Ok(Some(Begin::Reused | Begin::New)) => return None,
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(error = %e, "idempotency record unreadable; expired admission refused");
            return None;
        }
    }
    // Her active claim: the replay of it when made with this key and body, else 409
    // `already_claimed` with it, the answer the gate gives any other claim of hers.
    let active = match store::find_active(&state.db, campaign, customer).await {
        Ok(active) => active?,
        Err(e) => {
            tracing::warn!(error = %e, "claim lookup failed; expired admission refused");
            return None;
        }
    };
    if active.idempotency_key == key && active.request_fp == fp {
        state.metrics.idempotency_replays.inc();
    }
    let reply =
        service::existing_claim_reply(&state.db, &state.metrics, active, (key, &fp), true).await;
    reply
        .inspect_err(|e| tracing::warn!(error = %e, "claim lookup failed; admission refused"))
        .ok()
}
