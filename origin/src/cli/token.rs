//! `flashgate token`: mints a customer token for tests and demos, HS256 under the shared
//! secret or RS256 / ES256 under a PEM private key (an identity provider's role in
//! production). `--jwks` prints the public key as a JWKS instead, to serve or to put in
//! `FLASHGATE_JWKS`.

use anyhow::{bail, ensure, Context};
use flashgate_shared::token::{
    is_valid_customer_id, Algorithm, SigningKey, DEFAULT_MAX_LIFETIME_SECONDS,
    MAX_MAX_LIFETIME_SECONDS,
};

use crate::secret::Secret;

/// The arguments of `flashgate token`.
#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// Customer id (`sub`).
    #[arg(long, required_unless_present = "jwks")]
    pub sub: Option<String>,
    /// Lifetime in seconds, 1 ..= 31,536,000 (one year) and at most
    /// `--jwt-max-lifetime-seconds`: a token that is expired when it is minted, or one the
    /// origin would refuse as living too long, is refused with a usage error (exit 2).
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(i64).range(1..=31_536_000))]
    pub ttl_seconds: i64,
    /// The origin's longest accepted token lifetime, in seconds (60..=2,592,000), the setting
    /// of the same name that `flashgate serve` reads: `--ttl-seconds` may not be above it.
    #[arg(
        long,
        env = "FLASHGATE_JWT_MAX_LIFETIME_SECONDS",
        default_value_t = DEFAULT_MAX_LIFETIME_SECONDS,
        value_parser = clap::value_parser!(u32).range(60..=i64::from(MAX_MAX_LIFETIME_SECONDS))
    )]
    pub jwt_max_lifetime_seconds: u32,
    /// Algorithm: HS256 (shared secret), RS256 or ES256 (`--key`).
    #[arg(long, default_value = "HS256")]
    pub alg: String,
    /// PEM private key file for RS256 (RSA, PKCS#8 or PKCS#1) or ES256 (P-256, PKCS#8 or SEC1).
    #[arg(long)]
    pub key: Option<std::path::PathBuf>,
    /// Key id written into the header (`kid`).
    #[arg(long)]
    pub kid: Option<String>,
    /// Issuer (`iss`).
    #[arg(long)]
    pub iss: Option<String>,
    /// Audience (`aud`).
    #[arg(long)]
    pub aud: Option<String>,
    /// Print the public key of `--key` as a JWKS (`{"keys":[...]}`) instead of a token.
    #[arg(long)]
    pub jwks: bool,
    /// The HS256 secret (needed for HS256 only).
    #[arg(long, env = "FLASHGATE_CUSTOMER_TOKEN_SECRET", hide_env_values = true)]
    pub customer_token_secret: Option<Secret>,
}

impl TokenArgs {
    /// The token (or the JWKS with `--jwks`). Errors: an unknown algorithm, a missing or
    /// unreadable key or secret, a bad `sub`, a `--ttl-seconds` past
    /// `--jwt-max-lifetime-seconds`.
    pub fn run(&self) -> anyhow::Result<String> {
        let max = i64::from(self.jwt_max_lifetime_seconds);
        ensure!(
            self.jwks || self.ttl_seconds <= max,
            "--ttl-seconds {} is past the longest token lifetime the origin accepts, {max} s \
             (FLASHGATE_JWT_MAX_LIFETIME_SECONDS / --jwt-max-lifetime-seconds): the origin \
             would refuse the token with 401",
            self.ttl_seconds
        );
        let alg = Algorithm::parse(&self.alg.to_ascii_uppercase())
            .with_context(|| format!("--alg must be HS256, RS256 or ES256, not {:?}", self.alg))?;
        let key = match (alg, &self.key) {
            (Algorithm::Hs256, _) => {
                let secret = self
                    .customer_token_secret
                    .as_ref()
                    .context("HS256 needs FLASHGATE_CUSTOMER_TOKEN_SECRET")?;
                flashgate_shared::check_secret(
                    "FLASHGATE_CUSTOMER_TOKEN_SECRET",
                    secret.expose().as_bytes(),
                )
                .map_err(anyhow::Error::msg)?;
                SigningKey::hs256(self.kid.clone(), secret.expose().as_bytes())
            }
            (_, None) => bail!("{} needs --key <PEM file>", alg.as_str()),
            (_, Some(path)) => {
                let pem = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                SigningKey::from_pem(alg, self.kid.clone(), &pem).map_err(anyhow::Error::msg)?
            }
        };
        if self.jwks {
            let jwk = key
                .public_jwk()
                .context("an HS256 secret has no public key to publish")?;
            return Ok(serde_json::json!({ "keys": [jwk] }).to_string());
        }
        let sub = self.sub.clone().unwrap_or_default();
        ensure!(
            is_valid_customer_id(&sub),
            "sub must be 1..=128 visible ASCII characters"
        );
        let mut claims = serde_json::json!({
            "sub": sub,
            "exp": chrono::Utc::now().timestamp() + self.ttl_seconds,
        });
        if let Some(iss) = &self.iss {
            claims["iss"] = iss.clone().into();
        }
        if let Some(aud) = &self.aud {
            claims["aud"] = aud.clone().into();
        }
        Ok(key.sign(&claims))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::TokenArgs;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        token: TokenArgs,
    }

    fn parse(ttl: &str) -> Result<i64, clap::error::ErrorKind> {
        let ttl = format!("--ttl-seconds={ttl}");
        Cli::try_parse_from(["flashgate", "--sub", "alice", ttl.as_str()])
            .map(|c| c.token.ttl_seconds)
            .map_err(|e| e.kind())
    }

    #[test]
    fn a_lifetime_outside_one_second_to_one_year_is_a_usage_error() {
        for bad in ["0", "-60", "31536001"] {
            assert_eq!(
                parse(bad),
                Err(clap::error::ErrorKind::ValueValidation),
                "{bad}"
            );
        }
        assert_eq!(parse("1"), Ok(1));
        assert_eq!(parse("31536000"), Ok(31_536_000));
    }

    #[test]
    fn a_lifetime_past_the_origins_longest_is_refused_naming_the_setting() {
        let cli = |args: &[&str]| {
            let mut argv = vec!["flashgate", "--sub", "alice"];
            argv.extend_from_slice(args);
            Cli::try_parse_from(argv).expect("parses").token
        };
        let err = cli(&["--ttl-seconds=86401", "--jwt-max-lifetime-seconds=86400"])
            .run()
            .expect_err("past the max");
        assert!(
            err.to_string()
                .contains("FLASHGATE_JWT_MAX_LIFETIME_SECONDS"),
            "{err}"
        );
        let err = cli(&["--ttl-seconds=120", "--jwt-max-lifetime-seconds=60"])
            .run()
            .expect_err("past a lower max");
        assert!(err.to_string().contains("60 s"), "{err}");
    }
}
