//! The waiting room's signed strings: the ticket a customer gets when joining, and the
//! admission token that lets her claims through once her turn has come.
//!
//! Both are `<payload>.<tag>`: `payload` is base64url (RFC 4648 §5, no padding) of a JSON
//! object, `tag` is base64url of HMAC-SHA256 (RFC 2104) under a secret the edge and the origin
//! share, taken over `"<label>.<payload>"` with the label `flashgate-ticket-v1` or
//! `flashgate-admission-v1`, so that one kind can never pass for the other. Tags are compared
//! in constant time. Everything here is a pure function of the secret, the input and the
//! caller's clock (`now_s`, seconds since the Unix epoch).

use crate::signature::keyed_mac;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::Mac;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Longest ticket or admission token accepted, characters.
pub const MAX_LEN: usize = 1_024;

const TICKET_LABEL: &str = "flashgate-ticket-v1";
const ADMISSION_LABEL: &str = "flashgate-admission-v1";

/// Whose place in which queue: the part a ticket and its admission token share.
/// Payload keys `{"c","u","n"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    /// Campaign id.
    #[serde(rename = "c")]
    pub campaign: String,
    /// Customer id (the customer token's `sub`).
    #[serde(rename = "u")]
    pub customer: String,
    /// Sequence number in the queue, from 1.
    #[serde(rename = "n")]
    pub sequence: u64,
}

