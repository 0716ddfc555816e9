//! `flashgate admin webhooks …`, the real binary, against a real origin and a receiver written
//! with the reference `standardwebhooks` library (scripts/webhook-receiver): create → list →
//! show → change → an event delivered → deliveries → replay (the same event again) → rotate →
//! delete, then a refused URL and an unknown endpoint with their exit codes.
//!
//! The binary is `target/<profile>/flashgate`, next to this test's `deps/` directory: `cargo
//! test --workspace` builds it (the origin's own integration tests need it); with `cargo test
//! -p flashgate-tests`, build it first (`cargo build -p flashgate-origin --bin flashgate`).

use std::process::Output;
use std::time::Duration;

use flashgate_origin::cli::exit;
use flashgate_tests::support::{eventually, run_admin_cli, unique, TestOrigin};
use flashgate_tests::webhooks::Receiver;
use serde_json::Value;

/// Runs `flashgate admin webhooks <args>` against `o` with the manager token in the
/// environment (as an operator would), off the runtime's threads.
async fn cli(o: &TestOrigin, args: &[&str]) -> Output {
    let args = ["admin", "webhooks"]
        .iter()
        .chain(args)
        .map(|a| a.to_string())
        .collect();
    run_admin_cli(&o.url, o.manager_token(), args).await
}

/// Runs the CLI, expects exit 0, returns its stdout as JSON (`null` when empty).
async fn ok(o: &TestOrigin, args: &[&str]) -> Value {
    let out = cli(o, args).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(exit::OK),
        "{args:?}: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if stdout.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&stdout).expect("JSON on stdout")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_endpoints_and_deliveries_are_managed_from_the_cli() {
    let o = TestOrigin::start().await;
    let r = Receiver::start().await;
    let url = r.url();

    // create: the endpoint with its secret, shown once.
    let created = ok(
        &o,
        &["create", "--url", &url, "--events", "claim.held,claim.paid"],
    )
    .await;
    let id = created["id"].as_str().expect("id").to_string();
    let secret = created["secret"].as_str().expect("secret").to_string();
    assert!(secret.starts_with("whsec_"), "{created}");
    assert_eq!(
        created["event_types"],
        serde_json::json!(["claim.held", "claim.paid"])
    );
    assert_eq!(created["enabled"], true);
    r.secrets(&[&secret]).await;

    // list and show: no secret.
    let list = ok(&o, &["list"]).await;
    let listed: Vec<&Value> = list["endpoints"]
        .as_array()
        .expect("endpoints")
        .iter()
        .filter(|e| e["id"] == id.as_str())
        .collect();
    assert_eq!(listed.len(), 1, "{list}");
    assert_eq!(listed[0]["url"], url.as_str());
    assert_eq!(listed[0].get("secret"), None);
    let shown = ok(&o, &["show", &id]).await;
    assert_eq!(
        (shown["id"].as_str(), shown.get("secret")),
        (Some(id.as_str()), None)
    );

    // change: only what is given.
    let changed = ok(&o, &["change", &id, "--description", "checkout"]).await;
    assert_eq!(changed["description"], "checkout");
    assert_eq!(changed["enabled"], true);

    // An event, delivered: the deliveries show it.
    let c = o.campaign("sale", 2).await;
    let (s, body) = o.claim(&c, &unique("cli"), &unique("key")).await;
    assert_eq!(s, 201, "{body}");
    let first = eventually(
        "the claim.held to arrive",
        Duration::from_secs(60),
        || async {
            let got = r.received(&c).await;
            got.into_iter()
                .find(|e| (200..300).contains(&e.answered))
                .ok_or_else(|| "none yet".to_string())
        },
    )
    .await;
    assert_eq!(first.event["type"], "claim.held");
    assert_eq!(first.verified, vec![0]);
    let event_id = first.id.clone();
    let deliveries = eventually(
        "the delivery to be recorded",
        Duration::from_secs(30),
        || {
            let o = &o;
            let (id, event_id) = (&id, &event_id);
            async move {
                let d = ok(o, &["deliveries", id]).await;
                let mine = d["deliveries"]
                    .as_array()
                    .and_then(|all| all.iter().find(|x| x["event_id"] == event_id.as_str()))
                    .cloned();
                match mine {
                    Some(m) if m["status"] == "delivered" => Ok(m),
                    other => Err(format!("{other:?}")),
                }
            }
        },
    )
    .await;
    assert_eq!(deliveries["type"], "claim.held");
    assert_eq!(deliveries["last_response_code"], 200);
    assert_eq!(deliveries["attempts"], 1);
    let failed = ok(&o, &["deliveries", &id, "--status", "failed"]).await;
    assert_eq!(failed["deliveries"], serde_json::json!([]));

    // replay: the same event (same webhook-id) arrives again, verified.
    let replayed = ok(&o, &["replay", &id, "--event", &event_id]).await;
    assert_eq!(replayed["queued"], 1);
    let again = eventually("the replay to arrive", Duration::from_secs(60), || async {
        let n = r
            .received(&c)
            .await
            .into_iter()
            .filter(|e| e.id == event_id && (200..300).contains(&e.answered))
            .inspect(|e| assert_eq!(e.verified, vec![0]))
            .count();
        (n == 2).then_some(n).ok_or(format!("{n} received"))
    })
    .await;
    assert_eq!(again, 2);

    // rotate: a new secret.
    let rotated = ok(&o, &["rotate", &id]).await;
    let new_secret = rotated["secret"].as_str().expect("new secret");
    assert!(new_secret.starts_with("whsec_") && new_secret != secret);
    assert!(rotated["previous_secret_until"].is_string(), "{rotated}");

    // delete: 204, nothing printed; then the endpoint is gone (exit 3).
    assert_eq!(ok(&o, &["delete", &id]).await, Value::Null);
    let gone = cli(&o, &["show", &id]).await;
    assert_eq!(gone.status.code(), Some(exit::NOT_FOUND));
    let err = String::from_utf8_lossy(&gone.stderr);
    assert!(err.starts_with("error: 404 not_found"), "{err}");

    // Bad input: refused by the origin (exit 4), nothing written.
    let before = ok(&o, &["list"]).await["endpoints"]
        .as_array()
        .unwrap()
        .len();
    let bad = cli(
        &o,
        &[
            "create",
            "--url",
            "ftp://shop.example",
            "--events",
            "claim.held",
        ],
    )
    .await;
    assert_eq!(bad.status.code(), Some(exit::REFUSED));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.starts_with("error: 422 validation_failed"), "{err}");
    let unknown = cli(&o, &["create", "--url", &url, "--events", "claim.lost"]).await;
    assert_eq!(unknown.status.code(), Some(exit::REFUSED));
    let after = ok(&o, &["list"]).await["endpoints"]
        .as_array()
        .unwrap()
        .len();
    assert!(after <= before, "nothing created ({before} → {after})");
}
