//! The waiting room, origin side: joins ([`join`]), the task that advances `now_serving`
//! ([`admit`]), the admission check on claims, and the figures that the campaign status and
//! the admin API show. Keys and atomic steps: [`store`]. The design and its bounds are in
//! docs/WAITING-ROOM.md.

pub mod admit;
pub mod issued;
pub mod join;
pub mod presence;
pub mod replay;
pub mod restore;
pub mod store;
pub mod turns;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use flashgate_shared::admission::{self, AdmissionError};
use flashgate_shared::api::{codes, CampaignState, CampaignView};
use flashgate_shared::queue::{QueueStatus, QueueView, ADMISSION_HEADER, QUEUED};

use crate::campaigns::CampaignRow;
use crate::error::ApiError;
use crate::state::AppState;

/// `Retry-After` of a claim refused 429 `queued`, seconds (the edge answers the same).
pub const QUEUED_RETRY_AFTER_S: u32 = 5;

/// The edge secret that signs tickets and admission tokens; 503 (logged) without one, since a
/// waiting room cannot work without it.
pub fn secret(state: &AppState) -> Result<&[u8], ApiError> {
    state
        .config
        .edge_secret
        .as_ref()
        .map(|s| s.expose().as_bytes())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            ApiError::Unavailable(
                "the waiting room needs FLASHGATE_EDGE_SECRET to sign tickets".into(),
            )
        })
}

/// 422 `validation_failed` when this origin has no edge secret: a waiting room is refused
/// rather than created unable to sign tickets.
pub fn require_secret(state: &AppState) -> Result<(), ApiError> {
    secret(state).map(|_| ()).map_err(|_| {
        ApiError::validation(
            "a waiting room or a draw needs FLASHGATE_EDGE_SECRET on the origin (to sign \
             admission tokens)",
        )
    })
}

/// 429 `{"result":"queued"}` + `Retry-After`: a claim on a waiting-room campaign without an
/// admission token.
pub fn queued() -> Response {
    let mut res = (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::CONTENT_TYPE, "application/json")],
        format!(r#"{{"result":"{QUEUED}"}}"#),
    )
        .into_response();
    res.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(QUEUED_RETRY_AFTER_S));
    res
}

/// The pace of admitted claims on campaign `row` ([`store::pace`]): at most `admit_per_second`
/// per second plus one second's burst go on to the gate, across all origins, so the claims
/// the origin decides keep to `2 × admit_per_second` in any one-second window even when the
/// edge forwards a bunch (several isolates, or a stalled machine catching up). Over the pace:
/// 429 `{"result":"queued"}` + `Retry-After` (whole seconds, at least 1); the admission token
/// stays valid. A Redis error lets the claim through to the gate, which answers for itself.
pub async fn pace(state: &AppState, row: &CampaignRow) -> Result<(), Response> {
    let Some(w) = row.waiting_room() else {
        return Ok(());
    };
    let mut redis = state.redis.clone();
    match store::pace(&mut redis, &row.id, w.admit_per_second).await {
        Ok(0) => Ok(()),
        Ok(wait_ms) => {
            let mut res = queued();
            let s = u32::try_from(wait_ms.div_ceil(1000))
                .unwrap_or(u32::MAX)
                .max(1);
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
            Err(res)
        }
        Err(e) => {
            tracing::warn!(error = %e, campaign = %row.id, "claim pace not checked");
            Ok(())
        }
    }
}

/// `Err` (403 `forbidden`, replayable) when the admission of sequence `seq` on campaign `c`
/// won a claim already ([`store::mark_used`]): a waiting room's token admits one winning claim,
/// so a release does not make it good again. A Redis error is logged and counts as not used:
/// the gate still holds one active claim per customer.
pub async fn check_unspent(state: &AppState, c: &str, seq: u64) -> Result<(), Refusal> {
    let mut redis = state.redis.clone();
    match store::is_used(&mut redis, c, seq).await {
        Ok(false) => Ok(()),
        Ok(true) => {
            let message = "this admission token was used by a winning claim already";
            Err(Refusal {
                response: Box::new(ApiError::Forbidden(message.into()).into_response()),
                replayable: true,
            })
        }
        Err(e) => {
            tracing::warn!(error = %e, campaign = %c, "admission use not checked");
            Ok(())
        }
    }
}

/// A claim refused by [`check_claim`].
#[derive(Debug)]
pub struct Refusal {
    /// The answer (429 `queued`, 400, 403 or 503).
    pub response: Box<Response>,
    /// True when the token was genuine (signed, this customer's, this campaign's) but expired
    /// or spent: a retry of a decided claim may still be answered from its record ([`replay`]).
    pub replayable: bool,
}

impl From<Response> for Refusal {
    fn from(response: Response) -> Self {
        Refusal {
            response: Box::new(response),
            replayable: false,
        }
    }
}

