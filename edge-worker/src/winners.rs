//! Winners' retries after the sell-out: the isolate's winners filter of a sold-out campaign
//! ([`flashgate_shared::winners_filter`]), so that a claim that may come from a winner (her
//! retry, whose first reply was lost) goes to the origin, which answers it with her first
//! reply, while everyone else is answered `sold_out` at the edge as before.
//!
//! - Asked only for a claim that the fresh cached status would answer `sold_out` (the
//!   campaign's, or its variant's).
//! - Fetched for the sell-outs the cached status shows ([`sold_key`], sent as `?sold=`): a
//!   filter is used only for the set of sold-out variants (and campaign) it was fetched for,
//!   so a variant that sells out after the fetch (its last winners not in that filter) makes
//!   the next claim on a sold-out variant refresh it first, whatever its age. The origin
//!   builds one filter per such set (after the sell-outs it names: their winners are final).
//! - Fetched from the origin's winners-filter route, single-flight per campaign, at most once
//!   per status TTL per isolate, with `If-None-Match`: an unchanged filter is a bodiless 304,
//!   and the body (about 1.2 bytes per winner) is sent and decoded only when the winners
//!   changed. A failed fetch backs off for one TTL, as a status refresh does.
//! - A filter confirmed at most max-stale ago is used. Without one (its fetch failed, the origin
//!   has no such route) the edge cannot tell a winner's retry from anyone's claim:
//!   [`Verdict::Unknown`], answered `503` + `Retry-After` (not final) instead of a `sold_out`
//!   that would be false to a winner. A "too many" filter answers everyone `sold_out` at the
//!   edge; `GET …/claims/mine` then remains a winner's way to her claim.
//! - At most [`MAX_FILTERS`] campaigns' filters are kept per isolate.
//!
//! Times are ms since the Unix epoch on the edge's clock.

use crate::held::{self, Held};
use crate::memo;
use crate::status::{self, StatusEntry, Step};
use flashgate_shared::api::CampaignState;
use flashgate_shared::winners_filter::{FilterError, WinnersFilter};
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};

/// Campaigns whose winners filter an isolate keeps at most (about 119 KB each for 100,000
/// winners, 300 KB at the origin's default limit of 250,000).
pub const MAX_FILTERS: usize = 32;

/// The origin's answer to a winners filter fetch, read ([`Fetched::from_origin`]).
pub type Fetched = held::Fetched<WinnersFilter, FilterError>;

/// What the isolate holds of one campaign's winners: the filter ([`Held`]) and the sell-outs
/// it was fetched for ([`sold_key`]).
#[derive(Debug, Default)]
pub struct WinnersSlot {
    held: Held<WinnersFilter>,
    /// The [`sold_key`] of the filter held (the one its last fetch, 200 or 304, was for).
    sold: Option<u64>,
    /// The [`sold_key`] of the fetch under way.
    asked: u64,
}

impl Deref for WinnersSlot {
    type Target = Held<WinnersFilter>;
    fn deref(&self) -> &Self::Target {
        &self.held
    }
}

impl DerefMut for WinnersSlot {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.held
    }
}

/// The sell-outs of the cached status `entry` a winners filter must have been built after: a
/// 64-bit FNV-1a fingerprint of whether the campaign is sold out and the ids of its sold-out
/// variants (in the status's order). Equal keys: the same sell-outs.
pub fn sold_key(entry: Option<&StatusEntry>) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(PRIME);
        }
    };
    let Some(e) = entry else { return h };
    eat(&[u8::from(e.state() == Some(CampaignState::SoldOut))]);
    for v in e.variants().iter().filter(|v| v.remaining <= 0) {
        eat(v.id.as_bytes());
        eat(b"\n");
    }
    h
}

/// The query of a filter fetch for sell-outs `sold` ([`sold_key`]): `?sold=` and 16 hex digits.
pub fn sold_query(sold: u64) -> String {
    format!("?sold={sold:016x}")
}

impl Fetched {
    /// Reads the origin's answer: status, `ETag` and body. A 304 when no filter is held is a
    /// failure (nothing to keep).
    pub fn from_origin(code: u16, etag: Option<&str>, body: &[u8], held: bool) -> Self {
        Self::read(code, etag, body, held, WinnersFilter::decode)
    }
}

/// What the winners filter says of a customer's claim on a sold-out campaign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// She may hold a unit (her retry, or a false positive): forward it to the origin.
    Winner,
    /// She holds none (or the filter is "too many"): `sold_out` at the edge.
    Loser,
    /// No usable filter: nobody can be told `sold_out` truthfully if she is a winner.
    Unknown,
}

/// What a claim on a sold-out campaign does about its winners filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// Decided from what is held.
    Decided(Verdict),
    /// Refresh the filter first; this request leads.
    Lead,
    /// Another request is refreshing it: wait for that one, then [`WinnersSlot::may_have_won`].
    Wait,
}

