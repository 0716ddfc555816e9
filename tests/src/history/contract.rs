//! `contract`: every answer is one the API documents for that request (docs/API.md), with 503
//! `unavailable` + `Retry-After` allowed at any time (a fault).
//!
//! - a claim: 201 `claimed` with a claim; 409 `sold_out`, `already_claimed` (with her claim),
//!   `not_started`, `ended`, `paused`, `in_progress` (with `Retry-After`); 422
//!   `idempotency_key_reused`; 429 `queued` / `rate_limited` (a waiting room). The generator
//!   sends well-formed claims, so 400, 401, 403, 404, 413, 415 are outside it;
//! - a `/claims/mine` lookup: 200 `claimed` or `expired` with a claim, or 404;
//! - a transport error (no answer) is allowed when a later attempt with the same key (a claim)
//!   or of the same customer (a lookup) got an answer; the last attempt must be answered.

use std::collections::HashMap;

use super::outcome::CheckResult;
use super::record::{OpKind, Operation};

/// Why `op`'s answer is outside the contract, `None` when it is inside. `retried`: a later
/// attempt of the same request exists.
pub fn breach(op: &Operation, retried: bool) -> Option<String> {
    let Some(status) = op.status else {
        return (!retried).then(|| "a transport error, never retried".to_string());
    };
    if !op.body.is_object() {
        return Some("the body is not a JSON object".to_string());
    }
    let result = op.result().unwrap_or("");
    let has_claim = op.body["claim"]["id"].is_string();
    let retry_after = op
        .retry_after
        .as_deref()
        .is_some_and(|v| v.trim().parse::<u64>().is_ok());
    let ok = match (op.op, status, result) {
        (_, 503, "unavailable") => retry_after,
        (OpKind::Lookup, 200, "claimed" | "expired") => has_claim,
        (OpKind::Lookup, 404, _) => true,
        (OpKind::Lookup, _, _) => false,
        (_, 201, "claimed") | (_, 409, "already_claimed") => has_claim,
        (_, 409, "in_progress") => retry_after,
        (_, 409, "sold_out" | "not_started" | "ended" | "paused") => true,
        (_, 422, "idempotency_key_reused") => true,
        (_, 429, "queued" | "rate_limited") => true,
        _ => false,
    };
    (!ok).then(|| match status {
        503 | 409 if !retry_after && matches!(result, "unavailable" | "in_progress") => {
            format!("{status} {result} without a Retry-After in seconds")
        }
        _ => format!(
            "{status} {result:?} is not a documented answer to a {}",
            op.op.as_str()
        ),
    })
}

/// The check; one item per operation.
pub fn contract(ops: &[&Operation]) -> CheckResult {
    let mut r = CheckResult::new("contract");
    // The last attempt of each request: a claim by its key, a lookup by its customer.
    let request = |o: &Operation| match o.op {
        OpKind::Lookup => (o.customer.clone(), None),
        _ => (o.customer.clone(), o.key.clone()),
    };
    let mut last: HashMap<(String, Option<String>), (chrono::DateTime<chrono::Utc>, u64)> =
        HashMap::new();
    for o in ops {
        let t = (o.sent_at, o.seq);
        let e = last.entry(request(o)).or_insert(t);
        *e = (*e).max(t);
    }
    for o in ops {
        let retried = last
            .get(&request(o))
            .is_some_and(|t| *t > (o.sent_at, o.seq));
        r.count(breach(o, retried).map(|why| format!("{}: {why}", o.brief())));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn op(
        kind: OpKind,
        status: Option<u16>,
        body: serde_json::Value,
        ra: Option<&str>,
    ) -> Operation {
        Operation {
            seq: 1,
            op: kind,
            campaign: "x".into(),
            customer: "c1".into(),
            key: Some("k".into()),
            sent_at: chrono::Utc::now(),
            answered_at: chrono::Utc::now(),
            status,
            error: None,
            retry_after: ra.map(str::to_string),
            answered_by: None,
            replayed: false,
            body,
        }
    }

    #[test]
    fn the_documented_answers_pass_and_others_do_not() {
        let claim = json!({"result":"claimed","claim":{"id":"c_1"}});
        assert_eq!(
            breach(&op(OpKind::Claim, Some(201), claim.clone(), None), false),
            None
        );
        assert_eq!(
            breach(&op(OpKind::Lookup, Some(200), claim, None), false),
            None
        );
        let so = json!({"result":"sold_out"});
        assert_eq!(
            breach(&op(OpKind::Replay, Some(409), so, None), false),
            None
        );
        let un = json!({"result":"unavailable","message":"x"});
        assert_eq!(
            breach(&op(OpKind::Claim, Some(503), un.clone(), Some("1")), false),
            None
        );
        assert!(breach(&op(OpKind::Claim, Some(503), un, None), false).is_some());
        let ip = json!({"result":"in_progress"});
        assert!(breach(&op(OpKind::Claim, Some(409), ip, None), false).is_some());
        let bad = json!({"result":"internal"});
        assert!(breach(&op(OpKind::Claim, Some(500), bad, None), false).is_some());
        let none = serde_json::Value::Null;
        assert!(breach(&op(OpKind::Claim, None, none.clone(), None), false).is_some());
        assert_eq!(breach(&op(OpKind::Claim, None, none, None), true), None);
        let html = json!("<html>");
        assert!(breach(&op(OpKind::Claim, Some(502), html, None), true).is_some());
    }
}
