//! Check, use, confirm, release and the release sweeper of promo codes.
//!
//! Check (checking the code in the cart changes nothing): the guess buckets (peek), the code's
//! cached rules, and the code's cached state in Redis (the used-up flag and her use). It writes
//! nothing, except one token of the guess buckets for an unknown code.
//!
//! Use: guess buckets, cached rules, the idempotency record ([`crate::idempotency`], with a
//! fingerprint of its own; `in_progress` + `Retry-After` while its first request runs), the
//! rules, the used-up flag (answers without the row), then the one conditional statement of [`store::take`]; the cached state learns the outcome.
//! Steps from the idempotency record on run in a task of their own, so a client that hangs up
//! cannot leave a use taken without its record.

use std::sync::Arc;

use axum::http::StatusCode;
use chrono::Utc;
use flashgate_shared::api::codes;
use flashgate_shared::api::promo::{
    CheckReply, CheckRequest, CodeRefusal, NotApplicable, UseConflict, UseReply, UseRequest,
    UseState, UseStatus,
};

use super::store::{self, NewUse, Released, Take};
use super::{flags, guess, CodeRules};
use crate::error::{ApiError, ApiResult};
use crate::idempotency::{self, Begin};
use crate::redis_conn::RedisConn;
use crate::reply::{Outcome, Reply};
use tokio_util::task::TaskTracker;

fn refusal(r: CodeRefusal) -> Reply {
    Reply::with_status(r.http_status(), Outcome::CodeRefused, &r)
}

fn already_used(use_id: Option<String>) -> Reply {
    refusal(CodeRefusal::AlreadyUsed { use_id })
}

fn not_applicable(reason: NotApplicable) -> Reply {
    refusal(CodeRefusal::NotApplicable { reason })
}

