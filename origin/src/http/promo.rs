//! HTTP surface of the promo code service ([`crate::promo`]; paths and bodies are documented in
//! docs/API.md).
//!
//! Shop checkout (customer token):
//! - `POST /api/v1/codes/{code}/check` `{"cart_total": 6000}` → 200 `{"discount":600,"total":5400}`;
//!   422 `{"result":"not_applicable","reason":…}`; 404 `{"result":"invalid_code"}`.
//! - `POST /api/v1/codes/{code}/use` `{"order":"o81","cart_total":6000}` + `Idempotency-Key` →
//!   201 `{"use":"u_…","discount":600,"total":5400,"held_until":"…"}`; 409
//!   `{"result":"used_up"}` / `{"result":"already_used"}`; 422 `not_applicable`; 404. A retry
//!   with the same key gets the first reply byte for byte; while the first request with the key
//!   is still running, 409 `{"result":"in_progress"}` + `Retry-After: 1` (as a claim); the key
//!   with another code or body, 422 `idempotency_key_reused`.
//!
//! Payment service (service token):
//! - `POST /api/v1/uses/{id}/confirm` → 200 `{"use","code","status":"used"}`; 409 `use_released`.
//! - `POST /api/v1/uses/{id}/release` → 200 `{"use","code","status":"released"}`; 409
//!   `use_confirmed`. Any body is ignored.
//!
//! Admin (ADMIN HANDLERS below; the token and its role are checked by [`extract::admin`],
//! writes with a body by [`ManagerJson`]):
//! - `POST /admin/v1/codes` ([`flashgate_shared::api::promo::NewCode`]) → 201 `AdminCode`;
//!   409 when the code exists.
//! - `GET /admin/v1/codes/{code}` → 200 `AdminCode` with `uses_left`.
//! - `POST /admin/v1/codes/batches` ([`flashgate_shared::api::promo::NewCodeBatch`]) → 201
//!   `CodeBatch`.
//! - `PATCH /admin/v1/codes/{code}` `{"action":"disable"|"enable"}` → 200 `{changed, code,
//!   audit}`; 404; 422 for an unknown action.
//! - `GET /admin/v1/codes/batches/{id}.csv` (manager) → 200 `text/csv`, header `code`, one code
//!   a line, streamed; audited (`export`).
//!
//! Request errors: 400 `invalid_json` / `invalid_idempotency_key`, 401, 403, 413, 415, 422
//! `validation_failed` (e.g. a negative `cart_total`), 429 `rate_limited` + `Retry-After`
//! (failed tries spent), 503 `unavailable` + `Retry-After`. Never 500 for anything a client
//! sends; a refused request changes nothing (except one guess token for an unknown code).

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
pub use flashgate_shared::api::admin::CodeChangeReply;
use flashgate_shared::api::promo::{
    validate_offer, AdminCode, CheckReply, CheckRequest, CodeBatch, CodeChange, CodeKind,
    CodeRefusal, NewCode, NewCodeBatch, Offer, UseConflict, UseReply, UseRequest, UseState,
    MAX_BATCH_COUNT, MAX_CART_TOTAL, MAX_CODE_LIMIT, MAX_ORDER_LEN,
};
use flashgate_shared::MAX_CLAIM_BODY_BYTES;
use futures::TryStreamExt;
use sqlx::postgres::PgPoolCopyExt;

use super::extract::{self, ManagerJson, Role};
use super::openapi::params::{AdminIdempotencyKey, IdempotencyKey};
use super::openapi::CodeAnswer422;
use crate::error::{ApiError, ApiResult};
use crate::http::openapi::errors;
use crate::promo::admin::{self, CodeAction};
use crate::promo::rules::NewRules;
use crate::promo::service::{self, Trier, UseCall};
use crate::promo::store;
use crate::promo::{batch, flags, CodeRules};
use crate::state::AppState;
use flashgate_shared::api::ErrorBody;
use flashgate_shared::ip_limit::limit_key;

