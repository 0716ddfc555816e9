//! `Idempotency-Key` on admin writes (`POST /admin/v1/campaigns`, `PATCH
//! /admin/v1/campaigns/{id}`, `POST /admin/v1/codes`, `POST /admin/v1/codes/batches`,
//! `PATCH /admin/v1/codes/{code}`), after the IETF draft "The Idempotency-Key HTTP Header
//! Field": a write retried after a lost reply gets the first reply again instead of being
//! applied twice.
//!
//! One mechanism with claims and code uses: the records of [`crate::idempotency`] in
//! Redis, scoped per admin principal (the token's name, as `admin <name>`: the space keeps the
//! scope apart from every customer id, which is visible ASCII), and the request fingerprint of
//! that module over the method, path and body.
//!
//! - no header: the write runs as without this layer;
//! - a malformed key: 400 `invalid_idempotency_key`; no or a wrong token: 401 / 403 (as the
//!   handler would answer), before any record is written;
//! - first use of the key: the write runs; its reply (status and exact body) is kept for
//!   `FLASHGATE_IDEMPOTENCY_TTL_SECONDS`, except a 5xx, after which a retry runs again;
//! - the same key and fingerprint again: the kept reply, with `Idempotent-Replayed: true`;
//!   while the first request still runs: 409 `{"result":"in_progress","message"}` +
//!   `Retry-After: 1`;
//! - the same key with another method, path or body: 422 `idempotency_key_reused`.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use flashgate_shared::api::{codes, ErrorBody};

use crate::error::{ApiError, ApiResult};
use crate::http::extract::{self, Role, MAX_JSON_BODY_BYTES};
use crate::idempotency::{self, Begin};
use crate::reply::{Outcome, Reply};
use crate::state::AppState;

/// Response header set on a replayed reply (by [`Reply`]'s `IntoResponse`).
pub use flashgate_shared::REPLAYED_HEADER;

/// The middleware (`axum::middleware::from_fn_with_state`) of admin writes; see the module
/// documentation. Reads (`GET`, `HEAD`) pass through.
pub async fn replay_writes(State(state): State<AppState>, req: Request, next: Next) -> Response {
    run(state, req, next)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn run(state: AppState, req: Request, next: Next) -> ApiResult<Response> {
    let safe = matches!(*req.method(), Method::GET | Method::HEAD);
    if safe
        || !req
            .headers()
            .contains_key(flashgate_shared::IDEMPOTENCY_KEY_HEADER)
    {
        return Ok(next.run(req).await);
    }
    let key = extract::idempotency_key(req.headers())?;
    let who = extract::admin(req.headers(), &state, Role::Manager)?;
    let (parts, body) = req.into_parts();
    let bytes = extract::read_body(&parts.headers, body, MAX_JSON_BODY_BYTES).await?;
    let scope = format!("admin {}", who.name);
    let fp = idempotency::fingerprint(
        &format!("admin {} {}", parts.method, parts.uri.path()),
        &bytes,
    );
    let mut redis = state.redis.clone();
    match idempotency::begin(&mut redis, &scope, &key, &fp).await? {
        Begin::New => {}
        Begin::InProgress => {
            let body = ErrorBody::new(
                codes::IN_PROGRESS,
                "the first request with this Idempotency-Key is still running; retry with the same key",
            );
            return Ok(
                Reply::json(StatusCode::CONFLICT, Outcome::InProgress, &body).into_response(),
            );
        }
        Begin::Reused => {
            return Err(ApiError::Unprocessable(
                codes::IDEMPOTENCY_KEY_REUSED,
                "this Idempotency-Key was used with another method, path or body".into(),
            ))
        }
        Begin::Replay(reply) => return Ok(reply.into_response()),
    }
    let res = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let status = res.status();
    if status.is_server_error() {
        let _ = idempotency::abandon(&mut redis, &scope, &key).await;
        return Ok(res);
    }
    let (res_parts, res_body) = res.into_parts();
    let kept = match axum::body::to_bytes(res_body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => {
            let _ = idempotency::abandon(&mut redis, &scope, &key).await;
            return Err(ApiError::Unavailable(format!("admin reply body: {e}")));
        }
    };
    let reply = Reply {
        status,
        body: kept.clone(),
        outcome: Outcome::AdminWrite,
    };
    if let Err(e) = idempotency::finish(
        &mut redis,
        &scope,
        &key,
        &fp,
        &reply,
        state.config.idempotency_ttl_seconds,
    )
    .await
    {
        // The write is done: answer it. The pending record expires after
        // PENDING_TTL_SECONDS, after which a retry would run again.
        tracing::warn!(error = %e, actor = %who.name, "admin write reply not recorded for its Idempotency-Key");
    }
    Ok(Response::from_parts(res_parts, Body::from(kept)))
}