/// The handles the promo code service uses (built by [`crate::state::AppState::promo`]).
#[derive(Clone)]
pub struct PromoService {
    pub db: crate::db::Db,
    pub redis: RedisConn,
    pub rules: super::RulesCache,
    /// The use task of each request runs here, so shutdown joins it.
    pub tasks: TaskTracker,
    /// `FLASHGATE_CODE_GUESSES_PER_CUSTOMER`: failed tries per customer an hour (0: off).
    pub guesses_per_customer: i64,
    /// `FLASHGATE_CODE_GUESSES_PER_IP`: failed tries per client IP an hour (0: off), an
    /// IPv6 client counted per prefix ([`Trier::ip`]).
    pub guesses_per_ip: i64,
    /// `FLASHGATE_CODE_USE_HOLD_SECONDS`: how long a use waits for its confirm.
    pub use_hold_seconds: u64,
    /// `FLASHGATE_IDEMPOTENCY_TTL_SECONDS`: how long a final reply is kept for its key.
    pub idempotency_ttl_seconds: u64,
    /// The origin's metrics (`flashgate_guess_refusals_total`).
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// Who is trying a code: the customer of the token and her client IP, if known.
#[derive(Debug, Clone)]
pub struct Trier {
    /// The customer id (`sub`).
    pub customer: String,
    /// The key of her client IP's bucket, [`flashgate_shared::ip_limit::limit_key`] of the
    /// address under `FLASHGATE_LIMIT_IPV6_PREFIX`; `None` when the address is not known.
    pub ip: Option<String>,
}

/// Finds the code's rules under guess limiting: 429 when a bucket is spent (before anything
/// else, valid code or not); for an unknown or malformed code one token is spent and the reply
/// is 404 `invalid_code` (or 429 when the last token went to a concurrent try).
async fn lookup(
    svc: &PromoService,
    raw_code: &str,
    who: &Trier,
) -> ApiResult<Result<Arc<CodeRules>, Reply>> {
    let mut redis = svc.redis.clone();
    let buckets = guess::Buckets::of(
        &who.customer,
        who.ip.as_deref(),
        svc.guesses_per_customer,
        svc.guesses_per_ip,
    );
    if let Some(refused) = guess::peek(&mut redis, &buckets).await? {
        return Err(rate_limited(svc, refused));
    }
    if let Some(code) = flashgate_shared::code::normalise(raw_code) {
        if let Some(rules) = svc.rules.get(&svc.db, &code).await? {
            return Ok(Ok(rules));
        }
    }
    if let Some(refused) = guess::spend(&mut redis, &buckets).await? {
        return Err(rate_limited(svc, refused));
    }
    Ok(Err(refusal(CodeRefusal::InvalidCode)))
}

/// Counts the refusal by bucket and answers it 429.
fn rate_limited(svc: &PromoService, refused: guess::Refusal) -> ApiError {
    svc.metrics.guess_refused(refused.bucket.as_str());
    ApiError::RateLimited(
        refused.wait_seconds,
        "too many unknown codes tried; retry after the given delay".into(),
    )
}

/// `POST /api/v1/codes/{code}/check`: 200 `{"discount","total"}`, 422 `not_applicable`, 404
/// `invalid_code`, 429 `rate_limited`. Changes nothing.
pub async fn check(
    svc: &PromoService,
    raw_code: &str,
    who: &Trier,
    req: &CheckRequest,
) -> ApiResult<Reply> {
    let rules = match lookup(svc, raw_code, who).await? {
        Ok(rules) => rules,
        Err(reply) => return Ok(reply),
    };
    let applied = match rules.judge(Utc::now(), req.cart_total, req.currency.as_deref()) {
        Ok(a) => a,
        Err(reason) => return Ok(not_applicable(reason)),
    };
    let mut redis = svc.redis.clone();
    let cached = flags::read(&mut redis, &rules.code, &who.customer).await?;
    if cached.disabled {
        return Ok(not_applicable(NotApplicable::Disabled));
    }
    if rules.rules.once_per_customer && cached.holder.is_some() {
        return Ok(not_applicable(NotApplicable::AlreadyUsed));
    }
    if cached.used_up {
        return Ok(not_applicable(NotApplicable::UsedUp));
    }
    Ok(Reply::json(
        StatusCode::OK,
        Outcome::CodeChecked,
        &CheckReply {
            discount: applied.discount,
            total: applied.total,
        },
    ))
}

/// A validated use request.
#[derive(Debug, Clone)]
pub struct UseCall {
    pub who: Trier,
    pub idempotency_key: String,
    /// The body bytes as sent (for the fingerprint).
    pub body: Vec<u8>,
    pub req: UseRequest,
}

/// `POST /api/v1/codes/{code}/use`: 201 [`UseReply`]; 409 `used_up` / `already_used`; 422
/// `not_applicable` (rules) or `idempotency_key_reused`; 404 `invalid_code`; 429; 503.
/// A retry with the same key gets the first reply again; while the first request with the key
/// is still running, 409 `in_progress` with `Retry-After` (as a claim).
pub async fn use_code(svc: &PromoService, raw_code: &str, call: UseCall) -> ApiResult<Reply> {
    let rules = match lookup(svc, raw_code, &call.who).await? {
        Ok(rules) => rules,
        Err(reply) => return Ok(reply),
    };
    let svc = svc.clone();
    let tasks = svc.tasks.clone();
    tasks
        .spawn(async move { use_recorded(&svc, &rules, &call).await })
        .await
        .map_err(|e| ApiError::Unavailable(format!("use task: {e}")))?
}

async fn use_recorded(svc: &PromoService, rules: &CodeRules, call: &UseCall) -> ApiResult<Reply> {
    let mut redis = svc.redis.clone();
    let customer = &call.who.customer;
    let key = &call.idempotency_key;
    let fp = idempotency::fingerprint(&format!("code-use:{}", rules.code), &call.body);
    match idempotency::begin(&mut redis, customer, key, &fp).await? {
        Begin::New => {}
        // As a claim's: the key's first request is still running, so retry shortly.
        Begin::InProgress => {
            return Ok(Reply {
                outcome: Outcome::InProgress,
                ..refusal(CodeRefusal::InProgress)
            })
        }
        Begin::Reused => {
            return Err(ApiError::Unprocessable(
                codes::IDEMPOTENCY_KEY_REUSED,
                "this Idempotency-Key was used with another code or body".into(),
            ))
        }
        Begin::Replay(reply) => return Ok(reply),
    }
    let result = decide_use(svc, &mut redis, rules, call, &fp).await;
    match &result {
        Ok(reply) => {
            idempotency::finish(
                &mut redis,
                customer,
                key,
                &fp,
                reply,
                svc.idempotency_ttl_seconds,
            )
            .await?
        }
        Err(_) => {
            let _ = idempotency::abandon(&mut redis, customer, key).await;
        }
    }
    result
}

async fn decide_use(
    svc: &PromoService,
    redis: &mut RedisConn,
    rules: &CodeRules,
    call: &UseCall,
    fp: &str,
) -> ApiResult<Reply> {
    let customer = &call.who.customer;
    let applied = match rules.judge(
        Utc::now(),
        call.req.cart_total,
        call.req.currency.as_deref(),
    ) {
        Ok(a) => a,
        Err(reason) => return Ok(not_applicable(reason)),
    };
    // The used-up flag answers without the row.
    let cached = flags::read(redis, &rules.code, customer).await?;
    if cached.disabled {
        return Ok(not_applicable(NotApplicable::Disabled));
    }
    if cached.used_up {
        if rules.rules.once_per_customer && cached.holder.is_some() {
            return Ok(already_used(cached.holder));
        }
        return Ok(refusal(CodeRefusal::UsedUp));
    }
    let use_id = format!("u_{}", uuid::Uuid::now_v7().simple());
    let taken = store::take(
        &svc.db,
        &NewUse {
            id: &use_id,
            code: &rules.code,
            customer,
            order: &call.req.order,
            cart_total: call.req.cart_total,
            discount: applied.discount,
            hold_seconds: svc.use_hold_seconds as i64,
            idempotency_key: &call.idempotency_key,
            request_fp: fp,
        },
    )
    .await?;
    match taken {
        Take::Taken {
            held_until,
            uses_left,
            version,
        } => {
            flags::add_holder(redis, &rules.code, customer, &use_id).await?;
            flags::publish(redis, &rules.code, uses_left, version, false).await?;
            Ok(Reply::json(
                StatusCode::CREATED,
                Outcome::CodeUsed,
                &UseReply {
                    use_id,
                    discount: applied.discount,
                    total: applied.total,
                    held_until,
                },
            ))
        }
        Take::Refused => {
            let why = store::refusal(&svc.db, &rules.code, customer, &call.req.order).await?;
            flags::publish(redis, &rules.code, why.uses_left, why.version, why.disabled).await?;
            // Her own earlier use with this key (its record was lost): the same reply.
            let replay = [&why.mine, &why.order_use].into_iter().flatten().find(|u| {
                u.customer_id == *customer
                    && u.idempotency_key == call.idempotency_key
                    && u.request_fp == fp
            });
            if let Some(u) = replay {
                return Ok(Reply::json(
                    StatusCode::CREATED,
                    Outcome::CodeUsed,
                    &UseReply {
                        use_id: u.id.clone(),
                        discount: u.discount,
                        total: u.cart_total - u.discount,
                        held_until: u.held_until,
                    },
                ));
            }
            if why.disabled {
                return Ok(not_applicable(NotApplicable::Disabled));
            }
            if let Some(u) = why.order_use {
                return Ok(already_used(Some(u.id)));
            }
            match why.mine {
                Some(u) => {
                    flags::add_holder(redis, &rules.code, customer, &u.id).await?;
                    Ok(already_used(Some(u.id)))
                }
                None => Ok(refusal(CodeRefusal::UsedUp)),
            }
        }
    }
}

fn use_state(id: &str, code: &str, status: UseStatus) -> Reply {
    Reply::json(
        StatusCode::OK,
        Outcome::UseState,
        &UseState {
            use_id: id.to_string(),
            code: code.to_string(),
            status,
        },
    )
}

/// The answer of a confirm or release about use `id` as read `u`: 404 when there is no such
/// use, 409 `conflict` when it went the other way (`other`), else 200 with its state.
fn use_answer(
    id: &str,
    u: Option<store::UseRow>,
    other: UseStatus,
    conflict: UseConflict,
) -> ApiResult<Reply> {
    let u = u.ok_or_else(|| ApiError::NotFound(format!("no use {id}")))?;
    Ok(if u.status == other {
        Reply::json(StatusCode::CONFLICT, Outcome::UseState, &conflict)
    } else {
        use_state(&u.id, &u.code, u.status)
    })
}

/// `POST /api/v1/uses/{id}/confirm`: 200 `used` (also when confirmed before), 409
/// `use_released`, 404 when no such use.
pub async fn confirm(svc: &PromoService, id: &str) -> ApiResult<Reply> {
    let u = store::confirm(&svc.db, id).await?;
    use_answer(id, u, UseStatus::Released, UseConflict::UseReleased)
}

/// `POST /api/v1/uses/{id}/release`: 200 `released` (also when released before, by a call or
/// the sweeper), 409 `use_confirmed`, 404 when no such use. The count goes up by one exactly
/// once.
pub async fn release(svc: &PromoService, id: &str) -> ApiResult<Reply> {
    if let Some(r) = store::release(&svc.db, id).await? {
        learn_release(svc, &r).await?;
        return Ok(use_state(&r.use_id, &r.code, UseStatus::Released));
    }
    let u = store::find_use(&svc.db, id).await?;
    use_answer(id, u, UseStatus::Used, UseConflict::UseConfirmed)
}

async fn learn_release(svc: &PromoService, r: &Released) -> redis::RedisResult<()> {
    let mut redis = svc.redis.clone();
    flags::drop_holder(&mut redis, &r.code, &r.customer_id, &r.use_id).await?;
    flags::publish(&mut redis, &r.code, r.uses_left, r.version, r.disabled)
        .await
        .map(|_| ())
}

/// Uses released per sweep statement.
const SWEEP_BATCH: i64 = 500;

/// One pass of the release sweeper: releases uses not confirmed by `held_until`, exactly once
/// each (see [`store::sweep`]). Returns how many it released.
pub async fn sweep(svc: &PromoService) -> anyhow::Result<usize> {
    let mut total = 0;
    loop {
        let released = store::sweep(&svc.db, SWEEP_BATCH).await?;
        for r in &released {
            learn_release(svc, r).await?;
            // The use id, never the code: coupon codes stay out of the logs.
            tracing::info!(use_id = %r.use_id, "released an unconfirmed use");
        }
        total += released.len();
        if (released.len() as i64) < SWEEP_BATCH {
            return Ok(total);
        }
    }
}
