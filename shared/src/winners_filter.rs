//! The winners filter: the compact set of a sold-out campaign's winners (the customers holding
//! a unit) that the origin hands the edge, so that after the sell-out the edge forwards a
//! claim only when it may come from a winner (her retry, whose first reply was lost, is then
//! answered by the origin with that reply) and answers everyone else `sold_out` itself (see
//! the edge's documentation, "Winners' retries after the sell-out").
//!
//! It is a binary fuse filter with 8-bit fingerprints (crate `xorf`; Graf and Lemire, "Binary
//! Fuse Filters", 2022) over a 64-bit key per customer: the first eight bytes of the SHA-256
//! of the customer id (the customer token's `sub`), little-endian. A winner is always found
//! (no false negatives); anyone else is found by chance with probability about 2⁻⁸ (0.39 %).
//! It takes 1.13 to 1.2 bytes per winner (118,784 bytes for 100,000), whatever the length of
//! the ids.
//!
//! Wire format (`Content-Type:` [`CONTENT_TYPE`]): the 4 bytes [`MAGIC`], one kind byte, the
//! number of winners as a big-endian `u32`, then for [`KIND_LISTED`] with at least one winner
//! the filter: its 20-byte descriptor (seed `u64`, segment length, segment length mask and
//! segment count length as `u32`, all little-endian, as `xorf` lays it out) and its
//! fingerprints, one byte each, to the end of the body. [`KIND_TOO_MANY`] carries only the
//! count: the campaign has more winners than the origin lists, and the edge answers every
//! claim after the sell-out `sold_out` (`GET …/claims/mine` then remains a winner's way to
//! her claim). [`WinnersFilter::decode`] refuses any other body.

use sha2::{Digest, Sha256};
use xorf::{BinaryFuse8, Filter};

/// The origin's route of a campaign's winners filter, `{id}` being the campaign id (edge
/// signature or service token, as the campaign index).
pub const PATH_TEMPLATE: &str = "/edge/v1/campaigns/{id}/winners-filter";
/// Media type of a winners filter body.
pub const CONTENT_TYPE: &str = "application/vnd.flashgate.winners-filter";
/// First four bytes of a body (format version 1).
pub const MAGIC: [u8; 4] = *b"FGW1";
/// Kind byte: the winners are listed in the filter that follows.
pub const KIND_LISTED: u8 = 0;
/// Kind byte: more winners than the origin lists; no filter follows.
pub const KIND_TOO_MANY: u8 = 1;
/// Most winners a listed filter may hold: the format's bound (the origin's own limit,
/// `FLASHGATE_WINNERS_FILTER_MAX`, is at most this).
pub const MAX_WINNERS: usize = 1_000_000;
/// Header bytes before the filter: magic, kind and count.
const HEADER_BYTES: usize = 9;
/// Bytes of the filter's descriptor.
const DESCRIPTOR_BYTES: usize = 20;
/// Largest segment `xorf` makes (its fingerprints array is at most three segments longer than
/// its capacity).
const MAX_SEGMENT: usize = 262_144;
/// Largest body, bytes: a filter of [`MAX_WINNERS`] winners (at most 1.125 fingerprints per
/// winner plus three segments; bounded here with room to spare).
pub const MAX_BODY_BYTES: usize =
    HEADER_BYTES + DESCRIPTOR_BYTES + 2 * MAX_WINNERS + 3 * MAX_SEGMENT;

/// The route of campaign `id`'s winners filter (see [`PATH_TEMPLATE`]).
pub fn path(id: &str) -> String {
    PATH_TEMPLATE.replace("{id}", id)
}

/// The filter's key of a customer id: the first eight bytes of SHA-256(id), little-endian.
pub fn key(customer: &str) -> u64 {
    let d = Sha256::digest(customer.as_bytes());
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// Why a body was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterError {
    /// Not [`MAGIC`] at the start, an unknown kind, or shorter than the header.
    BadHeader,
    /// The count is over [`MAX_WINNERS`], or the length does not match the kind and count.
    BadLength,
    /// The descriptor does not describe the fingerprints that follow.
    BadDescriptor,
}

/// A campaign's winners as the edge keeps them (see the module documentation).
#[derive(Debug, Clone)]
pub enum WinnersFilter {
    /// The winners, in a filter (`None`: there are none).
    Listed {
        /// Number of winners.
        count: u32,
        /// The filter; `None` for no winners.
        filter: Option<BinaryFuse8>,
    },
    /// More winners than the origin lists: nobody can be told apart.
    TooMany {
        /// Number of winners.
        count: u32,
    },
}

