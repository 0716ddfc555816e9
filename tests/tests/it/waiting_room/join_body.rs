//! The join's body, through the edge (the built worker in workerd in front of a real origin,
//! PostgreSQL and Redis): on a waiting room without access options too, anything but an empty
//! body or the JSON object is 400 `invalid_json` at the edge, and issues nothing.

use std::time::Duration;

use flashgate_shared::api::ChangeAction;
use flashgate_tests::support::room::{
    admission, campaign, join_with_body, queue_until, room, room_edge,
};
use flashgate_tests::support::{queue_config, unique, TestOrigin};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_join_without_access_options_checks_its_body() {
    let o = TestOrigin::start_with(queue_config()).await;
    let id = campaign(&o, 10, chrono::Duration::minutes(-1), None, room(5)).await;
    admission(&o, &id, ChangeAction::PauseAdmission).await;
    let edge = room_edge(&o);
    let http = reqwest::Client::new();
    let run = unique("body");
    let bad = [
        ("application/json", "{"),
        ("application/json", "null"),
        ("application/json", "[]"),
        ("application/json", r#"["c", "1"]"#),
        ("application/json", r#"{"foo":1}"#),
        ("application/json", "7"),
        ("text/plain", "let me in"),
    ];
    for (i, (ct, body)) in bad.iter().enumerate() {
        let (st, by, j) = join_with_body(&http, &edge, &id, &format!("{run}-{i}"), ct, body).await;
        assert_eq!(
            (st, by.as_str(), j["result"].as_str()),
            (400, "edge", Some("invalid_json")),
            "{ct} {body}: {j}"
        );
        assert!(j["message"].as_str().is_some_and(|m| !m.is_empty()), "{j}");
        assert!(j.get("ticket").is_none(), "{j}");
    }
    // An empty body and the empty object still join.
    for (i, body) in ["", " {} "].iter().enumerate() {
        let c = format!("{run}-ok{i}");
        let (st, by, j) = join_with_body(&http, &edge, &id, &c, "application/json", body).await;
        assert_eq!((st, by.as_str()), (201, "edge"), "{body:?}: {j}");
    }
    // Only those two reached the line (the refused ones, sent first, would be reported first).
    let q = queue_until(&o, &id, |q| q["line"] == 2).await;
    assert_eq!(q["line"], 2, "{q}");
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(o.status(&id).await["queue"]["line"], 2);
    o.stop().await;
}
