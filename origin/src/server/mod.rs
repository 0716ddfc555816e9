//! Start-up and shutdown of the origin: connect, load the gates, start background tasks, serve
//! until told to stop, then finish in-flight requests (graceful shutdown).

pub mod tasks;

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::connect_info::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::config::Config;
use crate::state::AppState;

/// A running origin (used by `flashgate serve` and by in-process tests).
pub struct RunningOrigin {
    /// The bound address (useful with port 0).
    pub addr: SocketAddr,
    /// The state the handlers share, for tests that look inside.
    pub state: AppState,
    stop: CancellationToken,
    server: JoinHandle<std::io::Result<()>>,
}

impl RunningOrigin {
    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, finishes in-flight requests (at most `FLASHGATE_SHUTDOWN_TIMEOUT_MS`),
    /// then cancels the background tasks and joins every task of `state.tasks` within the same
    /// bound, and returns. Tasks still running past it are logged and left to the runtime.
    pub async fn shutdown(self) -> std::io::Result<()> {
        self.stop.cancel();
        let served = self.server.await.unwrap_or(Ok(()));
        let tasks = &self.state.tasks;
        tasks.close();
        let deadline = Duration::from_millis(self.state.config.shutdown_timeout_ms);
        if tokio::time::timeout(deadline, tasks.wait()).await.is_err() {
            tracing::warn!(
                running = tasks.len(),
                "shutdown deadline passed with background tasks still running"
            );
        } else {
            // Every request and task is done: nothing of this origin is in flight, so the
            // others may settle what it left at once.
            let mut gate = self.state.gate.clone();
            let _ = crate::gate::takes::drop_lease(&mut gate, self.state.takes.origin()).await;
        }
        served
    }
}

/// Connects, applies migrations, loads the gates and starts serving on `config.listen`.
pub async fn spawn(config: Config) -> anyhow::Result<RunningOrigin> {
    let listener = TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let state = AppState::connect(config).await?;
    let stop = CancellationToken::new();

    load_gates(&state).await;
    tasks::start(&state, &stop);

    let app = crate::http::router(state.clone());
    let limits = ConnectionLimits {
        header_read: Duration::from_millis(state.config.header_read_timeout_ms),
        shutdown: Duration::from_millis(state.config.shutdown_timeout_ms),
    };
    let fast = crate::http::fast::FastPath::new(state.clone());
    let server = tokio::spawn(serve(listener, app, fast, stop.clone(), limits));
    tracing::info!(%addr, "origin listening");
    Ok(RunningOrigin {
        addr,
        state,
        stop,
        server,
    })
}

/// Loads the gate of every campaign that has not ended. A campaign whose gate is already
/// loaded (another origin did it) is left alone.
async fn load_gates(state: &AppState) {
    let mut redis = state.gate.clone();
    match crate::campaigns::store::live(&state.db).await {
        Ok(live) => {
            for c in live {
                // Checked under the load lock: origins starting together load each gate once.
                let load = crate::gate::load::load_missing(&state.db, &mut redis, &c.id);
                if let Err(e) = load.await {
                    tracing::warn!(campaign = %c.id, error = %e, "gate load at start-up failed");
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not list campaigns at start-up"),
    }
}

/// Per-connection bounds of the accept loop.
#[derive(Debug, Clone, Copy)]
struct ConnectionLimits {
    /// `FLASHGATE_HEADER_READ_TIMEOUT_MS`: a request's line and headers must arrive within it.
    header_read: Duration,
    /// `FLASHGATE_SHUTDOWN_TIMEOUT_MS`: in-flight requests may run this long after a stop.
    shutdown: Duration,
}

/// The accept loop: HTTP/1.1 with hyper's header-read timeout (a client that drips its
/// headers is disconnected), the peer address as [`ConnectInfo`], each request offered to the
/// sold-out fast path `fast` first ([`crate::http::fast`]), and on stop a graceful
/// shutdown (no new connections; idle ones closed; in-flight requests answered) bounded by
/// `limits.shutdown`, after which the connections left are dropped.
async fn serve(
    listener: TcpListener,
    app: Router,
    fast: Option<std::sync::Arc<crate::http::fast::FastPath>>,
    stop: CancellationToken,
    limits: ConnectionLimits,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let stopped = stop.cancelled();
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let (app, fast) = (app.clone(), fast.clone());
                let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
                    req.extensions_mut().insert(ConnectInfo(peer));
                    let (app, fast) = (app.clone(), fast.clone());
                    async move {
                        let mut req = req.map(axum::body::Body::new);
                        if let Some(fast) = fast {
                            // Outside the router's panic layer: a panic here is answered like
                            // one in a handler (503 `unavailable`), not by a dropped connection.
                            let answer = std::panic::AssertUnwindSafe(fast.answer(req));
                            match futures::FutureExt::catch_unwind(answer).await {
                                Ok(Ok(res)) => return Ok(res),
                                Ok(Err(passed)) => req = passed,
                                Err(panic) => return Ok(crate::http::panic_reply(panic)),
                            }
                        }
                        app.oneshot(req).await
                    }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(limits.header_read)
                    .serve_connection(TokioIo::new(stream), service);
                let conn = graceful.watch(conn);
                connections.spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = &mut stopped => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(limits.shutdown, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            open = connections.len(),
            "shutdown deadline passed; closing the connections left"
        );
    }
    connections.abort_all();
    Ok(())
}
