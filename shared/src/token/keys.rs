//! The keys customer tokens are verified with, each pinned to one algorithm: HS256 secrets
//! (optionally named by a key id, for rotation) and RS256 / ES256 public keys read from a JSON
//! Web Key Set (RFC 7517; algorithms of RFC 7518 §3).
//!
//! A key is used only for its own algorithm: an HS256 token is checked against the HS256
//! secrets alone, so a token "signed" with an RSA public key as an HMAC secret never verifies
//! (no algorithm confusion), and `none` has no key at all.

use crate::signature::{keyed_mac, HmacSha256};
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::Mac;
use p256::ecdsa::signature::Verifier as _;
use serde::Deserialize;

/// Most keys a key set may hold (secrets and JWKS keys together); a larger JWKS is refused.
pub const MAX_KEYS: usize = 64;
/// Largest JWKS document read, in bytes.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;
/// Longest key id accepted, in bytes.
pub const MAX_KID_BYTES: usize = 256;
/// Smallest RSA modulus accepted, in bits (RFC 7518 §3.3 requires 2048).
pub const MIN_RSA_BITS: usize = 2048;
/// Largest RSA modulus accepted, in bits (bounds the cost of one verification).
pub const MAX_RSA_BITS: usize = 8192;
/// The start-up error of the origin and the edge when nothing can verify a customer token: no
/// HS256 secret, no JWKS (inline or URL).
pub const NO_KEYS: &str = "no customer token key: set FLASHGATE_CUSTOMER_TOKEN_SECRET (HS256), \
     or an identity provider's FLASHGATE_JWKS_URL or FLASHGATE_JWKS";

/// A JWS algorithm flashgate accepts (RFC 7518 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// HMAC with SHA-256 under a shared secret.
    Hs256,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// ECDSA on P-256 with SHA-256 (signature `r || s`, 64 bytes).
    Es256,
}

impl Algorithm {
    /// The `alg` header value: `HS256`, `RS256` or `ES256`.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Hs256 => "HS256",
            Algorithm::Rs256 => "RS256",
            Algorithm::Es256 => "ES256",
        }
    }

    /// The algorithm named by an `alg` value; `None` for any other (`none` included).
    pub fn parse(alg: &str) -> Option<Self> {
        match alg {
            "HS256" => Some(Algorithm::Hs256),
            "RS256" => Some(Algorithm::Rs256),
            "ES256" => Some(Algorithm::Es256),
            _ => None,
        }
    }
}

/// Key material of one verification key.
#[derive(Clone)]
enum Material {
    /// The HMAC keyed with the secret once (its inner and outer pads already hashed): each
    /// verification clones it instead of hashing the pads again.
    Hs256(HmacSha256),
    Rs256(Box<rsa::pkcs1v15::VerifyingKey<sha2::Sha256>>),
    Es256(p256::ecdsa::VerifyingKey),
}

/// One verification key: its optional key id and its material, which fixes its algorithm.
#[derive(Clone)]
pub struct VerifyKey {
    kid: Option<String>,
    material: Material,
}

impl std::fmt::Debug for VerifyKey {
    /// Names the key id and algorithm, never a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyKey")
            .field("kid", &self.kid)
            .field("alg", &self.algorithm().as_str())
            .finish()
    }
}

impl VerifyKey {
    /// An HS256 secret, named `kid` when given.
    pub fn hs256(kid: Option<String>, secret: &[u8]) -> Self {
        VerifyKey {
            kid,
            material: Material::Hs256(keyed_mac(secret)),
        }
    }

    /// The key's id (`kid`), if any.
    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// The one algorithm this key verifies.
    pub fn algorithm(&self) -> Algorithm {
        match self.material {
            Material::Hs256(_) => Algorithm::Hs256,
            Material::Rs256(_) => Algorithm::Rs256,
            Material::Es256(_) => Algorithm::Es256,
        }
    }

    /// True when `signature` signs `input` under this key (HMAC compared in constant time).
    pub fn verifies(&self, input: &[u8], signature: &[u8]) -> bool {
        match &self.material {
            Material::Hs256(keyed) => {
                let mut mac = keyed.clone();
                mac.update(input);
                mac.verify_slice(signature).is_ok()
            }
            Material::Rs256(key) => rsa::pkcs1v15::Signature::try_from(signature)
                .is_ok_and(|sig| key.verify(input, &sig).is_ok()),
            Material::Es256(key) => p256::ecdsa::Signature::from_slice(signature)
                .is_ok_and(|sig| key.verify(input, &sig).is_ok()),
        }
    }
}

