//! Secrets (tokens, signing keys) kept out of log lines, on the `secrecy` crate: the text is
//! wiped from memory when dropped (`zeroize`) and only [`Secret::expose`] reads it. The
//! at-least-32-bytes rule of every configured secret is checked by
//! [`crate::config::Config::validate`].

use std::fmt;

use secrecy::{ExposeSecret, SecretString};

/// A secret string whose `Debug` prints `[redacted]` (it has no `Display`).
#[derive(Clone, Default)]
pub struct Secret(SecretString);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(SecretString::from(s.into()))
    }
    /// The secret's bytes, for MACs and constant-time comparison.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret::new(s))
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn debug_never_shows_the_secret() {
        let s = Secret::new("a-very-secret-token-0123456789abcdef");
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(s.clone())), "Some([redacted])");
        assert_eq!(s.expose(), "a-very-secret-token-0123456789abcdef");
    }
}
