use super::*;

const TTL: i64 = 1_000;
const STALE: i64 = 30_000;
const LEAD: i64 = 6_000;

fn check(slot: &IndexSlot, id: &str, now: i64) -> Check {
    slot.check(id, now, TTL, STALE, LEAD)
}

fn fetched(ids: &[&str]) -> Fetched {
    let index = CampaignIndex::from_ids(ids.iter().copied());
    let body = index.encode();
    Fetched::from_origin(200, Some("\"t1\""), &body, false)
}

#[test]
fn no_index_yet_leads_one_refresh_and_others_wait() {
    let mut slot = IndexSlot::default();
    assert_eq!(check(&slot, "spring", 10_000), Check::Lead);
    slot.start(10_000);
    assert_eq!(check(&slot, "spring", 10_001), Check::Wait);
    assert_eq!(check(&slot, "other", 10_001), Check::Wait);
    slot.finish(fetched(&["spring"]), 10_020);
    assert_eq!(slot.refresh.generation, 1);
    assert_eq!(slot.decide("spring", 10_020, STALE), Check::Pass);
    assert_eq!(slot.decide("other", 10_020, STALE), Check::NotFound);
    assert_eq!(slot.etag.as_deref(), Some("\"t1\""));
}

#[test]
fn misses_refresh_at_most_once_per_ttl() {
    let mut slot = IndexSlot::default();
    slot.start(0);
    slot.finish(fetched(&["spring"]), 0);
    // Within the TTL every miss is a 404 without a refresh; hits pass.
    for now in [1, 500, 999] {
        assert_eq!(check(&slot, "made-up", now), Check::NotFound);
        assert_eq!(check(&slot, "spring", now), Check::Pass);
    }
    // A TTL later the first miss leads a refresh; hits still pass at once.
    assert_eq!(check(&slot, "made-up", 1_000), Check::Lead);
    slot.start(1_000);
    assert_eq!(check(&slot, "made-up-2", 1_001), Check::Wait);
    assert_eq!(check(&slot, "spring", 1_001), Check::Pass);
    slot.finish(Fetched::Unchanged, 1_010);
    assert_eq!(check(&slot, "made-up-3", 1_500), Check::NotFound);
    assert_eq!(check(&slot, "made-up-3", 2_010), Check::Lead);
}

#[test]
fn a_new_campaign_is_seen_after_the_next_refresh() {
    let mut slot = IndexSlot::default();
    slot.start(0);
    slot.finish(fetched(&["spring"]), 0);
    assert_eq!(check(&slot, "summer", 10), Check::NotFound);
    assert_eq!(check(&slot, "summer", 1_000), Check::Lead);
    slot.start(1_000);
    slot.finish(fetched(&["spring", "summer"]), 1_030);
    assert_eq!(slot.decide("summer", 1_030, STALE), Check::Pass);
    assert_eq!(check(&slot, "summer", 1_031), Check::Pass);
}

#[test]
fn failures_back_off_and_never_turn_away_a_campaign_without_an_index() {
    // No index and the origin refuses (403): ids pass for one TTL, then one more try.
    let mut slot = IndexSlot::default();
    slot.start(0);
    slot.finish(Fetched::Failed(FetchError::Status(403)), 5);
    assert_eq!(slot.decide("anything", 5, STALE), Check::Pass);
    assert_eq!(check(&slot, "anything", 500), Check::Pass);
    assert_eq!(check(&slot, "anything", 1_005), Check::Lead);

    // An index held, then the origin fails: misses are decided from the old index while it
    // is within max-stale, then let through.
    let mut slot = IndexSlot::default();
    slot.start(0);
    slot.finish(fetched(&["spring"]), 0);
    slot.start(1_000);
    slot.finish(Fetched::Failed(FetchError::Unreachable), 1_000);
    assert_eq!(check(&slot, "made-up", 1_500), Check::NotFound);
    assert_eq!(check(&slot, "spring", 1_500), Check::Pass);
    assert_eq!(slot.decide("made-up", STALE + 1, STALE), Check::Pass);
    // A leader that never came back is replaced after the lead timeout.
    let mut slot = IndexSlot::default();
    slot.start(0);
    assert_eq!(check(&slot, "x", LEAD - 1), Check::Wait);
    assert_eq!(check(&slot, "x", LEAD), Check::Lead);
}

#[test]
fn reads_origin_answers() {
    let body = CampaignIndex::from_ids(["a"]).encode();
    assert!(matches!(
        Fetched::from_origin(200, None, &body, false),
        Fetched::New { etag: None, .. }
    ));
    assert_eq!(
        Fetched::from_origin(200, None, b"junk", true),
        Fetched::Failed(FetchError::BadBody(IndexError::BadHeader))
    );
    assert_eq!(
        Fetched::from_origin(304, None, b"", true),
        Fetched::Unchanged
    );
    assert_eq!(
        Fetched::from_origin(304, None, b"", false),
        Fetched::Failed(FetchError::Status(304))
    );
    assert_eq!(
        Fetched::from_origin(403, None, b"{}", true),
        Fetched::Failed(FetchError::Status(403))
    );
}
