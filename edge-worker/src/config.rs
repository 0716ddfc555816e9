//! The worker's settings, read from its environment (`[vars]` and secrets of `wrangler.toml`,
//! or Miniflare bindings).
//!
//! | binding | kind | default | meaning |
//! |---|---|---|---|
//! | `FLASHGATE_ORIGIN_URL` | var | required | origin base URL, e.g. `https://origin.example.com` |
//! | `FLASHGATE_STATUS_TTL_MS` | var | 1000 | how long a cached status is fresh, ms |
//! | `FLASHGATE_STATUS_MAX_STALE_MS` | var | 30000 | how long a status may be served stale when the origin is down, ms |
//! | `FLASHGATE_NOT_STARTED_SKEW_MS` | var | 2000 | clock-skew allowance before `starts_at`, ms |
//! | `FLASHGATE_ORIGIN_TIMEOUT_MS` | var | 5000 | origin round-trip timeout, ms |
//! | `FLASHGATE_CUSTOMER_TOKEN_SECRET` | secret | required unless a JWKS is set | HS256 key of customer tokens, ≥ 32 bytes |
//! | `FLASHGATE_CUSTOMER_TOKEN_SECRETS` | secret | optional | more HS256 keys with key ids, `kid:secret[,kid:secret...]` (rotation) |
//! | `FLASHGATE_JWT_ISSUER` | var | unchecked | the `iss` customer tokens must carry |
//! | `FLASHGATE_JWT_AUDIENCE` | var | unchecked | the audience customer tokens' `aud` must contain |
//! | `FLASHGATE_JWT_LEEWAY_SECONDS` | var | 30 | clock-skew leeway on `exp`/`nbf`/`iat`, s (0..=300) |
//! | `FLASHGATE_JWT_MAX_LIFETIME_SECONDS` | var | 86400 | longest accepted token lifetime (`exp` − now), s (60..=2592000) |
//! | `FLASHGATE_JWKS_URL` | var | optional | the identity provider's JWKS (RS256/ES256 keys) |
//! | `FLASHGATE_JWKS` | var | optional | a JWKS inline (offline deployments) |
//! | `FLASHGATE_JWKS_TTL_SECONDS` | var | 600 | age at which the JWKS is fetched again, s |
//! | `FLASHGATE_JWKS_MIN_REFRESH_SECONDS` | var | 30 | least time between two JWKS fetches (unknown key ids, bad signatures on known ones), s |
//! | `FLASHGATE_EDGE_SECRET` | secret | optional | key of the edge signature, ≥ 32 bytes; also keys the waiting room's tickets and admission tokens; unset or empty = requests are forwarded unsigned and queue polls answer 503 |
//! | `FLASHGATE_LIMIT_CLAIMS_PER_S` | var | 5 | claims per second per customer on a campaign with a waiting room (0 = off) |
//! | `FLASHGATE_LIMIT_JOINS_PER_S` | var | 2 | queue joins per second per customer (0 = off) |
//! | `FLASHGATE_LIMIT_POLLS_PER_S` | var | 2 | queue polls per second per customer (0 = off) |
//! | `FLASHGATE_LIMIT_IP_PER_S` | var | 50 | joins, polls and waiting-room claims per second per client IP (0 = off) |
//! | `FLASHGATE_LIMIT_IPV6_PREFIX` | var | 64 | IPv6 clients share one per-IP bucket per prefix of this many bits (32..=128); IPv4-mapped addresses share their IPv4 address's ([`flashgate_shared::ip_limit`]) |
//! | `FLASHGATE_CORS_ORIGINS` | var | empty | shop origins allowed to call the API from a browser, comma-separated (`https://shop.example`); empty = same-origin only |
//! | `FLASHGATE_TEST_CLOCK_OFFSET_MS` | var | 0 | fault injection only: shifts the worker's clock by this many ms (−86400000..=86400000; `+2000` runs it 2 s ahead); never set in a deployment |

