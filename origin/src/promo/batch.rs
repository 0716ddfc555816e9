//! One-time code batches: `count` codes of 12 symbols from the
//! 32-symbol alphabet, drawn from a CSPRNG ([`crate::giveaway::draw::draw_code`]), each valid once,
//! saved in bulk with PostgreSQL `COPY`.
//!
//! Repeats: a repeat inside the batch is redrawn before saving (found by sorting); a
//! repeat of a code already stored makes the primary key refuse the `COPY`, which is then
//! undone (savepoint) and the batch saved by multi-row `INSERT … ON CONFLICT DO NOTHING`,
//! redrawing each refused code until all `count` are stored. At 2^60 codes a repeat is about
//! one in a million batches of a million, so the fast path is the rule.

use std::time::{Duration, Instant};

use crate::db::Db;
use flashgate_shared::code::GENERATED_LEN;

use super::rules::NewRules;
use super::store;

/// Rows per `COPY` data message, in bytes (about 1 MiB).
const COPY_CHUNK_BYTES: usize = 1 << 20;
/// Codes per `INSERT` of the slow path.
const INSERT_CHUNK: usize = 10_000;

/// A generated code as its 12 ASCII bytes.
type Code = [u8; GENERATED_LEN];

/// Draws codes until `all` (sorted, without repeats) holds `target`; returns the codes added,
/// sorted. A draw that repeats a code of `all` or of this call is dropped and counted in
/// `redrawn`.
fn top_up(
    all: &mut Vec<Code>,
    target: usize,
    draw: &mut (dyn FnMut() -> String + Send),
    redrawn: &mut u64,
) -> Vec<Code> {
    let mut added: Vec<Code> = Vec::new();
    while all.len() + added.len() < target {
        let need = target - all.len() - added.len();
        let mut drawn: Vec<Code> = (0..need)
            .filter_map(|_| Code::try_from(draw().as_bytes()).ok())
            .collect();
        drawn.sort_unstable();
        drawn.dedup();
        drawn.retain(|c| all.binary_search(c).is_err() && added.binary_search(c).is_err());
        *redrawn += (need - drawn.len()) as u64;
        added.extend_from_slice(&drawn);
        added.sort_unstable();
    }
    all.extend_from_slice(&added);
    all.sort_unstable();
    added
}

/// A saved batch.
#[derive(Debug, Clone)]
pub struct Batch {
    /// `b_` + 32 hex digits.
    pub id: String,
    pub rules_id: i64,
    pub count: i64,
    /// Codes drawn again because they repeated one already drawn or stored.
    pub redrawn: u64,
    /// Drawing, dropping repeats and sorting, before the first row is sent.
    pub drawn_in: Duration,
    /// Drawing and saving, end to end.
    pub took: Duration,
}

/// Generates and saves a batch of `count` one-time codes under `rules` (whose `use_limit` must
/// be 1), in one transaction.
pub async fn generate(db: &Db, rules: &NewRules, count: usize) -> Result<Batch, sqlx::Error> {
    generate_with(db, rules, count, &mut crate::giveaway::draw::draw_code).await
}

/// [`generate`] with the code source given (tests use it to force repeats).
pub async fn generate_with(
    db: &Db,
    rules: &NewRules,
    count: usize,
    draw: &mut (dyn FnMut() -> String + Send),
) -> Result<Batch, sqlx::Error> {
    let started = Instant::now();
    let mut redrawn = 0u64;
    // In key order, the primary key's B-tree is filled left to right instead of at random
    // pages (measured: several times faster for a million rows). The codes stay random; only
    // the order of saving changes. Sorting also finds repeats inside the batch.
    let mut codes: Vec<Code> = Vec::with_capacity(count);
    top_up(&mut codes, count, draw, &mut redrawn);
    let drawn_in = started.elapsed();

    let id = format!("b_{}", uuid::Uuid::now_v7().simple());
    let mut tx = db.begin().await?;
    let rules_id = store::insert_rules(&mut tx, rules).await?;
    sqlx::query!(
        "INSERT INTO coupon_batches (id, rules_id, count) VALUES ($1, $2, $3)",
        id,
        rules_id,
        count as i64,
    )
    .execute(&mut *tx)
    .await?;

    let suffix = format!("\t{rules_id}\t1\n");
    let copied = {
        let mut sp = tx.savepoint().await?;
        let result = async {
            let conn = sp.raw();
            let mut copy = conn
                .copy_in_raw("COPY coupon_codes (code, rules_id, uses_left) FROM STDIN")
                .await?;
            let mut buf = Vec::with_capacity(COPY_CHUNK_BYTES + 64);
            for code in &codes {
                buf.extend_from_slice(code);
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
        let mut todo = codes.clone();
        while !todo.is_empty() {
            let mut refused = 0usize;
            for chunk in todo.chunks(INSERT_CHUNK) {
                let texts: Vec<&str> = chunk
                    .iter()
                    .map(|c| std::str::from_utf8(c).unwrap_or_default())
                    .collect();
                let inserted = sqlx::query!(
                    "INSERT INTO coupon_codes (code, rules_id, uses_left)
                     SELECT unnest($1::text[]), $2, 1 ON CONFLICT (code) DO NOTHING",
                    &texts[..] as &[&str],
                    rules_id,
                )
                .execute(&mut *tx)
                .await?
                .rows_affected() as usize;
                refused += chunk.len() - inserted;
            }
            redrawn += refused as u64;
            // The refused codes stay in `codes`, so they are never drawn again.
            let target = codes.len() + refused;
            todo = top_up(&mut codes, target, draw, &mut redrawn);
        }
    }
    tx.commit().await?;
    Ok(Batch {
        id,
        rules_id,
        count: count as i64,
        redrawn,
        drawn_in,
        took: started.elapsed(),
    })
}

/// The `COPY … TO STDOUT` statement that streams the codes of a batch's rules as CSV with a
/// `code` header. `rules_id` comes from the database, never from a request.
pub fn csv_statement(rules_id: i64) -> String {
    format!(
        "COPY (SELECT code FROM coupon_codes WHERE rules_id = {rules_id}) \
         TO STDOUT WITH (FORMAT csv, HEADER)"
    )
}