/// The raw code of the path; a path that does not decode is an unknown code.
fn raw_code(path: Result<Path<String>, PathRejection>) -> String {
    path.map(|Path(c)| c).unwrap_or_default()
}

fn check_cart(cart_total: i64, currency: Option<&str>) -> ApiResult<()> {
    if !(0..=MAX_CART_TOTAL).contains(&cart_total) {
        return Err(ApiError::validation(format!(
            "cart_total must be 0 to {MAX_CART_TOTAL} minor units"
        )));
    }
    if currency.is_some_and(|c| !flashgate_shared::api::promo::is_currency(c)) {
        return Err(ApiError::validation(
            "currency must be three uppercase letters",
        ));
    }
    Ok(())
}

/// The common part of check and use, read as an extractor so both handlers take the same
/// request: the raw code of the path and, after the checks in order — customer token (401),
/// `Content-Type` (415), size ≤ 4 KiB (413), edge signature when present (403 when invalid,
/// [`extract::edge_proof`]) — who calls (the customer and the client IP of
/// [`extract::client_ip`]), the headers and the body bytes.
pub struct ShopperCall {
    code: String,
    who: Trier,
    headers: HeaderMap,
    bytes: axum::body::Bytes,
}

impl FromRequest<AppState> for ShopperCall {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let (mut parts, body) = req.into_parts();
        let code = raw_code(Path::<String>::from_request_parts(&mut parts, state).await);
        let headers = &parts.headers;
        let customer = extract::customer(headers, state).await?;
        extract::require_json(headers)?;
        let bytes = extract::read_body(headers, body, MAX_CLAIM_BODY_BYTES).await?;
        let proof = extract::edge_proof(
            headers,
            state.config.edge_secret.as_ref(),
            "POST",
            parts.uri.path(),
            &bytes,
        )?;
        let who = Trier {
            customer,
            ip: extract::client_ip(proof, headers, &parts.extensions)
                .map(|ip| limit_key(ip, state.config.limit_ipv6_prefix)),
        };
        Ok(ShopperCall {
            code,
            who,
            headers: parts.headers,
            bytes,
        })
    }
}

/// `POST /api/v1/codes/{code}/check`. Checks in order: the [`ShopperCall`] checks (401, 415,
/// 413, 403), body (400 / 422), then [`service::check`].
#[utoipa::path(
    post,
    path = "/api/v1/codes/{code}/check",
    tag = "promo codes",
    security(("customer_token" = [])),
    params(("code" = String, Path, description = "The promo code (normalised: trimmed, NFKC, uppercase).")),
    request_body(content = CheckRequest, example = json!({"cart_total": 6000})),
    responses(
        (status = 200, description = "The discount and the total after it (minor units); \
            changes nothing.", body = CheckReply, example = json!({"discount": 600, "total": 5400})),
        (status = 404, description = "invalid_code: no such code (a failed guess).",
            body = CodeRefusal, example = json!({"result": "invalid_code"})),
        (status = 422, description = "not_applicable with its `reason` (a business result), or \
            validation_failed for the body (a request error).",
            body = CodeAnswer422,
            example = json!({"result": "not_applicable", "reason": "disabled"})),
        errors::JsonBody,
        errors::InvalidEdgeSignature,
        (status = 429, description = "rate_limited: too many failed guesses by this customer or \
            address; retry after `Retry-After`.", body = ErrorBody,
            headers(("Retry-After" = u32))),
    ),
)]
pub async fn check(State(state): State<AppState>, call: ShopperCall) -> ApiResult<Response> {
    let req: CheckRequest = extract::parse_json(&call.bytes)?;
    check_cart(req.cart_total, req.currency.as_deref())?;
    let reply = service::check(&state.promo(), &call.code, &call.who, &req).await?;
    Ok(reply.into_response())
}

