//! A waiting room's admission token admits one winning claim (docs/WAITING-ROOM.md, "Tickets
//! and admission tokens"): while that claim is active the token with a new key gets it back as
//! `already_claimed`; after it is released the token is spent, so a customer cannot release
//! and claim again on one admission while others wait; a retry of the winning claim still gets
//! its recorded answer. Against a real origin, PostgreSQL and Redis, with
//! tokens minted as the edge mints them.

use chrono::Utc;
use flashgate_shared::admission::{mint_admission, open_ticket};
use flashgate_shared::api::ReleaseRequest;
use flashgate_tests::support::room::{campaign, room};
use flashgate_tests::support::{queue_config, unique, TestOrigin, TEST_EDGE_SECRET};

const K: &[u8] = TEST_EDGE_SECRET.as_bytes();

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_claim_does_not_give_its_admission_token_a_second_win() {
    let o = TestOrigin::start_with(queue_config()).await;
    let id = campaign(&o, 3, chrono::Duration::minutes(-1), Some(600), room(100)).await;
    let uma = unique("uma");
    let (_, body) = o.join(&id, &uma).await;
    let ticket = open_ticket(K, body["ticket"].as_str().expect("ticket"), &id).expect("ticket");
    let token = mint_admission(K, &ticket, Utc::now().timestamp(), 60);

    let key = unique("k");
    let won = o.signed_claim_with_key(&id, &uma, Some(&token), &key).await;
    assert_eq!(won.status, 201, "{}", won.body);
    let claim = won.body["claim"]["id"].as_str().unwrap().to_string();
    // While her claim is active, the spent token with a new key: her claim, 409, nothing taken.
    let active = o.signed_claim(&id, &uma, Some(&token)).await;
    assert_eq!(active.status, 409, "{}", active.body);
    assert_eq!(active.body["result"], "already_claimed", "{}", active.body);
    assert_eq!(
        active.body["claim"]["id"],
        claim.as_str(),
        "{}",
        active.body
    );
    assert_eq!(o.remaining(&id).await, 2);
    assert_eq!(o.claim_rows(&id, &[]).await, 1);
    let service = o.config.service_token.expose().to_string();
    let (s, b) = o
        .claim_action(
            &claim,
            "release",
            &service,
            &ReleaseRequest { reason: None },
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(o.remaining(&id).await, 3, "the released unit is back");

    // The same token with a new key: refused, and nothing is taken.
    let again = o.signed_claim(&id, &uma, Some(&token)).await;
    assert_eq!(again.status, 403, "{}", again.body);
    assert_eq!(again.body["result"], "forbidden", "{}", again.body);
    assert!(
        again.body["message"]
            .as_str()
            .unwrap_or("")
            .contains("used"),
        "{}",
        again.body
    );
    assert_eq!(o.remaining(&id).await, 3);
    assert_eq!(o.claim_rows(&id, &["held"]).await, 0);
    // A retry of the winning claim (its key and body) gets its recorded answer.
    let retry = o.signed_claim_with_key(&id, &uma, Some(&token), &key).await;
    assert_eq!((retry.status, &retry.body), (201, &won.body));
    assert_eq!(o.claim_rows(&id, &[]).await, 1);
    o.stop().await;
}
