//! Presence reported by the edge (`POST /edge/v1/campaigns/{id}/presence`): the tickets that
//! polled at one isolate since its last report, so admission can skip those who left
//! ([`super::store::advance`]).
//!
//! Stored per campaign `c` under the queue's hash tag:
//! - `fg:{c}:q:present`  — sorted set sequence → last seen (Unix ms, the origin's clock when the
//!   report arrived, or the join's time: a fresh ticket's grace). About 100 bytes per ticket
//!   in Redis 7 (skiplist + dict entry of a 13-digit member): 99,589,424 bytes measured for
//!   1,000,000 tickets (docs/BENCHMARKS.md, "Presence memory in Redis").
//! - `fg:{c}:q:reported` — when presence was first reported (Unix ms): until one window after
//!   it, every ticket counts as present (presence is not known yet, e.g. right after Redis lost
//!   the queue, or with no edge reporting at all).
//! - `fg:{c}:q:skipped`  — sorted set of the sequence numbers admission passed while away.
//! - `fg:{c}:q:back`     — the skipped ones seen again, to be admitted at the next step first.
//! - An arrival key reported here that is not in line yet (its report of joins was lost) and
//!   is still ahead of `now_serving` joins the line (`fg:{c}:q:keys`).
//! - `fg:{c}:q:report:{id}` — a report id already counted (kept [`REPORT_ID_KEPT_S`]).
//! - `fg:{c}:q:who` — the customer of a reported ticket not known there yet
//!   ([`super::store::who`]).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use flashgate_shared::admission::{self, AdmissionError};
use flashgate_shared::api::codes;
use flashgate_shared::queue::keys::EDGE_BLOCK;
use flashgate_shared::queue::presence::{PresenceReceipt, PresenceReport, REPORT_ID_KEPT_S};
use redis::Script;

use super::store::who::{fingerprint, KEPT_S};
use super::store::Keys;
use crate::error::ApiError;
use crate::redis_conn::RedisConn;
use crate::state::AppState;

// KEYS: report id key, present, reported, skipped, back, serving, keys, issued, who. ARGV: now
// ms, report id kept s, EDGE_BLOCK, who kept s, then per ticket its sequence number and its
// customer's fingerprint. Returns -1 for a report id counted before (nothing changed), else the
// tickets counted.
//
// An arrival key not in line yet and still ahead of `serving` (its join report was lost: a
// reporter cut off, or Redis lost the line) joins the line here.
static RECORD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if not redis.call('SET', KEYS[1], 1, 'NX', 'EX', ARGV[2]) then return -1 end
local now = ARGV[1]
redis.call('SET', KEYS[3], now, 'NX')
local serving = tonumber(redis.call('GET', KEYS[6]) or '0')
local E = tonumber(ARGV[3])
for i = 5, #ARGV, 2 do
  local s = ARGV[i]
  redis.call('HSETNX', KEYS[9], s, ARGV[i + 1])
  redis.call('ZADD', KEYS[2], 'GT', now, s)
  if redis.call('ZSCORE', KEYS[4], s) then redis.call('ZADD', KEYS[5], s, s) end
  if tonumber(s) >= E and tonumber(s) > serving then
    if redis.call('ZADD', KEYS[7], 'NX', s, s) == 1 then redis.call('INCR', KEYS[8]) end
  end
end
if #ARGV > 4 then redis.call('EXPIRE', KEYS[9], ARGV[4]) end
return math.floor((#ARGV - 4) / 2)
",
    )
});

/// Records report `r` of campaign `c` at `now_ms`: each ticket's last-seen time, and the skipped
/// ones that came back. Counted once per report id. Errors: 400 `invalid_request` for a bad
/// shape or a malformed ticket, 403 `forbidden` for a forged ticket or another campaign's (the
/// whole report is refused, nothing stored), 503 without the edge secret or when Redis fails.
pub async fn record(
    state: &AppState,
    c: &str,
    r: &PresenceReport,
    now_ms: i64,
) -> Result<PresenceReceipt, ApiError> {
    r.validate()
        .map_err(|m| ApiError::BadRequest(codes::INVALID_REQUEST, m))?;
    let secret = super::secret(state)?;
    let mut seqs = BTreeMap::new();
    for t in &r.tickets {
        let place = open_reported(secret, t, c)?.place;
        seqs.insert(place.sequence, fingerprint(&place.customer));
    }
    let mut redis = state.redis.clone();
    let n = store_report(&mut redis, c, &r.report_id, &seqs, now_ms).await?;
    Ok(PresenceReceipt {
        counted: n.max(0) as u64,
        duplicate: n < 0,
    })
}

/// Opens ticket `t` of a report for campaign `c`: 400 `invalid_request` when malformed, 403
/// `forbidden` when forged or another campaign's.
pub fn open_reported(secret: &[u8], t: &str, c: &str) -> Result<admission::Ticket, ApiError> {
    admission::open_ticket(secret, t, c).map_err(|e| {
        let message = format!("a reported {}", e.message("ticket"));
        match e {
            AdmissionError::Malformed => ApiError::BadRequest(codes::INVALID_REQUEST, message),
            _ => ApiError::Forbidden(message),
        }
    })
}

/// The Redis step of [`record`] (`seqs`: each sequence number with its customer's
/// fingerprint): -1 for a report id seen before, else the tickets counted.
async fn store_report(
    redis: &mut RedisConn,
    c: &str,
    report_id: &str,
    seqs: &BTreeMap<u64, String>,
    now_ms: i64,
) -> redis::RedisResult<i64> {
    let k = Keys::of(c);
    let mut inv = RECORD.prepare_invoke();
    inv.key(format!("fg:{{{c}}}:q:report:{report_id}"))
        .key(&k.present)
        .key(&k.reported)
        .key(&k.skipped)
        .key(&k.back)
        .key(&k.serving)
        .key(&k.keys)
        .key(&k.issued)
        .key(&k.who)
        .arg(now_ms)
        .arg(REPORT_ID_KEPT_S)
        .arg(EDGE_BLOCK)
        .arg(KEPT_S);
    for (s, who) in seqs {
        inv.arg(*s).arg(who);
    }
    inv.invoke_async(redis).await
}
