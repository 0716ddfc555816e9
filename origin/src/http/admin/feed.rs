//! The claims feed of a campaign for the shop's reconciliation (viewer token):
//! - `GET /admin/v1/campaigns/{id}/claims?status=&since=&cursor=&limit=` — one page
//!   ([`ClaimFeed`]), oldest first, with an opaque cursor for the next;
//! - `GET /admin/v1/campaigns/{id}/claims.csv?status=&since=` — every matching claim as CSV
//!   (header [`FEED_CSV_HEADER`]), streamed page by page in the same order; each export first
//!   writes an `export` audit row (who, which filters).
//!
//! Bad query values (a status that is not one, a `since` that is not RFC 3339, a cursor that
//! this feed did not make, a `limit` outside 1..=1000, an unknown parameter) are 422
//! `validation_failed`, as a bad query is on every admin route, nothing read or written.

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use flashgate_shared::api::{
    feed_csv_line, ClaimFeed, ClaimStatus, ErrorBody, FeedCursor, DEFAULT_FEED_LIMIT,
    FEED_CSV_HEADER, MAX_FEED_LIMIT,
};
use futures::stream::{self, StreamExt};

use crate::claims::feed::{self, FeedQuery};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{self, Path, Role};
use crate::http::openapi::errors;
use crate::state::AppState;

/// The query of the feed, for the document (the handlers read the pairs themselves, so that
/// every bad value is a 422 in the documented shape): `status`, `since`, `cursor`, `limit` (the
/// CSV export takes `status` and `since`).
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct FeedParams {
    /// Only claims in this status: `held`, `paid`, `released`, `expired`, `issued`, `redeemed`.
    pub status: Option<String>,
    /// Only claims written at or after this instant (RFC 3339).
    pub since: Option<String>,
    /// Where to go on: `next_cursor` of the page before (opaque).
    pub cursor: Option<String>,
    /// Claims per page, 1..=1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// The query of the CSV export, for the document: `status`, `since` as in [`FeedParams`].
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct CsvParams {
    /// Only claims in this status: `held`, `paid`, `released`, `expired`, `issued`, `redeemed`.
    pub status: Option<String>,
    /// Only claims written at or after this instant (RFC 3339).
    pub since: Option<String>,
}

/// The query's values as sent, each at most once.
#[derive(Debug, Default)]
struct Raw {
    status: Option<String>,
    since: Option<String>,
    cursor: Option<String>,
    limit: Option<String>,
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::validation(message)
}

/// The query string's pairs, as sent.
type Pairs = Result<Query<Vec<(String, String)>>, QueryRejection>;

/// The query string's values: each parameter at most once, no other parameter.
fn params(pairs: Pairs, allowed: &[&str]) -> ApiResult<Raw> {
    let Query(pairs) = pairs.map_err(|_| bad("the query string is not well-formed"))?;
    let mut p = Raw::default();
    for (k, v) in pairs {
        let slot = match k.as_str() {
            "status" if allowed.contains(&"status") => &mut p.status,
            "since" if allowed.contains(&"since") => &mut p.since,
            "cursor" if allowed.contains(&"cursor") => &mut p.cursor,
            "limit" if allowed.contains(&"limit") => &mut p.limit,
            _ => {
                return Err(bad(format!(
                    "unknown query parameter (this endpoint takes {})",
                    allowed.join(", ")
                )))
            }
        };
        if slot.replace(v).is_some() {
            return Err(bad("each query parameter may be given once"));
        }
    }
    Ok(p)
}

/// Checks the parameters of campaign `campaign`'s feed and builds its query.
fn query_of(campaign: &str, p: Raw) -> ApiResult<FeedQuery> {
    let status = match p.status.as_deref() {
        None => None,
        Some(s) => Some(ClaimStatus::parse(s).ok_or_else(|| {
            bad("status must be one of held, paid, released, expired, issued, redeemed")
        })?),
    };
    let since = match p.since.as_deref() {
        None => None,
        Some(s) => Some(
            DateTime::parse_from_rfc3339(s)
                .map_err(|_| bad("since must be an RFC 3339 time, e.g. 2026-01-01T12:00:00Z"))?
                .with_timezone(&Utc),
        ),
    };
    let after = match p.cursor.as_deref() {
        None => None,
        Some(c) => Some(FeedCursor::decode(c).ok_or_else(|| {
            bad("cursor is not one this feed made (use next_cursor of a page as it is)")
        })?),
    };
    let limit = match p.limit.as_deref() {
        None => DEFAULT_FEED_LIMIT,
        Some(l) => l
            .parse::<i64>()
            .ok()
            .filter(|n| (1..=MAX_FEED_LIMIT).contains(n))
            .ok_or_else(|| {
                bad(format!(
                    "limit must be a whole number from 1 to {MAX_FEED_LIMIT}"
                ))
            })?,
    };
    Ok(FeedQuery {
        campaign: campaign.to_string(),
        status,
        since,
        after,
        limit,
    })
}

/// The token (viewer), the campaign id's shape and the campaign's existence (404).
async fn campaign_of(state: &AppState, headers: &HeaderMap, id: &str) -> ApiResult<String> {
    let who = extract::admin(headers, state, Role::Viewer)?;
    tracing::Span::current().record("campaign", id);
    if !flashgate_shared::api::is_valid_slug(id)
        || crate::campaigns::store::find(&state.db, id)
            .await?
            .is_none()
    {
        return Err(extract::no_campaign(id));
    }
    Ok(who.name)
}

/// 200 with one page of the campaign's claims, oldest first; 422 `validation_failed` for a bad
/// `status`, `since`, `cursor`, `limit` or another parameter; 404 for an unknown campaign.
#[utoipa::path(
    get,
    path = "/admin/v1/campaigns/{id}/claims",
    tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Campaign id."), FeedParams),
    responses(
        (status = 200, description = "One page, oldest first (by `created_at`, then `id`); \
            `next_cursor` goes on after it.", body = ClaimFeed),
        (status = 422, description = "validation_failed: a bad status, since, cursor or limit, \
            or another query parameter.", body = ErrorBody),
        errors::NoCampaign,
    ),
)]
pub async fn claims(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    pairs: Pairs,
) -> ApiResult<Response> {
    let q = query_of(&id, params(pairs, &["status", "since", "cursor", "limit"])?)?;
    campaign_of(&state, &headers, &id).await?;
    let (claims, has_more) = feed::page(&state.db, &q).await?;
    let next_cursor = claims
        .last()
        .map(FeedCursor::after)
        .or(q.after)
        .map(|c| c.encode());
    Ok(Json(ClaimFeed {
        campaign: id,
        claims,
        next_cursor,
        has_more,
    })
    .into_response())
}

