//! One-time code batches (seed "Coupons", decision 4): `count` codes of 12 symbols from the
//! 32-symbol alphabet, drawn from a CSPRNG ([`crate::coupon::draw_code`]), each valid once,
//! saved in bulk with PostgreSQL `COPY`.
//!
//! Repeats: a repeat inside the batch is redrawn before saving (a set of the drawn codes); a
//! repeat of a code already stored makes the primary key refuse the `COPY`, which is then
//! undone (savepoint) and the batch saved by multi-row `INSERT … ON CONFLICT DO NOTHING`,
//! redrawing each refused code until all `count` are stored. At 2^60 codes a repeat is about
//! one in a million batches of a million, so the fast path is the rule.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use flashgate_shared::code::GENERATED_LEN;
use sqlx::{Acquire, PgPool};

use super::store::{self, NewRules};

/// Rows per `COPY` data message, in bytes (about 1 MiB).
const COPY_CHUNK_BYTES: usize = 1 << 20;
/// Codes per `INSERT` of the slow path.
const INSERT_CHUNK: usize = 10_000;

/// A saved batch.
#[derive(Debug, Clone)]
pub struct Batch {
    /// `b_` + 32 hex digits.
    pub id: String,
    pub rules_id: i64,
    pub count: i64,
    /// Codes drawn again because they repeated one already drawn or stored.
    pub redrawn: u64,
    /// Drawing and saving, end to end.
    pub took: Duration,
}

/// Generates and saves a batch of `count` one-time codes under `rules` (whose `use_limit` must
/// be 1), in one transaction.
pub async fn generate(db: &PgPool, rules: &NewRules, count: usize) -> Result<Batch, sqlx::Error> {
    generate_with(db, rules, count, &mut crate::coupon::draw_code).await
}

/// [`generate`] with the code source given (tests use it to force repeats).
pub async fn generate_with(
    db: &PgPool,
    rules: &NewRules,
    count: usize,
    draw: &mut (dyn FnMut() -> String + Send),
) -> Result<Batch, sqlx::Error> {
    let started = Instant::now();
    let id = format!("b_{}", uuid::Uuid::now_v7().simple());
    let mut tx = db.begin().await?;
    let rules_id = store::insert_rules(&mut tx, rules).await?;
    sqlx::query("INSERT INTO coupon_batches (id, rules_id, count) VALUES ($1, $2, $3)")
        .bind(&id)
        .bind(rules_id)
        .bind(count as i64)
        .execute(&mut *tx)
        .await?;

    let mut seen: HashSet<[u8; GENERATED_LEN]> = HashSet::with_capacity(count);
    let mut redrawn = 0u64;
    let mut fresh = |n: usize, seen: &mut HashSet<[u8; GENERATED_LEN]>, redrawn: &mut u64| {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let code = draw();
            let Ok(bytes) = <[u8; GENERATED_LEN]>::try_from(code.as_bytes()) else {
                continue;
            };
            if seen.insert(bytes) {
                out.push(code);
            } else {
                *redrawn += 1;
            }
        }
        out
    };
    let codes = fresh(count, &mut seen, &mut redrawn);

    let suffix = format!("\t{rules_id}\t1\n");
    let copied = {
        let mut sp = tx.begin().await?;
        let result = async {
            let conn = sp.acquire().await?;
            let mut copy = conn
                .copy_in_raw("COPY coupon_codes (code, rules_id, uses_left) FROM STDIN")
                .await?;
            let mut buf = Vec::with_capacity(COPY_CHUNK_BYTES + 64);
            for code in &codes {
                buf.extend_from_slice(code.as_bytes());
                buf.extend_from_slice(suffix.as_bytes());
                if buf.len() >= COPY_CHUNK_BYTES {
                    copy.send(buf.as_slice()).await?;
                    buf.clear();
                }
            }
            if !buf.is_empty() {
                copy.send(buf.as_slice()).await?;
            }
            copy.finish().await
        }
        .await;
        match result {
            Ok(_) => {
                sp.commit().await?;
                true
            }
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => {
                sp.rollback().await?;
                false
            }
            Err(e) => return Err(e),
        }
    };
    if !copied {
        // Some code is stored already: insert with ON CONFLICT, redraw the refused ones.
        let mut todo = codes;
        while !todo.is_empty() {
            let mut refused = 0usize;
            for chunk in todo.chunks(INSERT_CHUNK) {
                let inserted = sqlx::query(
                    "INSERT INTO coupon_codes (code, rules_id, uses_left)
                     SELECT unnest($1::text[]), $2, 1 ON CONFLICT (code) DO NOTHING",
                )
                .bind(chunk)
                .bind(rules_id)
                .execute(&mut *tx)
                .await?
                .rows_affected() as usize;
                refused += chunk.len() - inserted;
            }
            redrawn += refused as u64;
            todo = fresh(refused, &mut seen, &mut redrawn);
        }
    }
    tx.commit().await?;
    Ok(Batch {
        id,
        rules_id,
        count: count as i64,
        redrawn,
        took: started.elapsed(),
    })
}

/// The rules id of batch `id`, `None` when unknown.
pub async fn rules_of(db: &PgPool, id: &str) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT rules_id FROM coupon_batches WHERE id = $1")
        .bind(id)
        .fetch_optional(db)
        .await
}

/// The `COPY … TO STDOUT` statement that streams the codes of a batch's rules as CSV with a
/// `code` header. `rules_id` comes from the database, never from a request.
pub fn csv_statement(rules_id: i64) -> String {
    format!(
        "COPY (SELECT code FROM coupon_codes WHERE rules_id = {rules_id}) \
         TO STDOUT WITH (FORMAT csv, HEADER)"
    )
}
