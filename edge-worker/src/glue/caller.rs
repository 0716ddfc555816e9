//! Who is asking (wasm32 only): the client's IP, the customer whose token verifies here, and
//! the rate limits on both that joins, polls, challenges and claims take from. The decisions
//! are in [`crate::decide`] and [`crate::limit`].

use super::{jwks, now_ms, CF_CONNECTING_IP_HEADER, TOKENS};
use crate::config::EdgeConfig;
use crate::decide::{self, Answer};
use crate::limit::{self, Action, Limiter};
use crate::queue;
use flashgate_shared::ip_limit::limit_key_of;
use flashgate_shared::token;
use std::cell::RefCell;
use worker::{Headers, Request, Result};

/// Rate-limit buckets kept per isolate.
const LIMITER_CAPACITY: usize = 50_000;

thread_local! {
    static LIMITER: RefCell<Limiter> = RefCell::new(Limiter::new(LIMITER_CAPACITY));
}

/// The client's IP as the runtime reports it (`CF-Connecting-IP`), normalised by
/// [`crate::decide::client_ip`]; `None` when absent or not an address.
pub(super) fn client_ip(req: &Request) -> Option<String> {
    ip_of(req.headers())
}

/// [`client_ip`] from the request's headers.
pub(super) fn ip_of(headers: &Headers) -> Option<String> {
    let raw = headers.get(CF_CONNECTING_IP_HEADER).ok().flatten();
    decide::client_ip(raw.as_deref())
}

/// The customer of the request's bearer token when it verifies here, else `None`.
pub(super) async fn verified_customer(req: &Request, cfg: &EdgeConfig) -> Result<Option<String>> {
    let auth = req.headers().get("authorization")?;
    let bearer = auth.as_deref().and_then(token::bearer);
    let verifier = jwks::verifier(cfg, bearer).await;
    let now = now_ms();
    Ok(bearer.and_then(|t| {
        TOKENS.with(|c| {
            c.borrow_mut()
                .verify(t, &verifier, token::NumericDate::from_unix_ms(now))
                .ok()
        })
    }))
}

/// A join's caller (or a challenge's, limited as a join): her IP and the customer whose token
/// verifies here, once both are within the join's rate limits ([`limit`]); `Err` is the 429.
pub(super) async fn joining(
    req: &Request,
    cfg: &EdgeConfig,
) -> Result<std::result::Result<(Option<String>, Option<String>), Answer>> {
    let ip = client_ip(req);
    let customer = verified_customer(req, cfg).await?;
    Ok(limit(cfg, Action::Join, customer.as_deref(), ip.as_deref()).map(|()| (ip, customer)))
}

/// Takes one token for `action` from the customer's bucket (when known) and the IP's bucket
/// (when known: the bucket of [`flashgate_shared::ip_limit::limit_key`], so an IPv6 client
/// counts per prefix and an IPv4-mapped address as its IPv4 address); 429 `rate_limited` +
/// `Retry-After` when either is spent.
pub(super) fn limit(
    cfg: &EdgeConfig,
    action: Action,
    customer: Option<&str>,
    ip: Option<&str>,
) -> std::result::Result<(), Answer> {
    let now = now_ms();
    let per_customer = match action {
        Action::Join => cfg.limits.joins_per_s,
        Action::Poll => cfg.limits.polls_per_s,
        Action::Claim => cfg.limits.claims_per_s,
        Action::Replay => queue::REPLAY_PER_S,
        Action::AnyPerIp => cfg.limits.ip_per_s,
        Action::Forward => 0,
    };
    LIMITER.with(|l| {
        let mut l = l.borrow_mut();
        let ip_key = ip.and_then(|ip| limit_key_of(ip, cfg.limits.ipv6_prefix));
        if let Some(key) = ip_key {
            l.take(Action::AnyPerIp, &key, cfg.limits.ip_per_s, now)
                .map_err(limit::rate_limited)?;
        }
        if let Some(c) = customer {
            l.take(action, c, per_customer, now)
                .map_err(limit::rate_limited)?;
        }
        Ok(())
    })
}
