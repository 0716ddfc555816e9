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
//! read runs inside the body deadline ([`super::body_deadline`]). A body that cannot be read
//! whole is answered here, whatever the headers say, as every body reader answers it
//! ([`super::extract::body_error`]): 408 `request_timeout` when it did not arrive in time, 400
//! `invalid_request` when it ended short (the client closed); no handler runs.

use axum::body::Body;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Largest declared body read before the handler runs, in bytes: the bound of the origin's
/// JSON bodies ([`super::extract::MAX_JSON_BODY_BYTES`], 64 KiB).
pub const MAX_BODY_READ_FIRST_BYTES: usize = super::extract::MAX_JSON_BODY_BYTES;

/// Middleware: reads a body whose `Content-Length` is 1..=[`MAX_BODY_READ_FIRST_BYTES`] into
/// memory, then runs the handler with it; a body that cannot be read whole is answered 408 or
/// 400 ([`super::extract::body_error`]).
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
    match axum::body::to_bytes(body, len).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(e) => super::extract::body_error(&e).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;
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
    async fn a_body_that_cannot_be_read_is_400_invalid_request_and_no_handler_runs() {
        let failing =
            futures::stream::once(async { Err::<Bytes, _>(std::io::Error::other("cut off")) });
        let req = axum::http::Request::post("/")
            .header(header::CONTENT_LENGTH, "10")
            .body(Body::from_stream(failing))
            .expect("request");
        let answer = call(req).await;
        assert!(answer.contains(r#""result":"invalid_request""#), "{answer}");
    }
}