use flashgate_shared::ip_limit::Ipv6LimitPrefix;
use flashgate_shared::token::keys::NO_KEYS;
use flashgate_shared::token::refresh::Schedule;
use flashgate_shared::token::{
    KeySet, Verifier, VerifyKey, DEFAULT_LEEWAY_SECONDS, DEFAULT_MAX_LIFETIME_SECONDS,
    MAX_LEEWAY_SECONDS, MAX_MAX_LIFETIME_SECONDS,
};

/// Default status TTL, ms.
pub const DEFAULT_STATUS_TTL_MS: i64 = 1_000;
/// Default max-stale bound, ms.
pub const DEFAULT_STATUS_MAX_STALE_MS: i64 = 30_000;
/// Default clock-skew allowance for `not_started` answers at the edge, ms.
pub const DEFAULT_NOT_STARTED_SKEW_MS: i64 = 2_000;
/// Default origin timeout, ms.
pub const DEFAULT_ORIGIN_TIMEOUT_MS: i64 = 5_000;
/// Default `FLASHGATE_TURNSTILE_SITEVERIFY_URL`: Cloudflare's siteverify endpoint.
pub const DEFAULT_TURNSTILE_SITEVERIFY_URL: &str =
    "https://challenges.cloudflare.com/turnstile/v0/siteverify";
/// Default `FLASHGATE_TURNSTILE_SCRIPT_URL`: Cloudflare's widget script.
pub const DEFAULT_TURNSTILE_SCRIPT_URL: &str =
    "https://challenges.cloudflare.com/turnstile/v0/api.js";
/// Default `FLASHGATE_TURNSTILE_TIMEOUT_MS`.
pub const DEFAULT_TURNSTILE_TIMEOUT_MS: i64 = 2_000;
/// Largest accepted value of any of the millisecond settings (one day).
pub const MAX_SETTING_MS: i64 = 86_400_000;
/// Default claims per second per customer on a campaign with a waiting room.
pub const DEFAULT_LIMIT_CLAIMS_PER_S: u32 = 5;
/// Default queue joins per second per customer.
pub const DEFAULT_LIMIT_JOINS_PER_S: u32 = 2;
/// Default queue polls per second per customer.
pub const DEFAULT_LIMIT_POLLS_PER_S: u32 = 2;
/// Default waiting-room requests per second per client IP.
pub const DEFAULT_LIMIT_IP_PER_S: u32 = 50;
/// The binding of the fault-injection clock offset ([`EdgeConfig::test_clock_offset_ms`]).
pub const TEST_CLOCK_OFFSET_BINDING: &str = "FLASHGATE_TEST_CLOCK_OFFSET_MS";
/// Largest accepted rate limit, requests per second.
pub const MAX_LIMIT_PER_S: u32 = 1_000_000;

/// The waiting room's rate limits, requests per second; 0 turns one off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Claims per customer on a campaign with a waiting room.
    pub claims_per_s: u32,
    /// Queue joins per customer.
    pub joins_per_s: u32,
    /// Queue polls per customer.
    pub polls_per_s: u32,
    /// Joins, polls and waiting-room claims per client IP.
    pub ip_per_s: u32,
    /// The IPv6 prefix sharing one per-IP bucket
    /// ([`flashgate_shared::ip_limit::limit_key`]).
    pub ipv6_prefix: Ipv6LimitPrefix,
}

/// Where the worker fetches the identity provider's JWKS, and how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwksFetch {
    /// `FLASHGATE_JWKS_URL`.
    pub url: String,
    /// TTL and least interval between fetches.
    pub schedule: Schedule,
}

