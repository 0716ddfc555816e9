//! The mobile-credit provider behind a trait, and its HTTP client
//! ([`flashgate_shared::api::gifts::provider`] is the wire contract). The fulfilment id is the
//! provider's idempotency key: a call repeated after a lost reply credits nothing more.

use std::time::Duration;

use flashgate_shared::api::gifts::provider::{CreditReceipt, CreditRequest, CREDITS_PATH};
use futures::future::BoxFuture;

/// Why a provider call did not give a receipt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// No answer within the timeout (the credit may or may not have happened).
    #[error("timed out")]
    Timeout,
    /// A 5xx answer: the provider could not do it now.
    #[error("provider answered {0}")]
    Unavailable(u16),
    /// A 4xx answer: the provider refuses this credit; retrying will not help.
    #[error("provider refused with {0}")]
    Refused(u16),
    /// The connection failed, or the answer was not a receipt.
    #[error("transport: {0}")]
    Transport(String),
}

impl ProviderError {
    /// True when the same call may succeed later (everything but a refusal).
    pub fn retryable(&self) -> bool {
        !matches!(self, ProviderError::Refused(_))
    }
}

/// A mobile-credit provider.
pub trait Provider: Send + Sync {
    /// Credits `req` under `key` (the fulfilment id), at most once per key.
    fn credit<'a>(
        &'a self,
        key: &'a str,
        req: &'a CreditRequest,
    ) -> BoxFuture<'a, Result<CreditReceipt, ProviderError>>;
}

/// The provider over HTTP.
pub struct HttpProvider {
    base: String,
    client: reqwest::Client,
    timeout: Duration,
}

impl HttpProvider {
    /// A client of the provider at `base` (e.g. `http://127.0.0.1:7070`) giving up on a call
    /// after `timeout`.
    pub fn new(base: &str, timeout: Duration) -> Self {
        HttpProvider {
            base: base.trim_end_matches('/').to_string(),
            client: reqwest::Client::builder()
                .pool_max_idle_per_host(64)
                .build()
                .expect("HTTP client builds"),
            timeout,
        }
    }
}

impl Provider for HttpProvider {
    fn credit<'a>(
        &'a self,
        key: &'a str,
        req: &'a CreditRequest,
    ) -> BoxFuture<'a, Result<CreditReceipt, ProviderError>> {
        Box::pin(async move {
            let call = self
                .client
                .post(format!("{}{CREDITS_PATH}", self.base))
                .header(flashgate_shared::IDEMPOTENCY_KEY_HEADER, key)
                .json(req)
                .send();
            let res = match tokio::time::timeout(self.timeout, call).await {
                Err(_) => return Err(ProviderError::Timeout),
                Ok(Err(e)) if e.is_timeout() => return Err(ProviderError::Timeout),
                Ok(Err(e)) => return Err(ProviderError::Transport(e.to_string())),
                Ok(Ok(res)) => res,
            };
            let status = res.status();
            if status.is_server_error() {
                return Err(ProviderError::Unavailable(status.as_u16()));
            }
            if !status.is_success() {
                return Err(ProviderError::Refused(status.as_u16()));
            }
            match tokio::time::timeout(self.timeout, res.json::<CreditReceipt>()).await {
                Err(_) => Err(ProviderError::Timeout),
                Ok(Err(e)) => Err(ProviderError::Transport(e.to_string())),
                Ok(Ok(receipt)) => Ok(receipt),
            }
        })
    }
}
