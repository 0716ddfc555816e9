use super::*;
use crate::signature::keyed_mac;
use hmac::Mac;

/// Today's verification: the single HS256 secret, no leeway (exact time checks).
fn verify(token: &str, secret: &[u8], now: NumericDate) -> Result<CustomerClaims, TokenError> {
    Verifier::hs256(secret)
        .with_leeway_seconds(0)
        .verify(token, now)
}

const SECRET: &[u8] = b"test-secret";

fn claims(exp: i64) -> CustomerClaims {
    CustomerClaims {
        sub: "cust-1".into(),
        exp: exp.into(),
        nbf: None,
    }
}

#[test]
fn round_trip() {
    let t = mint(&claims(2_000), SECRET);
    assert_eq!(verify(&t, SECRET, at(1_000)).unwrap().sub, "cust-1");
}

#[test]
fn refuses_expired_forged_and_none() {
    let t = mint(&claims(2_000), SECRET);
    assert_eq!(verify(&t, SECRET, at(2_000)), Err(TokenError::Expired));
    assert_eq!(
        verify(&t, b"other", at(1_000)),
        Err(TokenError::BadSignature)
    );
    let none = format!(
        "{}.{}.",
        B64.encode(br#"{"alg":"none"}"#),
        B64.encode(br#"{"sub":"x","exp":9999999999}"#)
    );
    assert_eq!(
        verify(&none, SECRET, at(1)),
        Err(TokenError::UnsupportedAlgorithm)
    );
    assert_eq!(verify("a.b", SECRET, at(1)), Err(TokenError::Malformed));
    // A payload tampered after signing.
    let mut parts: Vec<&str> = t.split('.').collect();
    let forged = B64.encode(br#"{"sub":"admin","exp":9999999999}"#);
    parts[1] = &forged;
    assert_eq!(
        verify(&parts.join("."), SECRET, at(1)),
        Err(TokenError::BadSignature)
    );
}

fn at(seconds: i64) -> NumericDate {
    NumericDate::from(seconds)
}

/// A token signed under [`SECRET`] over a payload given as raw JSON.
fn signed_payload(payload: &str) -> String {
    let header = B64.encode(br#"{"alg":"HS256"}"#);
    let input = format!("{header}.{}", B64.encode(payload));
    let mut mac = keyed_mac(SECRET);
    mac.update(input.as_bytes());
    format!("{input}.{}", B64.encode(mac.finalize().into_bytes()))
}

#[test]
fn fractional_time_claims_are_numbers_compared_with_the_millisecond_clock() {
    let t = signed_payload(r#"{"sub":"c","exp":2000.5,"nbf":1000.25,"iat":999.75}"#);
    let ms = NumericDate::from_unix_ms;
    assert_eq!(verify(&t, SECRET, ms(1_000_250)).unwrap().sub, "c");
    assert_eq!(verify(&t, SECRET, ms(2_000_499)).unwrap().sub, "c");
    assert_eq!(verify(&t, SECRET, ms(2_000_500)), Err(TokenError::Expired));
    assert_eq!(
        verify(&t, SECRET, ms(1_000_249)),
        Err(TokenError::NotYetValid)
    );
    // Exponent notation is a number too.
    let e = signed_payload(r#"{"sub":"c","exp":2.0005e3}"#);
    assert_eq!(verify(&e, SECRET, ms(2_000_499)).unwrap().sub, "c");
    assert_eq!(verify(&e, SECRET, ms(2_000_500)), Err(TokenError::Expired));
    // Whatever is not a number stays malformed.
    for bad in [
        r#"{"sub":"c","exp":"2000"}"#,
        r#"{"sub":"c","exp":null}"#,
        r#"{"sub":"c","exp":1e999}"#,
        r#"{"sub":"c","exp":2000,"nbf":"x"}"#,
    ] {
        assert_eq!(
            verify(&signed_payload(bad), SECRET, at(1)),
            Err(TokenError::Malformed),
            "{bad}"
        );
    }
}

#[test]
fn whole_numeric_dates_are_written_as_integers() {
    let c = CustomerClaims {
        sub: "c".into(),
        exp: 2_000.into(),
        nbf: Some(NumericDate::from_unix_ms(1_500)),
    };
    assert_eq!(
        serde_json::to_string(&c).unwrap(),
        r#"{"sub":"c","exp":2000,"nbf":1.5}"#
    );
}

#[test]
fn bearer_header() {
    assert_eq!(bearer("Bearer abc"), Some("abc"));
    assert_eq!(bearer("bearer abc"), Some("abc"));
    assert_eq!(bearer("Basic abc"), None);
    assert_eq!(bearer("Bearer "), None);
}

fn es(kid: &str) -> SigningKey {
    SigningKey::es256(
        Some(kid.into()),
        p256::ecdsa::SigningKey::random(&mut rand_core::OsRng),
    )
}

fn jwks_of(keys: &[&SigningKey]) -> Vec<u8> {
    let keys: Vec<_> = keys.iter().filter_map(|k| k.public_jwk()).collect();
    serde_json::json!({ "keys": keys }).to_string().into_bytes()
}

fn payload(sub: &str) -> serde_json::Value {
    serde_json::json!({"sub": sub, "exp": 2_000, "iss": "i", "aud": ["x", "a"]})
}

#[test]
fn es256_and_rs256_verify_under_their_published_keys_only() {
    let rs = SigningKey::rs256(
        Some("r".into()),
        rsa::RsaPrivateKey::new(&mut rand_core::OsRng, 2048).unwrap(),
    );
    let (e1, e2) = (es("e1"), es("e2"));
    let v = Verifier::new(KeySet::parse_jwks(&jwks_of(&[&rs, &e1])).unwrap())
        .with_issuer(Some("i".into()))
        .with_audience(Some("a".into()));
    assert_eq!(
        v.verify(&rs.sign(&payload("c")), at(1_000)).unwrap().sub,
        "c"
    );
    assert_eq!(
        v.verify(&e1.sign(&payload("c")), at(1_000)).unwrap().sub,
        "c"
    );
    assert_eq!(
        v.verify(&e2.sign(&payload("c")), at(1_000)),
        Err(TokenError::UnknownKey)
    );
    assert!(v.names_unknown_key(&e2.sign(&payload("c"))));
    assert!(!v.names_unknown_key(&e1.sign(&payload("c"))));
    // e2's signature under e1's kid.
    let forged = SigningKey::es256(
        Some("e1".into()),
        p256::ecdsa::SigningKey::random(&mut rand_core::OsRng),
    );
    assert_eq!(
        v.verify(&forged.sign(&payload("c")), at(1_000)),
        Err(TokenError::BadSignature)
    );
    // An ES256 key named in an RS256 token, and HS256 with no HS256 key at all.
    let mut t = e1.sign(&payload("c"));
    let h = B64.encode(br#"{"alg":"RS256","kid":"e1"}"#);
    t.replace_range(..t.find('.').unwrap(), &h);
    assert_eq!(
        v.verify(&t, at(1_000)),
        Err(TokenError::UnsupportedAlgorithm)
    );
    assert_eq!(
        v.verify(&mint(&claims(2_000), SECRET), at(1_000)),
        Err(TokenError::UnsupportedAlgorithm)
    );
}

#[test]
fn a_jwks_keeps_signing_keys_it_knows_and_is_bounded() {
    let e = es("e");
    let mut doc: serde_json::Value = serde_json::from_slice(&jwks_of(&[&e])).unwrap();
    let keys = doc["keys"].as_array_mut().unwrap();
    let mut enc = keys[0].clone();
    enc["use"] = "enc".into();
    enc["kid"] = "enc".into();
    let mut other_alg = keys[0].clone();
    other_alg["alg"] = "ES384".into();
    other_alg["kid"] = "es384".into();
    keys.push(enc);
    keys.push(other_alg);
    keys.push(serde_json::json!({"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": "AA"}));
    let set = KeySet::parse_jwks(doc.to_string().as_bytes()).unwrap();
    assert_eq!(set.keys().len(), 1);
    assert!(set.has_kid("e"));
    let many: Vec<SigningKey> = (0..=keys::MAX_KEYS).map(|i| es(&format!("k{i}"))).collect();
    let refs: Vec<&SigningKey> = many.iter().collect();
    assert!(KeySet::parse_jwks(&jwks_of(&refs)).is_err());
    assert!(
        KeySet::parse_jwks(&jwks_of(&[&e, &e])).is_err(),
        "a kid given twice"
    );
    let mut no_kid = e.public_jwk().unwrap();
    no_kid.as_object_mut().unwrap().remove("kid");
    assert!(
        KeySet::parse_jwks(serde_json::json!({"keys": [no_kid]}).to_string().as_bytes()).is_err()
    );
    assert!(KeySet::parse_jwks(b"{\"keys\": 5}").is_err());
    assert!(KeySet::parse_jwks(&vec![b' '; keys::MAX_JWKS_BYTES + 1]).is_err());
}

#[test]
fn hs256_secrets_with_key_ids_parse_and_pick_their_key() {
    let list = "old:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, new:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    let set = KeySet::parse_hs256_secrets("V", list).unwrap();
    let v = Verifier::new(set).with_leeway_seconds(0);
    for kid in ["old", "new"] {
        let secret = if kid == "old" { [b'a'; 32] } else { [b'b'; 32] };
        let t = SigningKey::hs256(Some(kid.into()), &secret).sign(&claims(2_000));
        assert_eq!(v.verify(&t, at(1_000)).unwrap().sub, "cust-1", "{kid}");
    }
    // No kid: every HS256 key is tried.
    let t = SigningKey::hs256(None, &[b'b'; 32]).sign(&claims(2_000));
    assert_eq!(v.verify(&t, at(1_000)).unwrap().sub, "cust-1");
    let e = KeySet::parse_hs256_secrets("V", "k:short").unwrap_err();
    assert!(e.starts_with("V (key k) must be at least 32 bytes"), "{e}");
    assert!(!e.contains("short"));
    assert!(KeySet::parse_hs256_secrets("V", "no-colon").is_err());
}

#[test]
fn the_leeway_applies_to_exp_nbf_and_iat() {
    let t = signed_payload(r#"{"sub":"c","exp":2000,"nbf":1000,"iat":1000}"#);
    let v = Verifier::hs256(SECRET).with_leeway_seconds(30);
    assert!(v.verify(&t, at(2_029)).is_ok());
    assert_eq!(v.verify(&t, at(2_030)), Err(TokenError::Expired));
    assert!(v.verify(&t, at(970)).is_ok());
    assert_eq!(v.verify(&t, at(969)), Err(TokenError::NotYetValid));
    let iat = signed_payload(r#"{"sub":"c","exp":5000,"iat":1000}"#);
    assert_eq!(v.verify(&iat, at(969)), Err(TokenError::NotYetValid));
    assert_eq!(
        Verifier::hs256(SECRET)
            .with_leeway_seconds(10_000)
            .leeway_seconds(),
        MAX_LEEWAY_SECONDS
    );
}

#[test]
fn a_provider_token_without_its_key_is_keys_unavailable_only_until_a_jwks_is_held() {
    let published = es("pub-1");
    let payload = serde_json::json!({"sub": "cust-1", "exp": 2_000});
    let awaiting = Verifier::hs256(SECRET).awaiting_jwks(true);
    let provider_token = published.sign(&payload);
    assert_eq!(
        awaiting.verify(&provider_token, at(1_000)),
        Err(TokenError::KeysUnavailable)
    );
    // Without a kid: no ES256 key at all yet.
    let no_kid = SigningKey::es256(None, p256::ecdsa::SigningKey::random(&mut rand_core::OsRng));
    assert_eq!(
        awaiting.verify(&no_kid.sign(&payload), at(1_000)),
        Err(TokenError::KeysUnavailable)
    );
    // HS256 tokens do not depend on the JWKS: an unknown HS256 kid stays the token's fault.
    let hs = SigningKey::hs256(Some("other".into()), SECRET);
    assert_eq!(
        awaiting.verify(&hs.sign(&payload), at(1_000)),
        Err(TokenError::UnknownKey)
    );
    // Once a JWKS is held: the published key verifies, an unknown kid is UnknownKey.
    let held = awaiting
        .with_more_keys(KeySet::parse_jwks(&jwks_of(&[&published])).unwrap())
        .unwrap();
    assert_eq!(
        held.verify(&provider_token, at(1_000)).unwrap().sub,
        "cust-1"
    );
    assert_eq!(
        held.verify(&es("pub-2").sign(&payload), at(1_000)),
        Err(TokenError::UnknownKey)
    );
}

#[test]
fn a_far_future_exp_is_refused_beyond_the_longest_lifetime() {
    let v = Verifier::hs256(SECRET).with_leeway_seconds(30);
    let now = 1_000_000;
    let day = i64::from(DEFAULT_MAX_LIFETIME_SECONDS);
    let ok = signed_payload(&format!(r#"{{"sub":"c","exp":{}}}"#, now + day + 30));
    assert_eq!(v.verify(&ok, at(now)).unwrap().sub, "c");
    let long = signed_payload(&format!(r#"{{"sub":"c","exp":{}}}"#, now + day + 31));
    assert_eq!(v.verify(&long, at(now)), Err(TokenError::LifetimeTooLong));
    let never = signed_payload(r#"{"sub":"c","exp":1e30}"#);
    assert_eq!(v.verify(&never, at(now)), Err(TokenError::LifetimeTooLong));
    // A shorter setting; a setting above the cap is capped.
    let hour = Verifier::hs256(SECRET)
        .with_leeway_seconds(0)
        .with_max_lifetime_seconds(3_600);
    let two_hours = signed_payload(&format!(r#"{{"sub":"c","exp":{}}}"#, now + 7_200));
    assert_eq!(
        hour.verify(&two_hours, at(now)),
        Err(TokenError::LifetimeTooLong)
    );
    let year = Verifier::hs256(SECRET)
        .with_leeway_seconds(0)
        .with_max_lifetime_seconds(u32::MAX);
    let forty_days = signed_payload(&format!(r#"{{"sub":"c","exp":{}}}"#, now + 40 * 86_400));
    assert_eq!(
        year.verify(&forty_days, at(now)),
        Err(TokenError::LifetimeTooLong)
    );
}

#[test]
fn a_crit_header_is_refused_whatever_it_names() {
    let payload = B64.encode(br#"{"sub":"c","exp":2000}"#);
    for header in [
        r#"{"alg":"HS256","crit":["exp"]}"#,
        r#"{"alg":"HS256","crit":["x-ext"],"x-ext":1}"#,
        r#"{"alg":"HS256","crit":[]}"#,
    ] {
        let input = format!("{}.{payload}", B64.encode(header));
        let mut mac = keyed_mac(SECRET);
        mac.update(input.as_bytes());
        let t = format!("{input}.{}", B64.encode(mac.finalize().into_bytes()));
        assert_eq!(
            verify(&t, SECRET, at(1_000)),
            Err(TokenError::UnsupportedCritical),
            "{header}"
        );
    }
}

#[cfg(feature = "pem")]
#[test]
fn an_rsa_pem_key_under_2048_bits_is_refused_for_signing() {
    use rsa::pkcs8::EncodePrivateKey;
    let small = rsa::RsaPrivateKey::new(&mut rand_core::OsRng, 1024).unwrap();
    let pem = small.to_pkcs8_pem(rsa::pkcs8::LineEnding::LF).unwrap();
    let err = SigningKey::from_pem(Algorithm::Rs256, Some("s".into()), &pem)
        .expect_err("a 1024-bit key is refused");
    assert!(err.contains("has 1024"), "{err}");
}

#[test]
fn rsa_keys_under_2048_bits_are_skipped_in_a_jwks() {
    let small = SigningKey::rs256(
        Some("s".into()),
        rsa::RsaPrivateKey::new(&mut rand_core::OsRng, 1024).unwrap(),
    );
    let good = es("e1");
    let set = KeySet::parse_jwks(&jwks_of(&[&small, &good])).unwrap();
    let v = Verifier::new(set);
    assert_eq!(
        v.verify(&small.sign(&payload("c")), at(1_000)),
        Err(TokenError::UnknownKey)
    );
    assert_eq!(
        v.verify(&good.sign(&payload("c")), at(1_000)).unwrap().sub,
        "c"
    );
}
