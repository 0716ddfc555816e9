//! The model against figures computed by hand (docs/SCALING.md, "Capacity plan").

use super::*;

fn close(got: f64, want: f64, tolerance: f64) {
    assert!(
        (got - want).abs() <= tolerance,
        "got {got}, want {want} ± {tolerance}"
    );
}

/// 100,000 visitors evenly over 100 s, one tap each, stock 1,000: 1,000 taps a second.
fn flat_sale() -> Inputs {
    Inputs {
        visitors: 100_000,
        arrival_seconds: 100.0,
        arrival: Arrival::Uniform,
        tries_per_visitor: 1.0,
        stock: 1_000,
        ..Inputs::default()
    }
}

/// The waiting-room run of `scripts/demo`: 5,000 customers over 5 s, stock 500, admit 250/s.
fn demo_room() -> Inputs {
    Inputs {
        visitors: 5_000,
        arrival_seconds: 5.0,
        arrival: Arrival::Burst,
        tries_per_visitor: 1.0,
        stock: 500,
        kind: Kind::Giveaway,
        admit_per_second: Some(250.0),
        ..Inputs::default()
    }
}

#[test]
fn the_arrival_curves_and_their_inverses_agree() {
    for arrival in [Arrival::Uniform, Arrival::Burst] {
        for u in [0.0, 0.01, 0.3, 0.5, 0.99, 1.0] {
            close(cdf(arrival, 60.0, inverse_cdf(arrival, 60.0, u)), u, 1e-9);
        }
    }
    // The burst: a third of the taps in the first tenth of the window.
    close(cdf(Arrival::Burst, 60.0, 6.0), 0.3358, 1e-4);
    close(cdf(Arrival::Uniform, 60.0, 6.0), 0.1, 1e-12);
}

#[test]
fn polls_follow_the_retry_after_of_each_place() {
    close(poll_rate(10.0, 250.0, None), 10.0, 1e-9);
    // 500 places at 1 s, then 500 ln 2 from the places 500..1000.
    close(
        poll_rate(1_000.0, 250.0, None),
        500.0 + 500.0 * 2f64.ln(),
        1e-9,
    );
    // Past 60 r = 15,000 places: one poll every 30 s.
    close(
        poll_rate(30_000.0, 250.0, None),
        500.0 + 500.0 * 30f64.ln() + 15_000.0 / 30.0,
        1e-9,
    );
    close(poll_rate(1_000.0, 250.0, Some(5.0)), 200.0, 1e-12);
    assert_eq!(poll_rate(0.0, 250.0, None), 0.0);
}

#[test]
fn a_flat_sale_without_a_waiting_room() {
    let p = plan(&flat_sale(), &Calibration::default());
    // t_so = F⁻¹(1,000 / 100,000) = 1 s: the first second's 1,000 taps all win.
    close(p.times.sell_out_seconds.unwrap(), 1.0, 1e-9);
    close(p.origin.winners.total, 1_000.0, 1e-6);
    close(p.origin.winners.peak_per_second, 1_000.0, 1e-6);
    close(p.origin.other_claim_answers.total, 0.0, 1e-6);
    // Second 1: 50 taps within the 50 ms round trip, 0.03 % of the other 950.
    close(
        p.origin.sold_out_answers.peak_per_second,
        50.0 + 0.0003 * 950.0,
        1e-6,
    );
    // Every later tap: 99,000 − 50, of which 0.03 % forwarded.
    close(p.edge.sold_out_answers.total, 98_950.0 * 0.9997, 1e-3);
    close(
        p.edge.claims_forwarded.total,
        1_000.0 + 50.0 + 98_950.0 * 0.0003,
        1e-3,
    );
    // Edge cores at second 0: (1,000 / 4,700 + 1,000 / 1,500) / 0.6 → 2 isolates.
    close(
        p.edge.cores_needed,
        (1_000.0 / 4_700.0 + 1_000.0 / 1_500.0) / 0.6,
        1e-9,
    );
    assert_eq!(p.edge.isolates, 2);
    // Origin: 1,000 winners × 120 µs + 2 status fetches × 40 µs.
    close(p.origin.peak_busy_cores, 0.120_08, 1e-9);
    assert_eq!(p.origin.origins_needed, 1);
    // PostgreSQL: 1,000 claims/s, 2 per 2 ms commit.
    close(p.postgres.claims_per_commit_at_peak, 2.0, 1e-9);
    close(p.postgres.commits.peak_per_second, 500.0, 1e-6);
    close(p.postgres.peak_busy_cores, 0.048, 1e-9);
    close(p.redis.ops.peak_per_second, 3_000.0, 1e-6);
    // 2,048 fixed + 1,000 × (560 + 150).
    close(p.redis.bytes_during_sale, 712_048.0, 1e-6);
    assert!(p.queue.is_none());
}