/// A place in a campaign's queue. Payload `{"c","u","n","iat"}`, plus `"w"` for a drawn number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ticket {
    /// Campaign, customer and sequence number.
    #[serde(flatten)]
    pub place: Place,
    /// When the ticket was issued, seconds since the Unix epoch.
    #[serde(rename = "iat")]
    pub issued_at_s: i64,
    /// For a number drawn at random: the drawn customers not yet admitted when it was issued,
    /// her included (payload key `"w"`, absent when 0, as for arrival numbers). Lets the edge
    /// estimate her position from a cached status older than her draw
    /// ([`crate::queue::QueueStatus::position_of`]).
    #[serde(rename = "w", default, skip_serializing_if = "is_zero")]
    pub drawn_waiting_at_issue: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Permission to claim. Payload `{"c","u","n","exp"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Admission {
    /// Campaign, customer and sequence number of the ticket it was minted for.
    #[serde(flatten)]
    pub place: Place,
    /// Expiry (issued + `admission_ttl_seconds`), seconds since the Unix epoch; expired when
    /// `now_s >= expires_at_s`.
    #[serde(rename = "exp")]
    pub expires_at_s: i64,
}

/// Why a ticket or admission token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissionError {
    /// Not `<payload>.<tag>` in base64url, too long, or not the expected JSON: 400.
    Malformed,
    /// The tag does not match (another secret, a changed payload, the other kind): 403.
    Forged,
    /// `now_s >= expires_at_s`: 403.
    Expired,
    /// Signed for another customer: 403.
    WrongCustomer,
    /// Signed for another campaign: 403.
    WrongCampaign,
}

impl AdmissionError {
    /// HTTP status: 400 for [`AdmissionError::Malformed`], 403 otherwise.
    pub fn http_status(self) -> u16 {
        match self {
            AdmissionError::Malformed => 400,
            _ => 403,
        }
    }

    /// A short message for humans; never includes the token.
    pub fn message(self, what: &str) -> String {
        let why = match self {
            AdmissionError::Malformed => "is malformed",
            AdmissionError::Forged => "signature is invalid",
            AdmissionError::Expired => "has expired",
            AdmissionError::WrongCustomer => "belongs to another customer",
            AdmissionError::WrongCampaign => "belongs to another campaign",
        };
        format!("{what} {why}")
    }
}

fn tag(secret: &[u8], label: &str, payload: &str) -> impl Mac {
    let mut mac = keyed_mac(secret);
    mac.update(label.as_bytes());
    mac.update(b".");
    mac.update(payload.as_bytes());
    mac
}

/// `<payload>.<tag>`: base64url JSON of `value`, HMAC-SHA256 under `secret` over
/// `<label>.<payload>` (the one shape of flashgate's signed strings).
pub(crate) fn seal<T: Serialize>(secret: &[u8], label: &str, value: &T) -> String {
    let payload = B64.encode(serde_json::to_vec(value).expect("payload serialises"));
    let sig = B64.encode(tag(secret, label, &payload).finalize().into_bytes());
    format!("{payload}.{sig}")
}

/// Opens a string [`seal`]ed with `label`: `Malformed` or `Forged` on failure.
pub(crate) fn open<T: DeserializeOwned>(
    secret: &[u8],
    label: &str,
    s: &str,
) -> Result<T, AdmissionError> {
    if s.len() > MAX_LEN {
        return Err(AdmissionError::Malformed);
    }
    let (payload, sig) = s.trim().split_once('.').ok_or(AdmissionError::Malformed)?;
    let sig = B64.decode(sig).map_err(|_| AdmissionError::Malformed)?;
    let bytes = B64.decode(payload).map_err(|_| AdmissionError::Malformed)?;
    tag(secret, label, payload)
        .verify_slice(&sig)
        .map_err(|_| AdmissionError::Forged)?;
    serde_json::from_slice(&bytes).map_err(|_| AdmissionError::Malformed)
}

/// Signs a ticket.
pub fn sign_ticket(secret: &[u8], ticket: &Ticket) -> String {
    seal(secret, TICKET_LABEL, ticket)
}

/// Checks a ticket presented on `campaign`'s queue and returns it. Errors: `Malformed`,
/// `Forged`, `WrongCampaign`. A ticket does not expire; it lives as long as its campaign.
pub fn open_ticket(secret: &[u8], s: &str, campaign: &str) -> Result<Ticket, AdmissionError> {
    let t: Ticket = open(secret, TICKET_LABEL, s)?;
    if t.place.campaign != campaign {
        return Err(AdmissionError::WrongCampaign);
    }
    Ok(t)
}

/// Mints the admission token of `ticket` at `now_s`, valid for `ttl_s` seconds.
pub fn mint_admission(secret: &[u8], ticket: &Ticket, now_s: i64, ttl_s: u32) -> String {
    mint_admission_until(secret, ticket, now_s.saturating_add(i64::from(ttl_s)))
}

/// Mints the admission token of `ticket` expiring at `expires_at_s` (seconds since the Unix
/// epoch; fixed when the admission is granted, [`crate::queue::QueueStatus::admission_expiry_s`]).
pub fn mint_admission_until(secret: &[u8], ticket: &Ticket, expires_at_s: i64) -> String {
    let a = Admission {
        place: ticket.place.clone(),
        expires_at_s,
    };
    seal(secret, ADMISSION_LABEL, &a)
}

/// Checks an admission token on a claim by `customer` on `campaign` at `now_s`. Errors, in
/// this order: `Malformed`, `Forged`, `WrongCampaign`, `WrongCustomer`, `Expired`.
pub fn check_admission(
    secret: &[u8],
    s: &str,
    campaign: &str,
    customer: &str,
    now_s: i64,
) -> Result<Admission, AdmissionError> {
    let a = open_admission(secret, s, campaign, customer)?;
    if now_s >= a.expires_at_s {
        return Err(AdmissionError::Expired);
    }
    Ok(a)
}

/// Opens an admission token presented by `customer` on `campaign` without looking at its
/// expiry (for a caller that treats an expired but genuine token apart). Errors, in this
/// order: `Malformed`, `Forged`, `WrongCampaign`, `WrongCustomer`.
pub fn open_admission(
    secret: &[u8],
    s: &str,
    campaign: &str,
    customer: &str,
) -> Result<Admission, AdmissionError> {
    let a: Admission = open(secret, ADMISSION_LABEL, s)?;
    if a.place.campaign != campaign {
        return Err(AdmissionError::WrongCampaign);
    }
    if a.place.customer != customer {
        return Err(AdmissionError::WrongCustomer);
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const K: &[u8] = b"queue-secret";

    fn ticket(n: u64) -> Ticket {
        Ticket {
            place: Place {
                campaign: "drop".into(),
                customer: "ana".into(),
                sequence: n,
            },
            issued_at_s: 1_900_000_000,
            drawn_waiting_at_issue: 0,
        }
    }

    #[test]
    fn ticket_and_admission_are_checked() {
        let t = sign_ticket(K, &ticket(42));
        assert_eq!(open_ticket(K, &t, "drop"), Ok(ticket(42)));
        assert_eq!(
            open_ticket(K, &t, "other"),
            Err(AdmissionError::WrongCampaign)
        );
        assert_eq!(open_ticket(b"x", &t, "drop"), Err(AdmissionError::Forged));
        for junk in ["", "abc", "a.b.c", "!!.??", &"a".repeat(MAX_LEN + 1)] {
            assert_eq!(
                open_ticket(K, junk, "drop"),
                Err(AdmissionError::Malformed),
                "{junk}"
            );
        }
        let a = mint_admission(K, &ticket(42), 1_000, 120);
        let ok = check_admission(K, &a, "drop", "ana", 1_119).unwrap();
        assert_eq!((ok.place.sequence, ok.expires_at_s), (42, 1_120));
        let err = |s: &str, c, u, now| check_admission(K, s, c, u, now).unwrap_err();
        assert_eq!(err(&a, "drop", "ana", 1_120), AdmissionError::Expired);
        assert_eq!(err(&a, "drop", "bob", 1_000), AdmissionError::WrongCustomer);
        assert_eq!(err(&a, "sale", "ana", 1_000), AdmissionError::WrongCampaign);
        // A ticket never passes for an admission token, nor the other way round.
        assert_eq!(err(&t, "drop", "ana", 1_000), AdmissionError::Forged);
        assert_eq!(open_ticket(K, &a, "drop"), Err(AdmissionError::Forged));
        assert_eq!(AdmissionError::Malformed.http_status(), 400);
        assert_eq!(AdmissionError::Expired.http_status(), 403);
        assert_eq!(
            AdmissionError::Forged.message("admission token"),
            "admission token signature is invalid"
        );
    }

    proptest! {
        #[test]
        fn round_trips(n in 1u64.., iat in 0i64..4_000_000_000, ttl in 10u32..=3600,
                       customer in "[!-~]{1,128}") {
            let mut t = ticket(n);
            t.place.customer = customer.clone();
            t.issued_at_s = iat;
            prop_assert_eq!(open_ticket(K, &sign_ticket(K, &t), "drop"), Ok(t.clone()));
            let a = mint_admission(K, &t, iat, ttl);
            let got = check_admission(K, &a, "drop", &customer, iat).unwrap();
            prop_assert_eq!(got.expires_at_s, iat + i64::from(ttl));
        }

        #[test]
        fn any_tampering_is_refused(n in 1u64..1_000_000, at in 0usize..200, byte in 0u8..128) {
            let t = sign_ticket(K, &ticket(n));
            let mut bytes = t.clone().into_bytes();
            let i = at % bytes.len();
            prop_assume!(bytes[i] != byte);
            bytes[i] = byte;
            let tampered = String::from_utf8_lossy(&bytes).into_owned();
            // base64 has a few spellings of the same trailing bits; a decoded-equal string is
            // the same ticket, never another one.
            match open_ticket(K, &tampered, "drop") {
                Ok(got) => prop_assert_eq!(got, ticket(n)),
                Err(e) => prop_assert!(matches!(e, AdmissionError::Malformed | AdmissionError::Forged)),
            }
        }
    }
}