/// `POST /api/v1/codes/{code}/use`. Checks in order: the [`ShopperCall`] checks (401, 415,
/// 413, 403), `Idempotency-Key` (400), body (400 / 422), then [`service::use_code`].
///
/// Retries with the same `Idempotency-Key`: once the first request has answered, its reply
/// again, byte for byte; while it is still running, 409 `{"result":"in_progress"}` with
/// `Retry-After: 1` (the claim path's answer), which changes nothing: retry with the same key
/// to get the first reply.
#[utoipa::path(
    post,
    path = "/api/v1/codes/{code}/use",
    tag = "promo codes",
    security(("customer_token" = [])),
    params(("code" = String, Path, description = "The promo code."), IdempotencyKey),
    request_body(content = UseRequest, example = json!({"order": "o-1001", "cart_total": 6000})),
    responses(
        (status = 201, description = "The use, held until its confirm (or the sweeper's \
            release).", body = UseReply),
        (status = 409, description = "used_up, already_used (with the earlier use's id), \
            in_progress (+ `Retry-After`) while the first request with this key runs.",
            body = CodeRefusal, headers(("Retry-After" = u32, description = "With in_progress."))),
        (status = 404, description = "invalid_code.", body = CodeRefusal),
        (status = 422, description = "not_applicable with its `reason`; validation_failed; \
            idempotency_key_reused.", body = CodeAnswer422),
        errors::KeyedJsonBody,
        errors::InvalidEdgeSignature,
        (status = 429, description = "rate_limited: too many failed guesses.", body = ErrorBody,
            headers(("Retry-After" = u32))),
    ),
)]
pub async fn use_code(State(state): State<AppState>, call: ShopperCall) -> ApiResult<Response> {
    let key = extract::idempotency_key(&call.headers)?;
    let req: UseRequest = extract::parse_json(&call.bytes)?;
    check_cart(req.cart_total, req.currency.as_deref())?;
    flashgate_shared::text::check_visible_ascii("order", &req.order, MAX_ORDER_LEN)
        .map_err(ApiError::validation)?;
    let code = call.code;
    let call = UseCall {
        who: call.who,
        idempotency_key: key,
        body: call.bytes.to_vec(),
        req,
    };
    let reply = service::use_code(&state.promo(), &code, call).await?;
    Ok(reply.into_response())
}

/// A use id: `u_` + 32 lowercase hex digits. Anything else is not found.
fn use_id(path: Result<Path<String>, PathRejection>) -> ApiResult<String> {
    let id = path.map(|Path(id)| id).unwrap_or_default();
    let ok = id.len() == 34
        && id.starts_with("u_")
        && id[2..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if ok {
        Ok(id)
    } else {
        Err(ApiError::NotFound(format!("no use {id}")))
    }
}

/// The common checks of confirm and release, in order: service token (401; `action` names
/// the call in the error), then the use id of the path (404).
fn service_use(
    state: &AppState,
    path: Result<Path<String>, PathRejection>,
    headers: &HeaderMap,
    action: &str,
) -> ApiResult<String> {
    extract::require_token(headers, &state.config.service_token, action)?;
    use_id(path)
}

/// `POST /api/v1/uses/{id}/confirm` (service token): the payment went through.
#[utoipa::path(
    post,
    path = "/api/v1/uses/{id}/confirm",
    tag = "promo codes",
    security(("service_token" = [])),
    params(("id" = String, Path, description = "The use id (`u_` + 32 hex digits).")),
    responses(
        (status = 200, description = "used (the same call again: the same 200).", body = UseState),
        (status = 409, description = "use_released: the use went back before.", body = UseConflict),
        errors::NoUse,
    ),
)]
pub async fn confirm(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = service_use(&state, path, &headers, "confirm")?;
    Ok(service::confirm(&state.promo(), &id).await?.into_response())
}

