//! Idempotency records, kept in Redis: one mechanism for claims and promo code uses (scoped per
//! customer) and admin writes (scoped per admin principal).
//!
//! A record holds the request fingerprint ([`fingerprint`]: SHA-256 of a scope — for a claim, the
//! campaign id — and the canonical JSON body) and either
//! `pending` (the first request is running; a retry gets 409 `in_progress`) or the first
//! reply's status and body (a retry gets them back byte for byte). A retry whose fingerprint
//! differs gets 422 `idempotency_key_reused`. Records live `FLASHGATE_IDEMPOTENCY_TTL_SECONDS`
//! (pending ones [`PENDING_TTL_SECONDS`]).
//!
//! A claim's record lives in its campaign's gate slot, next to the customer's gate entry
//! ([`crate::gate::Keys::idempotency`]), so that its begin is one script with the take and its
//! finish one with the gate's confirmation ([`crate::gate::begin_take`], [`crate::gate::confirm`]).
//! So that a key stays one request across campaigns and kinds (the same key on another
//! campaign, or for a code use, is 422 `idempotency_key_reused`), a claim also stamps the
//! customer's key with its fingerprint under the common key ([`own_key`], sent alongside the
//! begin, not after it).
//!
//! Redis may lose records (it keeps nothing on disk here). A winner's reply survives anyway:
//! her claim row stores the key and fingerprint, and the claim path rebuilds the reply from it
//! (see [`crate::claims::service`]).

use crate::redis_conn::RedisConn;
use crate::reply::{status_code, Outcome, Reply};
use redis::Script;
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

/// How long a `pending` record lives if its request never finishes (origin crash), seconds.
pub const PENDING_TTL_SECONDS: u64 = 30;

/// The state of a key when a request arrives.
#[derive(Debug, PartialEq, Eq)]
pub enum Begin {
    /// First use: a pending record was written; run the request.
    New,
    /// The first request with this key is still running.
    InProgress,
    /// The key was used with another campaign or body.
    Reused,
    /// The first reply, to send again (its outcome is [`Outcome::Replay`]).
    Replay(Reply),
}

/// Fingerprint of a keyed request: hex SHA-256 of `scope \n canonical body`, where `scope`
/// names what the request acts on (the campaign id of a claim, `code-use:<CODE>` of a code
/// use, ...) and the canonical body is the body parsed as JSON and written back with object
/// keys sorted and no white space (in the spirit of RFC 8785, JSON Canonicalization Scheme).
/// So a retry whose body is the same JSON in other bytes (`{ }` for `{}`, keys reordered, as
/// mobile clients re-serialise) has the same fingerprint, and a body that differs in a value
/// has another. An empty body is hashed as empty; a body that is not JSON (refused before it
/// gets here) is hashed as sent. Every endpoint that takes an `Idempotency-Key` uses this one
/// function.
pub fn fingerprint(scope: &str, body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(scope.as_bytes());
    h.update(b"\n");
    h.update(canonical_json(body).as_deref().unwrap_or(body));
    hex::encode(h.finalize())
}

/// `body` parsed and re-serialised with sorted keys (serde_json's `Map` is a `BTreeMap`: the
/// `preserve_order` feature is off in this workspace); `None` when it is not JSON.
fn canonical_json(body: &[u8]) -> Option<Vec<u8>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Some(Vec::new());
    }
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    serde_json::to_vec(&value).ok()
}

/// The Redis key of `customer`'s idempotency record for `key`:
/// `fg:idem:<customer length>:<customer>:<key>`. Length-prefixed so that no (customer, key)
/// pair can collide with another.
pub fn record_key(customer: &str, key: &str) -> String {
    format!("fg:idem:{}:{customer}:{key}", customer.len())
}

static BEGIN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1] .. '\npending', 'EX', ARGV[2])
  return {'new'}
end
return {'existing', v}
",
    )
});

/// Starts a request with `key` for `customer`.
pub async fn begin(
    redis: &mut RedisConn,
    customer: &str,
    key: &str,
    fp: &str,
) -> redis::RedisResult<Begin> {
    let out: Vec<Vec<u8>> = BEGIN
        .key(record_key(customer, key))
        .arg(fp)
        .arg(PENDING_TTL_SECONDS)
        .invoke_async(redis)
        .await?;
    if out.first().map(Vec::as_slice) == Some(b"new".as_slice()) {
        return Ok(Begin::New);
    }
    Ok(existing(
        out.get(1).map(Vec::as_slice).unwrap_or_default(),
        fp,
    ))
}

/// The record at `record_key` (a claim's, [`crate::gate::record_key`]), read without writing:
/// `None` when there is none (never used, expired or lost), else what a retry with
/// fingerprint `fp` would get (`Replay`, `InProgress` or `Reused`, [`existing`]). For a retry
/// that may only be answered from the record (a claim whose admission token expired, see
/// [`crate::queue`]).
pub async fn peek_at(
    redis: &mut RedisConn,
    record_key: &str,
    fp: &str,
) -> redis::RedisResult<Option<Begin>> {
    let v: Option<Vec<u8>> = redis::cmd("GET").arg(record_key).query_async(redis).await?;
    Ok(v.map(|v| existing(&v, fp)))
}

