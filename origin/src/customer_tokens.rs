//! Customer tokens at the origin: the settings (issuer, audience, leeway, HS256 secrets with
//! key ids, the identity provider's JWKS) and the verifier that keeps the JWKS fresh.
//!
//! The verification itself is [`flashgate_shared::token::Verifier`], the same code as the
//! edge worker's; the fetch schedule is [`flashgate_shared::token::refresh`]. See
//! docs/AUTH.md.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use flashgate_shared::token::keys::{MAX_JWKS_BYTES, NO_KEYS};
use flashgate_shared::token::refresh::{keys_may_be_stale, Schedule, State, Step};
use flashgate_shared::token::{
    KeySet, NumericDate, TokenCache, TokenError, Verifier, VerifyKey, DEFAULT_LEEWAY_SECONDS,
    DEFAULT_MAX_LIFETIME_SECONDS, MAX_LEEWAY_SECONDS, MAX_MAX_LIFETIME_SECONDS,
};

use crate::secret::Secret;

/// Settings of customer tokens besides `FLASHGATE_CUSTOMER_TOKEN_SECRET` (flattened into
/// [`crate::config::Config`]).
#[derive(Debug, Clone, clap::Args)]
pub struct TokenSettings {
    /// The `iss` every customer token must carry (e.g. `https://tenant.eu.auth0.com/`); unset:
    /// not checked.
    #[arg(long, env = "FLASHGATE_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,

    /// The audience every customer token's `aud` must contain (e.g. the API identifier or the
    /// app's client id); unset: not checked.
    #[arg(long, env = "FLASHGATE_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,

    /// Clock-skew leeway on `exp`, `nbf` and `iat`, in seconds (0..=300).
    #[arg(long, env = "FLASHGATE_JWT_LEEWAY_SECONDS", default_value_t = DEFAULT_LEEWAY_SECONDS)]
    pub jwt_leeway_seconds: u32,

    /// Longest accepted token lifetime, in seconds (60..=2,592,000): a token whose `exp` lies
    /// further ahead than this plus the leeway is refused (401), so a token minted with a
    /// far-future `exp` does not live for ever.
    #[arg(
        long,
        env = "FLASHGATE_JWT_MAX_LIFETIME_SECONDS",
        default_value_t = DEFAULT_MAX_LIFETIME_SECONDS
    )]
    pub jwt_max_lifetime_seconds: u32,

    /// More HS256 secrets with key ids, `kid:secret[,kid:secret...]` (each ≥ 32 bytes): a
    /// token whose header names `kid` is checked with that secret. Lets two secrets be valid
    /// during a rotation.
    #[arg(long, env = "FLASHGATE_CUSTOMER_TOKEN_SECRETS", hide_env_values = true)]
    pub customer_token_secrets: Option<Secret>,

    /// URL of the identity provider's JWKS (RS256 / ES256 keys), e.g.
    /// `https://tenant.eu.auth0.com/.well-known/jwks.json`.
    #[arg(long, env = "FLASHGATE_JWKS_URL")]
    pub jwks_url: Option<String>,

    /// The JWKS itself, inline JSON (offline deployments); used with or without the URL.
    #[arg(long, env = "FLASHGATE_JWKS")]
    pub jwks: Option<String>,

    /// Age at which the JWKS is fetched again, in seconds.
    #[arg(long, env = "FLASHGATE_JWKS_TTL_SECONDS", default_value_t = 600)]
    pub jwks_ttl_seconds: u64,

    /// Least time between two JWKS fetches, in seconds: a token with an unknown key id, or
    /// whose signature fails on a known one (a key replaced under its kid), triggers a fetch
    /// at most this often.
    #[arg(long, env = "FLASHGATE_JWKS_MIN_REFRESH_SECONDS", default_value_t = 30)]
    pub jwks_min_refresh_seconds: u64,

    /// Longest wait for the JWKS endpoint, in milliseconds.
    #[arg(long, env = "FLASHGATE_JWKS_TIMEOUT_MS", default_value_t = 3_000)]
    pub jwks_timeout_ms: u64,
}

