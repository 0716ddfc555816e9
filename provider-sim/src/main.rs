//! `provider-sim`: the mobile-credit provider simulator (see the library documentation).

use clap::Parser;
use flashgate_provider_sim::{spawn, Faults};

#[derive(Parser)]
#[command(
    name = "provider-sim",
    about = "Mobile-credit provider simulator with injected faults"
)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "PROVIDER_SIM_LISTEN", default_value = "127.0.0.1:7070")]
    listen: std::net::SocketAddr,
    #[command(flatten)]
    faults: Faults,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let running = spawn(args.listen, args.faults).await?;
    println!("provider-sim listening on {}", running.url);
    tokio::signal::ctrl_c().await?;
    running.stop();
    Ok(())
}
