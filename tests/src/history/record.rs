//! One line of a history file: one operation the stampede performed and the answer it got.
//! The one definition the writer ([`super::writer`]) and the checker ([`super::check`]) share.
//!
//! A line is a JSON object (JSON Lines, one per line, in the order the answers arrived):
//!
//! ```json
//! {"seq":17,"op":"claim","campaign":"stampede-20261204-150102-0a1b","customer":"c0000042",
//!  "key":"stampede-20261204-150102-0a1b-42-0","sent_at":"2026-12-04T15:01:03.123456Z",
//!  "answered_at":"2026-12-04T15:01:03.130001Z","status":201,"retry_after":null,
//!  "answered_by":"origin","replayed":false,
//!  "body":{"result":"claimed","claim":{"id":"c_…","status":"held",…}}}
//! ```
//!
//! `status` is `null` for a transport error (then `error` says what failed and `body` is
//! `null`). `body` is the answer parsed as JSON, or the raw text (at most
//! [`RAW_BODY_MAX`] bytes) as a JSON string when it is not JSON.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest raw (non-JSON) answer body kept in a line, in bytes.
pub const RAW_BODY_MAX: usize = 500;

/// What an operation was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// The first request of a claim with a new idempotency key.
    Claim,
    /// A later attempt of the same claim (same key) after a 503, a transport error, a 502/504,
    /// 409 `in_progress` or 429 `queued`.
    Retry,
    /// A new claim request reusing the key of an earlier one (a double tap that resent its key,
    /// a winner retrying after her reply was lost).
    Replay,
    /// `GET /api/v1/campaigns/{id}/claims/mine`: the customer looks her claim up.
    Lookup,
}

impl OpKind {
    /// True for the claim requests (`claim`, `retry`, `replay`).
    pub fn is_claim(self) -> bool {
        matches!(self, OpKind::Claim | OpKind::Retry | OpKind::Replay)
    }

    /// The name written in a line.
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Claim => "claim",
            OpKind::Retry => "retry",
            OpKind::Replay => "replay",
            OpKind::Lookup => "lookup",
        }
    }
}

/// One operation and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    /// Sequence number, unique per campaign within one history file, in the order answers were written.
    pub seq: u64,
    /// What was done.
    pub op: OpKind,
    /// Campaign id.
    pub campaign: String,
    /// Customer id (the `sub` of her token).
    pub customer: String,
    /// The `Idempotency-Key` sent (claims); `null` for a lookup.
    #[serde(default)]
    pub key: Option<String>,
    /// When the request was sent (the generator's clock), RFC 3339 UTC with microseconds.
    #[serde(serialize_with = "micros", deserialize_with = "rfc3339")]
    pub sent_at: DateTime<Utc>,
    /// When the answer (or the transport error) arrived, RFC 3339 UTC with microseconds.
    #[serde(serialize_with = "micros", deserialize_with = "rfc3339")]
    pub answered_at: DateTime<Utc>,
    /// HTTP status; `null` for a transport error.
    pub status: Option<u16>,
    /// The transport error, when there was no answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The `Retry-After` header as sent, when present.
    #[serde(default)]
    pub retry_after: Option<String>,
    /// The `Flashgate-Answered-By` header (`edge`, `origin`), when present.
    #[serde(default)]
    pub answered_by: Option<String>,
    /// True when the answer carried `Idempotent-Replayed: true`.
    #[serde(default)]
    pub replayed: bool,
    /// The answer body: JSON, or the raw text as a string; `null` without an answer.
    #[serde(default)]
    pub body: serde_json::Value,
}

impl Operation {
    /// The `result` field of the body (`claimed`, `sold_out`, …), when there is one.
    pub fn result(&self) -> Option<&str> {
        self.body.get("result").and_then(|r| r.as_str())
    }

    /// The `claim.id` of the body, when there is one.
    pub fn claim_id(&self) -> Option<&str> {
        self.body
            .get("claim")
            .and_then(|c| c.get("id"))
            .and_then(|i| i.as_str())
    }

    /// One line for a human: seq, kind, customer, key, status and result.
    pub fn brief(&self) -> String {
        format!(
            "#{} {} {} key {} at {}: {}",
            self.seq,
            self.op.as_str(),
            self.customer,
            self.key.as_deref().unwrap_or("-"),
            self.sent_at.to_rfc3339_opts(SecondsFormat::Micros, true),
            match self.status {
                Some(s) => format!("{s} {}", self.result().unwrap_or("?")),
                None => format!(
                    "transport error ({})",
                    self.error.as_deref().unwrap_or("unknown")
                ),
            }
        )
    }
}

/// The body of an answer as it goes into a line: parsed JSON, else the raw text cut to
/// [`RAW_BODY_MAX`] bytes (on a character boundary).
pub fn body_value(bytes: &[u8]) -> serde_json::Value {
    match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(_) => {
            let text = String::from_utf8_lossy(bytes);
            let mut end = text.len().min(RAW_BODY_MAX);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            serde_json::Value::String(text[..end].to_string())
        }
    }
}

fn micros<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Micros, true))
}

fn rfc3339<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    let text = String::deserialize(d)?;
    DateTime::parse_from_rfc3339(&text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| serde::de::Error::custom(format!("{text:?} is not RFC 3339: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_round_trips_with_microseconds() {
        let line = r#"{"seq":3,"op":"replay","campaign":"x","customer":"c0000001","key":"x-1-0","sent_at":"2026-12-04T15:01:03.123456Z","answered_at":"2026-12-04T15:01:03.2Z","status":201,"retry_after":null,"answered_by":"origin","replayed":true,"body":{"result":"claimed","claim":{"id":"c_1"}}}"#;
        let op: Operation = serde_json::from_str(line).unwrap();
        assert_eq!(
            (op.op, op.status, op.result()),
            (OpKind::Replay, Some(201), Some("claimed"))
        );
        assert_eq!(op.claim_id(), Some("c_1"));
        let out = serde_json::to_string(&op).unwrap();
        assert!(
            out.contains(r#""answered_at":"2026-12-04T15:01:03.200000Z""#),
            "{out}"
        );
        assert_eq!(serde_json::from_str::<Operation>(&out).unwrap(), op);
    }

    #[test]
    fn bad_times_and_kinds_are_refused() {
        let bad = r#"{"seq":1,"op":"claim","campaign":"x","customer":"c","sent_at":"yesterday","answered_at":"2026-12-04T15:01:03Z","status":null}"#;
        assert!(serde_json::from_str::<Operation>(bad).is_err());
        let bad = bad
            .replace("yesterday", "2026-12-04T15:01:03Z")
            .replace("claim", "buy");
        assert!(serde_json::from_str::<Operation>(&bad).is_err());
    }

    #[test]
    fn raw_bodies_are_cut_on_a_character_boundary() {
        assert_eq!(body_value(br#"{"a":1}"#), serde_json::json!({"a":1}));
        let long = "é".repeat(400);
        let v = body_value(long.as_bytes());
        assert!(v.as_str().unwrap().len() <= RAW_BODY_MAX);
    }
}