/// `POST /api/v1/uses/{id}/release` (service token): the payment failed; the use goes back.
#[utoipa::path(
    post,
    path = "/api/v1/uses/{id}/release",
    tag = "promo codes",
    security(("service_token" = [])),
    params(("id" = String, Path, description = "The use id (`u_` + 32 hex digits).")),
    responses(
        (status = 200, description = "released: she may use the code again (the same call \
            again: the same 200).", body = UseState),
        (status = 409, description = "use_confirmed: the use was confirmed before.",
            body = UseConflict),
        errors::NoUse,
    ),
)]
pub async fn release(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = service_use(&state, path, &headers, "release")?;
    Ok(service::release(&state.promo(), &id).await?.into_response())
}

// ---- ADMIN HANDLERS -------------------------------------------------------------------------

fn admin_view(
    code: &CodeRules,
    uses_left: i64,
    disabled_at: Option<chrono::DateTime<chrono::Utc>>,
) -> AdminCode {
    let r = &code.rules;
    AdminCode {
        code: code.code.clone(),
        kind: r.kind,
        percent_off: r.percent_off_bp,
        amount_off: r.amount_off,
        currency: r.currency.clone(),
        min_order: r.min_order,
        starts_at: r.starts_at,
        ends_at: r.ends_at,
        limit: r.use_limit,
        uses_left,
        once_per_customer: r.once_per_customer,
        batch: code.batch.clone(),
        disabled_at,
    }
}

/// Checks an offer ([`validate_offer`], times) and builds its rules row. 422 when broken.
fn new_rules(
    kind: CodeKind,
    o: &Offer,
    use_limit: i64,
    once_per_customer: bool,
) -> ApiResult<NewRules> {
    validate_offer(o.percent_off, o.amount_off, &o.currency, o.min_order)
        .map_err(ApiError::validation)?;
    let (starts_at, ends_at) = times(o.starts_at.as_deref(), &o.ends_at)?;
    Ok(NewRules {
        kind,
        percent_off_bp: o.percent_off,
        amount_off: o.amount_off,
        currency: o.currency.clone(),
        min_order: o.min_order,
        starts_at,
        ends_at,
        use_limit,
        once_per_customer,
    })
}

/// Resolves `starts_at` (default now) and `ends_at` and checks `starts_at < ends_at`.
fn times(
    starts_at: Option<&str>,
    ends_at: &str,
) -> ApiResult<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>)> {
    use crate::promo::rules::parse_instant;
    let now = chrono::Utc::now();
    let starts = match starts_at {
        Some(s) => {
            parse_instant(s, now).map_err(|e| ApiError::validation(format!("starts_at: {e}")))?
        }
        None => now,
    };
    let ends =
        parse_instant(ends_at, now).map_err(|e| ApiError::validation(format!("ends_at: {e}")))?;
    if starts >= ends {
        return Err(ApiError::validation("starts_at must be before ends_at"));
    }
    Ok((starts, ends))
}

