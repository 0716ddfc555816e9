use super::*;

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[test]
fn winners_are_always_found_and_others_rarely() {
    let winners = names("winner", 100_000);
    let f = WinnersFilter::build(winners.iter().map(String::as_str), MAX_WINNERS);
    assert_eq!(f.count(), 100_000);
    assert!(winners.iter().all(|w| f.may_contain(w)));
    let others = names("loser", 100_000);
    let hits = others.iter().filter(|o| f.may_contain(o)).count();
    // 2^-8 expected (390 of 100,000); 0.5 % leaves room for chance.
    assert!(hits < 500, "{hits} false positives of 100,000");
    // About 1.19 bytes per winner at this size, whatever the ids' length.
    let bytes = f.fingerprint_bytes();
    assert!((112_000..=125_000).contains(&bytes), "{bytes} bytes");
}

#[test]
fn round_trips_through_the_wire_format() {
    let winners = names("w", 1_000);
    let f = WinnersFilter::build(winners.iter().map(String::as_str), MAX_WINNERS);
    let body = f.encode();
    assert_eq!(&body[..4], b"FGW1");
    let back = WinnersFilter::decode(&body).unwrap();
    assert_eq!(back.count(), 1_000);
    assert!(winners.iter().all(|w| back.may_contain(w)));
    let others = names("o", 1_000);
    let agree = others
        .iter()
        .all(|o| back.may_contain(o) == f.may_contain(o));
    assert!(agree, "the decoded filter answers as the built one");
    assert_eq!(back.encode(), body);
}

#[test]
fn no_winners_and_too_many() {
    let empty = WinnersFilter::build([], MAX_WINNERS);
    let back = WinnersFilter::decode(&empty.encode()).unwrap();
    assert!(back.is_listed());
    assert_eq!((back.count(), back.may_contain("ana")), (0, false));
    // Duplicates count once; above the limit nobody is told apart.
    let many = WinnersFilter::build(["a", "b", "c", "a"], 2);
    assert_eq!(many.count(), 3);
    let back = WinnersFilter::decode(&many.encode()).unwrap();
    assert!(!back.is_listed());
    assert!(!back.may_contain("a"));
    assert_eq!(many.encode().len(), 9);
    // The format's bound caps the caller's limit.
    let few = WinnersFilter::build(["a", "b"], usize::MAX);
    assert!(few.is_listed() && few.may_contain("a") && few.may_contain("b"));
}

#[test]
fn refuses_malformed_bodies() {
    let winners = names("w", 50);
    let body = WinnersFilter::build(winners.iter().map(String::as_str), 100).encode();
    assert!(matches!(
        WinnersFilter::decode(b"FGW"),
        Err(FilterError::BadHeader)
    ));
    let mut bad = body.clone();
    bad[0] = b'X';
    assert!(matches!(
        WinnersFilter::decode(&bad),
        Err(FilterError::BadHeader)
    ));
    bad = body.clone();
    bad[4] = 7;
    assert!(matches!(
        WinnersFilter::decode(&bad),
        Err(FilterError::BadHeader)
    ));
    // One fingerprint short, or one too many.
    assert!(matches!(
        WinnersFilter::decode(&body[..body.len() - 1]),
        Err(FilterError::BadDescriptor)
    ));
    let mut long = body.clone();
    long.push(0);
    assert!(matches!(
        WinnersFilter::decode(&long),
        Err(FilterError::BadDescriptor)
    ));
    // A mask that does not match the segment length, a segment length not a power of two.
    bad = body.clone();
    bad[9 + 12] ^= 1;
    assert!(matches!(
        WinnersFilter::decode(&bad),
        Err(FilterError::BadDescriptor)
    ));
    bad = body.clone();
    bad[9 + 8] = 3;
    assert!(matches!(
        WinnersFilter::decode(&bad),
        Err(FilterError::BadDescriptor)
    ));
    // A header cut inside the descriptor; a too-many body with a tail.
    assert!(matches!(
        WinnersFilter::decode(&body[..15]),
        Err(FilterError::BadLength)
    ));
    let mut tail = WinnersFilter::TooMany { count: 5 }.encode();
    tail.push(1);
    assert!(matches!(
        WinnersFilter::decode(&tail),
        Err(FilterError::BadLength)
    ));
}

proptest::proptest! {
    /// Any body either is refused or decodes to a filter whose lookups never panic.
    #[test]
    fn decoding_never_panics(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200), prefix in 0usize..3) {
        let mut bytes = match prefix {
            0 => Vec::new(),
            1 => b"FGW1\x00".to_vec(),
            _ => b"FGW1\x00\x00\x00\x00\x05".to_vec(),
        };
        bytes.extend(body);
        if let Ok(f) = WinnersFilter::decode(&bytes) {
            for name in ["ana", "bo", "cy", "di"] {
                let _ = f.may_contain(name);
            }
        }
    }
}

/// Figures for 100,000 winners, printed (`cargo test -p flashgate-shared --release
/// winners_filter_figures -- --nocapture`); nothing here is asserted on time.
#[test]
fn winners_filter_figures() {
    use std::time::Instant;
    let winners = names("customer-with-a-longish-subject", 100_000);
    let t = Instant::now();
    let f = WinnersFilter::build(winners.iter().map(String::as_str), MAX_WINNERS);
    let built = t.elapsed();
    let body = f.encode();
    let t = Instant::now();
    let back = WinnersFilter::decode(&body).unwrap();
    let decoded = t.elapsed();
    let probes = names("probe", 100_000);
    let t = Instant::now();
    let hits = probes.iter().filter(|p| back.may_contain(p)).count();
    let per_lookup = t.elapsed() / 100_000;
    println!(
        "winners filter, 100,000 winners: body {} bytes, fingerprints in memory {} bytes; build {built:?}, decode {decoded:?}, lookup {per_lookup:?}; {hits} false positives of 100,000 ({:.3} %)",
        body.len(),
        back.fingerprint_bytes(),
        hits as f64 / 1_000.0
    );
    assert_eq!(back.count(), 100_000);
}