impl WinnersSlot {
    /// Decides what a claim of `customer` does at `now_ms`, given the sell-outs of the status
    /// it was checked against (`sold`, [`sold_key`]): a filter fetched for them and confirmed
    /// less than `ttl_ms` ago decides at once; an older one, one fetched for other sell-outs,
    /// or none is refreshed first, single-flight (a refresh running `lead_timeout_ms` is
    /// presumed dead), except within one TTL of a failed refresh, when what is held decides
    /// (if it was fetched for `sold`).
    pub fn look(
        &self,
        customer: &str,
        sold: u64,
        now_ms: i64,
        ttl_ms: i64,
        max_stale_ms: i64,
        lead_timeout_ms: i64,
    ) -> Look {
        let fresh = self.sold == Some(sold) && self.held.fresh(now_ms, ttl_ms);
        match status::step(fresh, &self.refresh, now_ms, ttl_ms, lead_timeout_ms) {
            Step::Serve | Step::BackOff => {
                Look::Decided(self.verdict(customer, sold, now_ms, max_stale_ms))
            }
            Step::Lead => Look::Lead,
            Step::Wait => Look::Wait,
        }
    }

    /// What a usable filter (fetched for `sold`, confirmed at most `max_stale_ms` ago) says of
    /// `customer`; [`Verdict::Unknown`] without one.
    pub fn verdict(&self, customer: &str, sold: u64, now_ms: i64, max_stale_ms: i64) -> Verdict {
        match self.usable(now_ms, max_stale_ms) {
            Some(_) if self.sold != Some(sold) => Verdict::Unknown,
            None => Verdict::Unknown,
            Some(f) if f.may_contain_key(memo::winners_key(customer)) => Verdict::Winner,
            Some(_) => Verdict::Loser,
        }
    }

    /// Marks the refresh this request leads, for sell-outs `sold`, as started at `now_ms`.
    pub fn start(&mut self, sold: u64, now_ms: i64) {
        self.asked = sold;
        self.held.start(now_ms);
    }

    /// Takes in the refresh's outcome at `now_ms` ([`Held::finish`]); a filter received or
    /// confirmed is the one of the sell-outs the refresh asked for.
    pub fn finish(&mut self, fetched: Fetched, now_ms: i64) {
        if !matches!(fetched, Fetched::Failed(_)) {
            self.sold = Some(self.asked);
        }
        self.held.finish(fetched, now_ms);
    }
}

