//! `flashgate admin create` with the options that say who may claim (the real binary against a
//! real origin): a waiting room with a proof-of-work challenge and invites, and a draw; each
//! campaign's public status then shows them. A challenge without a waiting room is a usage
//! error (exit 2) and a draw window the admin API refuses is exit 4; neither creates anything.
//!
//! The binary is `target/<profile>/flashgate` (see tests/tests/it/webhooks/cli.rs).

use std::process::Output;

use flashgate_origin::cli::exit;
use flashgate_tests::support::draws::{get, origin};
use flashgate_tests::support::{run_admin_cli, unique, TestOrigin};
use serde_json::Value;

/// Runs `flashgate admin create --id ID --name N --kind sale --stock 5 --ends-at +2 h <more>`.
async fn create(o: &TestOrigin, id: &str, more: &[&str]) -> Output {
    let ends = (chrono::Utc::now() + chrono::Duration::hours(2)).to_rfc3339();
    let args = [
        "admin", "create", "--id", id, "--name", "CLI", "--kind", "sale",
    ]
    .into_iter()
    .chain(["--stock", "5", "--ends-at", &ends])
    .chain(more.iter().copied())
    .map(String::from)
    .collect();
    run_admin_cli(&o.url, o.manager_token(), args).await
}

fn code(out: &Output) -> Option<i32> {
    let code = out.status.code();
    if code != Some(exit::OK) {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    }
    code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_sets_the_waiting_room_challenge_invites_and_a_draw() {
    let o = origin().await;
    let room = unique("cli-room");
    let out = create(
        &o,
        &room,
        &[
            "--admit-per-second",
            "20",
            "--challenge",
            "pow",
            "--pow-difficulty",
            "16",
        ],
    )
    .await;
    assert_eq!(code(&out), Some(exit::OK));
    let out = create(&o, &format!("{room}-b"), &["--challenge", "pow"]).await;
    assert_eq!(
        out.status.code(),
        Some(exit::USAGE),
        "no waiting room: usage"
    );
    let (s, status) = get(&o, &format!("/api/v1/campaigns/{room}"), None).await;
    assert_eq!(s, 200, "{status}");
    assert_eq!(status["queue"]["admit_per_second"], 20, "{status}");
    let access = &status["queue"]["access"];
    assert_eq!(
        (
            access["challenge"].as_str(),
            access["pow_difficulty"].as_u64()
        ),
        (Some("pow"), Some(16))
    );

    let invited = unique("cli-invite");
    let json_room = r#"{"admit_per_second":3,"queueing":"random"}"#;
    let out = create(
        &o,
        &invited,
        &["--waiting-room", json_room, "--invite-only"],
    )
    .await;
    assert_eq!(code(&out), Some(exit::OK));
    let (_, status) = get(&o, &format!("/api/v1/campaigns/{invited}"), None).await;
    assert_eq!(status["queue"]["access"]["invite_only"], true, "{status}");

    let raffle = unique("cli-draw");
    let open = (chrono::Utc::now() + chrono::Duration::minutes(10)).to_rfc3339();
    let close = (chrono::Utc::now() + chrono::Duration::minutes(40)).to_rfc3339();
    let window = [
        "--access",
        "draw",
        "--entries-open-at",
        &open,
        "--entries-close-at",
        &close,
    ];
    let out = create(
        &o,
        &raffle,
        &[&window[..], &["--buying-window-seconds", "600"]].concat(),
    )
    .await;
    assert_eq!(code(&out), Some(exit::OK));
    let (s, draw) = get(&o, &format!("/api/v1/campaigns/{raffle}/draw"), None).await;
    assert_eq!(s, 200, "{draw}");
    assert_eq!(
        (
            draw["state"].as_str(),
            draw["buying_window_seconds"].as_i64()
        ),
        (Some("scheduled"), Some(600))
    );
    assert_eq!(
        draw["commitment"].as_str().map(str::len),
        Some(64),
        "{draw}"
    );
    // A buying window past 48 h: the admin API's 422, exit 4, nothing created.
    let bad = unique("cli-draw-bad");
    let out = create(
        &o,
        &bad,
        &[&window[..], &["--buying-window-seconds", "172801"]].concat(),
    )
    .await;
    assert_eq!(out.status.code(), Some(exit::REFUSED));
    assert!(String::from_utf8_lossy(&out.stderr).contains("draw.buying_window_seconds"));
    let (s, _): (u16, Value) = get(&o, &format!("/api/v1/campaigns/{bad}"), None).await;
    assert_eq!(s, 404);
    o.stop().await;
}
