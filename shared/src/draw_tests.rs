use super::*;

fn seed_of(label: &str) -> Seed {
    Seed(Sha256::digest(label.as_bytes()).into())
}

fn published(campaign: &str, seed: &Seed, entries: &[String], stock: i64) -> DrawResult {
    let d = draw(seed, campaign, entries, stock as u64);
    DrawResult {
        campaign: campaign.into(),
        stock,
        commitment: seed.commitment(),
        seed: seed.to_hex(),
        entries_digest: entries_digest(entries),
        entry_count: distinct_sorted(entries).len() as i64,
        winners: d.winners,
        waitlist: d.waitlist,
    }
}

#[test]
fn commitment_key_and_digest_follow_the_stated_rules() {
    let zero = Seed([0; SEED_LEN]);
    // SHA-256 of 32 zero bytes.
    assert_eq!(
        zero.commitment(),
        "66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925"
    );
    assert_eq!(Seed::from_hex(&zero.to_hex()).unwrap(), zero);
    assert!(Seed::from_hex("abc").is_err());
    assert!(Seed::from_hex(&"zz".repeat(32)).is_err());
    // The key is HMAC-SHA-256(seed, campaign "\n" customer).
    let mut mac = keyed_mac(&zero.0);
    mac.update(b"drop\nana");
    let want: [u8; 32] = mac.finalize().into_bytes().into();
    assert_eq!(entry_key(&zero, "drop", "ana"), want);
    assert_ne!(
        entry_key(&zero, "drop", "ana"),
        entry_key(&zero, "dro", "p\nana")
    );
    // The digest hashes the sorted distinct ids joined with newlines.
    let e: Vec<String> = ["bo", "ana", "bo", "cy"].map(String::from).to_vec();
    assert_eq!(
        entries_digest(&e),
        hex::encode(Sha256::digest(b"ana\nbo\ncy"))
    );
    assert_eq!(
        entries_digest::<String>(&[]),
        hex::encode(Sha256::digest(b""))
    );
}

#[test]
fn winners_are_the_first_stock_of_the_order_and_duplicates_count_once() {
    let seed = seed_of("w");
    let entries: Vec<String> = (0..30).map(|i| format!("c{i}")).collect();
    let mut repeated = entries.clone();
    repeated.extend(entries.iter().take(10).cloned());
    repeated.reverse();
    let d = draw(&seed, "drop", &entries, 7);
    assert_eq!(d, draw(&seed, "drop", &repeated, 7));
    assert_eq!((d.winners.len(), d.waitlist.len()), (7, 23));
    let keys: Vec<[u8; 32]> = d
        .winners
        .iter()
        .chain(&d.waitlist)
        .map(|c| entry_key(&seed, "drop", c))
        .collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]));
    // More stock than entries: everyone wins.
    let all = draw(&seed, "drop", &entries, 100);
    assert_eq!((all.winners.len(), all.waitlist.len()), (30, 0));
    // Another campaign with the same seed draws another order.
    assert_ne!(
        order(&seed, "other", &entries),
        order(&seed, "drop", &entries)
    );
}

#[test]
fn verify_accepts_the_published_draw_and_names_each_tampering() {
    let seed = seed_of("v");
    let entries: Vec<String> = (0..20).map(|i| format!("c{i}")).collect();
    let good = published("drop", &seed, &entries, 5);
    assert_eq!(verify(&good), Ok(()));

    let mut wrong_seed = good.clone();
    wrong_seed.seed = seed_of("other").to_hex();
    assert!(matches!(
        verify(&wrong_seed),
        Err(VerifyError::SeedMismatch { .. })
    ));
    let mut bad_hex = good.clone();
    bad_hex.seed = "xyz".into();
    assert!(matches!(
        verify(&bad_hex),
        Err(VerifyError::MalformedSeed(_))
    ));
    let mut swapped = good.clone();
    let (a, b) = (swapped.winners[0].clone(), swapped.waitlist[0].clone());
    swapped.winners[0] = b;
    swapped.waitlist[0] = a;
    assert!(matches!(
        verify(&swapped),
        Err(VerifyError::OrderMismatch { position: 0, .. })
    ));
    let mut dropped = good.clone();
    dropped.waitlist.pop();
    assert!(matches!(
        verify(&dropped),
        Err(VerifyError::EntriesMismatch(_))
    ));
    let mut moved = good.clone();
    let first_waiting = moved.waitlist.remove(0);
    moved.winners.push(first_waiting);
    assert_eq!(
        verify(&moved),
        Err(VerifyError::WinnerCount { expected: 5 })
    );
    let mut twice = good.clone();
    twice.waitlist.push(twice.winners[0].clone());
    twice.entry_count += 1;
    assert!(matches!(
        verify(&twice),
        Err(VerifyError::EntriesMismatch(_))
    ));
}

/// Upper 1 % point of χ² with `df` degrees of freedom (Wilson–Hilferty approximation, within
/// 0.1 % of the table for df ≥ 10).
fn chi2_upper_1pct(df: f64) -> f64 {
    let z = 2.326_348; // Φ⁻¹(0.99)
    let a = 2.0 / (9.0 * df);
    df * (1.0 - a + z * a.sqrt()).powi(3)
}

#[test]
fn over_200_seeded_draws_win_rates_are_uniform_and_repeat_entries_do_not_help() {
    const ENTRANTS: usize = 50;
    const STOCK: u64 = 10;
    const DRAWS: usize = 200;
    let people: Vec<String> = (0..ENTRANTS).map(|i| format!("customer-{i}")).collect();
    // Every fifth customer enters five times.
    let mut entries = Vec::new();
    for (i, p) in people.iter().enumerate() {
        let times = if i % 5 == 0 { 5 } else { 1 };
        entries.extend(std::iter::repeat_n(p.clone(), times));
    }
    let mut wins = vec![0u32; ENTRANTS];
    for d in 0..DRAWS {
        let seed = seed_of(&format!("stat-{d}"));
        let drawn = draw(&seed, "stat", &entries, STOCK);
        // Entering five times changes nothing: the same draw as one entry each.
        assert_eq!(drawn, draw(&seed, "stat", &people, STOCK));
        assert_eq!(drawn.winners.len() as u64, STOCK);
        for w in &drawn.winners {
            let i: usize = w["customer-".len()..].parse().unwrap();
            wins[i] += 1;
        }
    }
    let expected = DRAWS as f64 * STOCK as f64 / ENTRANTS as f64;
    let chi2: f64 = wins
        .iter()
        .map(|&w| (w as f64 - expected).powi(2) / expected)
        .sum();
    let critical = chi2_upper_1pct((ENTRANTS - 1) as f64);
    println!("χ² = {chi2:.2} over {ENTRANTS} entrants (critical {critical:.2} at p = 0.01)");
    assert!(chi2 < critical, "χ² {chi2} ≥ {critical}: {wins:?}");
    // Multiple entrants against single ones: two cells, one degree of freedom (6.635).
    let multi: u32 = wins.iter().step_by(5).sum();
    let single: u32 = wins.iter().sum::<u32>() - multi;
    let (e_multi, e_single) = (expected * 10.0, expected * 40.0);
    let chi2_groups =
        (multi as f64 - e_multi).powi(2) / e_multi + (single as f64 - e_single).powi(2) / e_single;
    println!("multiple entrants won {multi} (expected {e_multi}); χ² = {chi2_groups:.2}");
    assert!(chi2_groups < 6.635, "{multi} vs {single}");
    assert!((chi2_upper_1pct(49.0) - 74.92).abs() < 0.1);
}
