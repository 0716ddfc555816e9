//! Proof-of-work challenges for a campaign's join (`challenge: "pow"`): the rules only.
//!
//! A challenge is `<payload>.<tag>` like the waiting room's signed strings
//! ([`crate::admission`]): `payload` is base64url (no padding) of the JSON
//! `{"c","u","n","d","exp"}` (campaign, customer, nonce, difficulty, expiry), `tag` base64url of
//! HMAC-SHA256 under the edge's secret over `"flashgate-pow-v1.<payload>"`. The label keeps a
//! challenge from passing for a ticket or an admission token, and the reverse.
//!
//! A solution is a decimal `u64` counter `s` such that SHA-256 of the UTF-8 bytes of
//! `<challenge> + ":" + s` begins with at least `d` zero bits. Checking it costs one SHA-256
//! (after the challenge's HMAC); finding one costs `2^d` hashes on average.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::Mac;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::signature::keyed_mac;

const LABEL: &str = "flashgate-pow-v1";

/// Longest challenge accepted, characters.
pub const MAX_CHALLENGE_LEN: usize = 1_024;
/// Difficulty of a campaign that does not set one, leading zero bits (about 260,000 hashes on
/// average).
pub const DEFAULT_DIFFICULTY: u8 = 18;
/// Largest difficulty a campaign may set, bits.
pub const MAX_DIFFICULTY: u8 = 32;

/// What a challenge binds. Payload keys `{"c","u","n","d","exp"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    /// Campaign id.
    #[serde(rename = "c")]
    pub campaign: String,
    /// Customer id (the customer token's `sub`).
    #[serde(rename = "u")]
    pub customer: String,
    /// Random nonce, base64url of 16 bytes: two challenges never share work.
    #[serde(rename = "n")]
    pub nonce: String,
    /// Leading zero bits the solution's hash needs, 1..=[`MAX_DIFFICULTY`].
    #[serde(rename = "d")]
    pub difficulty: u8,
    /// Expiry, seconds since the Unix epoch; expired when `now_s >= expires_at_s`.
    #[serde(rename = "exp")]
    pub expires_at_s: i64,
}

/// Why a challenge or its solution was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowError {
    /// Not `<payload>.<tag>` in base64url, too long, not the JSON, a difficulty out of range,
    /// or a solution that is not a decimal `u64`.
    Malformed,
    /// The tag does not match (another secret, a changed payload, another kind of string).
    Forged,
    /// Issued for another campaign.
    WrongCampaign,
    /// Issued for another customer.
    WrongCustomer,
    /// `now_s >= expires_at_s`.
    Expired,
    /// The solution's hash has fewer leading zero bits than the difficulty.
    Unsolved,
}

impl PowError {
    /// A short message for humans; never includes the challenge.
    pub fn message(self) -> &'static str {
        match self {
            PowError::Malformed => "the challenge or its solution is malformed",
            PowError::Forged => "the challenge's signature is invalid",
            PowError::WrongCampaign => "the challenge belongs to another campaign",
            PowError::WrongCustomer => "the challenge belongs to another customer",
            PowError::Expired => "the challenge has expired",
            PowError::Unsolved => "the solution does not meet the challenge's difficulty",
        }
    }
}

fn tag(secret: &[u8], payload: &str) -> impl Mac {
    let mut mac = keyed_mac(secret);
    mac.update(LABEL.as_bytes());
    mac.update(b".");
    mac.update(payload.as_bytes());
    mac
}

/// Signs challenge `c` with `secret`.
pub fn issue(secret: &[u8], c: &Challenge) -> String {
    let payload = B64.encode(serde_json::to_vec(c).expect("payload serialises"));
    let sig = B64.encode(tag(secret, &payload).finalize().into_bytes());
    format!("{payload}.{sig}")
}

/// A challenge for `customer` on `campaign` with the 16-byte `nonce` (from a CSPRNG), valid
/// `ttl_s` seconds from `now_s`.
pub fn new_challenge(
    campaign: &str,
    customer: &str,
    nonce: [u8; 16],
    difficulty: u8,
    now_s: i64,
    ttl_s: i64,
) -> Challenge {
    Challenge {
        campaign: campaign.into(),
        customer: customer.into(),
        nonce: B64.encode(nonce),
        difficulty,
        expires_at_s: now_s.saturating_add(ttl_s),
    }
}

/// Leading zero bits of `hash`.
pub fn leading_zero_bits(hash: &[u8]) -> u32 {
    let mut n = 0;
    for &b in hash {
        if b == 0 {
            n += 8;
        } else {
            return n + b.leading_zeros();
        }
    }
    n
}

/// SHA-256 of `<challenge> + ":" + solution`.
pub fn work_hash(challenge: &str, solution: u64) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(challenge.as_bytes());
    h.update(b":");
    h.update(solution.to_string().as_bytes());
    h.finalize().into()
}