#[test]
fn origins_needed_grow_with_the_crowd() {
    let crowd = |visitors| {
        let i = Inputs {
            visitors,
            ..Inputs::default()
        };
        plan(&i, &Calibration::default()).origin.origins_needed
    };
    let sizes = [crowd(100_000), crowd(1_000_000), crowd(10_000_000)];
    assert!(sizes[0] <= sizes[1] && sizes[1] < sizes[2], "{sizes:?}");
    let one = Inputs {
        cores_per_origin: 1.0,
        visitors: 10_000_000,
        ..Inputs::default()
    };
    let eight = Inputs {
        cores_per_origin: 8.0,
        ..one.clone()
    };
    let c = Calibration::default();
    assert!(plan(&one, &c).origin.origins_needed > plan(&eight, &c).origin.origins_needed);
}

#[test]
fn the_waiting_room_admits_at_its_rate() {
    let p = plan(&demo_room(), &Calibration::default());
    // Joins enter the line 3 s after they are made (ADMIT_LAG_MS), when a second's budget (250)
    // has built up: 250 admitted at once, the rest at 250/s until 4 s. The edge shows them at
    // 250/s from 3 s: the last at 5 s, its claim 1 s TTL + 0.5 s later.
    let sold_out = p.times.sell_out_seconds.unwrap();
    close(sold_out, 6.5, 0.01);
    close(p.origin.winners.total, 500.0, 1e-6);
    close(p.origin.winners.peak_per_second, 250.0, 1.0);
    assert!(p.origin.claims.peak_per_second <= 2.0 * 250.0);
    close(p.edge.sold_out_answers.total, 0.0, 1e-9);
    // Each admitted customer's claim passes the edge once.
    close(p.edge.claims_forwarded.total, 500.0, 1e-6);
    let q = p.queue.unwrap();
    // p50: the 250th is shown at 4 s, joined at −1.25 ln(1 − 0.05 (1 − e⁻⁴)) s.
    let joined = |x: f64| -1.25 * (1.0 - x / 5_000.0 * (1.0 - (-4.0f64).exp())).ln();
    close(q.wait_p50_seconds, 4.0 - joined(250.0) + 1.5, 0.01);
    close(q.wait_p95_seconds, 4.9 - joined(475.0) + 1.5, 0.01);
    close(q.claim_delay_seconds, 1.5, 1e-12);
    // Those waiting are most when admission starts at 3 s: every joiner so far.
    let joined_by_3s = 5_000.0 * (1.0 - (-2.4f64).exp()) / (1.0 - (-4.0f64).exp());
    close(q.peak_length, joined_by_3s, 5.0);
    // Every customer joins once; the 4,500 left each poll once more after the sell-out.
    close(p.edge.joins.total, 5_000.0, 1e-6);
    assert!(p.edge.polls.total > 4_500.0);
    // With 1.3 taps each, an admitted customer's later taps reach the origin as replays.
    let taps = plan(
        &Inputs {
            tries_per_visitor: 1.3,
            ..demo_room()
        },
        &Calibration::default(),
    );
    close(taps.origin.winners.total, 500.0, 1e-6);
    close(taps.origin.other_claim_answers.total, 150.0, 1e-6);
    close(taps.origin.claims.total, 650.0, 1e-6);
    close(taps.origin.claims.peak_per_second, 1.3 * 250.0, 1.3);
}

