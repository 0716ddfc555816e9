//! Who may join, decided at the edge in plain Rust: the challenge of a waiting room's join
//! (`pow`, [`flashgate_shared::pow`]; `turnstile`, checked with the provider's siteverify),
//! its invites ([`flashgate_shared::invite`]) and what a failed join gets
//! ([`flashgate_shared::queue::access::ChallengeFailure`]).
//!
//! The infinite queue: a failed join of a campaign with `challenge_failure: infinite_queue`
//! gets a ticket signed with the shadow key ([`shadow_secret`], derived from the edge secret)
//! instead of the edge secret. It has the shape of any ticket, its polls answer as a waiting
//! customer's ([`shadow_poll`]), it is never admitted, and it is never reported to the origin
//! (which could not open it). The glue tells it apart by the key that opens it.

use std::collections::HashMap;

use flashgate_shared::admission::{open_ticket, Ticket};
use flashgate_shared::api::codes;
use flashgate_shared::invite::{self, InviteError};
use flashgate_shared::pow::{self, PowError};
pub use flashgate_shared::queue::access::shadow_secret;
use flashgate_shared::queue::access::{
    ChallengeFailure, ChallengeKind, ChallengeReply, JoinAccess, JoinBody,
};
use flashgate_shared::queue::{Outlook, QueueState};

use crate::decide::Answer;
use crate::queue::{self, Poll};
use crate::status::StatusEntry;

/// How long a `pow` challenge is valid, seconds.
pub const CHALLENGE_TTL_S: i64 = 300;

/// Invites remembered per isolate (a replay at this isolate gets the first ticket again).
pub const INVITE_MEMO_CAPACITY: usize = 100_000;

/// Why a join failed its challenge; [`Failure::label`] names it in logs and counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Failure {
    /// The join carried no challenge answer.
    Missing,
    /// A `pow` challenge or solution that does not parse.
    Malformed,
    /// A `pow` challenge not signed by this edge.
    Forged,
    /// A `pow` challenge of another campaign or customer.
    Foreign,
    /// An expired `pow` challenge.
    Expired,
    /// A `pow` solution short of the difficulty.
    Unsolved,
    /// Turnstile's siteverify said `success: false`.
    Rejected,
    /// Turnstile's siteverify timed out, failed, or answered something else than its JSON.
    ProviderError,
}

impl Failure {
    /// The reason's label (`missing`, `malformed`, `forged`, `foreign`, `expired`,
    /// `unsolved`, `rejected`, `provider_error`).
    pub fn label(self) -> &'static str {
        match self {
            Failure::Missing => "missing",
            Failure::Malformed => "malformed",
            Failure::Forged => "forged",
            Failure::Foreign => "foreign",
            Failure::Expired => "expired",
            Failure::Unsolved => "unsolved",
            Failure::Rejected => "rejected",
            Failure::ProviderError => "provider_error",
        }
    }
}

impl From<PowError> for Failure {
    fn from(e: PowError) -> Self {
        match e {
            PowError::Malformed => Failure::Malformed,
            PowError::Forged => Failure::Forged,
            PowError::WrongCampaign | PowError::WrongCustomer => Failure::Foreign,
            PowError::Expired => Failure::Expired,
            PowError::Unsolved => Failure::Unsolved,
        }
    }
}

/// Joins that failed their challenge at this isolate, by outcome (`infinite_queue` or
/// `forbidden`) and [`Failure::label`]; served with the edge's metrics
/// (`flashgate_edge_join_challenge_failures_total{outcome,reason}`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FailureCounts(std::collections::BTreeMap<(&'static str, Failure), u64>);

impl FailureCounts {
    /// Counts one failure `f` answered with the infinite queue (`forbidden` false) or a 403.
    pub fn add(&mut self, f: Failure, forbidden: bool) {
        let outcome = if forbidden {
            "forbidden"
        } else {
            "infinite_queue"
        };
        *self.0.entry((outcome, f)).or_default() += 1;
    }

    /// The counts in the Prometheus text format (nothing when none).
    pub fn render(&self) -> String {
        let name = "flashgate_edge_join_challenge_failures_total";
        let mut out = format!(
            "# HELP {name} Joins of this isolate that failed their challenge, by outcome and reason.\n# TYPE {name} counter\n"
        );
        for ((outcome, f), n) in &self.0 {
            out.push_str(&format!(
                "{name}{{outcome=\"{outcome}\",reason=\"{}\"}} {n}\n",
                f.label()
            ));
        }
        out
    }
}

