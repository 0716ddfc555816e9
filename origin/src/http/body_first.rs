//! Reads a small request body before any handler looks at the request.
//!
//! A handler that refuses a request on its headers alone (a bad token: 401, a bad
//! `Idempotency-Key`: 400, an unknown path: 404) used to answer before the body had been read.
//! hyper then closes the connection, as it cannot be reused with part of a request still
//! unread; when the body's bytes arrive after that close, the kernel answers them with a TCP
//! reset, and a client still writing its body can see "connection reset" instead of the 4xx
//! that was already on its way. The edge's `fetch` did, now and then under load, and answered
//! a refused redeem with 503 `unavailable`.
//! Reading the body first makes every answer arrive whole: the connection stays usable and
//! nothing is left unread when the answer goes out.
//!
//! Only a body with a declared `Content-Length` of at most [`MAX_BODY_READ_FIRST_BYTES`] is read
//! first: every JSON body but a gift segment's member list (up to 4 MiB, read by its handler
//! once the manager's token passed, so that no one without a token makes the origin hold
//! megabytes). A larger or chunked body is left to its handler, which refuses one past its
//! bound with 413 after draining it ([`super::extract::read_body`]). The
//! read runs inside the body deadline ([`super::body_deadline`]): a body that does not arrive in
//! time reaches the handler as the same read error (408 `request_timeout`).

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;

/// Largest declared body read before the handler runs, in bytes: the bound of the origin's
/// JSON bodies ([`super::extract::MAX_JSON_BODY_BYTES`], 64 KiB).
pub const MAX_BODY_READ_FIRST_BYTES: usize = super::extract::MAX_JSON_BODY_BYTES;

/// Middleware: reads a body whose `Content-Length` is 1..=[`MAX_BODY_READ_FIRST_BYTES`] into
/// memory, then runs the handler with it. A read error is handed on as the body's first
/// frame, so the handler answers it as before.
pub async fn read_body_first(req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let Some(len) = declared.filter(|n| (1..=MAX_BODY_READ_FIRST_BYTES).contains(n)) else {
        return next.run(req).await;
    };
    let (parts, body) = req.into_parts();
    // hyper ends a body at its Content-Length, so `len` bounds what is kept.
    let body = match axum::body::to_bytes(body, len).await {
        Ok(bytes) => Body::from(bytes),
        Err(e) => Body::from_stream(futures::stream::once(async move { Err::<Bytes, _>(e) })),
    };
    next.run(Request::from_parts(parts, body)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::post;
    use axum::Router;
    use tower::ServiceExt;

    /// A handler that reports whether its body had all arrived when it first looked.
    async fn peek(body: Body) -> String {
        use http_body::Body as _;
        let whole = body.is_end_stream() || body.size_hint().exact().is_some();
        let bytes = axum::body::to_bytes(body, usize::MAX).await;
        format!(
            "{whole} {:?}",
            bytes.map(|b| b.len()).map_err(|e| e.to_string())
        )
    }

    fn app() -> Router {
        Router::new()
            .route("/", post(peek))
            .layer(axum::middleware::from_fn(read_body_first))
    }

    async fn call(req: axum::http::Request<Body>) -> String {
        let res = app().oneshot(req).await.expect("answer");
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .expect("body");
        String::from_utf8(bytes.to_vec()).expect("utf-8")
    }

    #[tokio::test]
    async fn a_declared_body_that_arrives_late_is_whole_before_the_handler_runs() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Bytes, std::io::Error>>();
        let sender = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            tx.unbounded_send(Ok(Bytes::from_static(b"{\"a\":1}")))
                .expect("send");
        });
        let req = axum::http::Request::post("/")
            .header(header::CONTENT_LENGTH, "7")
            .body(Body::from_stream(rx))
            .expect("request");
        assert_eq!(call(req).await, "true Ok(7)");
        sender.await.expect("sender");
    }

    #[tokio::test]
    async fn a_chunked_body_is_left_to_the_handler() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Bytes, std::io::Error>>();
        tx.unbounded_send(Ok(Bytes::from_static(b"{}")))
            .expect("send");
        drop(tx);
        let req = axum::http::Request::post("/")
            .body(Body::from_stream(rx))
            .expect("request");
        assert_eq!(call(req).await, "false Ok(2)");
    }

    #[tokio::test]
    async fn a_read_error_reaches_the_handler_as_a_read_error() {
        let failing =
            futures::stream::once(async { Err::<Bytes, _>(std::io::Error::other("cut off")) });
        let req = axum::http::Request::post("/")
            .header(header::CONTENT_LENGTH, "10")
            .body(Body::from_stream(failing))
            .expect("request");
        assert_eq!(call(req).await, "false Err(\"cut off\")");
    }
}
