//! A request the origin drops without any answer (what a client sees when the origin closes an
//! idle keep-alive connection just as the runtime reuses it): the edge, in the real runtime,
//! sends a `GET` or a request with an `Idempotency-Key` once more and relays the answer; any
//! other request gets the edge's 503 `unavailable` and is never sent twice. The "origin" here
//! is a small HTTP/1.1 server of the test that drops the next N requests it reads and answers
//! the others with `{"fake":"origin"}`, counting each by method, path and key.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use flashgate_tests::support::{edge_with as edge, get, reply, EdgeSettings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The test's origin: drops the next `drop_next` requests (closing their connection unanswered)
/// and answers the rest; `seen` lists every request read as `METHOD path key?`.
struct DroppingOrigin {
    url: String,
    drop_next: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<String>>>,
    server: tokio::task::JoinHandle<()>,
}

impl DroppingOrigin {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let drop_next = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (d, s) = (drop_next.clone(), seen.clone());
        let server = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve(sock, d.clone(), s.clone()));
            }
        });
        DroppingOrigin {
            url,
            drop_next,
            seen,
            server,
        }
    }

    fn seen(&self, what: &str) -> usize {
        let seen = self.seen.lock().expect("seen");
        seen.iter().filter(|s| s.as_str() == what).count()
    }
}

impl Drop for DroppingOrigin {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// One keep-alive connection: reads each request (head, then a `Content-Length` body), drops
/// the connection when a drop is armed, else answers 200.
async fn serve(
    mut sock: tokio::net::TcpStream,
    drop_next: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<String>>>,
) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if matches!(sock.read_buf(&mut buf).await, Ok(0) | Err(_)) {
                return;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let header = |name: &str| {
            head.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}: ")).map(str::to_string))
        };
        let length: usize = header("content-length")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            if matches!(sock.read_buf(&mut buf).await, Ok(0) | Err(_)) {
                return;
            }
        }
        let line = head.lines().next().unwrap_or_default().to_string();
        let mut parts = line.split(' ');
        let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let keyed = if header("idempotency-key").is_some() {
            " keyed"
        } else {
            ""
        };
        seen.lock()
            .expect("seen")
            .push(format!("{} {path}{keyed}", method.to_uppercase()));
        buf.drain(..head_end + length);
        let armed = drop_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if armed {
            return; // closes the connection with no answer
        }
        let body = br#"{"fake":"origin"}"#;
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        if sock.write_all(answer.as_bytes()).await.is_err() || sock.write_all(body).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_dropped_unanswered_is_sent_again_only_when_safe_or_keyed() {
    let origin = DroppingOrigin::start().await;
    let e = edge(&origin.url, EdgeSettings::default());
    let http = reqwest::Client::new();

    // A GET (passed through): the first try is dropped, the second answered.
    origin.drop_next.store(1, Ordering::SeqCst);
    let r = get(&http, &format!("{}/openapi.json", e.url)).await;
    assert_eq!((r.status, r.by.as_str()), (200, "origin"), "{r:?}");
    assert_eq!(r.json()["fake"], "origin");
    assert_eq!(
        origin.seen("GET /openapi.json"),
        2,
        "dropped, then sent again"
    );

    // A POST without an Idempotency-Key is never sent twice: the edge's 503.
    origin.drop_next.store(1, Ordering::SeqCst);
    let post = || {
        http.post(format!("{}/api/v1/codes/SPRING10/check", e.url))
            .bearer_auth("some-customer-token")
            .header("content-type", "application/json")
            .body("{}")
    };
    let r = reply(post().send().await.expect("POST")).await;
    assert_eq!((r.status, r.by.as_str()), (503, "edge"), "{r:?}");
    assert_eq!(r.json()["result"], "unavailable");
    assert_eq!(
        origin.seen("POST /api/v1/codes/spring10/check"),
        1,
        "sent once"
    );

    // The same POST with an Idempotency-Key: the origin would replay it, so it is sent again.
    origin.drop_next.store(1, Ordering::SeqCst);
    let r = reply(
        post()
            .header("idempotency-key", "check-1")
            .send()
            .await
            .expect("POST"),
    )
    .await;
    assert_eq!((r.status, r.by.as_str()), (200, "origin"), "{r:?}");
    assert_eq!(origin.seen("POST /api/v1/codes/spring10/check keyed"), 2);

    // Two drops in a row: one more try only, then the edge's 503.
    origin.drop_next.store(2, Ordering::SeqCst);
    let r = get(&http, &format!("{}/openapi.json", e.url)).await;
    assert_eq!((r.status, r.by.as_str()), (503, "edge"), "{r:?}");
    assert_eq!(origin.seen("GET /openapi.json"), 4);
}