/// The keys tokens are verified with (at most [`MAX_KEYS`]).
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    keys: Vec<VerifyKey>,
}

/// The keys a token may be checked against.
pub(crate) enum Candidates<'a> {
    /// These keys (all of the token's algorithm).
    Keys(Vec<&'a VerifyKey>),
    /// The token names a key id this set does not hold.
    UnknownKid,
    /// The token's key id names a key of another algorithm, or no key has its algorithm.
    WrongAlgorithm,
}

impl KeySet {
    /// An empty set.
    pub fn new() -> Self {
        KeySet::default()
    }

    /// Adds a key. Errors when the set holds [`MAX_KEYS`] keys already or a key with the same
    /// id exists.
    pub fn push(&mut self, key: VerifyKey) -> Result<(), String> {
        if self.keys.len() >= MAX_KEYS {
            return Err(format!("at most {MAX_KEYS} keys are accepted"));
        }
        if let Some(kid) = key.kid() {
            if self.keys.iter().any(|k| k.kid() == Some(kid)) {
                return Err(format!("key id {kid:?} is given twice"));
            }
        }
        self.keys.push(key);
        Ok(())
    }

    /// Adds every key of `other` (see [`KeySet::push`]).
    pub fn extend(&mut self, other: KeySet) -> Result<(), String> {
        other.keys.into_iter().try_for_each(|k| self.push(k))
    }

    /// The keys held.
    pub fn keys(&self) -> &[VerifyKey] {
        &self.keys
    }

    /// True when the set holds a key named `kid`.
    pub fn has_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid() == Some(kid))
    }

    /// The keys a token of algorithm `alg` naming key id `kid` may be checked against: the
    /// key named `kid` (which must be of `alg`), or without a `kid` every key of `alg`.
    pub(crate) fn candidates(&self, alg: Algorithm, kid: Option<&str>) -> Candidates<'_> {
        match kid {
            Some(kid) => match self.keys.iter().find(|k| k.kid() == Some(kid)) {
                None => Candidates::UnknownKid,
                Some(k) if k.algorithm() != alg => Candidates::WrongAlgorithm,
                Some(k) => Candidates::Keys(vec![k]),
            },
            None => {
                let keys: Vec<_> = self.keys.iter().filter(|k| k.algorithm() == alg).collect();
                if keys.is_empty() {
                    Candidates::WrongAlgorithm
                } else {
                    Candidates::Keys(keys)
                }
            }
        }
    }

    /// Reads HS256 secrets `kid:secret[,kid:secret...]` (each secret at least
    /// [`crate::MIN_SECRET_BYTES`] bytes; a key id is 1..=256 visible ASCII characters without
    /// `:` or `,`). The error names `variable` and the key id, never a secret.
    pub fn parse_hs256_secrets(variable: &str, list: &str) -> Result<KeySet, String> {
        let mut set = KeySet::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (kid, secret) = entry.split_once(':').ok_or_else(|| {
                format!(
                    "{variable}: every entry must be kid:secret (a key id, a colon, the secret)"
                )
            })?;
            let kid = kid.trim();
            if !crate::text::is_visible_ascii(kid, MAX_KID_BYTES) {
                return Err(format!(
                    "{variable}: a key id must be 1 to {MAX_KID_BYTES} visible ASCII characters"
                ));
            }
            crate::check_secret(&format!("{variable} (key {kid})"), secret.as_bytes())?;
            set.push(VerifyKey::hs256(Some(kid.to_string()), secret.as_bytes()))
                .map_err(|e| format!("{variable}: {e}"))?;
        }
        Ok(set)
    }

    /// Reads a JSON Web Key Set (RFC 7517 §5): `{"keys":[...]}` of at most [`MAX_JWKS_BYTES`]
    /// bytes. Kept: RSA keys (`kty` `RSA`, `n`, `e`; [`MIN_RSA_BITS`]..=[`MAX_RSA_BITS`] bits)
    /// and P-256 keys (`kty` `EC`, `crv` `P-256`, `x`, `y`) whose `use` is absent or `sig` and
    /// whose `alg`, when given, is RS256 / ES256 respectively. Skipped: other keys (encryption
    /// keys, other curves or algorithms, RSA moduli outside that range), so that a provider
    /// adding one breaks nothing. Errors:
    /// not JSON of that shape, a kept key without a `kid` or with a broken value, more than
    /// [`MAX_KEYS`] kept keys or a key id given twice.
    pub fn parse_jwks(json: &[u8]) -> Result<KeySet, String> {
        if json.len() > MAX_JWKS_BYTES {
            return Err(format!("the JWKS is larger than {MAX_JWKS_BYTES} bytes"));
        }
        let doc: JwksDoc = serde_json::from_slice(json)
            .map_err(|e| format!("the JWKS is not a JSON key set: {e}"))?;
        let mut set = KeySet::new();
        for jwk in doc.keys {
            if let Some(key) = jwk.into_key()? {
                set.push(key)?;
            }
        }
        Ok(set)
    }
}

