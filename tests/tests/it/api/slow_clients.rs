//! Bounded time for slow or stuck clients and slow statements: headers that
//! drip in are cut off, a body that never finishes is 408, a request past its deadline is 408,
//! a request refused on its headers is answered whole when its body comes late,
//! a PostgreSQL statement cancelled by `statement_timeout` is 503 + `Retry-After`, and a value
//! PostgreSQL refuses is a 4xx, never a 503. Real origin over raw TCP, real PostgreSQL.

use std::time::{Duration, Instant};

use axum::response::IntoResponse;
use flashgate_origin::error::ApiError;
use flashgate_tests::support::{test_config, TestOrigin};
use sqlx::postgres::PgPoolOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads an answer with a JSON body: until the server closes the connection, the bytes end
/// with `}` (the body is complete), or `deadline` passes.
async fn read_answer(stream: &mut TcpStream, deadline: Instant) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline && !got.ends_with(b"}") {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
    got
}

fn addr(o: &TestOrigin) -> String {
    o.url.trim_start_matches("http://").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_dripped_a_byte_at_a_time_are_cut_off_within_the_header_read_bound() {
    let mut config = test_config();
    config.header_read_timeout_ms = 600;
    let o = TestOrigin::start_with(config).await;
    let mut s = TcpStream::connect(addr(&o)).await.expect("connect");
    let started = Instant::now();
    let request = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ".to_vec();
    let filler = std::iter::repeat(b'a');
    let mut closed_after = None;
    let mut buf = [0u8; 1024];
    // One byte every 100 ms, never ending the headers; stop when the server hangs up.
    for b in request.into_iter().chain(filler).take(100) {
        if s.write_all(&[b]).await.is_err() {
            closed_after = Some(started.elapsed());
            break;
        }
        match tokio::time::timeout(Duration::from_millis(100), s.read(&mut buf)).await {
            Ok(Ok(_)) | Ok(Err(_)) => {
                // Closed (0 bytes / reset) or a final answer (408) before the close.
                closed_after = Some(started.elapsed());
                break;
            }
            Err(_) => {}
        }
    }
    let closed_after = closed_after.expect("the server never cut off a client dripping headers");
    assert!(
        closed_after >= Duration::from_millis(500) && closed_after < Duration::from_millis(2_600),
        "cut off after {closed_after:?}, bound 600 ms"
    );
    // The origin still serves everyone else.
    let ok = o
        .http
        .get(format!("{}/healthz", o.url))
        .send()
        .await
        .expect("healthz");
    assert_eq!(ok.status(), 200);
    o.stop().await;
}

/// Sends the head of a pay call announcing a 100-byte body, then only part of it.
async fn start_unfinished_body(o: &TestOrigin) -> TcpStream {
    let mut s = TcpStream::connect(addr(o)).await.expect("connect");
    let head = format!(
        "POST /api/v1/claims/c_0123/pay HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"payment_r",
        o.config.service_token.expose()
    );
    s.write_all(head.as_bytes()).await.expect("write");
    s
}

fn assert_408(answer: &[u8]) {
    let text = String::from_utf8_lossy(answer);
    assert!(text.starts_with("HTTP/1.1 408"), "answer: {text}");
    assert!(
        text.contains(r#""result":"request_timeout""#) && text.contains(r#""message":"#),
        "documented error body: {text}"
    );
}

/// Starts an origin with `config`, sends a body that never finishes, checks the answer is a
/// 408 with the documented body, and returns how long it took.
async fn time_to_408(config: flashgate_origin::config::Config) -> Duration {
    let o = TestOrigin::start_with(config).await;
    let started = Instant::now();
    let mut s = start_unfinished_body(&o).await;
    let answer = read_answer(&mut s, Instant::now() + Duration::from_secs(5)).await;
    let took = started.elapsed();
    assert_408(&answer);
    o.stop().await;
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_finishes_is_408_within_the_body_read_bound() {
    let mut config = test_config();
    config.body_read_timeout_ms = 500;
    let took = time_to_408(config).await;
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_millis(2_500),
        "answered after {took:?}, bound 500 ms"
    );
}

/// The body deadline is a total, not a gap between bytes: a body dripped one byte every 100 ms
/// (each gap well inside the 600 ms bound, 10 s in all) is cut off at the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_dripped_a_byte_at_a_time_is_408_at_the_body_read_bound() {
    let mut config = test_config();
    config.body_read_timeout_ms = 600;
    let o = TestOrigin::start_with(config).await;
    let started = Instant::now();
    let s = start_unfinished_body(&o).await;
    let (mut read, mut write) = s.into_split();
    let drip = tokio::spawn(async move {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if write.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && !answer.ends_with(b"}") {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, read.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
        }
    }
    let took = started.elapsed();
    drip.abort();
    assert_408(&answer);
    assert!(
        took >= Duration::from_millis(550) && took < Duration::from_millis(3_000),
        "answered after {took:?}, bound 600 ms, the drip would take 10 s"
    );
    o.stop().await;
}

/// A request that would be refused on its headers (a bad `Idempotency-Key`) whose body never
/// finishes is 408, as any body that does not arrive in time: the body is read first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_refused_on_its_headers_whose_body_never_finishes_is_408() {
    let mut config = test_config();
    config.body_read_timeout_ms = 500;
    let o = TestOrigin::start_with(config).await;
    let mut s = TcpStream::connect(addr(&o)).await.expect("connect");
    let head = format!(
        "POST /api/v1/coupons/ABCDEFGHJKMN/redeem HTTP/1.1\r\nHost: x\r\n\
         Authorization: Bearer {}\r\nIdempotency-Key: {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"store",
        o.config.service_token.expose(),
        "k".repeat(256),
    );
    s.write_all(head.as_bytes()).await.expect("write");
    let answer = read_answer(&mut s, Instant::now() + Duration::from_secs(5)).await;
    assert_408(&answer);
    o.stop().await;
}

/// A request refused on its headers alone (an `Idempotency-Key` of 256 characters on a
/// redeem: 400) whose body comes 200 ms after them: the 400 arrives whole once the body is in,
/// and the same connection then serves another request. Answered before the body, hyper
/// closed the connection with the body unread and the late body drew a reset (what the edge
/// answered as 503: `http::body_first`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_refused_on_its_headers_is_answered_whole_when_its_body_comes_late() {
    let o = TestOrigin::start().await;
    let mut s = TcpStream::connect(addr(&o)).await.expect("connect");
    let body = br#"{"store":"s-1"}"#;
    let head = format!(
        "POST /api/v1/coupons/ABCDEFGHJKMN/redeem HTTP/1.1\r\nHost: x\r\n\
         Authorization: Bearer {}\r\nIdempotency-Key: {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        o.config.service_token.expose(),
        "k".repeat(256),
        body.len()
    );
    s.write_all(head.as_bytes()).await.expect("write head");
    // Nothing is answered while the body is still on its way.
    let mut buf = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(200), s.peek(&mut buf)).await;
    assert!(early.is_err(), "answered before the body came: {early:?}");
    s.write_all(body)
        .await
        .expect("the body is taken, not reset");
    let answer = read_answer(&mut s, Instant::now() + Duration::from_secs(5)).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 400"), "answer: {text}");
    assert!(
        text.contains(r#""result":"invalid_idempotency_key""#),
        "documented error body: {text}"
    );
    assert!(
        !text.to_ascii_lowercase().contains("connection: close"),
        "the connection stays usable: {text}"
    );
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write the second request");
    let second = read_answer(&mut s, Instant::now() + Duration::from_secs(5)).await;
    let second = String::from_utf8_lossy(&second);
    assert!(
        second.starts_with("HTTP/1.1 200"),
        "second answer: {second}"
    );
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_its_deadline_is_408() {
    let mut config = test_config();
    config.body_read_timeout_ms = 30_000;
    config.request_timeout_ms = 500;
    let took = time_to_408(config).await;
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_millis(2_500),
        "answered after {took:?}, bound 500 ms"
    );
}

