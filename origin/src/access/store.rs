//! PostgreSQL queries on `draws` and `draw_entries` (migration 0018), as runtime queries.

use chrono::{DateTime, Utc};
use flashgate_shared::api::{DrawProgress, DrawSettings, DrawState, DrawStatus, EntryReceipt};
use flashgate_shared::draw::{DrawResult, Seed, SEED_LEN};
use rand::RngCore;

use crate::db::Db;

/// One row of `draws`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DrawRow {
    pub campaign_id: String,
    pub entries_open_at: DateTime<Utc>,
    pub entries_close_at: DateTime<Utc>,
    /// Seconds a winner may claim once admitted.
    pub buying_window_seconds: i32,
    /// The secret seed, [`SEED_LEN`] bytes; never sent before `drawn_at` is set.
    pub seed: Vec<u8>,
    /// Lowercase hex SHA-256 of the seed.
    pub commitment: String,
    pub drawn_at: Option<DateTime<Utc>>,
    pub entries_digest: Option<String>,
    pub entry_count: Option<i32>,
    /// The stock the draw was made for (its winners are the first this many places), set
    /// with `drawn_at`: a restock after the draw does not change it.
    pub drawn_stock: Option<i64>,
}

impl DrawRow {
    /// Where the draw is at `now`.
    pub fn state_at(&self, now: DateTime<Utc>) -> DrawState {
        if self.drawn_at.is_some() {
            DrawState::Drawn
        } else if now < self.entries_open_at {
            DrawState::Scheduled
        } else if now < self.entries_close_at {
            DrawState::Open
        } else {
            DrawState::Closed
        }
    }

    /// The seed (a stored seed always has [`SEED_LEN`] bytes: the table checks it).
    pub fn seed(&self) -> Seed {
        let mut s = [0u8; SEED_LEN];
        s.copy_from_slice(&self.seed[..SEED_LEN]);
        Seed(s)
    }
}

const COLUMNS: &str = "campaign_id, entries_open_at, entries_close_at, buying_window_seconds, \
                       seed, commitment, drawn_at, entries_digest, entry_count, drawn_stock";

/// Creates the draw of campaign `id` with a new seed from the thread-local CSPRNG
/// (`rand::rng()`, seeded from the operating system), inside the caller's transaction (the
/// one that creates the campaign). Returns the commitment.
pub async fn create<'e>(
    db: impl sqlx::PgExecutor<'e>,
    id: &str,
    d: &DrawSettings,
) -> sqlx::Result<String> {
    let mut bytes = [0u8; SEED_LEN];
    rand::rng().fill_bytes(&mut bytes);
    let seed = Seed(bytes);
    let commitment = seed.commitment();
    sqlx::query(
        "INSERT INTO draws (campaign_id, entries_open_at, entries_close_at,
                            buying_window_seconds, seed, commitment)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(id)
    .bind(d.entries_open_at)
    .bind(d.entries_close_at)
    .bind(d.buying_window() as i32)
    .bind(&bytes[..])
    .bind(&commitment)
    .execute(db)
    .await?;
    Ok(commitment)
}

/// The draw of campaign `id`; `None` when the campaign is not a draw (or unknown).
pub async fn find(db: &Db, id: &str) -> sqlx::Result<Option<DrawRow>> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM draws WHERE campaign_id = $1"
    ))
    .bind(id)
    .fetch_optional(db)
    .await
}

/// What an entry came to.
#[derive(Debug)]
pub enum Entered {
    /// Her first entry (201).
    New(EntryReceipt),
    /// She had entered before: the same receipt (200).
    Again(EntryReceipt),
    /// No entry of hers and the window is not open (or the draw has run, or the campaign has
    /// ended): nothing written.
    Closed {
        /// The draw as it is now.
        draw: Box<DrawRow>,
        /// The campaign's end.
        ends_at: DateTime<Utc>,
    },
}

/// The key of campaign `id`'s draw lock: entries take it shared, the draw exclusive
/// (`pg_advisory_xact_lock_shared` / `pg_advisory_xact_lock`, held to the end of their
/// transactions).
pub const LOCK_KEY_SQL: &str = "hashtextextended('flashgate-draw:' || $1, 0)";