/// The admission check of a claim by `customer` on campaign `row` (defence in depth: the edge
/// checks first). A draw campaign (`draw`) is checked the same way, its winners' tokens minted
/// by [`crate::access::admit::token`]; without a token it is 403 `forbidden`, not `queued`.
/// `Ok(None)`: no waiting room and not a draw, nothing to check; `Ok(Some(seq))`: admitted
/// with the token of sequence `seq`. Refusals: 429 `queued` without a token ([`queued`]),
/// 400 `invalid_request` for a malformed one, 403 `forbidden` for a forged, expired, or
/// another customer's or campaign's token (`replayable` set for a genuine expired one), 503
/// without the edge secret.
pub fn check_claim(
    state: &AppState,
    row: &CampaignRow,
    draw: bool,
    customer: &str,
    headers: &HeaderMap,
) -> Result<Option<u64>, Refusal> {
    if row.waiting_room.is_none() && !draw {
        return Ok(None);
    }
    let secret = secret(state).map_err(|e| Refusal::from(e.into_response()))?;
    let Some(token) = headers
        .get(ADMISSION_HEADER)
        .map(|v| v.to_str().unwrap_or("\u{0}"))
        .filter(|t| !t.trim().is_empty())
    else {
        if draw {
            let message = "a draw campaign takes claims from its admitted winners only, with \
                           their admission token";
            return Err(Refusal::from(
                ApiError::Forbidden(message.into()).into_response(),
            ));
        }
        return Err(queued().into());
    };
    let now_s = chrono::Utc::now().timestamp();
    admission::check_admission(secret, token, &row.id, customer, now_s)
        .map(|a| Some(a.place.sequence))
        .map_err(|e| {
            let message = e.message("admission token");
            let response = match e {
                AdmissionError::Malformed => ApiError::BadRequest(codes::INVALID_REQUEST, message),
                _ => ApiError::Forbidden(message),
            }
            .into_response();
            Refusal {
                response: Box::new(response),
                replayable: e == AdmissionError::Expired,
            }
        })
}

/// The `queue` object of campaign `row`'s public status; `None` without a waiting room.
/// Redis errors are returned (the status then answers 503 rather than hide the queue).
pub async fn status(
    state: &AppState,
    row: &CampaignRow,
) -> redis::RedisResult<Option<QueueStatus>> {
    let Some(w) = row.waiting_room() else {
        return Ok(None);
    };
    let mut redis = state.redis.clone();
    let f = store::figures(&mut redis, &row.id).await?;
    let mut q = f.status(&w, row.queue_paused);
    // Also while active: a sold-out the edge learns from a claim's 409 keeps these queue
    // fields, and must still say `may_return` while holds are outstanding.
    let state_now = row.status_at(chrono::Utc::now()).state;
    if let Some(hold_s) = row.hold_seconds {
        if matches!(state_now, CampaignState::Active | CampaignState::SoldOut) {
            q.held_until = returnable_until(state, &row.id, hold_s).await;
        }
    }
    Ok(Some(q))
}

/// By when units of campaign `c` (holds of `hold_s` seconds) may still come back to the gate:
/// the latest `held_until` of its outstanding holds (`held`, including those past due that the
/// sweeper has not expired yet), and at least now + `hold_s` while PostgreSQL's `remaining` is
/// above zero. The gate runs ahead of PostgreSQL both ways: a unit it gave out may not be
/// committed as a hold yet (it will be held until at most now + `hold_s`), and an expired or
/// released hold is counted back in PostgreSQL before its unit reaches the gate. Either way
/// the gate may say sold out while a unit is on its way back, and `final` would send the
/// customers still polling away. `None` when nothing can come back, or when PostgreSQL fails
/// (logged: the poll then says `final`, as if nothing could).
async fn returnable_until(
    state: &AppState,
    c: &str,
    hold_s: i32,
) -> Option<chrono::DateTime<chrono::Utc>> {
    // One statement, so the count and the holds are one snapshot: a hold expiring between two
    // reads would be in neither.
    let read: sqlx::Result<Option<(i64, Option<chrono::DateTime<chrono::Utc>>)>> = sqlx::query_as(
        "SELECT k.remaining,
                    (SELECT max(held_until) FROM claims
                      WHERE campaign_id = k.id AND status = 'held')
               FROM campaigns k WHERE k.id = $1",
    )
    .bind(c)
    .fetch_optional(&state.db)
    .await;
    let (remaining, latest) = match read {
        Ok(row) => row?,
        Err(e) => {
            tracing::warn!(campaign = %c, error = %e, "outstanding holds unknown");
            return None;
        }
    };
    let in_flight = (remaining > 0)
        .then(|| chrono::Utc::now() + chrono::Duration::seconds(i64::from(hold_s.max(0))));
    latest.max(in_flight)
}

/// Fills the `queue` figures of admin views that have a waiting room (the view carries the
/// stored rate and pause from PostgreSQL). A Redis failure leaves `queue` out (logged): the
/// admin view still shows PostgreSQL's truth.
pub async fn fill_views(state: &AppState, views: &mut [CampaignView]) {
    let mut redis = state.redis.clone();
    for v in views.iter_mut() {
        let Some(q) = v.campaign.queue.as_mut() else {
            continue;
        };
        match store::figures(&mut redis, &v.campaign.status.id).await {
            Ok(f) => {
                q.length = f.joined.saturating_sub(f.admitted);
                q.now_serving = f.now_serving;
                q.admitted = f.admitted;
                q.admitted_unclaimed = f.unclaimed;
            }
            Err(e) => {
                tracing::warn!(campaign = %v.campaign.status.id, error = %e,
                    "queue figures unavailable");
                v.campaign.queue = None;
            }
        }
    }
}

/// The part of an admin view's `queue` known from PostgreSQL (rate and pause); the counts
/// are filled from Redis by [`fill_views`].
pub fn stored_view(row: &CampaignRow) -> Option<QueueView> {
    row.waiting_room().map(|w| QueueView {
        length: 0,
        now_serving: 0,
        admitted: 0,
        admitted_unclaimed: 0,
        admit_per_second: w.admit_per_second,
        paused: row.queue_paused,
    })
}