/// Checks the challenge string `s` and its `solution` for `customer` on `campaign` at `now_s`.
/// Errors, in this order: `Malformed`, `Forged`, `WrongCampaign`, `WrongCustomer`, `Expired`,
/// `Unsolved`.
pub fn check(
    secret: &[u8],
    s: &str,
    solution: &str,
    campaign: &str,
    customer: &str,
    now_s: i64,
) -> Result<Challenge, PowError> {
    if s.len() > MAX_CHALLENGE_LEN {
        return Err(PowError::Malformed);
    }
    let (payload, sig) = s.split_once('.').ok_or(PowError::Malformed)?;
    let sig = B64.decode(sig).map_err(|_| PowError::Malformed)?;
    let bytes = B64.decode(payload).map_err(|_| PowError::Malformed)?;
    tag(secret, payload)
        .verify_slice(&sig)
        .map_err(|_| PowError::Forged)?;
    let c: Challenge = serde_json::from_slice(&bytes).map_err(|_| PowError::Malformed)?;
    if !(1..=MAX_DIFFICULTY).contains(&c.difficulty) {
        return Err(PowError::Malformed);
    }
    if c.campaign != campaign {
        return Err(PowError::WrongCampaign);
    }
    if c.customer != customer {
        return Err(PowError::WrongCustomer);
    }
    if now_s >= c.expires_at_s {
        return Err(PowError::Expired);
    }
    // Only the canonical decimal form: "007" and "+7" are other strings than "7".
    let n: u64 = solution.parse().map_err(|_| PowError::Malformed)?;
    if n.to_string() != solution {
        return Err(PowError::Malformed);
    }
    if leading_zero_bits(&work_hash(s, n)) < u32::from(c.difficulty) {
        return Err(PowError::Unsolved);
    }
    Ok(c)
}

/// Finds a solution of challenge string `s` at `difficulty` by counting up from 0; `None` past
/// `max_tries` hashes. What a client does (the waiting page does it in JavaScript).
pub fn solve(s: &str, difficulty: u8, max_tries: u64) -> Option<u64> {
    (0..max_tries).find(|&n| leading_zero_bits(&work_hash(s, n)) >= u32::from(difficulty))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"an edge secret of at least 32 bytes!";
    const NOW: i64 = 1_800_000_000;

    fn challenge(difficulty: u8) -> String {
        issue(
            SECRET,
            &new_challenge("drop", "ana", [9; 16], difficulty, NOW, 120),
        )
    }

    #[test]
    fn a_solved_challenge_passes_and_costs_about_two_to_the_difficulty() {
        let s = challenge(12);
        let n = solve(&s, 12, 1 << 20).expect("a solution");
        let c = check(SECRET, &s, &n.to_string(), "drop", "ana", NOW).unwrap();
        assert_eq!((c.difficulty, c.customer.as_str()), (12, "ana"));
        assert!(leading_zero_bits(&work_hash(&s, n)) >= 12);
        // Total work over 64 challenges is near 64 × 2^8 (printed, not asserted).
        let total: u64 = (0..64u8)
            .map(|i| {
                let s = issue(SECRET, &new_challenge("drop", "ana", [i; 16], 8, NOW, 120));
                solve(&s, 8, 1 << 20).unwrap() + 1
            })
            .sum();
        println!("64 challenges at difficulty 8: {total} hashes (expected about 16384)");
    }

    #[test]
    fn forged_foreign_expired_and_unsolved_challenges_are_refused() {
        let s = challenge(10);
        let n = solve(&s, 10, 1 << 20).unwrap().to_string();
        assert!(check(SECRET, &s, &n, "drop", "ana", NOW).is_ok());
        // Another secret, a changed payload, a truncated tag.
        let other = issue(
            b"another secret of at least 32 bytes!!",
            &new_challenge("drop", "ana", [9; 16], 10, NOW, 120),
        );
        assert_eq!(
            check(SECRET, &other, &n, "drop", "ana", NOW),
            Err(PowError::Forged)
        );
        let (_, sig) = s.split_once('.').unwrap();
        let easier = new_challenge("drop", "ana", [9; 16], 1, NOW, 120);
        let payload = B64.encode(serde_json::to_vec(&easier).unwrap());
        assert_eq!(
            check(SECRET, &format!("{payload}.{sig}"), "0", "drop", "ana", NOW),
            Err(PowError::Forged)
        );
        // Another campaign's or customer's challenge.
        assert_eq!(
            check(SECRET, &s, &n, "other", "ana", NOW),
            Err(PowError::WrongCampaign)
        );
        assert_eq!(
            check(SECRET, &s, &n, "drop", "bo", NOW),
            Err(PowError::WrongCustomer)
        );
        // Expired at `exp`.
        assert_eq!(
            check(SECRET, &s, &n, "drop", "ana", NOW + 120),
            Err(PowError::Expired)
        );
        // A solution that does not meet the difficulty, or is not a canonical number.
        let wrong = (0..)
            .find(|&m| leading_zero_bits(&work_hash(&s, m)) < 10)
            .unwrap();
        assert_eq!(
            check(SECRET, &s, &wrong.to_string(), "drop", "ana", NOW),
            Err(PowError::Unsolved)
        );
        for bad in ["", "-1", "x", &format!("0{n}"), &format!("+{n}")] {
            assert_eq!(
                check(SECRET, &s, bad, "drop", "ana", NOW),
                Err(PowError::Malformed),
                "{bad}"
            );
        }
        // Garbage and an admission-shaped string.
        for bad in ["", "abc", "a.b.c", &"x".repeat(2_000)] {
            assert_eq!(
                check(SECRET, bad, "0", "drop", "ana", NOW),
                Err(PowError::Malformed),
                "{bad}"
            );
        }
        // A difficulty out of range, even signed.
        let zero = issue(SECRET, &new_challenge("drop", "ana", [1; 16], 0, NOW, 120));
        assert_eq!(
            check(SECRET, &zero, "0", "drop", "ana", NOW),
            Err(PowError::Malformed)
        );
    }

    #[test]
    fn leading_zero_bits_counts_bits_not_bytes() {
        assert_eq!(leading_zero_bits(&[0, 0, 0x10, 0xff]), 19);
        assert_eq!(leading_zero_bits(&[0x80]), 0);
        assert_eq!(leading_zero_bits(&[0; 4]), 32);
    }
}
