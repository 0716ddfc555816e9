//! Start-up and shutdown of the origin: connect, load the gates, start background tasks, serve
//! until told to stop, then finish in-flight requests (graceful shutdown).

use std::net::SocketAddr;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::state::AppState;

/// A running origin (used by `flashgate serve` and by in-process tests).
pub struct RunningOrigin {
    /// The bound address (useful with port 0).
    pub addr: SocketAddr,
    /// The state the handlers share, for tests that look inside.
    pub state: AppState,
    stop: watch::Sender<bool>,
    server: JoinHandle<std::io::Result<()>>,
}

impl RunningOrigin {
    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, finishes in-flight requests and background tasks, and returns.
    pub async fn shutdown(self) -> std::io::Result<()> {
        let _ = self.stop.send(true);
        self.server.await.unwrap_or(Ok(()))
    }
}

/// Connects, applies migrations, loads the gates and starts serving on `config.listen`.
pub async fn spawn(config: Config) -> anyhow::Result<RunningOrigin> {
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let state = AppState::connect(config).await?;
    let (stop, stop_rx) = watch::channel(false);

    load_gates(&state).await;
    crate::tasks::start(&state, stop_rx.clone());

    let app = crate::http::router(state.clone());
    let mut rx = stop_rx;
    // Records each connection's TCP peer address: the client IP of an unsigned request.
    let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = rx.wait_for(|stop| *stop).await;
            })
            .await
    });
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
    let mut redis = state.redis.clone();
    match crate::campaigns::store::live(&state.db).await {
        Ok(live) => {
            for c in live {
                let loaded = crate::gate::load::is_loaded(&mut redis, &c.id)
                    .await
                    .unwrap_or(false);
                if !loaded {
                    if let Err(e) = crate::gate::load::load(&state.db, &mut redis, &c.id).await {
                        tracing::warn!(campaign = %c.id, error = %e, "gate load at start-up failed");
                    }
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not list campaigns at start-up"),
    }
}