impl TokenSettings {
    /// The verifier of these settings before any fetch: the single secret (no key id; unset in
    /// an identity-provider-only setup), the secrets with key ids, the inline JWKS, issuer,
    /// audience and leeway. The error names the variable, never a secret; [`NO_KEYS`] when no
    /// key is configured and no JWKS URL either.
    pub fn base_verifier(&self, single_secret: Option<&Secret>) -> Result<Verifier, String> {
        if self.jwt_leeway_seconds > MAX_LEEWAY_SECONDS {
            return Err(format!(
                "FLASHGATE_JWT_LEEWAY_SECONDS must be at most {MAX_LEEWAY_SECONDS}"
            ));
        }
        if !(60..=MAX_MAX_LIFETIME_SECONDS).contains(&self.jwt_max_lifetime_seconds) {
            return Err(format!(
                "FLASHGATE_JWT_MAX_LIFETIME_SECONDS must be 60 to {MAX_MAX_LIFETIME_SECONDS}"
            ));
        }
        let mut keys = KeySet::new();
        if let Some(secret) = single_secret {
            keys.push(VerifyKey::hs256(None, secret.expose().as_bytes()))?;
        }
        if let Some(list) = &self.customer_token_secrets {
            keys.extend(KeySet::parse_hs256_secrets(
                "FLASHGATE_CUSTOMER_TOKEN_SECRETS",
                list.expose(),
            )?)
            .map_err(|e| format!("FLASHGATE_CUSTOMER_TOKEN_SECRETS: {e}"))?;
        }
        if let Some(jwks) = self.jwks.as_deref().filter(|j| !j.trim().is_empty()) {
            keys.extend(
                KeySet::parse_jwks(jwks.as_bytes()).map_err(|e| format!("FLASHGATE_JWKS: {e}"))?,
            )
            .map_err(|e| format!("FLASHGATE_JWKS: {e}"))?;
        }
        if let Some(url) = &self.jwks_url {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err("FLASHGATE_JWKS_URL must start with https:// or http://".into());
            }
        } else if keys.keys().is_empty() {
            return Err(NO_KEYS.into());
        }
        let nonempty = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
        Ok(Verifier::new(keys)
            .awaiting_jwks(self.jwks_url.is_some())
            .with_issuer(nonempty(&self.jwt_issuer))
            .with_audience(nonempty(&self.jwt_audience))
            .with_leeway_seconds(self.jwt_leeway_seconds)
            .with_max_lifetime_seconds(self.jwt_max_lifetime_seconds))
    }
}

/// Most customer tokens the origin keeps verified ([`TokenCache`]): about 250 bytes each
/// with a token of ~200 bytes, so about 8 MB at most. Past it the cache starts over.
pub const VERIFIED_TOKENS_CAPACITY: usize = 32_768;

/// The origin's customer-token verifier: the configured keys plus the JWKS fetched from
/// `FLASHGATE_JWKS_URL`, refreshed on the shared schedule, and the tokens it verified
/// ([`TokenCache`], emptied when the JWKS changes).
pub struct CustomerTokens {
    base: Verifier,
    current: RwLock<Arc<Verifier>>,
    source: Option<JwksSource>,
    verified: Mutex<TokenCache>,
}

/// Where and how the JWKS is fetched.
struct JwksSource {
    url: String,
    client: reqwest::Client,
    schedule: Schedule,
    state: Mutex<State>,
    /// Held by the one fetch under way (single-flight); waiters queue on it.
    fetch: tokio::sync::Mutex<()>,
}

impl CustomerTokens {
    /// The verifier of `settings` (see [`TokenSettings::base_verifier`]); the JWKS is fetched
    /// on the first token that needs it.
    pub fn new(settings: &TokenSettings, single_secret: Option<&Secret>) -> Result<Self, String> {
        let base = settings.base_verifier(single_secret)?;
        let source = match &settings.jwks_url {
            None => None,
            Some(url) => Some(JwksSource {
                url: url.clone(),
                client: reqwest::Client::builder()
                    .timeout(Duration::from_millis(settings.jwks_timeout_ms))
                    .build()
                    .map_err(|e| format!("JWKS client: {e}"))?,
                schedule: Schedule {
                    ttl_ms: i64::try_from(settings.jwks_ttl_seconds.saturating_mul(1_000))
                        .unwrap_or(i64::MAX),
                    min_interval_ms: i64::try_from(
                        settings.jwks_min_refresh_seconds.saturating_mul(1_000),
                    )
                    .unwrap_or(i64::MAX),
                },
                state: Mutex::new(State::default()),
                fetch: tokio::sync::Mutex::new(()),
            }),
        };
        Ok(CustomerTokens {
            current: RwLock::new(Arc::new(base.clone())),
            base,
            source,
            verified: Mutex::new(TokenCache::new(VERIFIED_TOKENS_CAPACITY)),
        })
    }

