//! `flashgate reconcile <campaign>`: the reconciliation report of [`crate::repair::reconcile`] from the
//! command line, without a running origin.

use sqlx::PgPool;

use crate::db::{Db, DbPooler};
use crate::gate::Gate;
use crate::redis_conn::RedisConn;

/// `flashgate reconcile <campaign>`: connects, prints the report as pretty JSON on stdout and
/// returns the exit code ([`crate::cli::exit`]): 0 clean, 1 a fault found, 3 an unknown
/// campaign, 5 PostgreSQL or Redis unreachable (2 a URL that does not parse). `pooler`: what
/// sits between it and PostgreSQL (`FLASHGATE_DB_POOLER`).
pub async fn run(database_url: &str, pooler: DbPooler, redis_url: &str, c: &str) -> i32 {
    use crate::cli::exit;
    let checked = async {
        let options = crate::db::behind(database_url.parse()?, pooler);
        let db = Db::new(PgPool::connect_with(options).await?, pooler);
        let mut redis = Gate::new(RedisConn::open_for_tool(redis_url).await?);
        anyhow::Ok(crate::repair::reconcile::reconcile(&db, &mut redis, c).await?)
    };
    match checked.await {
        Ok(Some(report)) => {
            let printed = match serde_json::to_string_pretty(&report) {
                Ok(json) => exit::print_or_code(&json),
                Err(e) => {
                    eprintln!("error: {e}");
                    exit::USAGE
                }
            };
            if printed != exit::OK {
                printed
            } else if report.ok {
                exit::OK
            } else {
                exit::FAULT
            }
        }
        Ok(None) => {
            eprintln!("error: no campaign {c}");
            exit::NOT_FOUND
        }
        Err(e) => {
            eprintln!("error: could not check: {e:#}");
            exit::for_error(&e)
        }
    }
}