/// The worker's settings. Build one with [`EdgeConfig::from_lookup`].
#[derive(Debug, Clone)]
pub struct EdgeConfig {
    /// Origin base URL without a trailing slash (`http` or `https`).
    pub origin_url: String,
    /// A cached status is fresh for this long after the origin produced it, ms (≥ 1).
    pub status_ttl_ms: i64,
    /// When a refresh fails, a status may still be served (marked stale) until it is this old, ms.
    pub status_max_stale_ms: i64,
    /// A claim is answered `not_started` at the edge only while `now + skew < starts_at`, ms.
    pub not_started_skew_ms: i64,
    /// Longest wait for an origin answer, ms (≥ 1).
    pub origin_timeout_ms: i64,
    /// Secret of the customer token (HS256); `None` when tokens come only from an identity
    /// provider's JWKS.
    pub customer_token_secret: Option<Vec<u8>>,
    /// Verifies customer tokens: the secret above, the secrets with key ids, the inline JWKS,
    /// issuer, audience and leeway (the fetched JWKS is added by the glue).
    pub tokens: Verifier,
    /// The JWKS endpoint, when set.
    pub jwks: Option<JwksFetch>,
    /// Secret of the edge signature and of the waiting room's tickets and admission tokens;
    /// `None` forwards claims without a signature (and queue polls answer 503).
    pub edge_secret: Option<Vec<u8>>,
    /// The waiting room's rate limits.
    pub limits: Limits,
    /// `FLASHGATE_EDGE_METRICS_TOKEN`: the bearer token of `GET /__flashgate/metrics`
    /// ([`crate::telemetry`]); `None`: the route answers 404.
    pub metrics_token: Option<String>,
    /// `FLASHGATE_CORS_ORIGINS`: the shop origins allowed to call the API from a browser
    /// ([`crate::cors`]); empty: same-origin only.
    pub cors: crate::cors::Cors,
    /// `FLASHGATE_TEST_CLOCK_OFFSET_MS`, fault injection only: added to the runtime's wall
    /// clock wherever the worker reads the time, ms (negative: behind); 0 unless set. The
    /// Workers runtime has no clock hook of its own, and workerd does not run under
    /// libfaketime; `scripts/chaos clock-skew` sets it to run the edge ahead of or behind the
    /// origins.
    pub test_clock_offset_ms: i64,
    /// The Turnstile provider of `challenge: "turnstile"` waiting rooms.
    pub turnstile: Turnstile,
}

/// Where the edge checks Turnstile widget tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turnstile {
    /// `FLASHGATE_TURNSTILE_SITEVERIFY_URL` (`http(s)://...`), default
    /// [`DEFAULT_TURNSTILE_SITEVERIFY_URL`].
    pub siteverify_url: String,
    /// `FLASHGATE_TURNSTILE_SECRET`; `None`: every check is a provider error (the campaign's
    /// `challenge_fail_open` decides).
    pub secret: Option<String>,
    /// `FLASHGATE_TURNSTILE_TIMEOUT_MS`: the longest wait for siteverify, ms (default
    /// [`DEFAULT_TURNSTILE_TIMEOUT_MS`]).
    pub timeout_ms: i64,
    /// `FLASHGATE_TURNSTILE_SITE_KEY`: the widget's public site key, which the bundled join
    /// page renders the widget with; `None`: the join page cannot show the widget.
    pub site_key: Option<String>,
    /// `FLASHGATE_TURNSTILE_SCRIPT_URL` (`http(s)://...`): the widget script the join page
    /// loads, default [`DEFAULT_TURNSTILE_SCRIPT_URL`].
    pub script_url: String,
}

