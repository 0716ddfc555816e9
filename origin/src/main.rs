//! The `flashgate` command: run the origin, apply migrations, mint customer tokens.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use flashgate_origin::cli::exit;
use flashgate_origin::cli::token::TokenArgs;
use flashgate_origin::config::{Config, DbPooler};

#[derive(Parser)]
#[command(
    name = "flashgate",
    version,
    about = "flashgate origin: flash sales and giveaways that never oversell"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the origin service (applies migrations first unless FLASHGATE_MIGRATE=false). Stops
    /// gracefully on SIGTERM/SIGINT.
    Serve(Box<Config>),
    /// Apply the pending PostgreSQL migrations and exit (one transaction holding a
    /// transaction-scoped lock: runs started at once apply each migration once).
    Migrate {
        /// Direct URL of the server (not a transaction pooler's).
        #[arg(long, env = "FLASHGATE_MIGRATION_DATABASE_URL")]
        migration_database_url: Option<String>,
        /// Used when FLASHGATE_MIGRATION_DATABASE_URL is unset.
        #[arg(long, env = "DATABASE_URL")]
        database_url: Option<String>,
    },
    /// Campaign managers' operations over the origin's admin API (list, show, create, pause,
    /// resume, close, restock, set-stock, set-ends-at, audit, reconcile, purge).
    Admin(flashgate_origin::cli::admin::AdminArgs),
    /// Gift fulfilment tools (`seed-demo`: the WORLDCUP_2026 demo campaign).
    Gifts {
        #[command(subcommand)]
        command: GiftsCommand,
    },
    /// Print a customer token (a JWT) for tests and demos: HS256 under
    /// FLASHGATE_CUSTOMER_TOKEN_SECRET, or RS256 / ES256 under a PEM private key (`--key`).
    Token(TokenArgs),
    /// Reconcile one campaign: print the JSON report (units, ledger, Redis gate vs PostgreSQL,
    /// oversold and stranded units); exit status 1 when it found a fault, 3 for an unknown
    /// campaign, 5 when PostgreSQL or Redis cannot be reached.
    Reconcile {
        /// Campaign id.
        campaign: String,
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        /// `transaction` when DATABASE_URL is a pooler in transaction mode.
        #[arg(long, env = "FLASHGATE_DB_POOLER", value_enum, default_value_t = DbPooler::None)]
        db_pooler: DbPooler,
        #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
        redis_url: String,
    },
    /// The capacity plan of a sale: the edge's, the origins', Redis's and PostgreSQL's load by
    /// kind, origins needed, sell-out time, queue wait and Redis memory, from a calibration of
    /// per-operation costs (docs/SCALING.md, "Capacity plan"). Exit 2 on bad input.
    Plan(flashgate_origin::cli::plan::PlanArgs),
    /// Draw campaigns: `verify` recomputes a published draw from its JSON (docs/DRAWS.md);
    /// exit 1 when it does not verify, 2 on unreadable input.
    Draw(flashgate_origin::cli::draw::DrawArgs),
}

#[derive(Subcommand)]
enum GiftsCommand {
    /// Apply the migrations, then load the WORLDCUP_2026 demo campaign (segments, caps,
    /// members); running it again changes nothing. Prints the campaign as JSON.
    SeedDemo {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
    },
}

/// mimalloc instead of the system allocator (glibc malloc): a request allocates and frees many
/// small blocks across tokio's worker threads (header maps, boxed futures, strings), and
/// malloc/free were ~24 % of a sold-out answer's instructions under callgrind (docs/BENCHMARKS.md).
/// Its thread-local free lists serve them in far fewer instructions.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // Expected errors end in one `error: …` line and their exit code, never a backtrace.
    let code = match run(cli.command).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit::for_error(&e)
        }
    };
    ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX))
}

/// Runs one command; returns its exit code ([`exit`]).
async fn run(command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Serve(config) => {
            if let Err(e) = config.validate() {
                eprintln!("error: bad configuration: {e}");
                return Ok(exit::USAGE);
            }
            // FLASHGATE_LOG_FORMAT=json: one JSON object a line, the access line of every
            // request included (route, result, latency, and from the request span the trace
            // id and campaign). Otherwise human-readable lines without the access line.
            let json = std::env::var("FLASHGATE_LOG_FORMAT").is_ok_and(|f| f == "json");
            let access = if json { "info" } else { "off" };
            let filter =
                tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                    format!(
                        "info,tower_http=warn,sqlx=warn,{}={access}",
                        flashgate_origin::metrics::ACCESS_LOG_TARGET
                    )
                    .into()
                });
            // Colour only on a terminal: a log file gets plain text.
            let logs = tracing_subscriber::fmt()
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
                .with_env_filter(filter);
            if json {
                logs.json().with_current_span(false).init();
            } else {
                logs.init();
            }
            let origin = flashgate_origin::server::spawn(*config).await?;
            shutdown_signal().await;
            tracing::info!("shutting down: finishing in-flight requests");
            origin.shutdown().await?;
        }
        Command::Reconcile {
            campaign,
            database_url,
            db_pooler,
            redis_url,
        } => {
            return Ok(flashgate_origin::cli::reconcile::run(
                &database_url,
                db_pooler,
                &redis_url,
                &campaign,
            )
            .await);
        }
        Command::Admin(args) => return Ok(flashgate_origin::cli::admin::run(args).await),
        Command::Plan(args) => return Ok(flashgate_origin::cli::plan::run(&args)),
        Command::Draw(args) => return Ok(flashgate_origin::cli::draw::run(&args)),
        Command::Migrate {
            migration_database_url,
            database_url,
        } => {
            let url = migration_database_url.or(database_url).ok_or_else(|| {
                anyhow::anyhow!("set FLASHGATE_MIGRATION_DATABASE_URL (or DATABASE_URL)")
            })?;
            let done = flashgate_origin::migrate::run(&url.parse()?).await?;
            if done.applied.is_empty() {
                exit::print_line(&format!(
                    "schema current at version {}; nothing applied",
                    done.current
                ))?;
            } else {
                exit::print_line(&format!(
                    "applied migration(s) {:?}; schema at version {}",
                    done.applied, done.current
                ))?;
            }
        }
        Command::Gifts {
            command: GiftsCommand::SeedDemo { database_url },
        } => {
            flashgate_origin::migrate::run(&database_url.parse()?).await?;
            let db = flashgate_origin::db::Db::from(sqlx::PgPool::connect(&database_url).await?);
            let shown = flashgate_origin::gifts::demo::seed(&db).await?;
            exit::print_line(&serde_json::to_string_pretty(&shown)?)?;
        }
        Command::Token(args) => exit::print_line(&args.run()?)?,
    }
    Ok(exit::OK)
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