/// Claims read per step of the CSV export.
const CSV_PAGE: i64 = 1_000;

/// 200 `text/csv` with every claim of the campaign that matches `status` and `since`, oldest
/// first, one line per claim under the header [`FEED_CSV_HEADER`] (the same values as the JSON
/// feed; empty for `null`). Audited as an `export` before the first byte.
#[utoipa::path(
    get,
    path = "/admin/v1/campaigns/{id}/claims.csv",
    tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "Campaign id."), CsvParams),
    responses(
        (status = 200, description = "The claims as CSV, header \
            `id,customer,status,held_until,paid_at,payment_ref,created_at` (audited as an \
            export).", content_type = "text/csv", body = String),
        (status = 422, description = "validation_failed: a bad status or since, or another \
            query parameter.", body = ErrorBody),
        errors::NoCampaign,
    ),
)]
pub async fn claims_csv(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    pairs: Pairs,
) -> ApiResult<Response> {
    let p = params(pairs, &["status", "since"])?;
    let audit_params = serde_json::json!({ "status": p.status, "since": p.since });
    let mut q = query_of(&id, p)?;
    q.limit = CSV_PAGE;
    let actor = campaign_of(&state, &headers, &id).await?;
    let seq = feed::audit_export(&state.db, &id, &actor, audit_params)
        .await?
        .ok_or_else(|| extract::no_campaign(&id))?;
    tracing::info!(campaign = %id, actor = %actor, seq, "claims feed exported");
    let db = state.db.clone();
    let header_line =
        stream::once(async { Ok::<_, std::io::Error>(format!("{FEED_CSV_HEADER}\n")) });
    // Page by page after a cursor: the stream owns its query, and each page is one statement.
    let pages = stream::unfold(Some(q), move |q| {
        let db = db.clone();
        async move {
            let mut q = q?;
            match feed::page(&db, &q).await {
                Ok((claims, more)) => {
                    let text: String = claims.iter().map(feed_csv_line).collect();
                    let next = (more && !claims.is_empty()).then(|| {
                        q.after = claims.last().map(FeedCursor::after);
                        q
                    });
                    Some((Ok(text), next))
                }
                Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
            }
        }
    });
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{id}-claims.csv\""),
            ),
        ],
        Body::from_stream(header_line.chain(pages)),
    )
        .into_response())
}
