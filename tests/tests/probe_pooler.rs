//! temporary probe
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::Row;

async fn run(persistent: bool, txn: bool) -> (usize, usize, Vec<String>) {
    let url = std::env::var("PROBE_URL").unwrap();
    let opts: PgConnectOptions = url.parse().unwrap();
    let opts = opts.statement_cache_capacity(0).extra_float_digits(None);
    let mut pools = vec![];
    for _ in 0..3 {
        pools.push(PgPoolOptions::new().max_connections(4).connect_with(opts.clone()).await.unwrap());
    }
    let mut handles = vec![];
    for t in 0..12 {
        let pool = pools[t % 3].clone();
        handles.push(tokio::spawn(async move {
            let (mut ok, mut bad, mut errs) = (0, 0, vec![]);
            for i in 0..300i32 {
                let v = t as i32 * 1000 + i;
                let r = if txn {
                    let mut tx = pool.begin().await.unwrap();
                    let r = sqlx::query("SELECT $1::int4 + 1 AS a, 'x' AS b").bind(v).persistent(persistent).fetch_one(&mut *tx).await;
                    let _ = tx.commit().await;
                    r
                } else {
                    sqlx::query("SELECT $1::int4 + 1 AS a, 'x' AS b").bind(v).persistent(persistent).fetch_one(&pool).await
                };
                match r {
                    Ok(row) if row.try_get::<i32, _>("a").ok() == Some(v + 1) => ok += 1,
                    Ok(_) => { bad += 1; errs.push("wrong value".into()) }
                    Err(e) => { bad += 1; errs.push(e.to_string()) }
                }
            }
            (ok, bad, errs)
        }));
    }
    let (mut ok, mut bad, mut errs) = (0, 0, vec![]);
    for h in handles { let (a, b, mut c) = h.await.unwrap(); ok += a; bad += b; errs.append(&mut c); }
    errs.sort(); errs.dedup();
    errs.truncate(5);
    (ok, bad, errs)
}

#[tokio::test]
async fn probe() {
    for (p, t) in [(true, false), (false, false), (false, true), (true, true)] {
        println!("persistent={p} txn={t}: {:?}", run(p, t).await);
    }
}
