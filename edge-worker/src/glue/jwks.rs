//! The identity provider's JWKS in the isolate: the verifier in use (configured keys plus the
//! last fetched JWKS) and its refresh on [`flashgate_shared::token::refresh`]'s schedule.
//!
//! One fetch at a time per isolate: the request that leads fetches, a request whose token
//! the keys held may be out of date for waits for it on short timers of its own (the same reason as the
//! status slots: a waiter is never woken from the leader's I/O context), bounded by the
//! origin timeout. A failed fetch keeps the keys held and is logged.

use super::{now_ms, send_bounded, wait_until, TOKENS};
use crate::config::EdgeConfig;
use flashgate_shared::token::keys::MAX_JWKS_BYTES;
use flashgate_shared::token::refresh::{keys_may_be_stale, State, Step};
use flashgate_shared::token::{KeySet, NumericDate, Verifier};
use std::cell::RefCell;
use std::rc::Rc;
use worker::{Headers, Method, Request, RequestInit};

/// The verifier in use and the fetch state.
#[derive(Default)]
struct Jwks {
    current: Option<Rc<Verifier>>,
    state: State,
    /// Bumped after every fetch, so that waiters see it ended.
    generation: u64,
}

thread_local! {
    static JWKS: RefCell<Jwks> = RefCell::new(Jwks::default());
}

/// The verifier for a request carrying `token` (when it has one): the one in use, after a
/// fetch of the JWKS when it is due or the keys held refuse the token in a way a newer JWKS
/// could cure (an unknown key id, a bad signature on a known one: [`keys_may_be_stale`]).
/// The token is verified here through [`TOKENS`], so the caller's verification of a good
/// token is a cache hit.
pub(super) async fn verifier(cfg: &EdgeConfig, token: Option<&str>) -> Rc<Verifier> {
    let Some(fetch) = &cfg.jwks else {
        return current(cfg);
    };
    let now = now_ms();
    let (step, generation) = JWKS.with(|j| {
        let mut j = j.borrow_mut();
        let current = j
            .current
            .get_or_insert_with(|| Rc::new(cfg.tokens.clone()))
            .clone();
        let stale_keys = token.is_some_and(|t| {
            TOKENS
                .with(|c| {
                    c.borrow_mut()
                        .verify(t, &current, NumericDate::from_unix_ms(now))
                })
                .is_err_and(keys_may_be_stale)
        });
        let step = j.state.step(fetch.schedule, now, stale_keys);
        if step == Step::Fetch {
            j.state.start(now);
        }
        (step, j.generation)
    });
    match step {
        Step::Use => {}
        Step::Fetch => {
            let fetched = fetch_keys(&fetch.url, cfg.origin_timeout_ms).await;
            let verifier = fetched.and_then(|keys| cfg.tokens.with_more_keys(keys));
            if let Err(e) = &verifier {
                worker::console_error!(
                    "flashgate edge: JWKS fetch from {} failed, keeping the keys held: {e}",
                    fetch.url
                );
            }
            let now = now_ms();
            JWKS.with(|j| {
                let mut j = j.borrow_mut();
                j.state.finish(now, verifier.is_ok());
                j.generation += 1;
                if let Ok(v) = verifier {
                    j.current = Some(Rc::new(v));
                    // Tokens verified under the old key set are checked again.
                    TOKENS.with(|t| t.borrow_mut().clear());
                }
            });
        }
        Step::Wait => {
            let deadline = now.saturating_add(cfg.origin_timeout_ms.saturating_add(1_000));
            wait_until(deadline, || {
                JWKS.with(|j| j.borrow().generation != generation)
            })
            .await;
        }
    }
    current(cfg)
}

/// The verifier in use (the configured one before any fetch).
fn current(cfg: &EdgeConfig) -> Rc<Verifier> {
    JWKS.with(|j| {
        j.borrow_mut()
            .current
            .get_or_insert_with(|| Rc::new(cfg.tokens.clone()))
            .clone()
    })
}

/// Fetches and reads the JWKS at `url` within `timeout_ms`, reading at most
/// [`MAX_JWKS_BYTES`] of its body.
async fn fetch_keys(url: &str, timeout_ms: i64) -> Result<KeySet, String> {
    let headers = Headers::new();
    headers
        .set("accept", "application/json")
        .map_err(|e| e.to_string())?;
    let mut init = RequestInit::new();
    init.with_method(Method::Get).with_headers(headers);
    let req = Request::new_with_init(url, &init).map_err(|e| e.to_string())?;
    let (code, _, body) = send_bounded(req, timeout_ms, Some(MAX_JWKS_BYTES))
        .await
        .map_err(|e| e.to_string())?;
    if !(200..300).contains(&code) {
        return Err(format!("answered {code}"));
    }
    KeySet::parse_jwks(&body)
}