/// Stamps `customer`'s `key` with fingerprint `fp` for `ttl_seconds` unless it bears one
/// (`SET NX GET`, one command). Returns false when it bears another fingerprint: the key was
/// used with another campaign, body or kind of request (`idempotency_key_reused`).
pub async fn own_key(
    redis: &mut RedisConn,
    customer: &str,
    key: &str,
    fp: &str,
    ttl_seconds: u64,
) -> redis::RedisResult<bool> {
    let was: Option<Vec<u8>> = redis::cmd("SET")
        .arg(record_key(customer, key))
        .arg(fp)
        .arg("NX")
        .arg("GET")
        .arg("EX")
        .arg(ttl_seconds)
        .query_async(redis)
        .await?;
    Ok(was.is_none_or(|v| existing(&v, fp) != Begin::Reused))
}

/// What an existing record `value` (`fp \n state [\n body]`, or a bare `fp` stamp of
/// [`own_key`]) says to a request with `fp`.
pub fn existing(value: &[u8], fp: &str) -> Begin {
    let mut parts = value.splitn(3, |b| *b == b'\n');
    let (stored_fp, state, body) = (parts.next(), parts.next(), parts.next());
    if stored_fp != Some(fp.as_bytes()) {
        return Begin::Reused;
    }
    let status = state
        .and_then(|s| std::str::from_utf8(s).ok())
        .and_then(|s| s.parse::<u16>().ok());
    match (status, body) {
        (Some(status), Some(body)) => Begin::Replay(Reply {
            status: status_code(status),
            body: axum::body::Bytes::copy_from_slice(body),
            outcome: Outcome::Replay,
        }),
        _ => Begin::InProgress,
    }
}

/// Stores `reply` (status and exact body bytes) as the answer of a finished request for
/// `ttl_seconds`.
pub async fn finish(
    redis: &mut RedisConn,
    customer: &str,
    key: &str,
    fp: &str,
    reply: &Reply,
    ttl_seconds: u64,
) -> redis::RedisResult<()> {
    finish_at(redis, &record_key(customer, key), fp, reply, ttl_seconds).await
}

/// [`finish`] for the record at `record_key` (a claim's, [`crate::gate::record_key`]).
pub async fn finish_at(
    redis: &mut RedisConn,
    record_key: &str,
    fp: &str,
    reply: &Reply,
    ttl_seconds: u64,
) -> redis::RedisResult<()> {
    redis::cmd("SET")
        .arg(record_key)
        .arg(record_value(fp, reply))
        .arg("EX")
        .arg(ttl_seconds)
        .query_async(redis)
        .await
}

/// The stored form of a finished request's record: `fp \n status \n body` (body bytes as
/// sent).
pub fn record_value(fp: &str, reply: &Reply) -> Vec<u8> {
    let mut record = format!("{fp}\n{}\n", reply.status.as_u16()).into_bytes();
    record.extend_from_slice(&reply.body);
    record
}

/// Forgets a key whose request failed without a final answer (503), so a retry runs again.
pub async fn abandon(redis: &mut RedisConn, customer: &str, key: &str) -> redis::RedisResult<()> {
    abandon_at(redis, &record_key(customer, key)).await
}

/// [`abandon`] for the record at `record_key` (a claim's, [`crate::gate::record_key`]).
pub async fn abandon_at(redis: &mut RedisConn, record_key: &str) -> redis::RedisResult<()> {
    redis::cmd("DEL").arg(record_key).query_async(redis).await
}

#[cfg(test)]
mod tests {
    use super::fingerprint;

    #[test]
    fn equal_json_in_other_bytes_has_the_same_fingerprint() {
        assert_eq!(fingerprint("c", b"{}"), fingerprint("c", b"{ }"));
        assert_eq!(fingerprint("c", b"{}"), fingerprint("c", b" {\n}\r\n"));
        assert_eq!(
            fingerprint("c", br#"{"order":"o1","cart_total":6000}"#),
            fingerprint("c", br#"{ "cart_total": 6000, "order": "o1" }"#)
        );
        assert_eq!(
            fingerprint("c", br#"{"a":{"y":1,"x":[2,{"q":1,"p":2}]}}"#),
            fingerprint("c", br#"{"a":{"x":[2,{"p":2,"q":1}],"y":1}}"#)
        );
    }

    #[test]
    fn another_value_or_scope_has_another_fingerprint() {
        let a = br#"{"order":"o1","cart_total":6000}"#;
        assert_ne!(
            fingerprint("c", a),
            fingerprint("c", br#"{"order":"o1","cart_total":6001}"#)
        );
        assert_ne!(
            fingerprint("c", a),
            fingerprint("c", br#"{"order":"o2","cart_total":6000}"#)
        );
        assert_ne!(fingerprint("c", a), fingerprint("d", a));
        assert_ne!(fingerprint("c", b"[1,2]"), fingerprint("c", b"[2,1]"));
        assert_ne!(fingerprint("c", b"{}"), fingerprint("c", b""));
    }
}