impl EdgeConfig {
    /// Reads the settings through `lookup(binding name) -> value`. Empty values count as unset.
    /// Errors (a human-readable message naming the binding) when a required binding is missing,
    /// the origin URL is not `http(s)://...`, a number is not an integer in `1..=86_400_000`
    /// (`0..` for the skew allowance, `-86_400_000..` for the test clock offset), a rate limit is not an integer in `0..=1_000_000`, the
    /// IPv6 prefix is not `32..=128`, or a secret is shorter than
    /// [`flashgate_shared::MIN_SECRET_BYTES`] (32) bytes.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let origin_url = get("FLASHGATE_ORIGIN_URL")
            .ok_or("FLASHGATE_ORIGIN_URL is not set")?
            .trim()
            .trim_end_matches('/')
            .to_string();
        if !(origin_url.starts_with("http://") || origin_url.starts_with("https://")) {
            return Err("FLASHGATE_ORIGIN_URL must start with http:// or https://".into());
        }
        let int = |name: &str, default: i64, min: i64, max: i64| -> Result<i64, String> {
            match get(name) {
                None => Ok(default),
                Some(v) => match v.trim().parse::<i64>() {
                    Ok(n) if (min..=max).contains(&n) => Ok(n),
                    _ => Err(format!("{name} must be an integer between {min} and {max}")),
                },
            }
        };
        let ms = |name: &str, default: i64, min: i64| int(name, default, min, MAX_SETTING_MS);
        let rate = |name: &str, default: u32| -> Result<u32, String> {
            let n = int(name, default.into(), 0, MAX_LIMIT_PER_S.into())?;
            Ok(u32::try_from(n).unwrap_or(default))
        };
        let customer_token_secret = get("FLASHGATE_CUSTOMER_TOKEN_SECRET").map(String::into_bytes);
        if let Some(s) = &customer_token_secret {
            flashgate_shared::check_secret("FLASHGATE_CUSTOMER_TOKEN_SECRET", s)?;
        }
        let (tokens, jwks) = token_settings(&get, customer_token_secret.as_deref(), &int)?;
        let edge_secret = get("FLASHGATE_EDGE_SECRET").map(String::into_bytes);
        if let Some(s) = &edge_secret {
            flashgate_shared::check_secret("FLASHGATE_EDGE_SECRET", s)?;
        }
        let url = |name: &str, default: &str| -> Result<String, String> {
            let u = get(name).map_or_else(|| default.into(), |u| u.trim().to_string());
            if u.starts_with("http://") || u.starts_with("https://") {
                Ok(u)
            } else {
                Err(format!("{name} must start with http:// or https://"))
            }
        };
        let site_key = get("FLASHGATE_TURNSTILE_SITE_KEY").map(|s| s.trim().to_string());
        if site_key
            .as_deref()
            .is_some_and(|k| !k.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err("FLASHGATE_TURNSTILE_SITE_KEY must be visible ASCII".into());
        }
        let turnstile = Turnstile {
            siteverify_url: url(
                "FLASHGATE_TURNSTILE_SITEVERIFY_URL",
                DEFAULT_TURNSTILE_SITEVERIFY_URL,
            )?,
            script_url: url(
                "FLASHGATE_TURNSTILE_SCRIPT_URL",
                DEFAULT_TURNSTILE_SCRIPT_URL,
            )?,
            site_key,
            secret: get("FLASHGATE_TURNSTILE_SECRET").map(|s| s.trim().to_string()),
            timeout_ms: ms(
                "FLASHGATE_TURNSTILE_TIMEOUT_MS",
                DEFAULT_TURNSTILE_TIMEOUT_MS,
                1,
            )?,
        };
        Ok(EdgeConfig {
            turnstile,
            origin_url,
            status_ttl_ms: ms("FLASHGATE_STATUS_TTL_MS", DEFAULT_STATUS_TTL_MS, 1)?,
            status_max_stale_ms: ms(
                "FLASHGATE_STATUS_MAX_STALE_MS",
                DEFAULT_STATUS_MAX_STALE_MS,
                1,
            )?,
            not_started_skew_ms: ms(
                "FLASHGATE_NOT_STARTED_SKEW_MS",
                DEFAULT_NOT_STARTED_SKEW_MS,
                0,
            )?,
            origin_timeout_ms: ms("FLASHGATE_ORIGIN_TIMEOUT_MS", DEFAULT_ORIGIN_TIMEOUT_MS, 1)?,
            customer_token_secret,
            tokens,
            jwks,
            edge_secret,
            metrics_token: get("FLASHGATE_EDGE_METRICS_TOKEN").map(|t| t.trim().to_string()),
            cors: crate::cors::Cors::new(flashgate_shared::cors::parse_origins(
                "FLASHGATE_CORS_ORIGINS",
                get("FLASHGATE_CORS_ORIGINS").as_deref(),
            )?),
            limits: Limits {
                claims_per_s: rate("FLASHGATE_LIMIT_CLAIMS_PER_S", DEFAULT_LIMIT_CLAIMS_PER_S)?,
                joins_per_s: rate("FLASHGATE_LIMIT_JOINS_PER_S", DEFAULT_LIMIT_JOINS_PER_S)?,
                polls_per_s: rate("FLASHGATE_LIMIT_POLLS_PER_S", DEFAULT_LIMIT_POLLS_PER_S)?,
                ip_per_s: rate("FLASHGATE_LIMIT_IP_PER_S", DEFAULT_LIMIT_IP_PER_S)?,
                ipv6_prefix: get("FLASHGATE_LIMIT_IPV6_PREFIX")
                    .map(|v| {
                        Ipv6LimitPrefix::parse(&v)
                            .map_err(|e| format!("FLASHGATE_LIMIT_IPV6_PREFIX {e}"))
                    })
                    .transpose()?
                    .unwrap_or_default(),
            },
            test_clock_offset_ms: int(
                TEST_CLOCK_OFFSET_BINDING,
                0,
                -MAX_SETTING_MS,
                MAX_SETTING_MS,
            )?,
        })
    }

    /// Now on the worker's clock: `wall_ms` (the runtime's clock, ms since the Unix epoch)
    /// shifted by [`EdgeConfig::test_clock_offset_ms`], ms since the Unix epoch.
    pub fn clock_ms(&self, wall_ms: i64) -> i64 {
        wall_ms.saturating_add(self.test_clock_offset_ms)
    }
}