/// `POST /admin/v1/codes` (manager token): creates a shared code. 201 `AdminCode`; 409 when it
/// exists; 422 for a broken rule.
#[utoipa::path(
    post,
    path = "/admin/v1/codes",
    tag = "promo codes",
    security(("admin_token" = [])),
    params(AdminIdempotencyKey),
    request_body(content = NewCode, example = json!({"code": "SUMMER10", "currency": "EUR",
        "limit": 100, "ends_at": "2026-09-01T00:00:00Z", "percent_off": 1000})),
    responses(
        (status = 201, description = "The code, created.", body = AdminCode),
        errors::JsonBody,
        (status = 409, description = "conflict: the code exists; in_progress (+ `Retry-After`).",
            body = ErrorBody, headers(("Retry-After" = u32))),
        (status = 422, description = "validation_failed, naming the rule; idempotency_key_reused.",
            body = ErrorBody),
    ),
)]
pub async fn admin_create(
    State(state): State<AppState>,
    ManagerJson { body: new, .. }: ManagerJson<NewCode>,
) -> ApiResult<Response> {
    let code = flashgate_shared::code::normalise(&new.code).ok_or_else(|| {
        ApiError::validation("code must be 1 to 64 characters A-Z and 0-9 after normalisation")
    })?;
    if !(1..=MAX_CODE_LIMIT).contains(&new.limit) {
        return Err(ApiError::validation(format!(
            "limit must be 1 to {MAX_CODE_LIMIT}"
        )));
    }
    let rules = new_rules(
        CodeKind::Shared,
        &new.offer,
        new.limit,
        new.once_per_customer,
    )?;
    let created = store::insert_shared(&state.db, &code, &rules)
        .await?
        .ok_or_else(|| ApiError::Conflict(format!("code {code} exists")))?;
    state.code_rules.forget(&code).await;
    Ok((
        StatusCode::CREATED,
        axum::Json(admin_view(&created, created.rules.use_limit, None)),
    )
        .into_response())
}

/// `GET /admin/v1/codes/{code}` (viewer or manager token): the code with its uses left.
#[utoipa::path(
    get,
    path = "/admin/v1/codes/{code}",
    tag = "promo codes",
    security(("admin_token" = [])),
    params(("code" = String, Path, description = "The promo code.")),
    responses(
        (status = 200, description = "The code with its uses left.", body = AdminCode),
        errors::NoCode,
    ),
)]
pub async fn admin_show(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    extract::admin(&headers, &state, Role::Viewer)?;
    let raw = raw_code(path);
    let not_found = || ApiError::NotFound(format!("no code {raw}"));
    let code = flashgate_shared::code::normalise(&raw).ok_or_else(not_found)?;
    let (rules, left, disabled_at) = store::find_with_uses_left(&state.db, &code)
        .await?
        .ok_or_else(not_found)?;
    Ok(axum::Json(admin_view(&rules, left, disabled_at)).into_response())
}

/// `PATCH /admin/v1/codes/{code}` (manager token) with [`CodeChange`]: `{"action":"disable"}`
/// makes every origin refuse the code (422 `not_applicable`, `reason: "disabled"`) — at once,
/// since the cached state in Redis every origin reads is written before this reply — and
/// `{"action":"enable"}` undoes it. One statement with its audit row. 200
/// [`CodeChangeReply`]; 404 unknown code; 422 `validation_failed` for an unknown action.
#[utoipa::path(
    patch,
    path = "/admin/v1/codes/{code}",
    tag = "promo codes",
    security(("admin_token" = [])),
    params(("code" = String, Path, description = "The promo code."), AdminIdempotencyKey),
    request_body(content = CodeChange, example = json!({"action": "disable"})),
    responses(
        (status = 200, description = "Applied (audited), or already so.", body = CodeChangeReply),
        errors::JsonBody,
        errors::NoCode,
        errors::InProgress,
        (status = 422, description = "validation_failed: another action; idempotency_key_reused.",
            body = ErrorBody),
    ),
)]
pub async fn admin_change(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let who = extract::admin(&headers, &state, Role::Manager)?;
    let raw = raw_code(path);
    let not_found = || ApiError::NotFound(format!("no code {raw}"));
    let change: CodeChange = extract::json_body(&headers, body).await?;
    let action = CodeAction::parse(&change.action).map_err(ApiError::validation)?;
    let code = flashgate_shared::code::normalise(&raw).ok_or_else(not_found)?;
    let done = admin::switch(&state.db, &code, &who.name, action)
        .await?
        .ok_or_else(not_found)?;
    let mut redis = state.redis.clone();
    flags::publish(
        &mut redis,
        &code,
        done.uses_left,
        done.version,
        done.disabled_at.is_some(),
    )
    .await?;
    if done.changed {
        // The code itself stays out of the logs (a coupon code is a bearer of value); the
        // audit row, read through the admin API, names it.
        let seq = done.audit.as_ref().map(|a| a.seq);
        tracing::info!(actor = %who.name, action = action.as_str(), audit_seq = seq, "code switched by a manager");
    }
    let (rules, left, disabled_at) = store::find_with_uses_left(&state.db, &code)
        .await?
        .ok_or_else(not_found)?;
    Ok(axum::Json(CodeChangeReply {
        changed: done.changed,
        code: admin_view(&rules, left, disabled_at),
        audit: done.audit,
    })
    .into_response())
}

