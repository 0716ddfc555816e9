//! The draw: when a draw's entry window has closed, rank its entries by the shared rules
//! ([`flashgate_shared::draw::draw`]) and publish the result, in one transaction; and the task
//! that does it for every draw whose window has closed.

use flashgate_shared::draw::{entries_digest, Seed, SEED_LEN};

use crate::db::Db;

/// What [`draw`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// Drawn now, with this many distinct entries.
    Drawn(usize),
    /// Drawn before (by another pass or origin): nothing changed.
    AlreadyDrawn,
    /// The window has not closed (and the draw was not asked to close it): nothing changed.
    NotClosed,
    /// Asked to close the window early, but it has not opened: nothing changed.
    NotOpen,
    /// No draw for this campaign.
    NoDraw,
}

/// Draws campaign `id`: takes the draw's lock exclusive (entries in flight hold it shared, so
/// every entry answered with a receipt is ranked) and its row, and unless drawn already, ranks the entries and
/// writes their places, each winner's `admitted_at` (her buying window opens now), the
/// digest, the count, the stock drawn for (`drawn_stock`, which a later restock leaves as it
/// is) and `drawn_at`. `by` names the manager who asked (`None` for the draw task): her
/// window still open closes now (an early draw), and the draw gets its `draw_run` audit row in
/// the same transaction. Safe with several origins at once: the row lock and `drawn_at` make
/// one of them draw.
pub async fn draw(db: &Db, id: &str, by: Option<&str>) -> sqlx::Result<Ran> {
    let mut tx = db.begin().await?;
    // Waits for the entries in flight; entries that come after wait for this draw.
    sqlx::query(&format!(
        "SELECT pg_advisory_xact_lock({})",
        crate::access::store::LOCK_KEY_SQL
    ))
    .bind(id)
    .execute(&mut *tx)
    .await?;
    type Row = (
        Vec<u8>,
        bool,
        bool,
        bool,
        i64,
        chrono::DateTime<chrono::Utc>,
    );
    let row: Option<Row> = sqlx::query_as(
        "SELECT d.seed, d.drawn_at IS NOT NULL, clock_timestamp() >= d.entries_close_at,
                clock_timestamp() > d.entries_open_at, c.stock, d.entries_close_at
           FROM draws d JOIN campaigns c ON c.id = d.campaign_id
          WHERE d.campaign_id = $1 FOR UPDATE OF d",
    )
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((seed, drawn, closed, opened, stock, close_at)) = row else {
        return Ok(Ran::NoDraw);
    };
    if drawn {
        return Ok(Ran::AlreadyDrawn);
    }
    if !closed {
        if by.is_none() {
            return Ok(Ran::NotClosed);
        }
        if !opened {
            return Ok(Ran::NotOpen);
        }
        sqlx::query("UPDATE draws SET entries_close_at = clock_timestamp() WHERE campaign_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
    }
    let entries: Vec<String> =
        sqlx::query_scalar("SELECT customer_id FROM draw_entries WHERE campaign_id = $1")
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
    let mut s = [0u8; SEED_LEN];
    s.copy_from_slice(&seed[..SEED_LEN]);
    let drawn = flashgate_shared::draw::draw(&Seed(s), id, &entries, stock.max(0) as u64);
    let winners = drawn.winners.len() as i32;
    let order: Vec<String> = drawn.winners.into_iter().chain(drawn.waitlist).collect();
    let places: Vec<i32> = (1..=order.len() as i32).collect();
    sqlx::query(
        "UPDATE draw_entries e
            SET place = o.place,
                admitted_at = CASE WHEN o.place <= $4 THEN clock_timestamp() END
           FROM unnest($2::text[], $3::int[]) AS o(customer_id, place)
          WHERE e.campaign_id = $1 AND e.customer_id = o.customer_id",
    )
    .bind(id)
    .bind(&order)
    .bind(&places)
    .bind(winners)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE draws SET drawn_at = clock_timestamp(), entries_digest = $2, entry_count = $3,
                          drawn_stock = $4
          WHERE campaign_id = $1",
    )
    .bind(id)
    .bind(entries_digest(&entries))
    .bind(order.len() as i32)
    .bind(stock.max(0))
    .execute(&mut *tx)
    .await?;
    if let Some(actor) = by {
        sqlx::query(
            "INSERT INTO admin_audit (campaign_id, actor, action, params, before, after)
             SELECT campaign_id, $2, 'draw_run', '{}'::jsonb,
                    jsonb_build_object('entries_close_at', $3::timestamptz, 'drawn_at', NULL),
                    jsonb_build_object('entries_close_at', entries_close_at,
                                       'drawn_at', drawn_at, 'stock', drawn_stock,
                                       'entry_count', entry_count, 'winners', $4::int)
               FROM draws WHERE campaign_id = $1",
        )
        .bind(id)
        .bind(actor)
        .bind(close_at)
        .bind(winners)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    tracing::info!(campaign = id, entries = order.len(), winners, "drawn");
    Ok(Ran::Drawn(order.len()))
}

/// One pass of the draw task: draws every campaign whose entry window has closed and that has
/// not been drawn. Returns how many it drew.
pub async fn pass(db: &Db) -> anyhow::Result<usize> {
    let due: Vec<String> = sqlx::query_scalar(
        "SELECT campaign_id FROM draws WHERE drawn_at IS NULL AND entries_close_at <= now()",
    )
    .fetch_all(db)
    .await?;
    let mut n = 0;
    for id in due {
        if let Ran::Drawn(_) = draw(db, &id, None).await? {
            n += 1;
        }
    }
    Ok(n)
}
