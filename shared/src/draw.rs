//! The draw of a draw campaign (`access: "draw"`), as pure functions anyone can run again:
//! the commitment to the seed, the order of the entries, the winners and the waitlist, and the
//! digest of the entry list. The origin draws with these; `flashgate draw verify` and the
//! Python procedure of docs/DRAWS.md check a published result with the same rules.
//!
//! The rules, exactly:
//! - **Seed**: [`SEED_LEN`] (32) random bytes, published as 64 lowercase hex digits.
//! - **Commitment**: lowercase hex of SHA-256(seed bytes), published before entries open.
//! - **Key of an entry**: HMAC-SHA-256 (RFC 2104) keyed with the seed bytes, over the UTF-8
//!   bytes of `campaign + "\n" + customer` (campaign ids are slugs and customer ids visible
//!   ASCII, so neither holds a newline).
//! - **Order**: the distinct customers sorted by key, ascending, bytewise (ties, which SHA-256
//!   makes practically impossible, by customer id bytewise). A customer who entered several
//!   times is one entry.
//! - **Winners**: the first `min(stock, entries)` customers of the order; the rest, in order,
//!   are the waitlist.
//! - **Entry list digest**: lowercase hex of SHA-256 over the distinct customer ids sorted
//!   bytewise ascending and joined with `"\n"` (no newline at the end; the empty list hashes the
//!   empty string).

use hmac::Mac;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::signature::keyed_mac;

/// Length of a draw's seed, bytes.
pub const SEED_LEN: usize = 32;

/// A draw's secret seed, kept by the origin until the reveal.
#[derive(Clone, PartialEq, Eq)]
pub struct Seed(pub [u8; SEED_LEN]);

impl std::fmt::Debug for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seed(…)")
    }
}

impl Seed {
    /// The seed from its 64 hex digits (either case); `Err` with a message otherwise.
    pub fn from_hex(s: &str) -> Result<Self, String> {
        let bytes = hex::decode(s).map_err(|_| "seed is not hexadecimal".to_string())?;
        let arr: [u8; SEED_LEN] = bytes
            .try_into()
            .map_err(|_| format!("seed must be {} hex digits", SEED_LEN * 2))?;
        Ok(Seed(arr))
    }

    /// The seed as 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The commitment: lowercase hex of SHA-256 of the seed bytes.
    pub fn commitment(&self) -> String {
        hex::encode(Sha256::digest(self.0))
    }
}

/// The key that places `customer` in `campaign`'s draw:
/// HMAC-SHA-256(seed, `campaign + "\n" + customer`).
pub fn entry_key(seed: &Seed, campaign: &str, customer: &str) -> [u8; 32] {
    let mut mac = keyed_mac(&seed.0);
    mac.update(campaign.as_bytes());
    mac.update(b"\n");
    mac.update(customer.as_bytes());
    mac.finalize().into_bytes().into()
}

/// The distinct customers of `entries`, sorted bytewise ascending.
pub fn distinct_sorted<S: AsRef<str>>(entries: &[S]) -> Vec<&str> {
    let mut v: Vec<&str> = entries.iter().map(AsRef::as_ref).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The entry list's digest: lowercase hex of SHA-256 over the distinct customer ids sorted
/// bytewise and joined with `"\n"`.
pub fn entries_digest<S: AsRef<str>>(entries: &[S]) -> String {
    let mut h = Sha256::new();
    for (i, c) in distinct_sorted(entries).into_iter().enumerate() {
        if i > 0 {
            h.update(b"\n");
        }
        h.update(c.as_bytes());
    }
    hex::encode(h.finalize())
}

/// The draw's order of `entries` (duplicates count once): see the module's rules.
pub fn order<S: AsRef<str>>(seed: &Seed, campaign: &str, entries: &[S]) -> Vec<String> {
    let mut keyed: Vec<([u8; 32], &str)> = distinct_sorted(entries)
        .into_iter()
        .map(|c| (entry_key(seed, campaign, c), c))
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, c)| c.to_string()).collect()
}

/// A draw's outcome: the winners and the waitlist, both in draw order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drawn {
    /// The first `min(stock, entries)` customers of the order.
    pub winners: Vec<String>,
    /// The rest of the order.
    pub waitlist: Vec<String>,
}

