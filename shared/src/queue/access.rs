//! Who may join a waiting room: the challenge at the join (`challenge`: `none`, `pow`,
//! `turnstile`) and invite-only access (`invite_only`). The options are fields of the
//! campaign's `waiting_room` option ([`super::WaitingRoom`]) and reach the edge in the public
//! status's `queue` object ([`super::QueueStatus`]), which answers the joins. None of them is
//! a secret: the invite key is derived from the edge secret ([`crate::invite`]).

use serde::{Deserialize, Serialize};

use hmac::Mac;

use crate::pow::{DEFAULT_DIFFICULTY, MAX_DIFFICULTY};
use crate::signature::keyed_mac;

/// The key of the edge's infinite-queue tickets under edge secret `secret`: a join that failed
/// its challenge gets a ticket signed with it, which the origin cannot open (so it is never
/// reported nor admitted) and the edge recognises.
pub fn shadow_secret(secret: &[u8]) -> [u8; 32] {
    let mut mac = keyed_mac(secret);
    mac.update(b"flashgate-infinite-queue-v1");
    mac.finalize().into_bytes().into()
}

/// Bounds of `pow_difficulty`, leading zero bits of the solution's SHA-256.
pub const POW_DIFFICULTY: std::ops::RangeInclusive<u8> = 1..=MAX_DIFFICULTY;

/// The challenge a join must pass before the edge issues a ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ChallengeKind {
    /// No challenge.
    #[default]
    None,
    /// A proof of work: the join carries the solution of a challenge the edge signed.
    Pow,
    /// A Cloudflare Turnstile widget token, checked with the provider's siteverify.
    Turnstile,
}

/// What a join that fails its challenge (or the provider, failing closed) gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ChallengeFailure {
    /// A ticket that looks normal and whose polls look normal, but is never admitted and never
    /// reaches the origin.
    #[default]
    InfiniteQueue,
    /// A plain 403 `forbidden`.
    Forbidden,
}

/// The access options of a waiting room, as the edge reads them from the public status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JoinAccess {
    /// The challenge at the join (default `none`).
    #[serde(default)]
    pub challenge: ChallengeKind,
    /// Difficulty of a `pow` challenge, [`POW_DIFFICULTY`] bits (default
    /// [`DEFAULT_DIFFICULTY`]).
    #[serde(default = "default_difficulty")]
    pub pow_difficulty: u8,
    /// When the challenge provider times out or errs: true issues a normal ticket (fail
    /// open), false treats the join as failed (default false).
    #[serde(default)]
    pub challenge_fail_open: bool,
    /// What a failed join gets (default `infinite_queue`).
    #[serde(default)]
    pub challenge_failure: ChallengeFailure,
    /// True when a join needs the shop's signed invite for this campaign and customer.
    #[serde(default)]
    pub invite_only: bool,
}

fn default_difficulty() -> u8 {
    DEFAULT_DIFFICULTY
}

impl Default for JoinAccess {
    fn default() -> Self {
        JoinAccess {
            challenge: ChallengeKind::None,
            pow_difficulty: DEFAULT_DIFFICULTY,
            challenge_fail_open: false,
            challenge_failure: ChallengeFailure::InfiniteQueue,
            invite_only: false,
        }
    }
}

impl JoinAccess {
    /// True for the defaults (no challenge, no invites): the status leaves them out.
    pub fn is_open(&self) -> bool {
        *self == JoinAccess::default()
    }

    /// Checks the bounds; the message names the field (`waiting_room.<field>`, answered 422
    /// `validation_failed`).
    pub fn validate(&self) -> Result<(), String> {
        if !POW_DIFFICULTY.contains(&self.pow_difficulty) {
            return Err(format!(
                "waiting_room.pow_difficulty must be between {} and {}",
                POW_DIFFICULTY.start(),
                POW_DIFFICULTY.end()
            ));
        }
        Ok(())
    }
}

/// The join's optional body, `application/json`: what the access options ask for. Unknown
/// fields are refused (400).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct JoinBody {
    /// `pow`: the challenge string the edge handed out (`GET .../queue/challenge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenge: Option<String>,
    /// `pow`: its solution, a decimal counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solution: Option<String>,
    /// `turnstile`: the widget's token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turnstile_token: Option<String>,
    /// `invite_only`: the shop's signed invite ([`crate::invite`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invite: Option<String>,
}

/// `GET /api/v1/campaigns/{id}/queue/challenge` of a `pow` waiting room: a challenge for the
/// customer whose token the request carries ([`crate::pow`]). Solve it, then join with
/// `{"challenge", "solution"}` ([`JoinBody`]) before `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChallengeReply {
    /// The signed challenge string.
    pub challenge: String,
    /// Leading zero bits the solution's SHA-256 needs.
    pub difficulty: u8,
    /// When the challenge expires (RFC 3339 UTC).
    pub expires_at: chrono::DateTime<chrono::Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_bounds_and_names() {
        let a: JoinAccess = serde_json::from_str("{}").unwrap();
        assert!(a.is_open());
        assert_eq!(a.pow_difficulty, 18);
        let a: JoinAccess = serde_json::from_str(
            r#"{"challenge":"pow","pow_difficulty":0,"challenge_failure":"forbidden"}"#,
        )
        .unwrap();
        assert_eq!(
            a.validate().unwrap_err(),
            "waiting_room.pow_difficulty must be between 1 and 32"
        );
        assert_eq!(a.challenge_failure, ChallengeFailure::Forbidden);
        assert!(serde_json::from_str::<JoinAccess>(r#"{"challenge":"captcha"}"#).is_err());
        assert!(serde_json::from_str::<JoinBody>(r#"{"nonce":"x"}"#).is_err());
    }
}