#[derive(Deserialize)]
struct JwksDoc {
    keys: Vec<Jwk>,
}

/// The members of a JWK (RFC 7517 §4, RFC 7518 §6) flashgate reads.
#[derive(Deserialize)]
struct Jwk {
    kty: String,
    kid: Option<String>,
    #[serde(rename = "use")]
    use_: Option<String>,
    alg: Option<String>,
    crv: Option<String>,
    n: Option<String>,
    e: Option<String>,
    x: Option<String>,
    y: Option<String>,
}

impl Jwk {
    /// The verification key, `None` for a key flashgate does not use.
    fn into_key(self) -> Result<Option<VerifyKey>, String> {
        if self.use_.as_deref().is_some_and(|u| u != "sig") {
            return Ok(None);
        }
        let alg = match (self.kty.as_str(), self.crv.as_deref()) {
            ("RSA", _) => Algorithm::Rs256,
            ("EC", Some("P-256")) => Algorithm::Es256,
            _ => return Ok(None),
        };
        if self.alg.as_deref().is_some_and(|a| a != alg.as_str()) {
            return Ok(None);
        }
        let kid = self
            .kid
            .filter(|k| crate::text::is_visible_ascii(k, MAX_KID_BYTES))
            .ok_or_else(|| format!("a {} key of the JWKS has no usable kid", alg.as_str()))?;
        let field = |name: &str, v: Option<String>| -> Result<Vec<u8>, String> {
            v.and_then(|v| B64.decode(v).ok())
                .ok_or_else(|| format!("key {kid:?}: `{name}` is missing or not base64url"))
        };
        let material = if alg == Algorithm::Rs256 {
            {
                let n = rsa::BigUint::from_bytes_be(&field("n", self.n)?);
                let e = rsa::BigUint::from_bytes_be(&field("e", self.e)?);
                // Too small to be safe or too large to verify cheaply: skipped like any key
                // flashgate does not use, so one such key in a provider's set breaks nothing.
                if !(MIN_RSA_BITS..=MAX_RSA_BITS).contains(&n.bits()) {
                    return Ok(None);
                }
                let public = rsa::RsaPublicKey::new_with_max_size(n, e, MAX_RSA_BITS)
                    .map_err(|e| format!("key {kid:?}: not an RSA public key: {e}"))?;
                Material::Rs256(Box::new(rsa::pkcs1v15::VerifyingKey::new(public)))
            }
        } else {
            {
                let (x, y) = (field("x", self.x)?, field("y", self.y)?);
                if x.len() != 32 || y.len() != 32 {
                    return Err(format!("key {kid:?}: P-256 coordinates are 32 bytes each"));
                }
                let point = p256::EncodedPoint::from_affine_coordinates(
                    p256::FieldBytes::from_slice(&x),
                    p256::FieldBytes::from_slice(&y),
                    false,
                );
                let key = p256::ecdsa::VerifyingKey::from_encoded_point(&point)
                    .map_err(|_| format!("key {kid:?}: not a point of P-256"))?;
                Material::Es256(key)
            }
        };
        Ok(Some(VerifyKey {
            kid: Some(kid),
            material,
        }))
    }
}