/// `POST /admin/v1/codes/batches` (manager token): generates and saves `count` one-time codes
/// (synchronously; a million take seconds). 201 `CodeBatch`; 422 for a broken rule.
#[utoipa::path(
    post,
    path = "/admin/v1/codes/batches",
    tag = "promo codes",
    security(("admin_token" = [])),
    params(AdminIdempotencyKey),
    request_body(content = NewCodeBatch, example = json!({"count": 1000, "currency": "EUR",
        "ends_at": "2026-09-01T00:00:00Z", "amount_off": 500})),
    responses(
        (status = 201, description = "The batch, generated and saved.", body = CodeBatch),
        errors::JsonBody,
        errors::InProgress,
        (status = 422, description = "validation_failed; idempotency_key_reused.", body = ErrorBody),
    ),
)]
pub async fn batch_create(
    State(state): State<AppState>,
    ManagerJson { body: new, .. }: ManagerJson<NewCodeBatch>,
) -> ApiResult<Response> {
    if !(1..=MAX_BATCH_COUNT).contains(&new.count) {
        return Err(ApiError::validation(format!(
            "count must be 1 to {MAX_BATCH_COUNT}"
        )));
    }
    let rules = new_rules(CodeKind::OneTime, &new.offer, 1, true)?;
    let b = batch::generate(&state.db, &rules, new.count as usize).await?;
    tracing::info!(batch = %b.id, count = b.count, redrawn = b.redrawn, took_ms = b.took.as_millis() as u64, "one-time codes saved");
    let body = CodeBatch {
        csv: format!("/admin/v1/codes/batches/{}.csv", b.id),
        id: b.id,
        count: b.count,
        took_ms: b.took.as_millis() as u64,
    };
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}

/// `GET /admin/v1/codes/batches/{id}.csv` (manager token: one-time codes are money, so a
/// viewer gets 403): the batch's codes as CSV, streamed from PostgreSQL `COPY … TO STDOUT`.
/// Each export first writes an `export` audit row (who, which batch, how many codes).
#[utoipa::path(
    get,
    path = "/admin/v1/codes/batches/{file}",
    tag = "promo codes",
    security(("admin_token" = [])),
    params(("file" = String, Path, description = "`<batch id>.csv`, as `csv` of the batch says.")),
    responses(
        (status = 200, description = "The batch's codes as CSV, header `code` (audited as an \
            export).", content_type = "text/csv", body = String),
        (status = 404, description = "not_found: no such batch file.", body = ErrorBody),
    ),
)]
pub async fn batch_csv(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let who = extract::admin(&headers, &state, Role::Manager)?;
    let file = path.map(|Path(f)| f).unwrap_or_default();
    let not_found = || ApiError::NotFound(format!("no batch file {file}"));
    let id = file.strip_suffix(".csv").ok_or_else(not_found)?;
    let (rules_id, audit) = admin::audit_export(&state.db, id, &who.name)
        .await?
        .ok_or_else(not_found)?;
    tracing::info!(batch = %id, actor = %who.name, seq = audit.seq, "one-time codes exported");
    let statement = batch::csv_statement(rules_id);
    let stream = state.db.pool().copy_out_raw(&statement).await?;
    let stream = stream.map_err(|e| std::io::Error::other(e.to_string()));
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{id}.csv\""),
            ),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}
