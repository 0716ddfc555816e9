use super::*;
use std::time::Instant;

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("spring-sale-{i}")).collect()
}

#[test]
fn listed_ids_are_found_and_others_mostly_not() {
    let listed = ids(1_000);
    let index = CampaignIndex::from_ids(listed.iter().map(String::as_str));
    assert_eq!(index.len(), 1_000);
    assert!(listed.iter().all(|id| index.may_contain(id)));
    let strangers = (0..10_000)
        .filter(|i| index.may_contain(&format!("other-{i}")))
        .count();
    // 1,000 fingerprints of 2^32: a chance hit is ~2.3e-7 per lookup; none in 10,000.
    assert_eq!(strangers, 0);
    assert!(!CampaignIndex::default().may_contain("spring-sale-1"));
}

#[test]
fn fingerprint_is_the_sha256_prefix() {
    // SHA-256("abc") = ba7816bf 8f01cfea ... (FIPS 180-4 test vector).
    assert_eq!(fingerprint("abc"), 0xba78_16bf);
}

#[test]
fn round_trips_and_refuses_malformed_bodies() {
    let index = CampaignIndex::from_ids(["b", "a", "a", "c"]);
    assert_eq!(index.len(), 3);
    let body = index.encode();
    assert_eq!(body.len(), 8 + 3 * 4);
    assert_eq!(&body[..8], b"FGI1\0\0\0\x03");
    assert_eq!(CampaignIndex::decode(&body), Ok(index.clone()));
    let empty = CampaignIndex::default().encode();
    assert_eq!(empty, b"FGI1\0\0\0\0");
    assert_eq!(CampaignIndex::decode(&empty), Ok(CampaignIndex::default()));

    assert_eq!(CampaignIndex::decode(b""), Err(IndexError::BadHeader));
    assert_eq!(CampaignIndex::decode(b"FGI1"), Err(IndexError::BadHeader));
    assert_eq!(
        CampaignIndex::decode(b"FGI2\0\0\0\0"),
        Err(IndexError::BadHeader)
    );
    assert_eq!(
        CampaignIndex::decode(&body[..body.len() - 1]),
        Err(IndexError::BadLength)
    );
    assert_eq!(
        CampaignIndex::decode(b"FGI1\xff\xff\xff\xff"),
        Err(IndexError::BadLength)
    );
    let mut unsorted = b"FGI1\0\0\0\x02".to_vec();
    unsorted.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 1]);
    assert_eq!(CampaignIndex::decode(&unsorted), Err(IndexError::NotSorted));
    let mut repeated = b"FGI1\0\0\0\x02".to_vec();
    repeated.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    assert_eq!(CampaignIndex::decode(&repeated), Err(IndexError::NotSorted));
}

#[test]
fn etag_follows_the_body() {
    let a = CampaignIndex::from_ids(["a"]).encode();
    let b = CampaignIndex::from_ids(["a", "b"]).encode();
    assert_eq!(etag(&a), etag(&a.clone()));
    assert_ne!(etag(&a), etag(&b));
    let tag = etag(&a);
    assert!(
        tag.starts_with('"') && tag.ends_with('"') && tag.len() == 18,
        "{tag}"
    );
}

#[test]
fn cutoff_is_seven_days_back_in_whole_hours() {
    let now = 1_800_000_123;
    let cut = ended_cutoff_unix_s(now);
    assert_eq!(cut % 3_600, 0);
    assert!(cut <= now - ENDED_KEPT_S && cut > now - ENDED_KEPT_S - 3_600);
    // Unchanged within the hour.
    assert_eq!(ended_cutoff_unix_s(now + 1), cut);
    // No overflow at the ends of the range.
    assert!(ended_cutoff_unix_s(i64::MIN) <= i64::MIN + 3_600);
    assert!(ended_cutoff_unix_s(i64::MAX) > 0);
}

/// Size and cost of the index for 100,000 campaigns, printed (run with `--nocapture`); the
/// assertions are on sizes only, never on time.
#[test]
fn figures_for_100_000_campaigns() {
    let listed = ids(100_000);
    let t = Instant::now();
    let index = CampaignIndex::from_ids(listed.iter().map(String::as_str));
    let build = t.elapsed();
    let t = Instant::now();
    let body = index.encode();
    let encode = t.elapsed();
    let t = Instant::now();
    let decoded = CampaignIndex::decode(&body).unwrap();
    let decode = t.elapsed();
    let probes = 100_000;
    let t = Instant::now();
    let strangers = (0..probes)
        .filter(|i| decoded.may_contain(&format!("made-up-{i}")))
        .count();
    let lookup = t.elapsed();
    assert!(index.len() >= 99_990, "{} distinct", index.len());
    assert_eq!(body.len(), 8 + 4 * index.len());
    assert!(body.len() <= 400_008);
    // Expected ~2.3 chance hits per 100,000 probes.
    assert!(strangers < 30, "{strangers} chance hits");
    println!(
        "campaign index, 100,000 campaigns: {} fingerprints, body {} bytes, memory {} bytes; \
         build (hash + sort) {build:?}, encode {encode:?}, decode + check {decode:?}; \
         {probes} made-up lookups {lookup:?} ({:.0} ns each), {strangers} chance hits",
        index.len(),
        body.len(),
        decoded.memory_bytes(),
        lookup.as_nanos() as f64 / probes as f64,
    );
}
