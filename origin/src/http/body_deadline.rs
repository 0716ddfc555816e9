//! A total deadline on reading a request body (`FLASHGATE_BODY_READ_TIMEOUT_MS`).
//!
//! tower-http's `RequestBodyTimeoutLayer` restarts its clock at every chunk, so a client that
//! drips one byte a second keeps a body open for as long as it likes. Here the clock starts when
//! the request arrives and is never reset: once it runs out, the next read of the body fails with
//! [`BodyDeadlineElapsed`], which the body reader answers as 408 `request_timeout`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::{sleep, Sleep};

/// The error a body read returns once its deadline has passed.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within its deadline")]
pub struct BodyDeadlineElapsed;

/// A body that fails with [`BodyDeadlineElapsed`] when it is still being read after its
/// deadline.
struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        // A frame that is ready wins over a deadline that passed at the same instant.
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyDeadlineElapsed)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Middleware: gives the request body a total read deadline of `limit` from now.
pub async fn body_deadline(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    let req = req.map(|inner| {
        Body::new(DeadlineBody {
            inner,
            deadline: Box::pin(sleep(limit)),
        })
    });
    next.run(req).await
}