#[test]
fn joins_reach_the_origin_as_one_report_per_isolate_and_second() {
    // 10,000 joins a second over 4 isolates: each isolate reports the tickets it issued once a
    // second, 4 reports a second.
    let i = Inputs {
        visitors: 100_000,
        arrival_seconds: 10.0,
        arrival: Arrival::Uniform,
        tries_per_visitor: 1.0,
        stock: 100_000,
        admit_per_second: Some(100_000.0),
        edge_isolates: Some(4),
        ..Inputs::default()
    };
    let p = plan(&i, &Calibration::default());
    close(p.edge.joins.peak_per_second, 10_000.0, 1.0);
    close(p.origin.join_reports.peak_per_second, 4.0, 1e-6);
    close(p.origin.join_reports.total, 40.0, 1.0);
    // Fewer joins than isolates: one report each.
    let few = plan(
        &Inputs {
            visitors: 20,
            ..i.clone()
        },
        &Calibration::default(),
    );
    assert!(few.origin.join_reports.peak_per_second <= few.edge.joins.peak_per_second + 1e-9);
    // One presence report per isolate and second.
    assert!(p.origin.presence_reports.peak_per_second <= 4.0);
    // Status fetches: one per isolate per TTL.
    close(p.origin.status_fetches.peak_per_second, 4.0, 1e-9);
    // Each join enters the line 3 s after it is made (ADMIT_LAG_MS) and is admitted at once:
    // 30,000 on their way, each polling once a second near the front, 3 polls each.
    close(p.edge.polls.peak_per_second, 30_000.0, 100.0);
    close(p.edge.polls.total, 300_000.0, 1_000.0);
    // The queue's slot: 4 join reports, 4 presence reports and 10 admitting steps × 10.7 µs
    // + 10,000 tickets × 3 µs + 30,000 polled tickets × 2 µs.
    close(
        p.redis.peak_queue_slot_busy_cores,
        (18.0 * 10.7 + 30_000.0 + 60_000.0) / 1e6,
        1e-3,
    );
}

#[test]
fn redis_memory_during_and_after_the_sale() {
    let p = plan(&demo_room(), &Calibration::default());
    // 2,048 + 500 × (560 + 150) + 5,000 × (117.7 + 117.7).
    close(p.redis.bytes_per_queued_visitor, 235.4, 1e-9);
    close(
        p.redis.bytes_during_sale,
        2_048.0 + 355_000.0 + 1_177_000.0,
        1e-6,
    );
    close(p.redis.bytes_after_sale, p.redis.bytes_during_sale, 1e-9);
    // A giveaway holds nothing: only the grace.
    close(p.redis.kept_after_end_seconds, 86_400.0, 1e-9);
    assert_eq!(p.redis.bytes_after_grace, 0.0);
    let sale = Inputs {
        kind: Kind::Sale,
        ended_keys_grace_seconds: 3_600.0,
        ..demo_room()
    };
    close(
        plan(&sale, &Calibration::default())
            .redis
            .kept_after_end_seconds,
        4_200.0,
        1e-9,
    );
    // The measured figure (docs/BENCHMARKS.md, "Presence memory in Redis"): an arrival key and
    // its presence entry, 235,448,592 bytes per 1,000,000 tickets.
    let c = Calibration::default();
    close(
        (c.redis_bytes_per_queued_visitor + c.redis_bytes_per_present_ticket) * 1e6,
        235_448_592.0,
        100_000.0,
    );
}

#[test]
fn unpaid_holds_come_back_as_a_second_wave() {
    let c = Calibration::default();
    let flash = Inputs {
        paid_share: 0.8,
        ..Inputs::default()
    };
    let p = plan(&flash, &c);
    close(p.times.second_wave_units, 200.0, 1e-9);
    close(p.times.second_wave_from_seconds.unwrap(), 600.0, 1e-9);
    // The crowd left after 60 s: nobody buys them until a restock.
    assert_eq!(p.times.second_sell_out_seconds, None);
    let room = Inputs {
        kind: Kind::Sale,
        paid_share: 0.5,
        hold_seconds: 60.0,
        ..demo_room()
    };
    let p = plan(&room, &c);
    close(p.times.second_wave_units, 250.0, 1e-9);
    let so = p.times.sell_out_seconds.unwrap();
    close(
        p.times.second_sell_out_seconds.unwrap(),
        so + 60.0 + 1.5,
        1e-9,
    );
    // Those left keep polling every 15 s while holds are outstanding.
    let giveaway = plan(&demo_room(), &c);
    assert!(p.edge.polls.total > giveaway.edge.polls.total + 4_000.0 * 3.0);
    assert_eq!(giveaway.times.second_wave_units, 0.0);
}