/// Draws `stock` winners among `entries` (duplicates count once).
pub fn draw<S: AsRef<str>>(seed: &Seed, campaign: &str, entries: &[S], stock: u64) -> Drawn {
    let mut winners = order(seed, campaign, entries);
    let cut = usize::try_from(stock)
        .unwrap_or(usize::MAX)
        .min(winners.len());
    let waitlist = winners.split_off(cut);
    Drawn { winners, waitlist }
}

/// The published result of a draw (`GET /api/v1/campaigns/{id}/draw` once revealed, and what
/// `flashgate draw verify` reads): everything needed to recompute it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DrawResult {
    /// Campaign id.
    pub campaign: String,
    /// Units drawn for.
    pub stock: i64,
    /// Lowercase hex SHA-256 of the seed, published before entries opened.
    pub commitment: String,
    /// The seed, 64 lowercase hex digits.
    pub seed: String,
    /// Digest of the entry list (see the module's rules).
    pub entries_digest: String,
    /// Distinct entries.
    pub entry_count: i64,
    /// The winners, in draw order.
    pub winners: Vec<String>,
    /// The waitlist, in draw order.
    pub waitlist: Vec<String>,
}

/// Why a published result does not verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// The seed is not 64 hex digits.
    MalformedSeed(String),
    /// SHA-256 of the seed is not the commitment.
    SeedMismatch {
        /// SHA-256 of the published seed.
        computed: String,
    },
    /// The entries (winners and waitlist) do not hash to `entries_digest`, repeat a customer,
    /// or do not number `entry_count`.
    EntriesMismatch(String),
    /// The published order is not the recomputed one.
    OrderMismatch {
        /// 0-based position of the first difference in winners ++ waitlist.
        position: usize,
        /// The customer the recomputed order has there.
        expected: String,
    },
    /// The number of winners is not `min(stock, entries)`.
    WinnerCount {
        /// `min(stock, entries)`.
        expected: usize,
    },
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyError::MalformedSeed(m) => write!(f, "malformed seed: {m}"),
            VerifyError::SeedMismatch { computed } => write!(
                f,
                "the seed does not match the commitment: SHA-256(seed) is {computed}"
            ),
            VerifyError::EntriesMismatch(m) => write!(f, "the entry list does not match: {m}"),
            VerifyError::OrderMismatch { position, expected } => write!(
                f,
                "the order differs at position {position}: the draw puts {expected} there"
            ),
            VerifyError::WinnerCount { expected } => {
                write!(f, "the draw has {expected} winners, not as published")
            }
        }
    }
}

impl std::error::Error for VerifyError {}

/// Recomputes a published draw: the seed against the commitment, the entry list (winners and
/// waitlist together) against its digest and count, the order, and the number of winners.
pub fn verify(r: &DrawResult) -> Result<(), VerifyError> {
    let seed = Seed::from_hex(&r.seed).map_err(VerifyError::MalformedSeed)?;
    let computed = seed.commitment();
    if !computed.eq_ignore_ascii_case(&r.commitment) {
        return Err(VerifyError::SeedMismatch { computed });
    }
    let published: Vec<&str> = r
        .winners
        .iter()
        .chain(&r.waitlist)
        .map(String::as_str)
        .collect();
    let distinct = distinct_sorted(&published);
    if distinct.len() != published.len() {
        return Err(VerifyError::EntriesMismatch(
            "a customer appears twice".into(),
        ));
    }
    if i64::try_from(distinct.len()) != Ok(r.entry_count) {
        return Err(VerifyError::EntriesMismatch(format!(
            "{} entries published, entry_count says {}",
            distinct.len(),
            r.entry_count
        )));
    }
    if !entries_digest(&published).eq_ignore_ascii_case(&r.entries_digest) {
        return Err(VerifyError::EntriesMismatch(
            "SHA-256 of the sorted entries is not entries_digest".into(),
        ));
    }
    let stock = u64::try_from(r.stock).unwrap_or(0);
    let drawn = draw(&seed, &r.campaign, &published, stock);
    let expected: Vec<&String> = drawn.winners.iter().chain(&drawn.waitlist).collect();
    if let Some(position) = (0..expected.len()).find(|&i| expected[i] != published[i]) {
        return Err(VerifyError::OrderMismatch {
            position,
            expected: expected[position].clone(),
        });
    }
    if drawn.winners.len() != r.winners.len() {
        return Err(VerifyError::WinnerCount {
            expected: drawn.winners.len(),
        });
    }
    Ok(())
}

#[cfg(test)]
#[path = "draw_tests.rs"]
mod tests;
