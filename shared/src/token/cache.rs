//! [`TokenCache`]: customer tokens already verified, kept by the edge (per isolate) and by the
//! origin (per process), so that a customer's retries skip the signature check.

use super::{CustomerClaims, NumericDate, TokenError, Verifier};

/// Customer tokens verified before, so that a customer's retries (a stampede is mostly retries
/// and double taps) skip the signature check (HMAC, or the far costlier RSA / ECDSA of an
/// identity provider's token) and the JSON parsing. A hit is only the very same token string
/// whose signature, issuer and audience were checked; its `exp` and `nbf` are checked again on
/// every use. Holds at most `capacity` tokens and starts over when full; its owner empties it
/// when the key set changes (a removed key's tokens are verified again).
#[derive(Debug, Default)]
pub struct TokenCache {
    verified: std::collections::HashMap<String, CustomerClaims>,
    capacity: usize,
}

impl TokenCache {
    /// An empty cache holding at most `capacity` tokens (0 disables it).
    pub fn new(capacity: usize) -> Self {
        TokenCache {
            verified: std::collections::HashMap::new(),
            capacity,
        }
    }

    /// The customer id of `tok` when it is held: `Some(Ok(sub))`, or `Some(Err(..))` when its
    /// times no longer pass at `now` with `leeway_s` seconds of leeway
    /// ([`CustomerClaims::check_times`]); `None` when it is not held.
    pub fn get(
        &self,
        tok: &str,
        now: NumericDate,
        leeway_s: u32,
    ) -> Option<Result<String, TokenError>> {
        let c = self.verified.get(tok)?;
        Some(c.check_times(now, leeway_s).map(|()| c.sub.clone()))
    }

    /// Keeps `claims`, the result of a successful verification of `tok`.
    pub fn insert(&mut self, tok: &str, claims: &CustomerClaims) {
        if self.capacity == 0 {
            return;
        }
        if self.verified.len() >= self.capacity {
            self.verified.clear();
        }
        self.verified.insert(tok.to_string(), claims.clone());
    }

    /// Same result as [`Verifier::verify`] for the same token, verifier and clock, as the
    /// customer id.
    pub fn verify(
        &mut self,
        tok: &str,
        verifier: &Verifier,
        now: NumericDate,
    ) -> Result<String, TokenError> {
        if let Some(hit) = self.get(tok, now, verifier.leeway_seconds()) {
            return hit;
        }
        let claims = verifier.verify(tok, now)?;
        self.insert(tok, &claims);
        Ok(claims.sub)
    }

    /// Forgets every token (the key set changed).
    pub fn clear(&mut self) {
        self.verified.clear();
    }

    /// Number of tokens held.
    pub fn len(&self) -> usize {
        self.verified.len()
    }

    /// True when no token is held.
    pub fn is_empty(&self) -> bool {
        self.verified.is_empty()
    }
}
