//! What the edge passes through to the origin, in plain workerd (the scripts' runtime) in front
//! of a real origin over real PostgreSQL and Redis, over raw TCP: the headers it keeps back
//! (`Expect`, `Upgrade`: `decide::passes_on`) and a body that ends short of its
//! `Content-Length`, which is never forwarded (`decide::unreadable_body`).

use std::time::Duration;

use flashgate_tests::support::{edge_with as edge, unique, EdgeRuntime, EdgeSettings, TestOrigin};

/// Sends `head` then `body` to `addr` over raw TCP (the body 100 ms later, as a client that
/// asked `Expect: 100-continue` would), closes the write side, and returns the answer's text.
async fn raw_exchange(addr: &str, head: &str, body: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(head.as_bytes()).await.expect("head");
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.write_all(body).await.expect("body");
    s.shutdown().await.expect("shutdown");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// In plain workerd (the scripts' runtime): a pass-through with `Expect: 100-continue` or
/// `Upgrade` gets the origin's own answer (both are kept back: the edge forwards a body it has
/// read whole), and a redeem whose body ends short of its `Content-Length` is 400
/// `invalid_request` at the edge and redeems nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expect_and_upgrade_are_kept_back_and_a_cut_body_forwards_nothing() {
    let o = TestOrigin::start().await;
    let e = edge(
        &o.url,
        EdgeSettings {
            runtime: EdgeRuntime::Workerd,
            ..EdgeSettings::default()
        },
    );
    let c = o.campaign("giveaway", 1).await;
    let (status, won) = o.claim(&c, &unique("ana"), &unique("k")).await;
    assert_eq!(status, 201, "{won}");
    let code = won["claim"]["code"]
        .as_str()
        .expect("coupon code")
        .to_string();
    let path = format!("/api/v1/coupons/{code}/redeem");
    let token = o.config.service_token.expose().to_string();
    for extra in [
        "Expect: 100-continue\r\n",
        "Upgrade: websocket\r\nConnection: Upgrade\r\n",
    ] {
        let body = br#"{"store":"s-1"}"#;
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
             Idempotency-Key: {}\r\nContent-Type: application/json\r\n{extra}\
             Content-Length: {}\r\n\r\n",
            "k".repeat(256),
            body.len()
        );
        let answer = raw_exchange(e.url.trim_start_matches("http://"), &head, body).await;
        assert!(
            answer.contains(r#""result":"invalid_idempotency_key""#)
                && answer
                    .to_ascii_lowercase()
                    .contains("flashgate-answered-by: origin"),
            "{extra:?}: {answer}"
        );
    }
    // 10 of the 100 bytes it announced, then the client closes.
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Idempotency-Key: {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
        unique("pos")
    );
    let answer = raw_exchange(e.url.trim_start_matches("http://"), &head, br#"{"store":""#).await;
    assert!(
        answer.is_empty() || answer.contains(r#""result":"invalid_request""#),
        "a cut body: {answer}"
    );
    let coupon = o
        .http
        .get(format!("{}/api/v1/coupons/{code}", o.url))
        .bearer_auth(&token)
        .send()
        .await
        .expect("coupon");
    let coupon: serde_json::Value = coupon.json().await.expect("coupon json");
    assert_eq!(coupon["status"], "issued", "nothing redeemed: {coupon}");
    o.stop().await;
}