/// Makes room for campaign `id` in `slots` before it is added: when [`MAX_FILTERS`] are
/// held, the one confirmed longest ago (and not being refreshed) is dropped.
pub fn make_room(slots: &mut HashMap<String, WinnersSlot>, id: &str) {
    if slots.len() < MAX_FILTERS || slots.contains_key(id) {
        return;
    }
    let oldest = slots
        .iter()
        .filter(|(_, s)| s.refresh.refreshing_since.is_none())
        .min_by_key(|(_, s)| s.fetched_at_ms)
        .map(|(k, _)| k.clone());
    if let Some(k) = oldest {
        slots.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: i64 = 1_000;
    const STALE: i64 = 30_000;
    const LEAD: i64 = 6_000;
    const K: u64 = 7;

    fn filter(winners: &[&str]) -> Fetched {
        let body = WinnersFilter::build(winners.iter().copied(), 100).encode();
        Fetched::from_origin(200, Some("\"w1\""), &body, false)
    }

    #[test]
    fn refreshes_once_per_ttl_and_decides_by_the_filter() {
        use Verdict::{Loser, Winner};
        let mut slot = WinnersSlot::default();
        assert_eq!(slot.look("ana", K, 10_000, TTL, STALE, LEAD), Look::Lead);
        slot.start(K, 10_000);
        assert_eq!(slot.look("bo", K, 10_001, TTL, STALE, LEAD), Look::Wait);
        slot.finish(filter(&["ana"]), 10_020);
        assert_eq!(
            slot.look("ana", K, 10_500, TTL, STALE, LEAD),
            Look::Decided(Winner)
        );
        assert_eq!(
            slot.look("bo", K, 10_500, TTL, STALE, LEAD),
            Look::Decided(Loser)
        );
        // A TTL later the next claim leads a conditional refresh; a 304 keeps the filter.
        assert_eq!(slot.look("bo", K, 11_020, TTL, STALE, LEAD), Look::Lead);
        slot.start(K, 11_020);
        slot.finish(Fetched::Unchanged, 11_030);
        assert_eq!(slot.etag.as_deref(), Some("\"w1\""));
        assert_eq!(
            slot.look("ana", K, 11_500, TTL, STALE, LEAD),
            Look::Decided(Winner)
        );
    }

    #[test]
    fn without_a_filter_nobody_is_told_sold_out_and_too_many_tells_everyone() {
        use Verdict::{Loser, Unknown};
        let mut slot = WinnersSlot::default();
        slot.start(K, 0);
        slot.finish(Fetched::from_origin(503, None, b"", false), 5);
        // Backing off for one TTL, nothing held: not known, no new fetch.
        assert_eq!(
            slot.look("ana", K, 500, TTL, STALE, LEAD),
            Look::Decided(Unknown)
        );
        assert_eq!(slot.look("ana", K, 1_005, TTL, STALE, LEAD), Look::Lead);
        let body = WinnersFilter::build(["ana", "bo", "cy"], 2).encode();
        slot.start(K, 1_005);
        slot.finish(Fetched::from_origin(200, None, &body, false), 1_010);
        assert_eq!(
            slot.look("ana", K, 1_100, TTL, STALE, LEAD),
            Look::Decided(Loser)
        );
        // A filter past max-stale is not used, even while backing off.
        slot.finish(filter(&["ana"]), 2_000);
        slot.finish(Fetched::Failed(held::FetchError::Unreachable), 40_000);
        assert_eq!(
            slot.look("ana", K, 40_100, TTL, STALE, LEAD),
            Look::Decided(Unknown)
        );
        assert!(matches!(
            Fetched::from_origin(200, None, b"junk", false),
            Fetched::Failed(held::FetchError::BadBody(FilterError::BadHeader))
        ));
    }

    #[test]
    fn a_filter_is_used_only_for_the_sell_outs_it_was_fetched_for() {
        use Verdict::{Unknown, Winner};
        let mut slot = WinnersSlot::default();
        slot.start(K, 0);
        slot.finish(filter(&["ana"]), 10);
        // Another variant sold out since: the next claim refreshes, however young the filter.
        assert_eq!(slot.look("bo", K + 1, 20, TTL, STALE, LEAD), Look::Lead);
        slot.start(K + 1, 20);
        assert_eq!(slot.look("ana", K + 1, 21, TTL, STALE, LEAD), Look::Wait);
        slot.finish(Fetched::Unchanged, 30);
        assert_eq!(
            slot.look("ana", K + 1, 40, TTL, STALE, LEAD),
            Look::Decided(Winner)
        );
        // A failed refresh for other sell-outs: what is held is not theirs, nobody is told
        // `sold_out` while backing off.
        assert_eq!(slot.look("bo", K + 2, 50, TTL, STALE, LEAD), Look::Lead);
        slot.start(K + 2, 50);
        slot.finish(Fetched::Failed(held::FetchError::Unreachable), 60);
        assert_eq!(
            slot.look("bo", K + 2, 70, TTL, STALE, LEAD),
            Look::Decided(Unknown)
        );
    }

    #[test]
    fn the_sold_key_names_the_sold_out_variants_and_the_campaign() {
        let entry = |left: [i64; 2], state: CampaignState| {
            let mut body = serde_json::to_value(status::tests::status(state)).unwrap();
            body["variants"] = serde_json::json!([
                {"id": "a", "name": "A", "stock": 5, "remaining": left[0], "state": "active"},
                {"id": "b", "name": "B", "stock": 5, "remaining": left[1], "state": "active"},
            ]);
            status::from_origin("spring", 200, body.to_string().as_bytes(), 0).unwrap()
        };
        use CampaignState::{Active, SoldOut};
        let cases = [
            ([1, 1], Active),
            ([0, 1], Active),
            ([1, 0], Active),
            ([0, 0], Active),
        ];
        let mut keys: Vec<u64> = cases
            .iter()
            .chain(&[([0, 0], SoldOut)])
            .map(|(left, state)| sold_key(Some(&entry(*left, *state))))
            .collect();
        assert_eq!(keys[1], sold_key(Some(&entry([0, 1], Active))));
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 5, "each set of sell-outs its own key");
        assert_eq!(sold_query(0xab), "?sold=00000000000000ab");
    }

    #[test]
    fn keeps_at_most_max_filters() {
        let mut slots: HashMap<String, WinnersSlot> = HashMap::new();
        for i in 0..MAX_FILTERS {
            make_room(&mut slots, &format!("c{i}"));
            let slot = slots.entry(format!("c{i}")).or_default();
            slot.finish(filter(&["ana"]), 1_000 + i as i64);
        }
        slots.get_mut("c5").unwrap().start(K, 2_000);
        make_room(&mut slots, "c0");
        assert_eq!(slots.len(), MAX_FILTERS, "a held campaign needs no room");
        make_room(&mut slots, "new");
        assert_eq!(slots.len(), MAX_FILTERS - 1);
        assert!(!slots.contains_key("c0"), "the oldest went");
        assert!(slots.contains_key("c5"));
    }
}
