//! Winners' retries after the sell-out, with the built worker inside workerd in front of a real
//! origin (PostgreSQL, Redis): a winner whose 201 was lost retries with the same key after the
//! sell-out and gets her first reply back from the origin; losers are still answered
//! `sold_out` by the edge without reaching the origin; a loser that the winners filter lets
//! through by chance (a false positive) is answered `sold_out` by the origin; above the
//! filter's size limit the edge answers everyone `sold_out` and `claims/mine` is the way back.
//! Also the origin's winners-filter route (ETag, 304, callers, unknown campaigns).

use flashgate_shared::winners_filter::{self, WinnersFilter};
use flashgate_tests::support::{
    claims_at_once, edge_claim, edge_headers, edge_with, get, reply, signed_test_config, unique,
    EdgeSettings, Reply, TestEdge, TestOrigin, TEST_EDGE_SECRET,
};

/// A sale of `stock` units on `o` behind a new edge; `stock` winners claim through the edge
/// with key `k` (their 201s) and one loser gets the origin's `sold_out`, from which the edge
/// learns the sell-out. Returns the campaign, the edge, the winners and their replies.
async fn sold_out_behind_edge(
    o: &TestOrigin,
    stock: usize,
) -> (String, TestEdge, Vec<String>, Vec<Reply>) {
    let c = o.campaign("sale", stock as i64).await;
    let e = edge_with(&o.url, EdgeSettings::default());
    let run = unique("w");
    let replies = claims_at_once(o, &e.url, &c, &run, stock).await;
    assert!(replies.iter().all(|r| r.status == 201), "{replies:?}");
    let winners = (0..stock).map(|i| format!("{run}-{i}")).collect();
    let last = edge_claim(o, &e.url, &c, &unique("first-loser"), "k").await;
    assert_eq!((last.status, last.by.as_str()), (409, "origin"));
    assert_eq!(last.body, br#"{"result":"sold_out"}"#);
    (c, e, winners, replies)
}

/// The filter the origin builds for these winners (the build is deterministic).
fn filter_of(winners: &[String]) -> WinnersFilter {
    WinnersFilter::build(
        winners.iter().map(String::as_str),
        winners_filter::MAX_WINNERS,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_winner_whose_reply_was_lost_gets_it_back_after_the_sell_out() {
    let o = TestOrigin::start_signed().await;
    let (c, e, winners, firsts) = sold_out_behind_edge(&o, 5).await;
    let filter = filter_of(&winners);

    // Her retry with the same key, after the sell-out: the origin replays her first reply.
    let before = o.claim_requests();
    for (w, first) in winners.iter().zip(&firsts).take(3) {
        let again = edge_claim(&o, &e.url, &c, w, "k").await;
        assert_eq!((again.status, again.by.as_str()), (201, "origin"), "{w}");
        assert_eq!(
            again.json(),
            first.json(),
            "her first reply, byte for byte in JSON"
        );
    }
    // A winner's claim with another key (no record for it): her claim, from PostgreSQL.
    let other_key = edge_claim(&o, &e.url, &c, &winners[3], "another-key").await;
    assert_eq!((other_key.status, other_key.by.as_str()), (409, "origin"));
    assert_eq!(other_key.json()["result"], "already_claimed");
    assert_eq!(
        other_key.json()["claim"]["id"],
        firsts[3].json()["claim"]["id"]
    );
    assert_eq!(o.claim_requests() - before, 4);

    // Losers the filter surely turns away: sold_out at the edge, none reaches the origin.
    let run = unique("loser");
    let losers: Vec<String> = (0..400)
        .map(|i| format!("{run}-{i}"))
        .filter(|l| !filter.may_contain(l))
        .take(200)
        .collect();
    let before = o.claim_requests();
    for l in &losers {
        let r = edge_claim(&o, &e.url, &c, l, "k").await;
        assert_eq!((r.status, r.by.as_str()), (409, "edge"), "{l}");
        assert_eq!(r.body, br#"{"result":"sold_out"}"#);
    }
    assert_eq!(o.claim_requests() - before, 0);

    // A loser the filter lets through by chance (about 1 in 256): the origin says sold_out.
    let lucky = (0..100_000)
        .map(|i| format!("{run}-fp-{i}"))
        .find(|l| filter.may_contain(l))
        .expect("a false positive among 100,000 names");
    let before = o.claim_requests();
    let r = edge_claim(&o, &e.url, &c, &lucky, "k").await;
    assert_eq!((r.status, r.by.as_str()), (409, "origin"));
    assert_eq!(r.body, br#"{"result":"sold_out"}"#);
    assert_eq!(o.claim_requests() - before, 1);

    // Still exactly the stock in PostgreSQL, one claim per winner.
    assert_eq!(o.claim_rows(&c, &[]).await, 5);
    // The filter was fetched once per TTL at most (the test ran for a few seconds).
    let fetches = o.origin_count(|m| &m.winners_filter_requests);
    assert!((1..=10).contains(&fetches), "{fetches} filter fetches");
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn above_the_size_limit_everyone_gets_sold_out_at_the_edge_and_claims_mine_is_the_way_back() {
    let mut config = signed_test_config();
    config.winners_filter_max = 2;
    let o = TestOrigin::start_with(config).await;
    let (c, e, winners, firsts) = sold_out_behind_edge(&o, 3).await;

    let before = o.claim_requests();
    let again = edge_claim(&o, &e.url, &c, &winners[0], "k").await;
    assert_eq!((again.status, again.by.as_str()), (409, "edge"));
    assert_eq!(again.body, br#"{"result":"sold_out"}"#);
    assert_eq!(o.claim_requests() - before, 0);
    assert!(o.origin_count(|m| &m.winners_filter_requests) >= 1);

    let mine = o
        .http
        .get(format!("{}/api/v1/campaigns/{c}/claims/mine", e.url))
        .bearer_auth(o.token(&winners[0]))
        .send()
        .await
        .expect("claims/mine");
    let mine = reply(mine).await;
    assert_eq!(mine.status, 200);
    assert_eq!(mine.json()["claim"]["id"], firsts[0].json()["claim"]["id"]);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_winners_filter_route() {
    let o = TestOrigin::start_signed().await;
    let (c, _e, winners, _) = sold_out_behind_edge(&o, 4).await;
    let path = winners_filter::path(&c);
    let signed = |extra: Option<&str>| {
        let mut req = o.http.get(format!("{}{path}", o.url));
        for (name, value) in edge_headers(TEST_EDGE_SECRET, "GET", &path, b"", None, None, None) {
            req = req.header(name, value);
        }
        if let Some(tag) = extra {
            req = req.header("if-none-match", tag);
        }
        req
    };
    let first = reply(signed(None).send().await.expect("filter")).await;
    assert_eq!(first.status, 200);
    assert_eq!(
        first.header("content-type"),
        Some(winners_filter::CONTENT_TYPE)
    );
    let filter = WinnersFilter::decode(&first.body).expect("a filter");
    assert_eq!(filter.count(), 4);
    assert!(winners.iter().all(|w| filter.may_contain(w)));
    assert_eq!(first.body, filter_of(&winners).encode());
    let tag = first.header("etag").expect("etag").to_string();
    let unchanged = reply(signed(Some(&tag)).send().await.expect("filter")).await;
    assert_eq!((unchanged.status, unchanged.body.len()), (304, 0));

    // Unsigned and without the service token: refused; an unknown campaign: 404.
    let anon = get(&o.http, &format!("{}{path}", o.url)).await;
    assert_eq!(anon.status, 401);
    let ghost = winners_filter::path(&unique("ghost"));
    let mut req = o.http.get(format!("{}{ghost}", o.url));
    for (name, value) in edge_headers(TEST_EDGE_SECRET, "GET", &ghost, b"", None, None, None) {
        req = req.header(name, value);
    }
    assert_eq!(reply(req.send().await.expect("ghost")).await.status, 404);
    o.stop().await;
}