/// The status, `Retry-After` and JSON body an error is answered with.
async fn answer_of(e: ApiError) -> (u16, Option<String>, serde_json::Value) {
    let res = e.into_response();
    let status = res.status().as_u16();
    let retry = res
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().expect("ascii").to_string());
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 16)
        .await
        .expect("body");
    (
        status,
        retry,
        serde_json::from_slice(&bytes).expect("json body"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_cancelled_by_statement_timeout_is_503_with_retry_after() {
    let mut config = test_config();
    config.db_statement_timeout_ms = 1_234;
    // The origin's own pool runs with the configured statement_timeout.
    let o = TestOrigin::start_with(config.clone()).await;
    let shown: String = sqlx::query_scalar("SHOW statement_timeout")
        .fetch_one(&o.origin.state.db)
        .await
        .expect("show");
    assert_eq!(shown, "1234ms");
    // A pool with the same options and a tiny timeout: pg_sleep is cancelled (SQLSTATE 57014).
    config.db_statement_timeout_ms = 50;
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(config.pg_options().expect("options"))
        .await
        .expect("pool");
    let started = Instant::now();
    let err = sqlx::query("SELECT pg_sleep(5)")
        .execute(&pool)
        .await
        .expect_err("cancelled by statement_timeout");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(
        err.as_database_error().and_then(|d| d.code()).as_deref(),
        Some("57014")
    );
    let (status, retry, body) = answer_of(ApiError::from(err)).await;
    assert_eq!((status, retry.as_deref()), (503, Some("1")));
    assert_eq!(body["result"], "unavailable");
    assert!(body["message"].is_string());
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_postgresql_refuses_is_a_4xx_never_a_503() {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(test_config().pg_options().expect("options"))
        .await
        .expect("pool");
    // A NUL byte in text: SQLSTATE 22021 (data exception) → 422.
    let err = sqlx::query("SELECT $1::text")
        .bind("bad\u{0}name")
        .execute(&pool)
        .await
        .expect_err("PostgreSQL refuses NUL in text");
    assert_eq!(
        err.as_database_error().and_then(|d| d.code()).as_deref(),
        Some("22021")
    );
    let (status, retry, body) = answer_of(ApiError::from(err)).await;
    assert_eq!((status, retry), (422, None));
    assert_eq!(body["result"], "validation_failed");
    // Out of range: 22003 → 422.
    let err = sqlx::query("SELECT $1::int4 + 2147483647")
        .bind(1i32)
        .execute(&pool)
        .await
        .expect_err("integer out of range");
    assert_eq!(answer_of(ApiError::from(err)).await.0, 422);
    // A unique violation: 23505 → 409 conflict.
    let mut conn = pool.acquire().await.expect("conn");
    sqlx::query("CREATE TEMP TABLE t_unique (x int PRIMARY KEY)")
        .execute(&mut *conn)
        .await
        .expect("temp table");
    sqlx::query("INSERT INTO t_unique VALUES (1)")
        .execute(&mut *conn)
        .await
        .expect("first row");
    let err = sqlx::query("INSERT INTO t_unique VALUES (1)")
        .execute(&mut *conn)
        .await
        .expect_err("duplicate");
    let (status, _, body) = answer_of(ApiError::from(err)).await;
    assert_eq!((status, body["result"].as_str()), (409, Some("conflict")));
}

/// Shutdown cancels and joins every background task (the sweepers, the stale-take settler)
/// within `FLASHGATE_SHUTDOWN_TIMEOUT_MS`: once `shutdown` returns, none is left running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_joins_every_background_task_within_its_deadline() {
    let mut config = test_config();
    config.shutdown_timeout_ms = 5_000;
    let o = TestOrigin::start_with(config).await;
    let tasks = o.origin.state.tasks.clone();
    assert!(
        tasks.len() >= 3,
        "the background loops run: {}",
        tasks.len()
    );
    let started = Instant::now();
    o.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(tasks.is_closed());
    assert_eq!(tasks.len(), 0, "every task was joined");
}

/// A webhook receiver that accepts the relay's connection and never answers holds a call for
/// its whole timeout (15 s); shutdown drops that call (its row is leased and sent again when the
/// lease ends) instead of waiting for it past `FLASHGATE_SHUTDOWN_TIMEOUT_MS`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_does_not_wait_for_a_webhook_receiver_that_never_answers() {
    use flashgate_tests::support::unique;
    use flashgate_tests::webhooks::{register, unregister};
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hook", silent.local_addr().expect("addr"));
    let (accepted_tx, mut accepted) = tokio::sync::mpsc::channel::<TcpStream>(64);
    tokio::spawn(async move {
        while let Ok((stream, _)) = silent.accept().await {
            // Kept open, never read nor answered.
            let _ = accepted_tx.send(stream).await;
        }
    });
    // A database of its own: no other test's origin relays this delivery, so the call under
    // way at the stop is this origin's.
    let own = flashgate_tests::support::own_services(test_config(), "silent_hook").await;
    let mut config = own.config.clone();
    config.shutdown_timeout_ms = 5_000;
    let o = TestOrigin::start_with(config).await;
    let (endpoint, _) = register(&o, &url, &["claim.held"]).await;
    let c = o.campaign("sale", 1).await;
    let (status, body) = o.claim(&c, &unique("ana"), "k").await;
    assert_eq!(status, 201, "{body}");
    let held = tokio::time::timeout(Duration::from_secs(30), accepted.recv())
        .await
        .expect("the relay calls the receiver within 30 s")
        .expect("a connection");
    // Later events are not queued for it; the call under way goes on.
    unregister(&o, &endpoint).await;
    let tasks = o.origin.state.tasks.clone();
    let started = Instant::now();
    o.stop().await;
    let took = started.elapsed();
    drop(held);
    own.release().await;
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
    assert_eq!(tasks.len(), 0, "every task was joined");
}
