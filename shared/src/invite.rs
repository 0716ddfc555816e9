//! Invites to an `invite_only` waiting room: enqueue tokens the shop signs, checked by the edge
//! at the join.
//!
//! An invite is `<payload>.<tag>`: `payload` is base64url (no padding) of the JSON
//! `{"c","u","exp","jti"}` (campaign id, customer id, expiry in seconds since the Unix epoch,
//! a one-time id of 1..=64 characters `[A-Za-z0-9_-]`), `tag` base64url of HMAC-SHA256 under
//! the campaign's invite key over `"flashgate-invite-v1.<payload>"`.
//!
//! The invite key of a campaign is derived from the edge secret:
//! `HMAC-SHA256(edge secret, "flashgate-invite-key-v1." + campaign id)`, given to the shop
//! as 64 lowercase hex digits by the admin API. So the edge needs nothing but its secret to
//! check an invite, no secret is stored with the campaign, and a key opens one campaign only.
//! Rotating the edge secret rotates every campaign's invite key.

use hmac::Mac;
use serde::{Deserialize, Serialize};

use crate::admission::{self, AdmissionError};
use crate::signature::keyed_mac;

const KEY_LABEL: &str = "flashgate-invite-key-v1";
const LABEL: &str = "flashgate-invite-v1";

/// Longest invite accepted, characters.
pub const MAX_INVITE_LEN: usize = 1_024;

/// What an invite binds. Payload keys `{"c","u","exp","jti"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invite {
    /// Campaign id.
    #[serde(rename = "c")]
    pub campaign: String,
    /// Customer id (the customer token's `sub`).
    #[serde(rename = "u")]
    pub customer: String,
    /// Expiry, seconds since the Unix epoch; expired when `now_s >= expires_at_s`.
    #[serde(rename = "exp")]
    pub expires_at_s: i64,
    /// One-time id: a second join with the same invite gets the first ticket again.
    pub jti: String,
}

/// Why an invite was refused (all 403 `forbidden` at the join).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InviteError {
    /// None was sent.
    Missing,
    /// Not `<payload>.<tag>` in base64url, too long, not the JSON, or a bad `jti`.
    Malformed,
    /// The tag does not match this campaign's invite key.
    Forged,
    /// Issued for another campaign.
    WrongCampaign,
    /// Issued for another customer.
    WrongCustomer,
    /// `now_s >= expires_at_s`.
    Expired,
}

impl InviteError {
    /// A short message for humans.
    pub fn message(self) -> &'static str {
        match self {
            InviteError::Missing => "this campaign is invite-only: the join needs an invite",
            InviteError::Malformed => "the invite is malformed",
            InviteError::Forged => "the invite's signature is invalid",
            InviteError::WrongCampaign => "the invite belongs to another campaign",
            InviteError::WrongCustomer => "the invite belongs to another customer",
            InviteError::Expired => "the invite has expired",
        }
    }
}

/// Campaign `campaign`'s invite key under edge secret `edge_secret` (32 bytes).
pub fn invite_key(edge_secret: &[u8], campaign: &str) -> [u8; 32] {
    let mut mac = keyed_mac(edge_secret);
    mac.update(KEY_LABEL.as_bytes());
    mac.update(b".");
    mac.update(campaign.as_bytes());
    mac.finalize().into_bytes().into()
}

/// [`invite_key`] as 64 lowercase hex digits, as the shop gets it.
pub fn invite_key_hex(edge_secret: &[u8], campaign: &str) -> String {
    invite_key(edge_secret, campaign)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Signs invite `i` with invite key `key` (what the shop does; see docs/ACCESS.md).
pub fn sign(key: &[u8], i: &Invite) -> String {
    admission::seal(key, LABEL, i)
}

fn valid_jti(j: &str) -> bool {
    (1..=64).contains(&j.len())
        && j.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Checks invite `s` for `customer` on `campaign` at `now_s` under the campaign's invite key
/// `key`. Errors, in this order: `Missing` (empty), `Malformed`, `Forged`, `WrongCampaign`,
/// `WrongCustomer`, `Expired`.
pub fn check(
    key: &[u8],
    s: &str,
    campaign: &str,
    customer: &str,
    now_s: i64,
) -> Result<Invite, InviteError> {
    if s.trim().is_empty() {
        return Err(InviteError::Missing);
    }
    if s.len() > MAX_INVITE_LEN {
        return Err(InviteError::Malformed);
    }
    let i: Invite = admission::open(key, LABEL, s).map_err(|e| match e {
        AdmissionError::Forged => InviteError::Forged,
        _ => InviteError::Malformed,
    })?;
    if !valid_jti(&i.jti) {
        return Err(InviteError::Malformed);
    }
    if i.campaign != campaign {
        return Err(InviteError::WrongCampaign);
    }
    if i.customer != customer {
        return Err(InviteError::WrongCustomer);
    }
    if now_s >= i.expires_at_s {
        return Err(InviteError::Expired);
    }
    Ok(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EDGE: &[u8] = b"an edge secret of at least 32 bytes!";

    fn invite(c: &str, u: &str, exp: i64) -> Invite {
        Invite {
            campaign: c.into(),
            customer: u.into(),
            expires_at_s: exp,
            jti: "inv-1".into(),
        }
    }

    #[test]
    fn a_signed_invite_passes_once_for_its_campaign_and_customer() {
        let key = invite_key(EDGE, "drop");
        assert_ne!(key, invite_key(EDGE, "other"), "one key per campaign");
        assert_eq!(invite_key_hex(EDGE, "drop").len(), 64);
        let s = sign(&key, &invite("drop", "ana", 2_000));
        assert_eq!(check(&key, &s, "drop", "ana", 1_999).unwrap().jti, "inv-1");
        assert_eq!(
            check(&key, &s, "drop", "bo", 1_000),
            Err(InviteError::WrongCustomer)
        );
        assert_eq!(
            check(&key, &s, "drop", "ana", 2_000),
            Err(InviteError::Expired)
        );
        // Another campaign's invite under its own key, then under this campaign's key.
        let other = sign(&invite_key(EDGE, "other"), &invite("other", "ana", 2_000));
        assert_eq!(
            check(&key, &other, "drop", "ana", 1_000),
            Err(InviteError::Forged)
        );
        let wrong = sign(&key, &invite("other", "ana", 2_000));
        assert_eq!(
            check(&key, &wrong, "drop", "ana", 1_000),
            Err(InviteError::WrongCampaign)
        );
        let mut bad = invite("drop", "ana", 2_000);
        bad.jti = "a b".into();
        assert_eq!(
            check(&key, &sign(&key, &bad), "drop", "ana", 1_000),
            Err(InviteError::Malformed)
        );
        for junk in ["x", "a.b", &"y".repeat(2_000)] {
            assert_eq!(
                check(&key, junk, "drop", "ana", 1_000),
                Err(InviteError::Malformed)
            );
        }
        assert_eq!(
            check(&key, " ", "drop", "ana", 1_000),
            Err(InviteError::Missing)
        );
    }
}
