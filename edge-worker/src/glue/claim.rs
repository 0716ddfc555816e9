//! A customer's claim (`POST /api/v1/campaigns/{id}/claims`) in the Workers runtime: the
//! request checks and the token, then what the cached status, the winners filter and the
//! waiting room say, then (on a waiting room, within the budgets held across isolates)
//! forwarded to the origin with the edge signature. Every answer is
//! counted where it is made ([`super::telemetry`]). Part of the wasm32 glue ([`super`]).

use super::origin::{origin_target, relay, send, sign_forwarded};
use super::request_url::RequestUrl;
use super::status_cache::{learn, status_for};
use super::telemetry::{count_relayed, edge_answer as answer};
use super::{caller, index, jwks, now_ms, queue, shared_limit, winners, TOKENS};
use crate::config::EdgeConfig;
use crate::decide::{self, Answer, ClaimInput};
use crate::plan::{ClaimPlan, Do, Got};
use crate::status;
use flashgate_shared::queue::ADMISSION_HEADER;
use flashgate_shared::request_id::REQUEST_ID_HEADER;
use flashgate_shared::trace::TRACEPARENT_HEADER;
use flashgate_shared::IDEMPOTENCY_KEY_HEADER;
use worker::{js_sys, Env, Headers, Method, Request, RequestInit, Response, Result};

pub(super) async fn claim(
    mut req: Request,
    env: &Env,
    cfg: &EdgeConfig,
    id: &str,
    url: &RequestUrl,
) -> Result<Response> {
    // Each header read is a call into the runtime: a header is read where the claim first
    // needs it, so a sold-out answer reads only the four its checks look at.
    let content_length = req.headers().get("content-length")?;
    if let Err(a) = decide::check_content_length(content_length.as_deref()) {
        // Read a moderately large body before answering so the client's connection stays
        // usable; a huge one is refused unread.
        if decide::drain_before_refusing(content_length.as_deref()) {
            let _ = req.bytes().await;
        }
        return answer(id, &a);
    }
    let body = match req.bytes().await {
        Ok(b) => b,
        Err(_) => {
            return answer(
                id,
                &Answer::error(
                    400,
                    flashgate_shared::api::codes::INVALID_JSON,
                    "claim body could not be read",
                ),
            )
        }
    };
    let headers = req.headers();
    let authorization = headers.get("authorization")?;
    let key = headers.get(IDEMPOTENCY_KEY_HEADER)?;
    let content_type = headers.get("content-type")?;
    let ip = std::cell::OnceCell::new();
    let client_ip = || ip.get_or_init(|| caller::ip_of(headers)).as_deref();
    let input = ClaimInput {
        authorization: authorization.as_deref(),
        idempotency_key: key.as_deref().map(str::as_bytes),
        content_type: content_type.as_deref(),
        content_length: None,
        body: Some(&body),
    };
    let bearer = authorization
        .as_deref()
        .and_then(flashgate_shared::token::bearer);
    let verifier = jwks::verifier(cfg, bearer).await;
    let now = now_ms();
    let checked = TOKENS.with(|t| {
        decide::check_claim(
            &input,
            &mut t.borrow_mut(),
            &verifier,
            flashgate_shared::token::NumericDate::from_unix_ms(now),
        )
    });
    let customer = match checked {
        Ok(c) => c,
        Err(a) => return answer(id, &a),
    };
    if let Err(a) = decide::claim_campaign_check(id) {
        return answer(id, &a);
    }
    if let Err(a) = index::known(cfg, id).await {
        return answer(id, &a);
    }
    let (entry, fresh) = status_for(cfg, id, url).await;
    let now = now_ms();
    // The rules' order is the claim plan's: this only answers its questions.
    let mut plan = ClaimPlan::new(entry.as_deref(), fresh, now, cfg.not_started_skew_ms, &body);
    // The admission header is read when first needed (not for an answer from the cache).
    let mut admission = None;
    let mut got = Got::Start;
    loop {
        got = match plan.next(got) {
            Do::Answer(a) => return answer(id, &a),
            Do::Forward => break,
            Do::Limit {
                action,
                with_address,
            } => {
                let ip = if with_address { client_ip() } else { None };
                Got::Limited(caller::limit(cfg, action, Some(&customer), ip))
            }
            Do::AskWinners => {
                let sold = crate::winners::sold_key(entry.as_deref());
                Got::Verdict(winners::verdict(cfg, id, &customer, sold).await)
            }
            Do::CheckAdmission => {
                let token = admission.insert(headers.get(ADMISSION_HEADER)?);
                Got::Admission(queue::queue_secret(cfg).and_then(|secret| {
                    crate::queue::check_claim_admission(
                        secret,
                        token.as_deref(),
                        id,
                        &customer,
                        now,
                    )
                }))
            }
            Do::Pace(rate) => Got::Paced(queue::pace(id, rate)),
        };
    }
    // A claim of a waiting room about to cost the origin: counted across isolates too (the
    // local buckets let it through above).
    if crate::queue::admit_rate(entry.as_deref()).is_some() {
        let budget = crate::shared_limit::Budget::Claims;
        if let Err(a) = shared_limit::check(env, cfg, budget, &customer, client_ip()).await {
            return answer(id, &a);
        }
    }
    let admission = match admission {
        Some(a) => a,
        None => headers.get(ADMISSION_HEADER)?,
    };
    // Forward: body bytes, Authorization and Idempotency-Key as sent, plus the client IP and
    // the edge signature over all of them.
    let out = Headers::new();
    if let Some(ct) = &content_type {
        out.set("content-type", ct)?;
    }
    if let Some(a) = &authorization {
        out.set("authorization", a)?;
    }
    if let Some(k) = &key {
        out.set(IDEMPOTENCY_KEY_HEADER, k)?;
    }
    if let Some(a) = &admission {
        out.set(ADMISSION_HEADER, a)?;
    }
    if let Some(t) = headers.get(TRACEPARENT_HEADER)? {
        out.set(TRACEPARENT_HEADER, &t)?;
    }
    if let Some(id) = headers.get(REQUEST_ID_HEADER)? {
        out.set(REQUEST_ID_HEADER, &id)?;
    }
    sign_forwarded(cfg, &out, client_ip(), "POST", url.path(), &body)?;
    let target = origin_target(cfg, url)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(out)
        .with_body(Some(js_sys::Uint8Array::from(body.as_slice()).into()));
    let forwarded = Request::new_with_init(&target, &init)?;
    let (code, resp_headers, resp_body) = match send(forwarded, cfg.origin_timeout_ms).await {
        Ok(r) if r.0 < 500 => r,
        Ok((code, _, _)) => {
            worker::console_warn!("claim on {id}: origin answered {code}");
            return answer(id, &Answer::unavailable());
        }
        Err(e) => {
            worker::console_warn!("claim on {id}: origin unreachable: {e}");
            return answer(id, &Answer::unavailable());
        }
    };
    let by = resp_headers.get(flashgate_shared::ANSWERED_BY_HEADER)?;
    count_relayed(&resp_body, by.as_deref());
    let replayed = resp_headers.get(flashgate_shared::REPLAYED_HEADER)?;
    learn(
        id,
        status::Decided::from_header(replayed.as_deref()),
        code,
        &resp_body,
    );
    relay(code, &resp_headers, resp_body)
}