#[test]
fn a_crowd_smaller_than_the_stock_never_sells_out() {
    let i = Inputs {
        visitors: 500,
        ..Inputs::default()
    };
    let p = plan(&i, &Calibration::default());
    assert_eq!(p.times.sell_out_seconds, None);
    close(p.origin.winners.total, 500.0, 1e-6);
    close(p.edge.sold_out_answers.total, 0.0, 1e-9);
}

#[test]
fn variants_split_the_stock_and_add_up_the_rates() {
    let c = Calibration::default();
    let one = plan(&flat_sale(), &c);
    let two = plan(
        &Inputs {
            variants: 2,
            ..flat_sale()
        },
        &c,
    );
    close(two.times.sell_out_seconds.unwrap(), 1.0, 1e-9);
    close(two.origin.winners.total, one.origin.winners.total, 1e-6);
    close(
        two.redis.bytes_during_sale,
        one.redis.bytes_during_sale + 2_048.0,
        1e-6,
    );
}

#[test]
fn bad_inputs_name_their_option() {
    let bad = [
        (
            Inputs {
                edge_cores: Some(0.0),
                ..Inputs::default()
            },
            "--edge-cores",
        ),
        (
            Inputs {
                origins: Some(0),
                ..Inputs::default()
            },
            "--origins",
        ),
        (
            Inputs {
                clients: Some(0),
                ..Inputs::default()
            },
            "--clients",
        ),
        (
            Inputs {
                visitors: 0,
                ..Inputs::default()
            },
            "--visitors",
        ),
        (
            Inputs {
                paid_share: 1.5,
                ..Inputs::default()
            },
            "--paid-share",
        ),
        (
            Inputs {
                paid_share: -0.1,
                ..Inputs::default()
            },
            "--paid-share",
        ),
        (
            Inputs {
                hold_seconds: -1.0,
                ..Inputs::default()
            },
            "--hold-seconds",
        ),
        (
            Inputs {
                arrival_seconds: 0.0,
                ..Inputs::default()
            },
            "--arrival-seconds",
        ),
        (
            Inputs {
                tries_per_visitor: 0.5,
                ..Inputs::default()
            },
            "--tries-per-visitor",
        ),
        (
            Inputs {
                target_utilisation: 0.0,
                ..Inputs::default()
            },
            "--target-utilisation",
        ),
        (
            Inputs {
                admit_per_second: Some(0.0),
                ..Inputs::default()
            },
            "--admit-per-second",
        ),
        (
            Inputs {
                stock: 0,
                ..Inputs::default()
            },
            "--stock",
        ),
    ];
    for (i, option) in bad {
        let e = i.check().unwrap_err();
        assert!(e.contains(option), "{e}");
    }
    Inputs::default().check().unwrap();
}

/// Round numbers for the fixed-capacity tests: forwarding 2,000 taps per edge core-second,
/// 4,000 `sold_out` answers, a 50 ms round trip, 0.03 % forwarded after the sell-out.
fn round_calibration() -> Calibration {
    Calibration {
        edge_claims_forwarded_per_core_second: 2_000.0,
        edge_sold_out_answers_per_core_second: 4_000.0,
        edge_origin_round_trip_ms: 50.0,
        edge_forward_share_after_sold_out: 0.0003,
        origin_core_us_per_winner: 120.0,
        origin_core_us_per_other_claim_answer: 60.0,
        ..Calibration::default()
    }
}

