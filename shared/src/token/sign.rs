//! Signing customer tokens, for `flashgate token`, demos and tests: HS256 under a secret,
//! RS256 and ES256 under a private key, with an optional key id (`kid`) in the header.
//! flashgate itself only verifies; an identity provider signs in production.

use super::keys::Algorithm;
use crate::signature::keyed_mac;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::Mac;
use p256::ecdsa::signature::{SignatureEncoding, Signer as _};
use serde::Serialize;

/// Key material of a [`SigningKey`].
#[derive(Clone)]
enum Material {
    Hs256(Vec<u8>),
    Rs256(Box<rsa::pkcs1v15::SigningKey<sha2::Sha256>>),
    Es256(p256::ecdsa::SigningKey),
}

/// A key that signs tokens, with the key id written into their header.
#[derive(Clone)]
pub struct SigningKey {
    kid: Option<String>,
    material: Material,
}

impl std::fmt::Debug for SigningKey {
    /// Names the key id and algorithm, never key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .field("alg", &self.algorithm().as_str())
            .finish()
    }
}

impl SigningKey {
    /// An HS256 secret.
    pub fn hs256(kid: Option<String>, secret: &[u8]) -> Self {
        SigningKey {
            kid,
            material: Material::Hs256(secret.to_vec()),
        }
    }

    /// An RSA private key (RS256).
    pub fn rs256(kid: Option<String>, key: rsa::RsaPrivateKey) -> Self {
        SigningKey {
            kid,
            material: Material::Rs256(Box::new(rsa::pkcs1v15::SigningKey::new(key))),
        }
    }

    /// A P-256 private key (ES256).
    pub fn es256(kid: Option<String>, key: p256::ecdsa::SigningKey) -> Self {
        SigningKey {
            kid,
            material: Material::Es256(key),
        }
    }

    /// Reads a PEM private key for `alg` (RS256: PKCS#8 `PRIVATE KEY` or PKCS#1
    /// `RSA PRIVATE KEY`; ES256: PKCS#8 or SEC1 `EC PRIVATE KEY`, curve P-256). Errors: HS256
    /// (a secret is not a PEM key), a PEM that is not such a key, or an RSA key outside
    /// [`super::keys::MIN_RSA_BITS`]..=[`super::keys::MAX_RSA_BITS`] bits (the verifiers skip
    /// such keys).
    #[cfg(feature = "pem")]
    pub fn from_pem(alg: Algorithm, kid: Option<String>, pem: &str) -> Result<Self, String> {
        use p256::pkcs8::DecodePrivateKey;
        match alg {
            Algorithm::Hs256 => Err("HS256 signs with a secret, not a PEM key".into()),
            Algorithm::Rs256 => {
                use rsa::pkcs1::DecodeRsaPrivateKey;
                use rsa::traits::PublicKeyParts;
                let key = rsa::RsaPrivateKey::from_pkcs8_pem(pem)
                    .or_else(|_| rsa::RsaPrivateKey::from_pkcs1_pem(pem))
                    .map_err(|_| "not an RSA private key in PEM (PKCS#8 or PKCS#1)".to_string())?;
                // The verifiers skip keys outside this range: refuse to sign with one.
                let bits = key.n().bits();
                if !(super::keys::MIN_RSA_BITS..=super::keys::MAX_RSA_BITS).contains(&bits) {
                    return Err(format!(
                        "an RSA key must have {} to {} bits (RFC 7518 §3.3 requires at least 2048); this one has {bits}",
                        super::keys::MIN_RSA_BITS,
                        super::keys::MAX_RSA_BITS
                    ));
                }
                Ok(SigningKey::rs256(kid, key))
            }
            Algorithm::Es256 => p256::ecdsa::SigningKey::from_pkcs8_pem(pem)
                .or_else(|_| p256::SecretKey::from_sec1_pem(pem).map(Into::into))
                .map(|k| SigningKey::es256(kid, k))
                .map_err(|_| "not a P-256 private key in PEM (PKCS#8 or SEC1)".into()),
        }
    }

    /// The algorithm this key signs with.
    pub fn algorithm(&self) -> Algorithm {
        match self.material {
            Material::Hs256(_) => Algorithm::Hs256,
            Material::Rs256(_) => Algorithm::Rs256,
            Material::Es256(_) => Algorithm::Es256,
        }
    }

    /// The public key as a JWK (RFC 7517) with `kid`, `alg` and `use: "sig"`, ready for a
    /// JWKS; `None` for an HS256 secret (which is never published).
    pub fn public_jwk(&self) -> Option<serde_json::Value> {
        use rsa::traits::PublicKeyParts;
        let kid = self.kid.clone();
        match &self.material {
            Material::Hs256(_) => None,
            Material::Rs256(k) => {
                let public = rsa::RsaPublicKey::from(k.as_ref().as_ref());
                Some(serde_json::json!({
                    "kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid,
                    "n": B64.encode(public.n().to_bytes_be()),
                    "e": B64.encode(public.e().to_bytes_be()),
                }))
            }
            Material::Es256(k) => {
                let point = k.verifying_key().to_encoded_point(false);
                Some(serde_json::json!({
                    "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": kid,
                    "x": B64.encode(point.x()?), "y": B64.encode(point.y()?),
                }))
            }
        }
    }

    /// Signs `payload` (any JSON object, e.g. [`super::CustomerClaims`] or a
    /// `serde_json::Value` with `iss` and `aud`) into a compact JWS (RFC 7515 §7.1).
    pub fn sign(&self, payload: &impl Serialize) -> String {
        self.sign_with_header(serde_json::Map::new(), payload)
    }

    /// [`SigningKey::sign`] with more header parameters (`extra`, e.g. `crit`) beside `alg`,
    /// `typ` and `kid`; the three are written by the key and win over `extra`.
    pub fn sign_with_header(
        &self,
        extra: serde_json::Map<String, serde_json::Value>,
        payload: &impl Serialize,
    ) -> String {
        let mut header = serde_json::Value::Object(extra);
        header["alg"] = self.algorithm().as_str().into();
        header["typ"] = "JWT".into();
        if let Some(kid) = &self.kid {
            header["kid"] = kid.clone().into();
        }
        let header = B64.encode(header.to_string());
        let payload = B64.encode(serde_json::to_vec(payload).expect("claims serialise"));
        let input = format!("{header}.{payload}");
        let sig = match &self.material {
            Material::Hs256(secret) => {
                let mut mac = keyed_mac(secret);
                mac.update(input.as_bytes());
                mac.finalize().into_bytes().to_vec()
            }
            Material::Rs256(k) => k.sign(input.as_bytes()).to_vec(),
            Material::Es256(k) => {
                let sig: p256::ecdsa::Signature = k.sign(input.as_bytes());
                sig.to_vec()
            }
        };
        format!("{input}.{}", B64.encode(sig))
    }
}