/// Enters `customer` into the draw `d` while its window is open and its campaign has not
/// ended (a manager may close it, or move its end, during the window). The entry's transaction first takes the draw's lock
/// shared ([`LOCK_KEY_SQL`]) and only then reads the window, so the draw (which takes it
/// exclusive) ranks every entry that was answered with a receipt, and no entry lands after it.
/// An advisory lock rather than a row lock: thousands of entries at once share it without
/// writing to the draw's row.
pub async fn enter(db: &Db, d: &DrawRow, customer: &str) -> sqlx::Result<Entered> {
    let mut id = [0u8; 16];
    rand::rng().fill_bytes(&mut id);
    let entry_id = format!("e_{}", hex::encode(id));
    let mut tx = db.begin().await?;
    sqlx::query(&format!(
        "SELECT pg_advisory_xact_lock_shared({LOCK_KEY_SQL})"
    ))
    .bind(&d.campaign_id)
    .execute(&mut *tx)
    .await?;
    // A statement of its own after the lock: its snapshot sees a draw that committed while
    // this entry waited.
    let (open, ends_at, new_at): (Option<bool>, Option<DateTime<Utc>>, Option<DateTime<Utc>>) =
        sqlx::query_as(
            "WITH d AS (
             SELECT d.campaign_id, c.ends_at,
                    now() >= d.entries_open_at AND clock_timestamp() < d.entries_close_at
                        AND clock_timestamp() < c.ends_at AND d.drawn_at IS NULL AS open
               FROM draws d JOIN campaigns c ON c.id = d.campaign_id
              WHERE d.campaign_id = $1
         ), ins AS (
             INSERT INTO draw_entries (campaign_id, customer_id, entry_id)
             SELECT campaign_id, $2, $3 FROM d WHERE open
             ON CONFLICT (campaign_id, customer_id) DO NOTHING
             RETURNING entered_at
         )
         SELECT (SELECT open FROM d), (SELECT ends_at FROM d), (SELECT entered_at FROM ins)",
        )
        .bind(&d.campaign_id)
        .bind(customer)
        .bind(&entry_id)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    let receipt = |entry_id: String, entered_at| EntryReceipt {
        entry_id,
        campaign: d.campaign_id.clone(),
        customer: customer.to_string(),
        entered_at,
        commitment: d.commitment.clone(),
        entries_close_at: d.entries_close_at,
    };
    if let Some(at) = new_at {
        return Ok(Entered::New(receipt(entry_id, at)));
    }
    match entry_of(db, &d.campaign_id, customer).await? {
        Some(e) => Ok(Entered::Again(receipt(e.entry_id, e.entered_at))),
        None if open == Some(true) => Err(sqlx::Error::RowNotFound),
        // Read again: a manager may have closed the window early and drawn meanwhile.
        None => {
            let fresh = find(db, &d.campaign_id).await?;
            Ok(Entered::Closed {
                draw: Box::new(fresh.unwrap_or_else(|| d.clone())),
                ends_at: ends_at.unwrap_or(DateTime::<Utc>::MAX_UTC),
            })
        }
    }
}

/// One row of `draw_entries`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EntryRow {
    pub entry_id: String,
    pub entered_at: DateTime<Utc>,
    /// 1-based place in the order, once drawn.
    pub place: Option<i32>,
    pub admitted_at: Option<DateTime<Utc>>,
    pub lapsed_at: Option<DateTime<Utc>>,
}

/// Her entry in campaign `id`'s draw, if any.
pub async fn entry_of(db: &Db, id: &str, customer: &str) -> sqlx::Result<Option<EntryRow>> {
    sqlx::query_as(
        "SELECT entry_id, entered_at, place, admitted_at, lapsed_at FROM draw_entries
          WHERE campaign_id = $1 AND customer_id = $2",
    )
    .bind(id)
    .bind(customer)
    .fetch_optional(db)
    .await
}

/// The public status of draw `d`: with the published result once drawn (the order read back
/// from the stored places, the winners the first `drawn_stock` of it).
pub async fn status(db: &Db, d: &DrawRow) -> sqlx::Result<DrawStatus> {
    let result = match (d.drawn_at, &d.entries_digest, d.entry_count, d.drawn_stock) {
        (Some(_), Some(digest), Some(count), Some(stock)) => {
            let mut order: Vec<String> = sqlx::query_scalar(
                "SELECT customer_id FROM draw_entries
                  WHERE campaign_id = $1 AND place IS NOT NULL ORDER BY place",
            )
            .bind(&d.campaign_id)
            .fetch_all(db)
            .await?;
            let cut = usize::try_from(stock).unwrap_or(0).min(order.len());
            let waitlist = order.split_off(cut);
            Some(DrawResult {
                campaign: d.campaign_id.clone(),
                stock,
                commitment: d.commitment.clone(),
                seed: d.seed().to_hex(),
                entries_digest: digest.clone(),
                entry_count: i64::from(count),
                winners: order,
                waitlist,
            })
        }
        _ => None,
    };
    Ok(DrawStatus { result, ..brief(d) })
}

/// The counts of draw `d`'s entries for a manager, the first `drawn_stock` places being the
/// winners ([`DrawProgress`]; before the draw none is).
pub async fn progress(db: &Db, d: &DrawRow) -> sqlx::Result<DrawProgress> {
    let (entries, winners, waitlist, admitted, admitted_from_waitlist, claimed, lapsed): (
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
    ) = sqlx::query_as(
        "SELECT count(*),
                count(*) FILTER (WHERE e.place <= $2),
                count(*) FILTER (WHERE e.place > $2),
                count(*) FILTER (WHERE e.admitted_at IS NOT NULL),
                count(*) FILTER (WHERE e.admitted_at IS NOT NULL AND e.place > $2),
                count(*) FILTER (WHERE e.admitted_at IS NOT NULL AND EXISTS (
                    SELECT 1 FROM claims c
                     WHERE c.campaign_id = e.campaign_id AND c.customer_id = e.customer_id
                       AND c.status IN ('held', 'paid'))),
                count(*) FILTER (WHERE e.lapsed_at IS NOT NULL)
           FROM draw_entries e WHERE e.campaign_id = $1",
    )
    .bind(&d.campaign_id)
    .bind(d.drawn_stock.unwrap_or(0))
    .fetch_one(db)
    .await?;
    Ok(DrawProgress {
        draw: brief(d),
        entries,
        winners,
        waitlist,
        admitted,
        admitted_from_waitlist,
        claimed,
        lapsed,
    })
}

/// The status of draw `d` without its result (the campaign's public status carries it).
pub fn brief(d: &DrawRow) -> DrawStatus {
    DrawStatus {
        campaign: d.campaign_id.clone(),
        state: d.state_at(Utc::now()),
        entries_open_at: d.entries_open_at,
        entries_close_at: d.entries_close_at,
        buying_window_seconds: i64::from(d.buying_window_seconds),
        commitment: d.commitment.clone(),
        drawn_at: d.drawn_at,
        result: None,
    }
}
