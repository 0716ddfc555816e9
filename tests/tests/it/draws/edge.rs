//! A draw's customer routes through the edge (the built worker in workerd in front of a real
//! origin): an entry, her entry again, her outcome and the public draw reach the origin signed
//! by the edge, as docs/DRAWS.md tells a shop to call them; a wrong method is answered at the
//! edge.

use chrono::Utc;
use flashgate_shared::ANSWERED_BY_HEADER;
use flashgate_tests::support::draws::{draw_campaign, entries_in_db, origin};
use flashgate_tests::support::{reply, token_for, unique, TestEdge, TEST_EDGE_SECRET};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_customer_enters_a_draw_and_reads_it_through_the_edge() {
    let o = origin().await;
    let c = unique("edraw");
    let now = Utc::now();
    o.create(&draw_campaign(
        &c,
        3,
        now - chrono::Duration::seconds(1),
        now + chrono::Duration::minutes(10),
    ))
    .await;
    let edge = TestEdge::start(
        &o.url,
        &[
            ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.to_string()),
            ("FLASHGATE_LIMIT_IP_PER_S", "0".to_string()),
        ],
    );
    let http = reqwest::Client::new();
    let token = token_for(&o.config, &format!("{c}-ana"));
    let enter = || {
        http.post(format!("{}/api/v1/campaigns/{c}/draw/entries", edge.url))
            .bearer_auth(&token)
            .send()
    };

    let first = reply(enter().await.expect("entry")).await;
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    assert_eq!(first.header(ANSWERED_BY_HEADER), Some("origin"));
    let again = reply(enter().await.expect("entry again")).await;
    assert_eq!(
        again.status,
        200,
        "{}",
        String::from_utf8_lossy(&again.body)
    );
    assert_eq!(again.json()["entry_id"], first.json()["entry_id"]);
    assert_eq!(entries_in_db(&o, &c).await, 1);

    let mine = reply(
        http.get(format!(
            "{}/api/v1/campaigns/{c}/draw/entries/mine",
            edge.url
        ))
        .bearer_auth(&token)
        .send()
        .await
        .expect("mine"),
    )
    .await;
    assert_eq!(mine.status, 200, "{}", String::from_utf8_lossy(&mine.body));
    assert_eq!(mine.json()["outcome"], "entered");
    assert_eq!(mine.json()["receipt"]["entry_id"], first.json()["entry_id"]);

    let draw = reply(
        http.get(format!("{}/api/v1/campaigns/{c}/draw", edge.url))
            .send()
            .await
            .expect("draw"),
    )
    .await;
    assert_eq!(draw.status, 200, "{}", String::from_utf8_lossy(&draw.body));
    assert_eq!(draw.json()["commitment"], first.json()["commitment"]);

    // A GET of the entries route is refused at the edge, with its Allow.
    let wrong = reply(
        http.get(format!("{}/api/v1/campaigns/{c}/draw/entries", edge.url))
            .bearer_auth(&token)
            .send()
            .await
            .expect("wrong method"),
    )
    .await;
    assert_eq!((wrong.status, wrong.header("allow")), (405, Some("POST")));
    assert_eq!(wrong.header(ANSWERED_BY_HEADER), Some("edge"));
    o.stop().await;
}