#[test]
fn fixed_capacity_rates_are_the_tightest_bound() {
    let c = round_calibration();
    assert_eq!(bounded::rates(&flat_sale(), &c), None);
    // A quarter of an edge core: 500 forwarded and 1,000 answered taps a second.
    let edge = Inputs {
        edge_cores: Some(0.25),
        ..flat_sale()
    };
    assert_eq!(bounded::rates(&edge, &c), Some((500.0, 1_000.0)));
    // Two tries each: (120 + 60) / 2 = 90 µs a tap; one origin of 0.09 cores: 1,000 a second.
    let origin = Inputs {
        tries_per_visitor: 2.0,
        origins: Some(1),
        cores_per_origin: 0.09,
        ..flat_sale()
    };
    let (pre, post) = bounded::rates(&origin, &c).unwrap();
    close(pre, 1_000.0, 1e-9);
    assert!(post.is_infinite());
    // 128 closed-loop clients, 50 ms a forwarded tap: 2,560 a second; with the edge the lower.
    let clients = Inputs {
        clients: Some(128),
        ..flat_sale()
    };
    assert_eq!(bounded::rates(&clients, &c), Some((2_560.0, f64::INFINITY)));
    let both = Inputs {
        edge_cores: Some(1.0),
        ..clients
    };
    assert_eq!(bounded::rates(&both, &c), Some((2_000.0, 4_000.0)));
    // Two variants share the capacity: each campaign gets half.
    let split = Inputs {
        variants: 2,
        ..edge
    };
    assert_eq!(bounded::rates(&split, &c), Some((250.0, 500.0)));
}

#[test]
fn a_flat_sale_on_a_quarter_of_an_edge_core_queues() {
    // 1,000 taps a second arrive, 500 are forwarded: the 1,000th winner is answered at 2 s,
    // not 1 s, and the origins see 500 claims a second, not 1,000.
    let i = Inputs {
        edge_cores: Some(0.25),
        ..flat_sale()
    };
    let p = plan(&i, &round_calibration());
    close(p.times.sell_out_seconds.unwrap(), 2.0, 0.002);
    close(p.origin.winners.total, 1_000.0, 1e-6);
    close(p.origin.winners.peak_per_second, 500.0, 1e-6);
    // Second 2: 50 ms at 500 forwarded a second (25 `sold_out` from the origin), then 950 ms
    // at 1,000 answered a second, 0.03 % of them forwarded.
    close(
        p.origin.sold_out_answers.peak_per_second,
        25.0 + 0.0003 * 950.0,
        0.6,
    );
    // The 1,025 taps queued by then wait until the arrivals stop at 100 s: every tap is
    // answered, the last about 1 s late.
    close(
        p.edge.sold_out_answers.total + p.origin.sold_out_answers.total,
        99_000.0,
        1e-3,
    );
    close(p.times.modelled_seconds, 102.0, 1e-9);
}

#[test]
fn origins_and_clients_bound_the_flat_sale_alike() {
    // One origin of 0.06 cores at 120 µs a winner, or 25 clients with a 50 ms round trip:
    // 500 forwarded taps a second either way; the edge then answers at once.
    for i in [
        Inputs {
            origins: Some(1),
            cores_per_origin: 0.06,
            ..flat_sale()
        },
        Inputs {
            clients: Some(25),
            ..flat_sale()
        },
    ] {
        let p = plan(&i, &round_calibration());
        close(p.times.sell_out_seconds.unwrap(), 2.0, 0.002);
        close(p.origin.winners.peak_per_second, 500.0, 1e-6);
        // The 1,000 queued at 2 s: 25 forwarded in the round trip, the rest at the edge.
        close(
            p.edge.sold_out_answers.peak_per_second,
            1_975.0 * 0.9997,
            1.0,
        );
    }
}

#[test]
fn a_capacity_above_the_crowd_changes_nothing() {
    let c = round_calibration();
    let open = plan(&flat_sale(), &c);
    let roomy = plan(
        &Inputs {
            edge_cores: Some(1_000.0),
            origins: Some(100),
            clients: Some(1_000_000),
            ..flat_sale()
        },
        &c,
    );
    close(
        roomy.times.sell_out_seconds.unwrap(),
        open.times.sell_out_seconds.unwrap(),
        0.001,
    );
    close(roomy.origin.winners.peak_per_second, 1_000.0, 1e-6);
    close(
        roomy.origin.sold_out_answers.total,
        open.origin.sold_out_answers.total,
        1.0,
    );
    close(
        roomy.edge.sold_out_answers.total,
        open.edge.sold_out_answers.total,
        1.0,
    );
}