impl WinnersFilter {
    /// The filter of these customer ids (duplicates count once), or [`WinnersFilter::TooMany`]
    /// when there are more than `max` (at most [`MAX_WINNERS`]).
    pub fn build<'a>(customers: impl IntoIterator<Item = &'a str>, max: usize) -> Self {
        let mut keys: Vec<u64> = customers.into_iter().map(key).collect();
        keys.sort_unstable();
        keys.dedup();
        let count = u32::try_from(keys.len()).unwrap_or(u32::MAX);
        if keys.len() > max.min(MAX_WINNERS) {
            return WinnersFilter::TooMany { count };
        }
        if keys.is_empty() {
            return WinnersFilter::Listed {
                count,
                filter: None,
            };
        }
        match BinaryFuse8::try_from(&keys) {
            Ok(filter) => WinnersFilter::Listed {
                count,
                filter: Some(filter),
            },
            // The construction gives up only after 1,000 seeds (never seen with distinct
            // keys); then nobody is told apart, as above the limit.
            Err(_) => WinnersFilter::TooMany { count },
        }
    }

    /// Number of winners.
    pub fn count(&self) -> u32 {
        match self {
            WinnersFilter::Listed { count, .. } | WinnersFilter::TooMany { count } => *count,
        }
    }

    /// True when the winners are listed (nobody is told apart otherwise).
    pub fn is_listed(&self) -> bool {
        matches!(self, WinnersFilter::Listed { .. })
    }

    /// True when `customer` may be a winner (always for a winner; for anyone else with
    /// probability about 0.39 %); false when she surely is not, or when the winners are not
    /// listed ([`WinnersFilter::TooMany`]).
    pub fn may_contain(&self, customer: &str) -> bool {
        self.may_contain_key(key(customer))
    }

    /// [`Self::may_contain`] for a customer whose [`key`] is `k` (a caller that keeps the keys
    /// of the customers it sees often skips their SHA-256).
    pub fn may_contain_key(&self, k: u64) -> bool {
        match self {
            WinnersFilter::Listed {
                filter: Some(f), ..
            } => f.contains(&k),
            _ => false,
        }
    }

    /// Bytes of fingerprints held in memory.
    pub fn fingerprint_bytes(&self) -> usize {
        match self {
            WinnersFilter::Listed {
                filter: Some(f), ..
            } => f.fingerprints.len(),
            _ => 0,
        }
    }

    /// The wire format (see the module documentation).
    pub fn encode(&self) -> Vec<u8> {
        let (kind, filter) = match self {
            WinnersFilter::Listed { filter, .. } => (KIND_LISTED, filter.as_ref()),
            WinnersFilter::TooMany { .. } => (KIND_TOO_MANY, None),
        };
        let extra = filter.map_or(0, |f| DESCRIPTOR_BYTES + f.fingerprints.len());
        let mut out = Vec::with_capacity(HEADER_BYTES + extra);
        out.extend_from_slice(&MAGIC);
        out.push(kind);
        out.extend_from_slice(&self.count().to_be_bytes());
        if let Some(f) = filter {
            let d = &f.descriptor;
            out.extend_from_slice(&d.seed.to_le_bytes());
            out.extend_from_slice(&d.segment_length.to_le_bytes());
            out.extend_from_slice(&d.segment_length_mask.to_le_bytes());
            out.extend_from_slice(&d.segment_count_length.to_le_bytes());
            out.extend_from_slice(&f.fingerprints);
        }
        out
    }

    /// Reads a body written by [`WinnersFilter::encode`]. Checks the descriptor against the
    /// fingerprints, so that no lookup in the decoded filter can index past them.
    pub fn decode(body: &[u8]) -> Result<Self, FilterError> {
        let header = body.get(..HEADER_BYTES).ok_or(FilterError::BadHeader)?;
        if header[..4] != MAGIC {
            return Err(FilterError::BadHeader);
        }
        let count = u32::from_be_bytes([header[5], header[6], header[7], header[8]]);
        let rest = &body[HEADER_BYTES..];
        match header[4] {
            KIND_TOO_MANY if rest.is_empty() => Ok(WinnersFilter::TooMany { count }),
            KIND_LISTED if count == 0 && rest.is_empty() => Ok(WinnersFilter::Listed {
                count,
                filter: None,
            }),
            KIND_LISTED if count as usize <= MAX_WINNERS && body.len() <= MAX_BODY_BYTES => {
                let filter = decode_filter(rest)?;
                Ok(WinnersFilter::Listed {
                    count,
                    filter: Some(filter),
                })
            }
            KIND_LISTED | KIND_TOO_MANY => Err(FilterError::BadLength),
            _ => Err(FilterError::BadHeader),
        }
    }
}

/// The filter after the header: a descriptor whose segments are a power of two long, whose
/// mask is the segment length less one and whose fingerprints are exactly the segment count
/// length plus two segments (where every lookup lands).
fn decode_filter(rest: &[u8]) -> Result<BinaryFuse8, FilterError> {
    let (d, fingerprints) = (
        rest.get(..DESCRIPTOR_BYTES).ok_or(FilterError::BadLength)?,
        rest.get(DESCRIPTOR_BYTES..).ok_or(FilterError::BadLength)?,
    );
    let word = |at: usize| u32::from_le_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]);
    let mut seed = [0u8; 8];
    seed.copy_from_slice(&d[..8]);
    let descriptor = xorf::Descriptor {
        seed: u64::from_le_bytes(seed),
        segment_length: word(8),
        segment_length_mask: word(12),
        segment_count_length: word(16),
    };
    let (len, mask, count_len) = (
        descriptor.segment_length,
        descriptor.segment_length_mask,
        descriptor.segment_count_length,
    );
    let expected = len
        .checked_mul(2)
        .and_then(|two| two.checked_add(count_len));
    let consistent = len.is_power_of_two()
        && mask == len - 1
        && count_len >= len
        && count_len % len == 0
        && expected.is_some_and(|e| e as usize == fingerprints.len());
    if !consistent {
        return Err(FilterError::BadDescriptor);
    }
    Ok(BinaryFuse8 {
        descriptor,
        fingerprints: fingerprints.into(),
    })
}

#[cfg(test)]
#[path = "winners_filter_tests.rs"]
mod tests;