    fn current(&self) -> Arc<Verifier> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn with_verified<T>(&self, f: impl FnOnce(&mut TokenCache) -> T) -> T {
        f(&mut self.verified.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Verifies `token` at the origin's clock and returns its customer id (`sub`). A token
    /// verified before is taken from the cache, its `exp` and `nbf` checked again
    /// ([`TokenCache`]), unless the JWKS is due for its refresh. A JWKS a TTL old makes this
    /// request fetch the JWKS first; a token the keys held refuse in a way a newer JWKS could
    /// cure (an unknown key id, a bad signature on a known one: [`keys_may_be_stale`]) makes it
    /// fetch the JWKS and verify again. One fetch at a time, at most one per
    /// `FLASHGATE_JWKS_MIN_REFRESH_SECONDS`. Errors: every [`TokenError`].
    pub async fn verify(&self, token: &str) -> Result<String, TokenError> {
        let now = || NumericDate::from_unix_ms(chrono::Utc::now().timestamp_millis());
        let leeway = self.base.leeway_seconds();
        // A JWKS due for its refresh is fetched by a full verification first, so a removed
        // key's tokens stop working at the next fetch, as without the cache.
        let keys_current = self
            .source
            .as_ref()
            .is_none_or(|s| s.step(false, false) == Step::Use);
        if let Some(hit) = keys_current
            .then(|| self.with_verified(|v| v.get(token, now(), leeway)))
            .flatten()
        {
            return hit;
        }
        let claims = self.verify_signed(token, now).await?;
        self.with_verified(|v| v.insert(token, &claims));
        Ok(claims.sub)
    }

    async fn verify_signed(
        &self,
        token: &str,
        now: impl Fn() -> NumericDate,
    ) -> Result<flashgate_shared::token::CustomerClaims, TokenError> {
        let first = self.current().verify(token, now());
        let Some(source) = &self.source else {
            return first;
        };
        // An unknown key id, or a signature failing on a known one (the provider replaced the
        // key under its kid): the JWKS held may be out of date.
        let stale_keys = first.as_ref().is_err_and(|e| keys_may_be_stale(*e));
        match source.step(stale_keys, true) {
            // A fetch may have ended since `first` (another request led it): the token is
            // judged against the keys held now.
            Step::Use if stale_keys => return self.current().verify(token, now()),
            Step::Use => return first,
            // A request that finds a fetch under way waits for it, so a token sent while the
            // first JWKS is on its way is answered with the keys it brings, not a 503.
            Step::Fetch | Step::Wait => {}
        }
        let _one = source.fetch.lock().await;
        // Whoever held the lock before may have fetched already: ask again.
        if source.step(stale_keys, false) == Step::Fetch {
            self.refresh(source).await;
        }
        self.current().verify(token, now())
    }

    async fn refresh(&self, source: &JwksSource) {
        let now_ms = || chrono::Utc::now().timestamp_millis();
        source.with_state(|s| s.start(now_ms()));
        let fetched = source.fetch_keys().await;
        let ok = match fetched.and_then(|keys| self.base.with_more_keys(keys)) {
            Ok(v) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(v);
                // A key the JWKS no longer lists must not keep its tokens valid.
                self.with_verified(TokenCache::clear);
                tracing::info!(url = %source.url, "JWKS fetched");
                true
            }
            Err(e) => {
                tracing::warn!(url = %source.url, error = %e, "JWKS fetch failed; keeping the keys held");
                false
            }
        };
        source.with_state(|s| s.finish(now_ms(), ok));
    }
}

impl JwksSource {
    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The step of a request now. With `see_fetching`, a request with an unknown key id
    /// that finds a fetch under way gets [`Step::Wait`]; without it, the fetch under way is
    /// ignored (the fetch lock orders the fetches; its holder asks without it).
    fn step(&self, unknown_kid: bool, see_fetching: bool) -> Step {
        let now = chrono::Utc::now().timestamp_millis();
        self.with_state(|s| {
            let seen = State {
                fetching: s.fetching && see_fetching,
                ..*s
            };
            seen.step(self.schedule, now, unknown_kid)
        })
    }

    /// Fetches and reads the JWKS. Errors: the request failing, a non-2xx answer, a body past
    /// [`MAX_JWKS_BYTES`] (by its `Content-Length`, or while reading a body without one: the
    /// rest is never read), an invalid JWKS.
    async fn fetch_keys(&self) -> Result<KeySet, String> {
        let mut resp = self
            .client
            .get(&self.url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| format!("request failed: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("answered {}", resp.status()));
        }
        if resp
            .content_length()
            .is_some_and(|n| n > MAX_JWKS_BYTES as u64)
        {
            return Err(format!("the JWKS is larger than {MAX_JWKS_BYTES} bytes"));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| format!("body: {e}"))? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(format!("the JWKS is larger than {MAX_JWKS_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        KeySet::parse_jwks(&body)
    }
}