/// What a join that passed the invite check gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// A normal ticket.
    Pass,
    /// An infinite-queue ticket ([`shadow_secret`]), for this failure.
    InfiniteQueue(Failure),
}

/// The join's body ([`JoinBody`]), with access options or without; empty (or only white space)
/// is the empty body. Error: 400 `invalid_json` for anything but a JSON object of its fields
/// (an array, which serde would read as the fields in order, included).
pub fn parse_body(bytes: &[u8]) -> Result<JoinBody, Answer> {
    let Some(first) = bytes.iter().find(|b| !b.is_ascii_whitespace()) else {
        return Ok(JoinBody::default());
    };
    let bad = |e: &dyn std::fmt::Display| {
        Answer::error(
            400,
            codes::INVALID_JSON,
            &format!("the join's body must be a JSON object without unknown fields: {e}"),
        )
    };
    if *first != b'{' {
        return Err(bad(&"not an object"));
    }
    serde_json::from_slice(bytes).map_err(|e| bad(&e))
}

/// A `pow` challenge for `customer` on campaign `campaign` at `now_s` with the 16 random bytes
/// `nonce`. Error: 409 `conflict` when the waiting room has no `pow` challenge.
pub fn challenge(
    secret: &[u8],
    access: &JoinAccess,
    campaign: &str,
    customer: &str,
    nonce: [u8; 16],
    now_s: i64,
) -> Result<ChallengeReply, Answer> {
    if access.challenge != ChallengeKind::Pow {
        return Err(Answer::error(
            409,
            codes::CONFLICT,
            &format!("the waiting room of campaign {campaign} has no proof-of-work challenge"),
        ));
    }
    let c = pow::new_challenge(
        campaign,
        customer,
        nonce,
        access.pow_difficulty,
        now_s,
        CHALLENGE_TTL_S,
    );
    Ok(ChallengeReply {
        challenge: pow::issue(secret, &c),
        difficulty: c.difficulty,
        expires_at: chrono::DateTime::from_timestamp(c.expires_at_s, 0).unwrap_or_default(),
    })
}

/// Checks the `pow` answer of `body` for `customer` on `campaign` at `now_s`: one HMAC and one
/// SHA-256.
pub fn check_pow(
    secret: &[u8],
    body: &JoinBody,
    campaign: &str,
    customer: &str,
    now_s: i64,
) -> Result<(), Failure> {
    let (Some(c), Some(s)) = (body.challenge.as_deref(), body.solution.as_deref()) else {
        return Err(Failure::Missing);
    };
    pow::check(secret, c, s, campaign, customer, now_s)
        .map(|_| ())
        .map_err(Failure::from)
}

/// What Turnstile's siteverify did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Siteverify {
    /// It answered with this status and body.
    Answered(u16, Vec<u8>),
    /// No answer within the timeout.
    TimedOut,
    /// The request failed (no connection, no secret configured).
    Failed,
}

/// The JSON body of a siteverify request for widget token `token` (from client IP `ip` when
/// known) under the site's secret `secret`.
pub fn siteverify_body(secret: &str, token: &str, ip: Option<&str>) -> String {
    let mut v = serde_json::json!({ "secret": secret, "response": token });
    if let Some(ip) = ip {
        v["remoteip"] = ip.into();
    }
    v.to_string()
}

/// The verdict of a siteverify outcome: `Ok` for a 200 with `"success": true`, `Rejected` for
/// a 200 with `"success": false`, `ProviderError` for anything else (a timeout, a failure,
/// another status, a body without a boolean `success`).
pub fn turnstile_verdict(outcome: &Siteverify) -> Result<(), Failure> {
    let Siteverify::Answered(200, body) = outcome else {
        return Err(Failure::ProviderError);
    };
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|_| Failure::ProviderError)?;
    match v.get("success").and_then(serde_json::Value::as_bool) {
        Some(true) => Ok(()),
        Some(false) => Err(Failure::Rejected),
        None => Err(Failure::ProviderError),
    }
}

