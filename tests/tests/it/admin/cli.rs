//! `flashgate admin …` against a real origin: the subcommands reach the admin API, and each
//! kind of failure has its own exit code (2 a refused token, 3 not found, 4 refused, 5 an
//! unreachable origin).

use flashgate_origin::cli::admin::{run, AdminArgs, AdminCommand};
use flashgate_origin::cli::exit;
use flashgate_origin::secret::Secret;
use flashgate_tests::support::TestOrigin;

fn args(o: &TestOrigin, token: &str, command: AdminCommand) -> AdminArgs {
    AdminArgs {
        origin_url: o.url.clone(),
        token: Some(Secret::new(token)),
        idempotency_key: None,
        command,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_subcommands_call_the_admin_api() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 4).await;
    let m = o.manager_token().to_string();
    let campaign = || c.clone();

    assert_eq!(run(args(&o, &m, AdminCommand::List)).await, 0);
    assert_eq!(
        run(args(
            &o,
            &m,
            AdminCommand::Show {
                campaign: campaign()
            }
        ))
        .await,
        0
    );
    assert_eq!(
        run(args(
            &o,
            &m,
            AdminCommand::Pause {
                campaign: campaign()
            }
        ))
        .await,
        0
    );
    assert_eq!(o.status(&c).await["state"], "paused");
    assert_eq!(
        run(args(
            &o,
            &m,
            AdminCommand::Resume {
                campaign: campaign()
            }
        ))
        .await,
        0
    );
    let restock = AdminCommand::Restock {
        campaign: campaign(),
        add: 3,
    };
    assert_eq!(run(args(&o, &m, restock)).await, 0);
    assert_eq!(o.remaining(&c).await, 7);
    let set = AdminCommand::SetStock {
        campaign: campaign(),
        stock: 5,
    };
    assert_eq!(run(args(&o, &m, set)).await, 0);
    assert_eq!(o.remaining(&c).await, 5);
    assert_eq!(
        run(args(
            &o,
            &m,
            AdminCommand::Audit {
                campaign: campaign()
            }
        ))
        .await,
        0
    );

    // A viewer may read but not write (2); an unknown campaign is 3; a refused change 4.
    let v = o.viewer_token().to_string();
    assert_eq!(run(args(&o, &v, AdminCommand::List)).await, 0);
    assert_eq!(
        run(args(
            &o,
            &v,
            AdminCommand::Close {
                campaign: campaign()
            }
        ))
        .await,
        exit::USAGE
    );
    let unknown = AdminCommand::Show {
        campaign: "no-such-campaign-cli".into(),
    };
    assert_eq!(run(args(&o, &m, unknown)).await, exit::NOT_FOUND);
    let below_claimed = AdminCommand::SetStock {
        campaign: campaign(),
        stock: 0,
    };
    assert_eq!(run(args(&o, &m, below_claimed)).await, exit::REFUSED);
    assert_eq!(
        run(args(
            &o,
            &m,
            AdminCommand::Close {
                campaign: campaign()
            }
        ))
        .await,
        0
    );
    assert_eq!(o.status(&c).await["state"], "ended");

    let mut gone = args(&o, &m, AdminCommand::List);
    gone.origin_url = "http://127.0.0.1:9".into();
    assert_eq!(run(gone).await, exit::UNREACHABLE);
    let mut no_token = args(&o, &m, AdminCommand::List);
    no_token.token = None;
    assert_eq!(run(no_token).await, exit::USAGE);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_times_take_every_form_of_the_one_admin_time_parser() {
    let o = TestOrigin::start().await;
    let id = flashgate_tests::support::unique("zoned");
    let body = serde_json::json!({
        "id": id, "name": "Zoned", "kind": "giveaway", "stock": 3,
        "starts_at": "2030-01-01T01:00 Europe/Paris",
        "ends_at": "2030-01-02T01:00:00+01:00",
    });
    let token = o.manager_token().to_string();
    let (s, b) = o
        .admin(
            reqwest::Method::POST,
            "/admin/v1/campaigns",
            Some(&token),
            Some(body),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["starts_at"], "2030-01-01T00:00:00Z", "{b}");
    let (s, b) = o
        .change(
            &id,
            serde_json::json!({"ends_at": "2030-01-03T12:00 Asia/Tokyo"}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["campaign"]["ends_at"], "2030-01-03T03:00:00Z", "{b}");
    // A time in no accepted form: 422 naming the field and the forms; nothing changed.
    let (s, b) = o
        .change(
            &id,
            serde_json::json!({"ends_at": "Sunday 23:59 Mars/Olympus"}),
        )
        .await;
    assert_eq!(
        (s, b["result"].as_str()),
        (422, Some("validation_failed")),
        "{b}"
    );
    let message = b["message"].as_str().unwrap();
    assert!(message.starts_with("ends_at: "), "{message}");
    let (s, b) = o
        .change(&id, serde_json::json!({"ends_at": "next week"}))
        .await;
    assert_eq!(s, 422, "{b}");
    assert!(b["message"].as_str().unwrap().contains("RFC 3339"), "{b}");
    assert_eq!(o.status(&id).await["ends_at"], "2030-01-03T03:00:00Z");
    o.stop().await;
}
