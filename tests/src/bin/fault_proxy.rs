//! `fault_proxy`: a TCP proxy that loses replies, for `scripts/chaos`.
//!
//! It forwards every byte both ways between its clients and one upstream (Redis, or an origin
//! behind HAProxy). While its fault is on, a reply chunk read from the upstream is, with the
//! probability `--drop-share`, thrown away and both connections of that client are closed: the
//! upstream received the request and acted on it (a gate take ran, a claim committed), the
//! client never hears the answer. That is the "unknown result" a client must survive by
//! retrying with the same idempotency key.
//!
//! `SIGUSR1` turns the fault on, `SIGUSR2` turns it off (each prints one line to stderr with
//! the counts so far); `SIGTERM`/`SIGINT` end the proxy. Which chunks are lost is drawn from
//! one generator seeded with `--seed`, so a run's choices repeat for the same order of chunks;
//! with `--seed-file`, each `SIGUSR1` first seeds it again from that file (one integer), so one
//! long-lived proxy serves runs of several seeds.
//!
//! Exit status: 0 after a signal to end, 2 when it cannot listen or its flags are wrong.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{signal, SignalKind};

/// A TCP proxy that loses a share of the upstream's replies while its fault is on.
#[derive(Parser, Debug)]
#[command(name = "fault_proxy")]
struct Args {
    /// Address to listen on (port 0: any free port, written to --port-file).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The upstream every connection is forwarded to.
    #[arg(long)]
    upstream: SocketAddr,
    /// Share (0..=1) of the upstream's reply chunks lost while the fault is on.
    #[arg(long, default_value_t = 0.2, value_parser = share)]
    drop_share: f64,
    /// Seed of the generator that picks the lost replies.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Read the seed from this file at each SIGUSR1 (when it holds an integer).
    #[arg(long)]
    seed_file: Option<PathBuf>,
    /// Write the port listened on here (one line) once listening.
    #[arg(long)]
    port_file: Option<PathBuf>,
    /// Start with the fault on.
    #[arg(long)]
    faulty: bool,
}

fn share(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is not within 0..=1"))
    }
}

/// What every connection shares.
struct Shared {
    upstream: SocketAddr,
    drop_share: f64,
    faulty: AtomicBool,
    rng: Mutex<StdRng>,
    connections: AtomicU64,
    lost: AtomicU64,
}

impl Shared {
    /// True when this reply chunk is to be lost.
    fn lose(&self) -> bool {
        if !self.faulty.load(Ordering::Relaxed) {
            return false;
        }
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        rng.random_bool(self.drop_share)
    }

    fn report(&self, what: &str) {
        eprintln!(
            "fault_proxy: {what} ({} connections, {} replies lost so far)",
            self.connections.load(Ordering::Relaxed),
            self.lost.load(Ordering::Relaxed)
        );
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fault_proxy: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fault_proxy: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    use anyhow::Context;
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let port = listener.local_addr()?.port();
    if let Some(path) = &args.port_file {
        std::fs::write(path, format!("{port}\n"))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let shared = Arc::new(Shared {
        upstream: args.upstream,
        drop_share: args.drop_share,
        faulty: AtomicBool::new(args.faulty),
        rng: Mutex::new(StdRng::seed_from_u64(args.seed)),
        connections: AtomicU64::new(0),
        lost: AtomicU64::new(0),
    });
    eprintln!(
        "fault_proxy: 127.0.0.1:{port} -> {} (drop share {}, seed {})",
        args.upstream, args.drop_share, args.seed
    );
    let (mut on, mut off) = (
        signal(SignalKind::user_defined1())?,
        signal(SignalKind::user_defined2())?,
    );
    let (mut term, mut int) = (
        signal(SignalKind::terminate())?,
        signal(SignalKind::interrupt())?,
    );
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                shared.connections.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(forward(client, Arc::clone(&shared)));
            }
            _ = on.recv() => {
                let seed = args.seed_file.as_ref().and_then(|f| std::fs::read_to_string(f).ok());
                if let Some(seed) = seed.and_then(|s| s.trim().parse::<u64>().ok()) {
                    *shared.rng.lock().unwrap_or_else(|p| p.into_inner()) =
                        StdRng::seed_from_u64(seed);
                    eprintln!("fault_proxy: seed {seed}");
                }
                shared.faulty.store(true, Ordering::Relaxed);
                shared.report("losing replies");
            }
            _ = off.recv() => {
                shared.faulty.store(false, Ordering::Relaxed);
                shared.report("forwarding every reply");
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    shared.report("stopped");
    Ok(())
}

/// Forwards one client both ways until either side closes, or a reply is lost.
async fn forward(client: TcpStream, shared: Arc<Shared>) {
    let Ok(upstream) = TcpStream::connect(shared.upstream).await else {
        return; // the client sees its connection closed, as with the upstream down
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut upstream_read, mut upstream_write) = upstream.into_split();
    let requests = async {
        let _ = tokio::io::copy(&mut client_read, &mut upstream_write).await;
        let _ = upstream_write.shutdown().await;
    };
    let replies = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match upstream_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if shared.lose() {
                shared.lost.fetch_add(1, Ordering::Relaxed);
                return; // dropping both halves closes both connections
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = client_write.shutdown().await;
    };
    // A lost reply ends the connection at once; otherwise each direction ends on its own.
    tokio::select! {
        () = replies => {}
        () = async { requests.await; std::future::pending::<()>().await } => {}
    }
}