/// Reads an integer binding: name, default, least and largest value.
type IntSetting<'a> = &'a dyn Fn(&str, i64, i64, i64) -> Result<i64, String>;

/// The customer-token verifier and the JWKS endpoint of the settings (`get` reads a binding,
/// `int` an integer binding with a default and bounds). Errors: a bad binding, or
/// [`NO_KEYS`] when neither a secret nor a JWKS is set.
fn token_settings(
    get: &dyn Fn(&str) -> Option<String>,
    secret: Option<&[u8]>,
    int: IntSetting<'_>,
) -> Result<(Verifier, Option<JwksFetch>), String> {
    let mut keys = KeySet::new();
    if let Some(secret) = secret {
        keys.push(VerifyKey::hs256(None, secret))?;
    }
    if let Some(list) = get("FLASHGATE_CUSTOMER_TOKEN_SECRETS") {
        keys.extend(KeySet::parse_hs256_secrets(
            "FLASHGATE_CUSTOMER_TOKEN_SECRETS",
            &list,
        )?)
        .map_err(|e| format!("FLASHGATE_CUSTOMER_TOKEN_SECRETS: {e}"))?;
    }
    if let Some(jwks) = get("FLASHGATE_JWKS") {
        KeySet::parse_jwks(jwks.as_bytes())
            .and_then(|set| keys.extend(set))
            .map_err(|e| format!("FLASHGATE_JWKS: {e}"))?;
    }
    let leeway = int(
        "FLASHGATE_JWT_LEEWAY_SECONDS",
        DEFAULT_LEEWAY_SECONDS.into(),
        0,
        MAX_LEEWAY_SECONDS.into(),
    )?;
    let max_lifetime = int(
        "FLASHGATE_JWT_MAX_LIFETIME_SECONDS",
        DEFAULT_MAX_LIFETIME_SECONDS.into(),
        60,
        MAX_MAX_LIFETIME_SECONDS.into(),
    )?;
    let verifier = Verifier::new(keys)
        .awaiting_jwks(get("FLASHGATE_JWKS_URL").is_some())
        .with_issuer(get("FLASHGATE_JWT_ISSUER"))
        .with_audience(get("FLASHGATE_JWT_AUDIENCE"))
        .with_leeway_seconds(u32::try_from(leeway).unwrap_or(DEFAULT_LEEWAY_SECONDS))
        .with_max_lifetime_seconds(
            u32::try_from(max_lifetime).unwrap_or(DEFAULT_MAX_LIFETIME_SECONDS),
        );
    let jwks = match get("FLASHGATE_JWKS_URL") {
        None if verifier.keys().keys().is_empty() => return Err(NO_KEYS.into()),
        None => None,
        Some(url) => {
            let url = url.trim().to_string();
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err("FLASHGATE_JWKS_URL must start with https:// or http://".into());
            }
            let day_s = MAX_SETTING_MS / 1_000;
            Some(JwksFetch {
                url,
                schedule: Schedule {
                    ttl_ms: int("FLASHGATE_JWKS_TTL_SECONDS", 600, 1, day_s)? * 1_000,
                    min_interval_ms: int("FLASHGATE_JWKS_MIN_REFRESH_SECONDS", 30, 1, day_s)?
                        * 1_000,
                },
            })
        }
    };
    Ok((verifier, jwks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const SECRET: &str = "a-customer-token-secret-of-32-by";

    fn cfg(pairs: &[(&str, &str)]) -> Result<EdgeConfig, String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        EdgeConfig::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_and_required() {
        let c = cfg(&[
            ("FLASHGATE_ORIGIN_URL", "http://127.0.0.1:8080/"),
            ("FLASHGATE_CUSTOMER_TOKEN_SECRET", SECRET),
            ("FLASHGATE_EDGE_SECRET", ""),
        ])
        .unwrap();
        assert_eq!(c.origin_url, "http://127.0.0.1:8080");
        assert_eq!(c.status_ttl_ms, 1_000);
        assert_eq!(c.status_max_stale_ms, 30_000);
        assert_eq!(c.not_started_skew_ms, 2_000);
        assert_eq!(c.origin_timeout_ms, 5_000);
        assert_eq!(c.customer_token_secret.as_deref(), Some(SECRET.as_bytes()));
        assert_eq!(c.edge_secret, None);
        assert!(!c.cors.enabled());
        assert_eq!(c.test_clock_offset_ms, 0);
        assert_eq!(c.clock_ms(1_700_000_000_000), 1_700_000_000_000);
        assert_eq!(
            c.limits,
            Limits {
                claims_per_s: 5,
                joins_per_s: 2,
                polls_per_s: 2,
                ip_per_s: 50,
                ipv6_prefix: Ipv6LimitPrefix::default(),
            }
        );
        assert_eq!(
            cfg(&[("FLASHGATE_CUSTOMER_TOKEN_SECRET", SECRET)]).unwrap_err(),
            "FLASHGATE_ORIGIN_URL is not set"
        );
        assert_eq!(
            cfg(&[("FLASHGATE_ORIGIN_URL", "http://o")]).unwrap_err(),
            NO_KEYS
        );
        // An identity provider alone: no HS256 secret needed.
        let c = cfg(&[
            ("FLASHGATE_ORIGIN_URL", "http://o"),
            ("FLASHGATE_JWKS_URL", "https://idp.example/jwks.json"),
        ])
        .unwrap();
        assert_eq!(c.customer_token_secret, None);
        assert!(c.tokens.keys().keys().is_empty());
    }

    #[test]
    fn rejects_bad_numbers_and_urls() {
        let base = [
            ("FLASHGATE_ORIGIN_URL", "http://o"),
            ("FLASHGATE_CUSTOMER_TOKEN_SECRET", SECRET),
        ];
        for bad in ["0", "-5", "abc", "99999999999999999999", "1.5"] {
            let mut p = base.to_vec();
            p.push(("FLASHGATE_STATUS_TTL_MS", bad));
            assert!(cfg(&p).is_err(), "{bad} accepted");
        }
        let mut p = base.to_vec();
        p.push(("FLASHGATE_NOT_STARTED_SKEW_MS", "0"));
        p.push(("FLASHGATE_STATUS_TTL_MS", " 250 "));
        let c = cfg(&p).unwrap();
        assert_eq!((c.not_started_skew_ms, c.status_ttl_ms), (0, 250));
        for (v, ok) in [
            ("0", true),
            ("1000000", true),
            ("1000001", false),
            ("-1", false),
        ] {
            let mut p = base.to_vec();
            p.push(("FLASHGATE_LIMIT_CLAIMS_PER_S", v));
            assert_eq!(cfg(&p).is_ok(), ok, "{v}");
        }
        for (v, bits) in [
            ("48", Some(48)),
            ("/56", Some(56)),
            ("31", None),
            ("x", None),
        ] {
            let mut p = base.to_vec();
            p.push(("FLASHGATE_LIMIT_IPV6_PREFIX", v));
            match (cfg(&p), bits) {
                (Ok(c), Some(b)) => assert_eq!(c.limits.ipv6_prefix.bits(), b),
                (Err(e), None) => assert!(
                    e.starts_with("FLASHGATE_LIMIT_IPV6_PREFIX must be an IPv6 prefix length"),
                    "{e}"
                ),
                (other, _) => panic!("{v}: {other:?}"),
            }
        }
        assert!(cfg(&[
            ("FLASHGATE_ORIGIN_URL", "ftp://o"),
            ("FLASHGATE_CUSTOMER_TOKEN_SECRET", SECRET)
        ])
        .is_err());
    }

    #[test]
    fn cors_origins_are_read_and_checked() {
        let base = [
            ("FLASHGATE_ORIGIN_URL", "http://o"),
            ("FLASHGATE_CUSTOMER_TOKEN_SECRET", SECRET),
        ];
        let mut p = base.to_vec();
        p.push((
            "FLASHGATE_CORS_ORIGINS",
            "https://shop.example, http://localhost:3000",
        ));
        let c = cfg(&p).unwrap();
        assert!(c.cors.headers(Some("http://localhost:3000"), false).len() > 1);
        let mut p = base.to_vec();
        p.push(("FLASHGATE_CORS_ORIGINS", "https://shop.example/cart"));
        assert!(cfg(&p).unwrap_err().starts_with("FLASHGATE_CORS_ORIGINS: "));
    }

    #[test]
    fn turnstile_settings_have_defaults_and_are_checked() {
        let base = [
            ("FLASHGATE_ORIGIN_URL", "http://o"),
            ("FLASHGATE_CUSTOMER_TOKEN_SECRET", SECRET),
        ];
        let c = cfg(&base).unwrap();
        assert_eq!(c.turnstile.siteverify_url, DEFAULT_TURNSTILE_SITEVERIFY_URL);
        assert_eq!((c.turnstile.secret, c.turnstile.timeout_ms), (None, 2_000));
        let mut p = base.to_vec();
        p.push(("FLASHGATE_TURNSTILE_SITEVERIFY_URL", "ftp://x"));
        assert!(cfg(&p)
            .unwrap_err()
            .starts_with("FLASHGATE_TURNSTILE_SITEVERIFY_URL"));
        let mut p = base.to_vec();
        p.push(("FLASHGATE_TURNSTILE_TIMEOUT_MS", "0"));
        assert!(cfg(&p)
            .unwrap_err()
            .starts_with("FLASHGATE_TURNSTILE_TIMEOUT_MS"));
        assert_eq!(c.turnstile.script_url, DEFAULT_TURNSTILE_SCRIPT_URL);
        assert_eq!(c.turnstile.site_key, None);
        let mut p = base.to_vec();
        p.push(("FLASHGATE_TURNSTILE_SITE_KEY", " 0x4AAA-key "));
        p.push((
            "FLASHGATE_TURNSTILE_SCRIPT_URL",
            "http://127.0.0.1:9/api.js",
        ));
        let c = cfg(&p).unwrap();
        assert_eq!(c.turnstile.site_key.as_deref(), Some("0x4AAA-key"));
        assert_eq!(c.turnstile.script_url, "http://127.0.0.1:9/api.js");
        let mut p = base.to_vec();
        p.push(("FLASHGATE_TURNSTILE_SCRIPT_URL", "/api.js"));
        assert!(cfg(&p)
            .unwrap_err()
            .starts_with("FLASHGATE_TURNSTILE_SCRIPT_URL"));
        let mut p = base.to_vec();
        p.push(("FLASHGATE_TURNSTILE_SITE_KEY", "a b"));
        assert!(cfg(&p)
            .unwrap_err()
            .starts_with("FLASHGATE_TURNSTILE_SITE_KEY"));
    }

    #[test]
    fn secrets_shorter_than_32_bytes_are_refused_by_name() {
        let e = cfg(&[
            ("FLASHGATE_ORIGIN_URL", "http://o"),
            ("FLASHGATE_CUSTOMER_TOKEN_SECRET", "short"),
        ])
        .unwrap_err();
        assert!(
            e.starts_with("FLASHGATE_CUSTOMER_TOKEN_SECRET must be at least 32 bytes"),
            "{e}"
        );
        let e = cfg(&[
            ("FLASHGATE_ORIGIN_URL", "http://o"),
            ("FLASHGATE_CUSTOMER_TOKEN_SECRET", SECRET),
            ("FLASHGATE_EDGE_SECRET", "edge-secret"),
        ])
        .unwrap_err();
        assert!(
            e.starts_with("FLASHGATE_EDGE_SECRET must be at least 32 bytes"),
            "{e}"
        );
        assert!(!e.contains("edge-secret"), "no secret in {e}");
    }

    #[test]
    fn test_clock_offset_shifts_the_clock_and_refuses_bad_values() {
        let base = [
            ("FLASHGATE_ORIGIN_URL", "http://o"),
            ("FLASHGATE_CUSTOMER_TOKEN_SECRET", SECRET),
        ];
        let wall = 1_700_000_000_000;
        for (v, offset) in [
            ("2000", 2_000),
            ("+2000", 2_000),
            (" -2000 ", -2_000),
            ("0", 0),
            ("", 0),
            ("86400000", 86_400_000),
            ("-86400000", -86_400_000),
        ] {
            let mut p = base.to_vec();
            p.push((TEST_CLOCK_OFFSET_BINDING, v));
            let c = cfg(&p).unwrap();
            assert_eq!(c.test_clock_offset_ms, offset, "{v:?}");
            assert_eq!(c.clock_ms(wall), wall + offset, "{v:?}");
        }
        for bad in [
            "2s",
            "-2.5",
            "abc",
            "86400001",
            "-86400001",
            "99999999999999999999",
        ] {
            let mut p = base.to_vec();
            p.push((TEST_CLOCK_OFFSET_BINDING, bad));
            assert_eq!(
                cfg(&p).unwrap_err(),
                "FLASHGATE_TEST_CLOCK_OFFSET_MS must be an integer between -86400000 and 86400000",
                "{bad:?}"
            );
        }
        // Saturates instead of overflowing at the ends of the clock.
        let mut p = base.to_vec();
        p.push((TEST_CLOCK_OFFSET_BINDING, "-5"));
        assert_eq!(cfg(&p).unwrap().clock_ms(i64::MIN), i64::MIN);
    }
}