/// What the join gets after its challenge `check` under `access`: a provider error passes when
/// `challenge_fail_open`; another failure is the infinite queue, or 403 `forbidden` with
/// `challenge_failure: forbidden`.
pub fn gate(access: &JoinAccess, check: Result<(), Failure>) -> Result<Gate, Answer> {
    match check {
        Ok(()) => Ok(Gate::Pass),
        Err(Failure::ProviderError) if access.challenge_fail_open => Ok(Gate::Pass),
        Err(f) => match access.challenge_failure {
            ChallengeFailure::InfiniteQueue => Ok(Gate::InfiniteQueue(f)),
            ChallengeFailure::Forbidden => Err(Answer::error(
                403,
                codes::FORBIDDEN,
                &format!("the join's challenge failed ({})", f.label()),
            )),
        },
    }
}

/// Checks the invite of `body` when `access` is `invite_only`: `Ok(Some(jti))` for a valid
/// one, `Ok(None)` when no invite is needed. Error: 403 `forbidden` for a missing, malformed,
/// forged, expired, another campaign's or another customer's invite.
pub fn check_invite(
    secret: &[u8],
    access: &JoinAccess,
    body: &JoinBody,
    campaign: &str,
    customer: &str,
    now_s: i64,
) -> Result<Option<String>, Answer> {
    if !access.invite_only {
        return Ok(None);
    }
    let key = invite::invite_key(secret, campaign);
    invite::check(
        &key,
        body.invite.as_deref().unwrap_or_default(),
        campaign,
        customer,
        now_s,
    )
    .map(|i| Some(i.jti))
    .map_err(|e: InviteError| Answer::error(403, codes::FORBIDDEN, e.message()))
}

/// The tickets an isolate issued for invites, by (campaign, customer, one-time id): a replay
/// gets the first ticket again. Holds at most `capacity` and starts over when full.
#[derive(Debug, Default)]
pub struct InviteMemo {
    tickets: HashMap<(String, String, String), String>,
    capacity: usize,
}

impl InviteMemo {
    /// An empty memo of at most `capacity` invites.
    pub fn new(capacity: usize) -> Self {
        InviteMemo {
            tickets: HashMap::new(),
            capacity,
        }
    }

    /// The ticket issued for this invite, if any.
    pub fn get(&self, campaign: &str, customer: &str, jti: &str) -> Option<&str> {
        self.tickets
            .get(&(campaign.to_string(), customer.to_string(), jti.to_string()))
            .map(String::as_str)
    }

    /// Remembers signed ticket `ticket` for this invite.
    pub fn put(&mut self, campaign: &str, customer: &str, jti: &str, ticket: String) {
        if self.tickets.len() >= self.capacity {
            self.tickets.clear();
        }
        self.tickets.insert(
            (campaign.to_string(), customer.to_string(), jti.to_string()),
            ticket,
        );
    }
}

/// Opens `raw` as an infinite-queue ticket of campaign `id` ([`shadow_secret`] of the edge
/// secret `secret`): the ticket and the shadow key, or `None`.
pub fn open_shadow(secret: &[u8], raw: &str, id: &str) -> Option<(Ticket, [u8; 32])> {
    let key = shadow_secret(secret);
    open_ticket(&key, raw, id).ok().map(|t| (t, key))
}

/// A poll of an infinite-queue ticket: the answer a waiting customer with this ticket would
/// get, except that it is never admitted (nor lapsed): where it would be, it waits at position
/// 1. Sold out and ended read as for everyone.
pub fn shadow_poll(
    entry: &StatusEntry,
    ticket: &Ticket,
    shadow: &[u8],
    now_ms: i64,
) -> Result<Poll, Answer> {
    let mut p = queue::poll(entry, ticket, shadow, now_ms, &[])?;
    if matches!(p.reply.state, QueueState::Admitted | QueueState::Lapsed) {
        p.reply.state = QueueState::Waiting;
        p.reply.admitted = false;
        p.reply.admission_token = None;
        p.reply.position = 1;
        p.reply.eta_seconds = p.reply.eta_seconds.max(1);
        p.reply.outlook = Some(Outlook::Likely);
        p.retry_after_s = p.retry_after_s.clamp(1, queue::MAX_RETRY_AFTER_S);
    }
    Ok(p)
}

#[cfg(test)]
#[path = "access_tests.rs"]
mod tests;
