//! A draw's buying window against a real origin over HTTP, real PostgreSQL and real Redis:
//! winners claim with their admission token (nobody else can), a winner who does not claim in
//! her window passes her unit to the first of the waitlist, in order, and so does one whose
//! hold expires unpaid after her window; the manager's counts of the draw follow each step.

use std::time::Duration;

use chrono::Utc;
use flashgate_shared::draw::DrawResult;
use flashgate_tests::support::draws::{draw_campaign, enter, get, origin, run_now, status};
use flashgate_tests::support::{eventually, unique, TestOrigin};
use reqwest::Method;

#[tokio::test]
async fn winners_claim_with_their_token_and_lapsed_units_pass_down_the_waitlist_in_order() {
    let o = origin().await;
    let c = unique("window");
    let now = Utc::now();
    let mut body = draw_campaign(
        &c,
        2,
        now - chrono::Duration::seconds(1),
        now + chrono::Duration::minutes(30),
    );
    // Long enough for the steps between a unit's admission and its claim on a loaded machine
    // (a 3 s window expired before the first claim at load average ~12).
    body.draw.as_mut().unwrap().buying_window_seconds = Some(6);
    // Holds outlast the buying window: the first winner's hold expires unpaid after it.
    body.hold_seconds = Some(12);
    o.create(&body).await;
    let people: Vec<String> = (0..6).map(|i| format!("{c}-p{i}")).collect();
    for p in &people {
        assert_eq!(enter(&o, &c, p).await.0, 201);
    }
    assert_eq!(progress(&o, &c).await, [6, 0, 0, 0, 0, 0, 0]);
    let (s, b) = run_now(&o, &c).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(progress(&o, &c).await, [6, 2, 4, 2, 0, 0, 0]);
    let result: DrawResult = serde_json::from_value(b["result"].clone()).unwrap();
    let (first, second) = (&result.winners[0], &result.winners[1]);
    let (next, after) = (&result.waitlist[0], &result.waitlist[1]);
    let o = &o;
    let mine = |who: String| {
        let (token, path) = (
            o.token(&who),
            format!("/api/v1/campaigns/{c}/draw/entries/mine"),
        );
        async move { get(o, &path, Some(&token)).await.1 }
    };
    let m = mine(first.clone()).await;
    assert_eq!(m["outcome"], "won", "{m}");
    let admission = m["admission"].as_str().unwrap().to_string();
    assert!(m["buying_until"].is_string(), "{m}");
    // Without a token, with another winner's, or as a waitlisted customer: 403, nothing claimed.
    let r = o.signed_claim(&c, first, None).await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    let r = o.signed_claim(&c, next, Some(&admission)).await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert_eq!(mine(next.clone()).await["outcome"], "waitlisted");
    assert_eq!(o.claim_rows(&c, &["held"]).await, 0);
    // The first winner claims with her token.
    let r = o.signed_claim(&c, first, Some(&admission)).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    // The second never claims: when her window ends her unit passes to the first of the
    // waitlist, with a fresh window; the one after still waits.
    let m = eventually("the unit to pass", Duration::from_secs(30), || async {
        let m = mine(next.clone()).await;
        if m["outcome"] == "won" {
            Ok(m)
        } else {
            Err(m.to_string())
        }
    })
    .await;
    assert_eq!(mine(second.clone()).await["outcome"], "lapsed");
    assert_eq!(mine(first.clone()).await["outcome"], "won");
    assert_eq!(mine(after.clone()).await["outcome"], "waitlisted");
    let r = o
        .signed_claim(&c, next, Some(m["admission"].as_str().unwrap()))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(o.claim_rows(&c, &["held"]).await, 2);
    // The manager's counts: one unit passed down the waitlist, two claimed, one lapsed.
    assert_eq!(progress(o, &c).await, [6, 2, 4, 3, 1, 2, 1]);
    // The first winner's hold expires unpaid after her window: her unit passes on too.
    let m = eventually(
        "the expired hold's unit to pass",
        Duration::from_secs(60),
        || async {
            let m = mine(after.clone()).await;
            if m["outcome"] == "won" {
                Ok(m)
            } else {
                Err(m.to_string())
            }
        },
    )
    .await;
    assert_eq!(mine(first.clone()).await["outcome"], "lapsed");
    let r = o
        .signed_claim(&c, after, Some(m["admission"].as_str().unwrap()))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(o.claim_rows(&c, &["expired"]).await, 1);
    assert_eq!(o.claim_rows(&c, &["held"]).await, 2);
    assert_eq!(progress(o, &c).await, [6, 2, 4, 4, 2, 2, 2]);
}

/// `GET /admin/v1/campaigns/{c}/draw` with a viewer's token (the commitment checked against
/// the public one): entries, winners, waitlist, admitted, admitted from the waitlist, claimed,
/// lapsed.
async fn progress(o: &TestOrigin, c: &str) -> [i64; 7] {
    let path = format!("/admin/v1/campaigns/{c}/draw");
    let (s, p) = o
        .admin(Method::GET, &path, Some(o.viewer_token()), None)
        .await;
    assert_eq!(s, 200, "{p}");
    let (_, public) = status(o, c).await;
    assert_eq!(p["draw"]["commitment"], public["commitment"], "{p}");
    assert!(p["draw"].get("result").is_none(), "{p}");
    let n = |k: &str| p[k].as_i64().unwrap_or(-1);
    [
        n("entries"),
        n("winners"),
        n("waitlist"),
        n("admitted"),
        n("admitted_from_waitlist"),
        n("claimed"),
        n("lapsed"),
    ]
}

#[tokio::test]
async fn the_managers_view_of_a_draw_is_refused_without_a_token_and_for_other_campaigns() {
    let o = origin().await;
    let c = unique("progress");
    let now = Utc::now();
    o.create(&draw_campaign(
        &c,
        1,
        now,
        now + chrono::Duration::minutes(30),
    ))
    .await;
    let path = format!("/admin/v1/campaigns/{c}/draw");
    assert_eq!(o.admin(Method::GET, &path, None, None).await.0, 401);
    let sale = o.campaign("sale", 1).await;
    let (s, b) = o
        .admin(
            Method::GET,
            &format!("/admin/v1/campaigns/{sale}/draw"),
            Some(o.viewer_token()),
            None,
        )
        .await;
    assert_eq!((s, b["result"].as_str()), (409, Some("conflict")), "{b}");
    let (s, _) = o
        .admin(
            Method::GET,
            "/admin/v1/campaigns/no-such-draw/draw",
            Some(o.viewer_token()),
            None,
        )
        .await;
    assert_eq!(s, 404);
}
