//! The grant timeline of a waiting room: when `now_serving` reached each value, which fixes
//! each admission's expiry (an admission is never renewed by polling; docs/WAITING-ROOM.md).

use serde::{Deserialize, Serialize};

use super::QueueStatus;

/// Most points a status's grant timeline carries ([`coarsen_grants`]).
pub const MAX_GRANTS: usize = 64;

/// One point of the grant timeline: `now_serving` reached `n` at `at_ms` (Unix ms), so every
/// sequence in `(previous point's n, n]` was admitted at `at_ms` or later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Grant {
    /// `now_serving` after the grant.
    pub n: u64,
    /// When it was granted, Unix ms.
    pub at_ms: i64,
}

/// `points` (increasing `n` and `at_ms`) cut to at most `max` points (≥ 1). Neighbours are
/// merged into one point with the larger `n` and the earlier `at_ms`, so a merged admission
/// looks granted no later than it was: its expiry is never later than the origin's own lapse
/// (which hands the unit to the next customer), at most one merged span earlier. The last
/// point (the newest admissions) is kept exact.
pub fn coarsen_grants(points: &[Grant], max: usize) -> Vec<Grant> {
    let (Some(last), Some(first)) = (points.last(), points.first()) else {
        return Vec::new();
    };
    if points.len() <= max.max(1) {
        return points.to_vec();
    }
    if max <= 1 {
        return vec![Grant {
            n: last.n,
            at_ms: first.at_ms,
        }];
    }
    // The older points in groups of `span`, then the newest point alone.
    let rest = &points[..points.len() - 1];
    let span = rest.len().div_ceil(max - 1);
    let mut out: Vec<Grant> = rest
        .chunks(span)
        .map(|g| Grant {
            n: g[g.len() - 1].n,
            at_ms: g[0].at_ms,
        })
        .collect();
    out.push(*last);
    out
}

impl QueueStatus {
    /// When the admission of sequence `seq` was granted, Unix ms: the time of the first grant
    /// point whose `n` reaches `seq`. `None` when the status carries no timeline (an older
    /// origin) or the timeline does not reach `seq` yet (a status older than this
    /// admission: the caller treats it as granted now). A sequence below the oldest point
    /// gets that point's time (the floor: older than the admission TTL, so already lapsed).
    /// A ticket admitted again after it was skipped takes its time from
    /// [`QueueStatus::returned`] instead.
    pub fn grant_ms(&self, seq: u64) -> Option<i64> {
        if let Some(at_ms) = self.returned_ms(seq) {
            return Some(at_ms);
        }
        let grants = self.grants.as_deref()?;
        let i = grants.partition_point(|g| g.n < seq);
        grants.get(i).map(|g| g.at_ms)
    }

    /// Expiry of the admission of sequence `seq`, seconds since the Unix epoch, as minted at
    /// `now_ms`: its grant time ([`QueueStatus::grant_ms`], `now_ms` when unknown) plus
    /// `admission_ttl_seconds`, rounded down to whole seconds. The same for every poll once
    /// the status carries the grant.
    pub fn admission_expiry_s(&self, seq: u64, now_ms: i64) -> i64 {
        let granted_ms = self.grant_ms(seq).unwrap_or(now_ms).min(now_ms);
        granted_ms
            .div_euclid(1000)
            .saturating_add(i64::from(self.admission_ttl_seconds))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline(points: &[(u64, i64)]) -> QueueStatus {
        QueueStatus {
            now_serving: points.last().map_or(0, |p| p.0),
            admit_per_second: 1,
            admission_ttl_seconds: 10,
            grants: Some(
                points
                    .iter()
                    .map(|&(n, at_ms)| Grant { n, at_ms })
                    .collect(),
            ),
            ..QueueStatus::default()
        }
    }

    #[test]
    fn grant_time_is_the_first_point_reaching_the_sequence() {
        let q = timeline(&[(2, 1_000), (5, 2_500), (6, 3_000)]);
        assert_eq!(q.grant_ms(1), Some(1_000)); // below the floor: the floor's time
        assert_eq!(q.grant_ms(2), Some(1_000));
        assert_eq!(q.grant_ms(3), Some(2_500));
        assert_eq!(q.grant_ms(5), Some(2_500));
        assert_eq!(q.grant_ms(6), Some(3_000));
        assert_eq!(q.grant_ms(7), None); // not admitted in this status
        assert_eq!(QueueStatus::default().grant_ms(1), None); // an older origin
    }

    #[test]
    fn admission_expiry_is_fixed_at_the_grant_whatever_the_poll_time() {
        let q = timeline(&[(2, 1_000), (5, 2_500)]);
        for poll_ms in [2_500, 3_000, 9_999, 12_000, 60_000] {
            assert_eq!(q.admission_expiry_s(4, poll_ms), 12, "poll at {poll_ms}");
        }
        // Without a timeline, each poll mints its own expiry (older origins).
        let old = QueueStatus {
            admission_ttl_seconds: 10,
            ..QueueStatus::default()
        };
        assert_eq!(old.admission_expiry_s(4, 3_000), 13);
        assert_eq!(old.admission_expiry_s(4, 12_000), 22);
    }

    #[test]
    fn coarsened_grants_never_expire_later_than_the_exact_ones() {
        let exact: Vec<Grant> = (1..=200u64)
            .map(|n| Grant {
                n: n * 3,
                at_ms: 1_000 + n as i64 * 100,
            })
            .collect();
        let coarse = coarsen_grants(&exact, MAX_GRANTS);
        assert!(coarse.len() <= MAX_GRANTS);
        assert_eq!(coarse.last(), exact.last());
        let (e, c) = (timeline(&[]), timeline(&[]));
        let (e, c) = (
            QueueStatus {
                grants: Some(exact),
                ..e
            },
            QueueStatus {
                grants: Some(coarse),
                ..c
            },
        );
        for seq in 1..=600 {
            let (exact_ms, coarse_ms) = (e.grant_ms(seq).unwrap(), c.grant_ms(seq).unwrap());
            assert!(coarse_ms <= exact_ms, "seq {seq}: {coarse_ms} > {exact_ms}");
            assert!(exact_ms - coarse_ms <= 400, "seq {seq}: coarsened too far");
        }
    }
}
