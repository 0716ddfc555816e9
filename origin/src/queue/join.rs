//! Joining a campaign's queue: the customer's place (sequence number), her signed ticket, and
//! the reply. The sequence number is final when the ticket is issued, because the edge computes
//! positions from it alone:
//! - a join in the `prequeue_seconds` before `starts_at`, and every join of a `random` queue,
//!   draws a number at random in `(now_serving, RANDOM_BLOCK)`, so the prequeue is shuffled
//!   at the start and a `random` queue is drawn among those still waiting;
//! - a join of a `fifo` queue after the start gets the next arrival number,
//!   `RANDOM_BLOCK + n`, after every drawn number.

use chrono::{DateTime, Utc};
use flashgate_shared::admission::{sign_ticket, Place, Ticket};
use flashgate_shared::queue::{JoinReply, Queueing, WaitingRoom};

use super::store::{self, Draw, Joined};
use crate::campaigns::CampaignRow;
use crate::error::ApiError;
use crate::state::AppState;

/// How a join at `now` on a campaign starting at `starts_at` draws its number. `Err` with the
/// opening time when the prequeue has not opened yet (`now < starts_at - prequeue_seconds`).
pub fn draw_at(
    w: &WaitingRoom,
    starts_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Draw, DateTime<Utc>> {
    let opens = starts_at - chrono::Duration::seconds(i64::from(w.prequeue_seconds));
    if now >= starts_at {
        Ok(match w.queueing {
            Queueing::Fifo => Draw::Arrival,
            Queueing::Random => Draw::Random,
        })
    } else if now >= opens && w.prequeue_seconds > 0 {
        Ok(Draw::Random)
    } else {
        Err(opens)
    }
}

/// Gives `customer` her place on campaign `row` (which has the waiting room `w`): [`join_group`]
/// of one. Returns the reply and whether the place is new (201) or hers already (200).
pub async fn join(
    state: &AppState,
    row: &CampaignRow,
    w: &WaitingRoom,
    customer: &str,
) -> Result<(JoinReply, bool), ApiError> {
    let mut one = join_group(state, row, w, &[customer]).await?;
    one.pop()
        .ok_or_else(|| ApiError::Unavailable("the join got no place; join again".into()))
}

/// Gives each of `customers` (a group of joins, in arrival order) her place on campaign `row`
/// (which has the waiting room `w`), in one Redis step. Returns, per customer in order, the
/// reply and whether the place is new (201) or hers already (200). The Redis step runs in a turn
/// of [`JoinTurns`](super::turns::JoinTurns). Errors, for the whole group: 409 `conflict` before
/// the prequeue opens, 503 without the edge secret, when no turn came in time, when Redis fails,
/// or while another origin reopens a queue Redis lost ([`super::restore`]; a lost queue is
/// reopened here otherwise, and the joins placed).
pub async fn join_group(
    state: &AppState,
    row: &CampaignRow,
    w: &WaitingRoom,
    customers: &[&str],
) -> Result<Vec<(JoinReply, bool)>, ApiError> {
    let secret = super::secret(state)?;
    let now = Utc::now();
    let draw = draw_at(w, row.starts_at, now).map_err(|opens| {
        ApiError::Conflict(format!(
            "the waiting room opens at {}",
            opens.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ))
    })?;
    state.metrics.queue_join_requests.inc();
    state.metrics.queue_joins.inc_by(customers.len() as u64);
    let mut redis = state.redis.clone();
    let permit = state.join_turns.take().await?;
    let joined = store::join(&mut redis, &row.id, customers, draw, now.timestamp()).await;
    drop(permit);
    let joined = match joined? {
        // Redis lost the queue: reopen it from its checkpoint and join once more.
        Joined::NotOpen => {
            super::restore::restore(state, &row.id).await.map_err(|e| {
                ApiError::Unavailable(format!("the queue could not be reopened: {e}"))
            })?;
            let permit = state.join_turns.take().await?;
            let again = store::join(&mut redis, &row.id, customers, draw, now.timestamp()).await;
            drop(permit);
            again?
        }
        places => places,
    };
    let Joined::Places(places) = joined else {
        return Err(ApiError::Unavailable(format!(
            "the queue of campaign {} is being reopened after a Redis loss; join again",
            row.id
        )));
    };
    let to_start_ms = (row.starts_at - now).num_milliseconds();
    let remaining = u64::try_from(row.remaining).unwrap_or(0);
    let campaign_state = row.state_at(now);
    Ok(customers
        .iter()
        .zip(places)
        .map(|(customer, p)| {
            let figures = store::Figures {
                now_serving: p.now_serving,
                admitted: p.admitted,
                drawn: p.drawn,
                unclaimed: p.unclaimed,
                unclaimed_since_ms: p.unclaimed_since_ms,
                ..Default::default()
            };
            let status = figures.status(w, row.queue_paused);
            let position = status.position_of(p.seq, p.drawn_waiting_at_issue);
            let queue_state = status.state(campaign_state, position);
            let ticket = Ticket {
                place: Place {
                    campaign: row.id.clone(),
                    customer: customer.to_string(),
                    sequence: p.seq,
                },
                issued_at_s: p.issued_at_s,
                drawn_waiting_at_issue: p.drawn_waiting_at_issue,
            };
            let reply = JoinReply {
                ticket: sign_ticket(secret, &ticket),
                position,
                eta_seconds: status.eta_seconds(
                    queue_state,
                    position,
                    remaining,
                    to_start_ms,
                    now.timestamp_millis(),
                ),
                state: queue_state,
            };
            (reply, p.created)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_by_time_and_queueing() {
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        let start = t("2030-01-01T12:00:00Z");
        let mut w: WaitingRoom = serde_json::from_str(r#"{"admit_per_second":5}"#).unwrap();
        assert_eq!(
            draw_at(&w, start, t("2030-01-01T11:49:59Z")),
            Err(t("2030-01-01T11:50:00Z"))
        );
        assert_eq!(
            draw_at(&w, start, t("2030-01-01T11:50:00Z")),
            Ok(Draw::Random)
        );
        assert_eq!(draw_at(&w, start, start), Ok(Draw::Arrival));
        w.queueing = Queueing::Random;
        assert_eq!(draw_at(&w, start, start), Ok(Draw::Random));
        w.prequeue_seconds = 0;
        assert!(draw_at(&w, start, t("2030-01-01T11:59:59Z")).is_err());
    }
}
