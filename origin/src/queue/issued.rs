//! Tickets the edge issued (`POST /edge/v1/campaigns/{id}/joins` with a report): each isolate
//! answers joins itself, signing tickets whose sequence number is the order key
//! ([`flashgate_shared::queue::keys`]), and reports them here in batches, so a join costs the
//! origin nothing per customer. The report's tickets join the line that admission walks in
//! order ([`super::store::issued`]).

use flashgate_shared::api::codes;
use flashgate_shared::queue::joins::IssuedReport;
use flashgate_shared::queue::keys::arrival_ms;
use flashgate_shared::queue::presence::{PresenceReceipt, REPORT_ID_KEPT_S};

use super::store::issued::{self, Added, IssuedTicket};
use super::store::who::fingerprint;
use crate::error::ApiError;
use crate::state::AppState;

/// Records report `r` of campaign `c`: every ticket is checked again (signed with the edge
/// secret, this campaign's, a sequence number the edge issues), then all are added to the line
/// in one Redis step, once per report id. Errors (the whole report refused, nothing stored):
/// 400 `invalid_request` for a bad shape, a malformed ticket or a sequence number the edge does
/// not issue; 403 `forbidden` for a forged ticket or another campaign's; 503 without the edge
/// secret, when Redis fails, or while a queue Redis lost is being reopened (the edge sends it
/// again).
pub async fn record(
    state: &AppState,
    c: &str,
    r: &IssuedReport,
) -> Result<PresenceReceipt, ApiError> {
    r.validate()
        .map_err(|m| ApiError::BadRequest(codes::INVALID_REQUEST, m))?;
    let secret = super::secret(state)?;
    let mut tickets = Vec::with_capacity(r.tickets.len());
    for t in &r.tickets {
        let ticket = super::presence::open_reported(secret, t, c)?;
        let seq = ticket.place.sequence;
        if !issued::is_edge_issued(seq) {
            return Err(ApiError::BadRequest(
                codes::INVALID_REQUEST,
                format!("a reported ticket's sequence number {seq} is not one the edge issues"),
            ));
        }
        let at_ms = arrival_ms(seq).unwrap_or(ticket.issued_at_s.saturating_mul(1000));
        tickets.push(IssuedTicket {
            seq,
            at_ms,
            who: fingerprint(&ticket.place.customer),
        });
    }
    state.metrics.queue_join_requests.inc();
    let mut redis = state.redis.clone();
    let mut added = issued::add(&mut redis, c, &r.report_id, REPORT_ID_KEPT_S, &tickets).await?;
    if added == Added::NotOpen {
        // Redis lost the queue: reopen it from its checkpoint and add once more.
        super::restore::restore(state, c)
            .await
            .map_err(|e| ApiError::Unavailable(format!("the queue could not be reopened: {e}")))?;
        added = issued::add(&mut redis, c, &r.report_id, REPORT_ID_KEPT_S, &tickets).await?;
    }
    match added {
        Added::Counted(n) => {
            state.metrics.queue_joins.inc_by(n);
            Ok(PresenceReceipt {
                counted: n,
                duplicate: false,
            })
        }
        Added::Duplicate => Ok(PresenceReceipt {
            counted: 0,
            duplicate: true,
        }),
        Added::NotOpen => Err(ApiError::Unavailable(format!(
            "the queue of campaign {c} is not open; report again"
        ))),
    }
}
