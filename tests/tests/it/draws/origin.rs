//! Draw campaigns (`access: "draw"`, docs/DRAWS.md) against a real origin over HTTP, real
//! PostgreSQL and real Redis: 10,000 customers enter at once (200 of them five times each) for
//! 100 units; the published draw has exactly 100 distinct winners in the order the shared rules,
//! `flashgate draw verify` and the Python procedure of docs/DRAWS.md all recompute; a wrong seed
//! fails both; entries racing an early draw are in it exactly when they got a receipt; the
//! draw runs on its own when the window closes; bad input changes nothing. The
//! buying window: draws_window.rs.

use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use flashgate_shared::api::NewCampaign;
use flashgate_shared::draw::{self, DrawResult};
use flashgate_tests::support::draws::{
    draw_campaign, enter, enter_raw, enter_with, entries_in_db, get, origin, run, run_now, secret,
    status, verify_both,
};
use flashgate_tests::support::{eventually, flashgate_bin, unique};
use futures::stream::{self, StreamExt};
use serde_json::{json, Value};

/// Entry requests in flight at once: all truly concurrent, bounded so that the queue for the
/// origin's 16 PostgreSQL connections mostly stays under their 3 s acquire timeout on a loaded
/// 2-core machine (each entry is one short transaction). A 503 past it is retried after its
/// `Retry-After`, as the docs tell clients to (an entry is idempotent per customer).
const IN_FLIGHT: usize = 250;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_entries_one_hundred_verified_winners() {
    let o = origin().await;
    let c = unique("raffle");
    let now = Utc::now();
    o.create(&draw_campaign(
        &c,
        100,
        now - chrono::Duration::seconds(1),
        now + chrono::Duration::minutes(30),
    ))
    .await;
    // The commitment is public before anyone enters.
    let (s, before) = status(&o, &c).await;
    assert_eq!(
        (s, before["state"].as_str()),
        (200, Some("open")),
        "{before}"
    );
    let commitment = before["commitment"].as_str().unwrap().to_string();
    assert_eq!(commitment.len(), 64);
    assert!(before.get("result").is_none(), "{before}");
    // And on the campaign's public status.
    let (s, public) = get(&o, &format!("/api/v1/campaigns/{c}"), None).await;
    assert_eq!(
        (s, &public["draw"]["commitment"]),
        (200, &json!(commitment)),
        "{public}"
    );
    assert!(public["draw"].get("result").is_none(), "{public}");

    // 10,000 customers; the first 200 enter five times each, their tries side by side.
    let run_id = unique("e");
    let people: Vec<String> = (0..10_000).map(|i| format!("{run_id}-{i:05}")).collect();
    let mut tries = Vec::new();
    for (i, p) in people.iter().enumerate() {
        let times = if i < 200 { 5 } else { 1 };
        tries.extend(std::iter::repeat_n(p.clone(), times));
    }
    let mut retried = 0;
    let replies: Vec<(String, u16, Value)> = stream::iter(tries.into_iter().map(|p| {
        let (http, url, token, c) = (o.http.clone(), o.url.clone(), o.token(&p), c.clone());
        let secret = secret(&o);
        tokio::spawn(async move {
            let mut retries = 0;
            loop {
                let (status, body) = enter_raw(&http, &url, &secret, &c, Some(&token)).await;
                if status != 503 || retries == 5 {
                    return (p, status, body, retries);
                }
                retries += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    }))
    .buffer_unordered(IN_FLIGHT)
    .map(|r| r.expect("task"))
    .collect::<Vec<_>>()
    .await
    .into_iter()
    .map(|(p, status, body, retries)| {
        retried += retries;
        (p, status, body)
    })
    .collect();
    println!("{retried} entries retried after a 503");
    let created = replies.iter().filter(|r| r.1 == 201).count();
    let again = replies.iter().filter(|r| r.1 == 200).count();
    println!(
        "{} entry requests: {created} entries (201), {again} repeats (200)",
        replies.len()
    );
    let others: Vec<_> = replies
        .iter()
        .filter(|r| r.1 != 201 && r.1 != 200)
        .take(3)
        .collect();
    assert_eq!((created, again), (10_000, 800), "{others:?}");
    // One receipt per customer, whichever of her tries it answered.
    let mut receipt_of = std::collections::HashMap::new();
    for (p, _, body) in &replies {
        assert_eq!(body["customer"], json!(p), "{body}");
        assert_eq!(body["commitment"], json!(commitment), "{body}");
        let id = body["entry_id"].as_str().unwrap().to_string();
        assert_eq!(receipt_of.entry(p.clone()).or_insert(id.clone()), &id);
    }
    assert_eq!(entries_in_db(&o, &c).await, 10_000);

    // The manager closes the entries now and draws.
    let (s, drawn) = run_now(&o, &c).await;
    assert_eq!(
        (s, drawn["state"].as_str()),
        (200, Some("drawn")),
        "{drawn}"
    );
    let (s, published) = status(&o, &c).await;
    assert_eq!(s, 200);
    let result: DrawResult = serde_json::from_value(published["result"].clone()).unwrap();
    assert_eq!(result.commitment, commitment);
    assert_eq!((result.winners.len(), result.waitlist.len()), (100, 9_900));
    assert_eq!(result.entry_count, 10_000);
    let distinct: std::collections::BTreeSet<_> = result.winners.iter().collect();
    assert_eq!(distinct.len(), 100);
    // The shared rules, recomputed here from the revealed seed and everyone who entered.
    assert_eq!(draw::verify(&result), Ok(()));
    let seed = draw::Seed::from_hex(&result.seed).unwrap();
    assert_eq!(seed.commitment(), commitment);
    assert_eq!(result.entries_digest, draw::entries_digest(&people));
    let order = draw::order(&seed, &c, &people);
    assert_eq!(order[..100], result.winners[..]);
    assert_eq!(order[100..], result.waitlist[..]);
    // A second run changes nothing.
    let (s, again) = run_now(&o, &c).await;
    assert_eq!((s, &again["result"]), (200, &published["result"]));

    // The CLI and the documented Python agree with the published result.
    let dir = std::env::temp_dir().join(unique("draws"));
    std::fs::create_dir_all(&dir).unwrap();
    let [cli, py] = verify_both(&dir, &published);
    println!("flashgate draw verify: {}python: {}", cli.1, py.1);
    assert_eq!(cli.0, 0, "{cli:?}");
    assert!(cli.1.starts_with("ok: draw of"), "{cli:?}");
    assert_eq!(
        (py.0, py.1.trim()),
        (0, "ok: 10000 entries, 100 winners"),
        "{py:?}"
    );
    // A wrong seed fails both, saying why, with a non-zero exit.
    let mut forged = published.clone();
    forged["result"]["seed"] = json!("07".repeat(32));
    let [cli, py] = verify_both(&dir, &forged);
    println!("wrong seed: {}{}", cli.2, py.2);
    assert_eq!(cli.0, 1, "{cli:?}");
    assert!(
        cli.2.contains("the seed does not match the commitment"),
        "{cli:?}"
    );
    assert_eq!(py.0, 1, "{py:?}");
    assert!(
        py.2.contains("the seed does not match the commitment"),
        "{py:?}"
    );
    // Two customers swapped: both refuse the order.
    let mut swapped = published.clone();
    let (w, l) = (
        swapped["result"]["winners"][0].clone(),
        swapped["result"]["waitlist"][0].clone(),
    );
    swapped["result"]["winners"][0] = l;
    swapped["result"]["waitlist"][0] = w;
    let [cli, py] = verify_both(&dir, &swapped);
    assert_eq!((cli.0, py.0), (1, 1), "{cli:?} {py:?}");
    assert!(cli.2.contains("order differs at position 0"), "{cli:?}");
    // Unreadable input is a usage error.
    let (code, _, err) =
        run(Command::new(flashgate_bin()).args(["draw", "verify", "/nonexistent/draw.json"]));
    assert_eq!(code, 2, "{err}");
    let _ = std::fs::remove_dir_all(&dir);

    // Each customer learns her outcome; entering after the draw finds her receipt or is
    // refused, and changes nothing.
    let first = &result.winners[0];
    let mine = format!("/api/v1/campaigns/{c}/draw/entries/mine");
    let (s, b) = get(&o, &mine, Some(&o.token(first))).await;
    assert_eq!(
        (s, b["outcome"].as_str(), b["place"].as_i64()),
        (200, Some("won"), Some(1)),
        "{b}"
    );
    let next = &result.waitlist[0];
    let (s, b) = get(&o, &mine, Some(&o.token(next))).await;
    assert_eq!(
        (s, b["outcome"].as_str(), b["place"].as_i64()),
        (200, Some("waitlisted"), Some(101)),
        "{b}"
    );
    let (s, b) = enter(&o, &c, first).await;
    assert_eq!((s, &b["entry_id"]), (200, &json!(receipt_of[first])), "{b}");
    let (s, b) = enter(&o, &c, "late-comer").await;
    assert_eq!((s, b["result"].as_str()), (409, Some("conflict")), "{b}");
    assert!(b["message"].as_str().unwrap().contains("closed at"), "{b}");
    assert_eq!(entries_in_db(&o, &c).await, 10_000);
    let (s, b) = get(&o, &mine, Some(&o.token("late-comer"))).await;
    assert_eq!(s, 404, "{b}");
    o.stop().await;
}

#[tokio::test]
async fn the_draw_runs_by_itself_when_the_window_closes() {
    let o = origin().await;
    let c = unique("auto");
    let now = Utc::now();
    let close = now + chrono::Duration::seconds(3);
    o.create(&draw_campaign(
        &c,
        5,
        now - chrono::Duration::seconds(1),
        close,
    ))
    .await;
    let people: Vec<String> = (0..40).map(|i| format!("{c}-p{i}")).collect();
    let replies = futures::future::join_all(people.iter().map(|p| enter(&o, &c, p))).await;
    assert!(replies.iter().all(|(s, _)| *s == 201), "{replies:?}");
    let published = eventually("the draw", Duration::from_secs(30), || async {
        let (_, b) = status(&o, &c).await;
        if b["state"] == "drawn" {
            Ok(b)
        } else {
            Err(b.to_string())
        }
    })
    .await;
    let result: DrawResult = serde_json::from_value(published["result"].clone()).unwrap();
    assert_eq!(draw::verify(&result), Ok(()));
    assert_eq!((result.winners.len(), result.entry_count), (5, 40));
    let drawn_at: DateTime<Utc> = serde_json::from_value(published["drawn_at"].clone()).unwrap();
    assert!(
        drawn_at >= close,
        "drawn at {drawn_at}, before the close {close}"
    );
    o.stop().await;
}

#[tokio::test]
async fn bad_entries_and_bad_options_are_refused_and_change_nothing() {
    let o = origin().await;
    let now = Utc::now();
    // Entries not open yet: the commitment is out, the seed is not, entries are refused.
    let later = unique("later");
    o.create(&draw_campaign(
        &later,
        3,
        now + chrono::Duration::minutes(30),
        now + chrono::Duration::minutes(60),
    ))
    .await;
    let (s, b) = status(&o, &later).await;
    assert_eq!((s, b["state"].as_str()), (200, Some("scheduled")), "{b}");
    assert!(
        b["commitment"].is_string() && b.get("result").is_none(),
        "{b}"
    );
    let (s, b) = enter(&o, &later, "early-bird").await;
    assert_eq!((s, b["result"].as_str()), (409, Some("conflict")), "{b}");
    assert!(b["message"].as_str().unwrap().contains("open at"), "{b}");
    let (s, b) = run_now(&o, &later).await;
    assert_eq!(s, 409, "{b}");
    assert_eq!(entries_in_db(&o, &later).await, 0);
    // A campaign that is not a draw.
    let sale = o.campaign("sale", 3).await;
    let (s, b) = get(&o, &format!("/api/v1/campaigns/{sale}"), None).await;
    assert!(s == 200 && b.get("draw").is_none(), "{b}");
    let (s, b) = enter(&o, &sale, "ana").await;
    assert_eq!((s, b["result"].as_str()), (409, Some("conflict")), "{b}");
    assert!(b["message"].as_str().unwrap().contains("not a draw"), "{b}");
    assert_eq!(status(&o, &sale).await.0, 409);
    assert_eq!(run_now(&o, &sale).await.0, 409);
    // Unknown campaigns and ids that are no slug.
    for id in [unique("nope"), "Not_A_Slug".to_string()] {
        let (s, b) = enter(&o, &id, "ana").await;
        assert_eq!(
            (s, b["result"].as_str()),
            (404, Some("not_found")),
            "{id}: {b}"
        );
        assert_eq!(status(&o, &id).await.0, 404);
    }
    // No token, or a forged one.
    let open = unique("open");
    o.create(&draw_campaign(
        &open,
        3,
        now - chrono::Duration::seconds(1),
        now + chrono::Duration::minutes(30),
    ))
    .await;
    let (s, b) = enter_raw(&o.http, &o.url, &secret(&o), &open, None).await;
    assert_eq!(
        (s, b["result"].as_str()),
        (401, Some("unauthorized")),
        "{b}"
    );
    // Not signed by the edge: 403.
    let r = o
        .http
        .post(format!("{}/api/v1/campaigns/{open}/draw/entries", o.url))
        .bearer_auth(o.token("ana"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let token = o.token("mallory");
    let forged = format!("{}x", &token[..token.len() - 1]);
    let (s, b) = enter_with(&o, &open, &forged).await;
    assert_eq!(
        (s, b["result"].as_str()),
        (401, Some("unauthorized")),
        "{b}"
    );
    assert_eq!(entries_in_db(&o, &open).await, 0);
    // A manager's run needs a manager token.
    let viewer = o.viewer_token().to_string();
    let (s, _) = o
        .admin(
            reqwest::Method::POST,
            &format!("/admin/v1/campaigns/{open}/draw/run"),
            Some(&viewer),
            None,
        )
        .await;
    assert_eq!(s, 403);
    assert_eq!(status(&o, &open).await.1["state"], "open");

    // Bad options: 422 naming the field, nothing created.
    let base = |id: &str| draw_campaign(id, 3, now, now + chrono::Duration::minutes(30));
    let cases: Vec<(NewCampaign, &str)> = vec![
        (
            NewCampaign {
                draw: None,
                ..base(&unique("bad"))
            },
            "needs the draw option",
        ),
        (
            NewCampaign {
                access: None,
                ..base(&unique("bad"))
            },
            "access \"draw\" only",
        ),
        (
            {
                let mut c = base(&unique("bad"));
                c.draw.as_mut().unwrap().entries_close_at = c.ends_at;
                c
            },
            "draw.entries_close_at must be before ends_at",
        ),
        (
            {
                let mut c = base(&unique("bad"));
                c.draw.as_mut().unwrap().entries_close_at = now;
                c
            },
            "draw.entries_open_at must be before draw.entries_close_at",
        ),
        (
            {
                let mut c = base(&unique("bad"));
                c.draw.as_mut().unwrap().buying_window_seconds = Some(172_801);
                c
            },
            "draw.buying_window_seconds",
        ),
        // An entry window that has closed already, long ago or a second ago.
        (
            draw_campaign(
                &unique("past"),
                3,
                Utc.with_ymd_and_hms(2020, 1, 1, 0, 0, 0).unwrap(),
                Utc.with_ymd_and_hms(2020, 1, 2, 0, 0, 0).unwrap(),
            ),
            "draw.entries_close_at must be in the future",
        ),
        (
            draw_campaign(
                &unique("past"),
                3,
                now - chrono::Duration::minutes(5),
                now - chrono::Duration::seconds(1),
            ),
            "draw.entries_close_at must be in the future",
        ),
    ];
    let token = o.manager_token().to_string();
    for (body, message) in cases {
        let (s, b) = o
            .admin(
                reqwest::Method::POST,
                "/admin/v1/campaigns",
                Some(&token),
                Some(serde_json::to_value(&body).unwrap()),
            )
            .await;
        assert_eq!(
            (s, b["result"].as_str()),
            (422, Some("validation_failed")),
            "{b}"
        );
        assert!(
            b["message"].as_str().unwrap().contains(message),
            "{message}: {b}"
        );
        let (s, _) = get(&o, &format!("/api/v1/campaigns/{}", body.id), None).await;
        assert_eq!(s, 404, "{} was created", body.id);
    }
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn entries_racing_an_early_draw_are_in_it_exactly_when_they_got_a_receipt() {
    let o = origin().await;
    let c = unique("race");
    let now = Utc::now();
    o.create(&draw_campaign(
        &c,
        10,
        now - chrono::Duration::seconds(1),
        now + chrono::Duration::minutes(30),
    ))
    .await;
    let people: Vec<String> = (0..1_500).map(|i| format!("{c}-{i}")).collect();
    let entries = stream::iter(people.iter().cloned().map(|p| {
        let (http, url, token, c) = (o.http.clone(), o.url.clone(), o.token(&p), c.clone());
        let secret = secret(&o);
        tokio::spawn(async move {
            (
                p.clone(),
                enter_raw(&http, &url, &secret, &c, Some(&token)).await,
            )
        })
    }))
    .buffer_unordered(IN_FLIGHT)
    .map(|r| r.expect("task"))
    .collect::<Vec<_>>();
    // The manager draws while the entries are coming in.
    let draw = async {
        eventually("some entries", Duration::from_secs(60), || async {
            match entries_in_db(&o, &c).await {
                n if n >= 300 => Ok(()),
                n => Err(format!("{n} entries")),
            }
        })
        .await;
        run_now(&o, &c).await
    };
    let (replies, (s, drawn)) = tokio::join!(entries, draw);
    assert_eq!(s, 200, "{drawn}");
    let result: DrawResult = serde_json::from_value(drawn["result"].clone()).unwrap();
    assert_eq!(draw::verify(&result), Ok(()));
    let received: std::collections::BTreeSet<&str> = replies
        .iter()
        .filter(|(_, (s, _))| *s == 201)
        .map(|(p, _)| p.as_str())
        .collect();
    let refused = replies.iter().filter(|(_, (s, _))| *s == 409).count();
    let in_draw: std::collections::BTreeSet<&str> = result
        .winners
        .iter()
        .chain(&result.waitlist)
        .map(String::as_str)
        .collect();
    println!(
        "{} receipts before the draw, {refused} refused after it",
        received.len()
    );
    let others: Vec<_> = replies
        .iter()
        .filter(|(_, (s, _))| *s != 201 && *s != 409)
        .take(3)
        .collect();
    assert_eq!(received.len() + refused, people.len(), "{others:?}");
    assert_eq!(in_draw, received);
    assert_eq!(entries_in_db(&o, &c).await, received.len() as i64);
    o.stop().await;
}
