//! The campaign index: the compact set of campaign ids the origin hands the edge, so that the
//! edge answers an unknown campaign id with 404 itself instead of asking the origin
//! (see the edge's documentation, "Campaign index").
//!
//! It holds one 32-bit fingerprint per campaign (the first four bytes of the SHA-256 of the
//! id, FIPS 180-4), sorted: 4 bytes per campaign, a binary search per lookup. Two ids may share
//! a fingerprint, so a hit means "may exist" (the edge then asks for the status as before) and
//! a miss means "does not exist". With `n` campaigns a made-up id hits by chance with
//! probability about `n / 2^32` (2.3 × 10⁻⁵ for 100,000 campaigns).
//!
//! Wire format (`Content-Type:` [`CONTENT_TYPE`]): the 4 bytes [`MAGIC`], the count as a
//! big-endian `u32`, then that many big-endian `u32` fingerprints in strictly ascending order.
//! Nothing else; [`CampaignIndex::decode`] refuses any other body.

use sha2::{Digest, Sha256};

/// The origin's route of the index (edge signature or service token; see the origin's docs).
pub const INDEX_PATH: &str = "/edge/v1/campaign-index";
/// Media type of the index body.
pub const CONTENT_TYPE: &str = "application/vnd.flashgate.campaign-index";
/// First four bytes of an index body (format version 1).
pub const MAGIC: [u8; 4] = *b"FGI1";
/// How long an ended campaign stays in the index after its `ends_at`, at least, in seconds
/// (7 days): its status, its claims (`claims/mine`) and its late claims (409 `ended`) still
/// reach the origin that long. The cut-off moves in whole hours ([`ended_cutoff_unix_s`]), so
/// ended campaigns leave the index at most once an hour and it stays unchanged (a 304 to the
/// edge) in between.
pub const ENDED_KEPT_S: i64 = 7 * 86_400;
/// Granularity of the ended cut-off, seconds (one hour).
pub const CUTOFF_STEP_S: i64 = 3_600;
/// Most campaigns an index body may hold (a bound for the edge's read, 4 MB of fingerprints).
pub const MAX_CAMPAIGNS: usize = 1_000_000;
/// Largest index body, bytes ([`MAX_CAMPAIGNS`] fingerprints and the 8-byte header).
pub const MAX_BODY_BYTES: usize = 8 + 4 * MAX_CAMPAIGNS;

/// The index's fingerprint of a campaign id: the first four bytes of SHA-256(id), big-endian.
pub fn fingerprint(id: &str) -> u32 {
    let d = Sha256::digest(id.as_bytes());
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// The ends-at cut-off at `now_unix_s` (seconds since the Unix epoch): campaigns whose
/// `ends_at` is after it are in the index. It is `now - ENDED_KEPT_S`, rounded down to a whole
/// hour, so an ended campaign stays listed between 7 days and 7 days + 1 hour.
pub fn ended_cutoff_unix_s(now_unix_s: i64) -> i64 {
    now_unix_s
        .saturating_sub(ENDED_KEPT_S)
        .div_euclid(CUTOFF_STEP_S)
        .saturating_mul(CUTOFF_STEP_S)
}

/// Why an index body was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexError {
    /// Not [`MAGIC`] at the start, or shorter than the header.
    BadHeader,
    /// The length does not match the count, or the count is over [`MAX_CAMPAIGNS`].
    BadLength,
    /// The fingerprints are not strictly ascending.
    NotSorted,
}

/// A set of campaign fingerprints (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CampaignIndex {
    sorted: Vec<u32>,
}

impl CampaignIndex {
    /// The index of these campaign ids (duplicates and shared fingerprints count once).
    pub fn from_ids<'a>(ids: impl IntoIterator<Item = &'a str>) -> Self {
        let mut sorted: Vec<u32> = ids.into_iter().map(fingerprint).collect();
        sorted.sort_unstable();
        sorted.dedup();
        CampaignIndex { sorted }
    }

    /// True when `id` may be a campaign of the index; false when it surely is not.
    pub fn may_contain(&self, id: &str) -> bool {
        self.may_contain_fingerprint(fingerprint(id))
    }

    /// [`Self::may_contain`] for an id whose [`fingerprint`] is `fp` (a caller that keeps the
    /// fingerprints of the ids it sees often skips their SHA-256).
    pub fn may_contain_fingerprint(&self, fp: u32) -> bool {
        self.sorted.binary_search(&fp).is_ok()
    }

    /// Number of distinct fingerprints.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// True when it holds no campaign.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// Bytes of memory the fingerprints take (4 per fingerprint).
    pub fn memory_bytes(&self) -> usize {
        self.sorted.len() * 4
    }

    /// The wire format (module documentation): 8 + 4 × [`CampaignIndex::len`] bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 4 * self.sorted.len());
        out.extend_from_slice(&MAGIC);
        // from_ids of more than u32::MAX ids cannot happen in practice; saturate regardless.
        let count = u32::try_from(self.sorted.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&count.to_be_bytes());
        for f in &self.sorted {
            out.extend_from_slice(&f.to_be_bytes());
        }
        out
    }

    /// Reads the wire format. Errors: [`IndexError`].
    pub fn decode(body: &[u8]) -> Result<Self, IndexError> {
        let (header, rest) = body.split_at_checked(8).ok_or(IndexError::BadHeader)?;
        if header[..4] != MAGIC {
            return Err(IndexError::BadHeader);
        }
        let count = u32::from_be_bytes([header[4], header[5], header[6], header[7]]) as usize;
        if count > MAX_CAMPAIGNS || rest.len() != count * 4 {
            return Err(IndexError::BadLength);
        }
        let sorted: Vec<u32> = rest
            .chunks_exact(4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if sorted.windows(2).any(|w| w[0] >= w[1]) {
            return Err(IndexError::NotSorted);
        }
        Ok(CampaignIndex { sorted })
    }
}

/// The entity tag of an index body (RFC 9110 §8.8.3), quoted: the first 16 hex digits of the
/// body's SHA-256. The edge sends it back in `If-None-Match`; an unchanged index is a `304`.
pub fn etag(body: &[u8]) -> String {
    let d = Sha256::digest(body);
    format!("\"{}\"", hex::encode(&d[..8]))
}

#[cfg(test)]
#[path = "campaign_index_tests.rs"]
mod tests;
