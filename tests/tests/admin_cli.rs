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
