//! Odd values for every field of every endpoint, and the check that an answer stays within the
//! API contract (docs/API.md, "Shared rules"): a documented 2xx or 4xx, never a 5xx, and a non-2xx
//! body `{"result": …}` that carries a `message` when it is a request error, with no internal
//! error text. Used by `tests/tests/it/api/fuzz_fields.rs`.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::SeedableRng;
use reqwest::Method;
use serde_json::Value;

/// Who an endpoint wants as caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// No credentials.
    None,
    /// A customer token (a fresh customer per request).
    Customer,
    /// The service token.
    Service,
    /// The manager admin token.
    Admin,
}

/// One endpoint and a valid request to it; the fuzz changes one part at a time.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub name: &'static str,
    pub method: Method,
    /// The path with `{p}` where its one parameter goes.
    pub path: String,
    /// A valid (existing) value of the parameter.
    pub param: String,
    pub auth: Auth,
    /// Sends an `Idempotency-Key`.
    pub keyed: bool,
    /// A valid body, or `None` for no body.
    pub body: Option<Value>,
}

/// The part of a request an odd value replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The valid request, unchanged.
    Valid,
    /// The path parameter (a raw, already percent-encoded segment).
    Param(String),
    /// The `Idempotency-Key` header (raw bytes).
    Key(Vec<u8>),
    /// The whole body (raw JSON text or not JSON at all).
    Body(String),
    /// One top-level field of the body (raw JSON text of its value).
    Field(String, String),
}

/// One request to send.
#[derive(Debug, Clone)]
pub struct Case {
    pub endpoint: usize,
    pub target: Target,
}

/// Odd JSON values (raw JSON text): control characters, lone surrogates, a 10 KB string,
/// numbers at and past the i64 and f64 limits, wrong types, 200 levels of nesting.
pub fn odd_values() -> Vec<String> {
    let mut v: Vec<String> = [
        r#""bad\u0000name""#,
        r#""r\u0000""#,
        r#""\ud800""#,
        r#""x\udfff""#,
        r#""tab\there""#,
        r#""\u001b[31m""#,
        r#""\u0085""#,
        r#""""#,
        r#""   ""#,
        r#""é\u202e""#,
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "1e400",
        "-1e400",
        "1.7976931348623157e308",
        "4.9e-324",
        "0.5",
        "-1",
        "0",
        "true",
        "null",
        "[]",
        "{}",
        r#""1""#,
        r#"{"a":1}"#,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(format!("\"{}\"", "x".repeat(10 * 1024)));
    v.push(format!("{}{}", "[".repeat(200), "]".repeat(200)));
    v.push(format!("{}1{}", r#"{"a":"#.repeat(200), "}".repeat(200)));
    v
}

/// Odd whole bodies: the odd values, plus text that is not JSON.
pub fn odd_bodies() -> Vec<String> {
    let mut v = odd_values();
    v.extend([
        "{".into(),
        "{}{}".into(),
        "\u{0}".into(),
        "{\"a\":1,\"a\":2}".into(),
    ]);
    v
}

/// Odd path segments (already percent-encoded as a client would send them).
pub fn odd_params() -> Vec<String> {
    vec![
        "%00".into(),
        "bad%00name".into(),
        "%ED%A0%80".into(),
        "%FF".into(),
        "%ZZ".into(),
        "%20".into(),
        "..".into(),
        "%2F".into(),
        "%C3%A9".into(),
        "9223372036854775808".into(),
        "-1".into(),
        "x".repeat(10 * 1024),
    ]
}

/// Odd `Idempotency-Key` values (raw header bytes).
pub fn odd_keys() -> Vec<Vec<u8>> {
    vec![
        b"".to_vec(),
        b" ".to_vec(),
        b"a b".to_vec(),
        b"a\tb".to_vec(),
        "é".as_bytes().to_vec(),
        vec![b'k'; 256],
        vec![b'k'; 10 * 1024],
    ]
}

/// Every case: for each endpoint the valid request, each odd path parameter, each odd key
/// (keyed endpoints), each odd whole body and each odd value in each body field; then
/// `pairs` seeded random cases with two fields odd at once.
pub fn cases(endpoints: &[Endpoint], seed: u64, pairs: usize) -> Vec<Case> {
    let mut out = Vec::new();
    let values = odd_values();
    for (i, e) in endpoints.iter().enumerate() {
        let mut push = |target| {
            out.push(Case {
                endpoint: i,
                target,
            })
        };
        push(Target::Valid);
        odd_params()
            .into_iter()
            .for_each(|p| push(Target::Param(p)));
        if e.keyed {
            odd_keys().into_iter().for_each(|k| push(Target::Key(k)));
        }
        if e.body.is_some() || e.method == Method::POST {
            odd_bodies().into_iter().for_each(|b| push(Target::Body(b)));
        }
        for field in fields(e) {
            for v in &values {
                push(Target::Field(field.clone(), v.clone()));
            }
        }
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let with_fields: Vec<usize> = (0..endpoints.len())
        .filter(|&i| fields(&endpoints[i]).len() >= 2)
        .collect();
    for _ in 0..pairs {
        let Some(&i) = with_fields.choose(&mut rng) else {
            break;
        };
        let fs = fields(&endpoints[i]);
        let chosen: Vec<&String> = fs.choose_multiple(&mut rng, 2).collect();
        let mut body = endpoints[i].body.clone().unwrap_or(Value::Null);
        let raw: Vec<&String> = (0..2)
            .map(|_| values.choose(&mut rng).expect("values"))
            .collect();
        for f in &chosen {
            body[f.as_str()] = Value::String(format!("__FUZZ_{f}__"));
        }
        let mut text = body.to_string();
        for (f, r) in chosen.iter().zip(&raw) {
            text = text.replace(&format!("\"__FUZZ_{f}__\""), r);
        }
        out.push(Case {
            endpoint: i,
            target: Target::Body(text),
        });
    }
    out
}

fn fields(e: &Endpoint) -> Vec<String> {
    match &e.body {
        Some(Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// The body bytes of `case` against `e`.
pub fn body_of(e: &Endpoint, target: &Target) -> Option<String> {
    match target {
        Target::Body(b) => Some(b.clone()),
        Target::Field(f, raw) => {
            let mut body = e.body.clone().unwrap_or(Value::Null);
            body[f.as_str()] = Value::String("__FUZZ__".into());
            Some(body.to_string().replace("\"__FUZZ__\"", raw))
        }
        _ => e.body.as_ref().map(Value::to_string),
    }
}

/// The path of `case` against `e`.
pub fn path_of(e: &Endpoint, target: &Target) -> String {
    match target {
        Target::Param(p) => e.path.replace("{p}", p),
        _ => e.path.replace("{p}", &e.param),
    }
}

/// Statuses the API documents.
pub const DOCUMENTED_STATUSES: &[u16] = &[
    200, 201, 400, 401, 403, 404, 405, 408, 409, 413, 415, 422, 429,
];

/// Result codes of request errors: their body must carry a `message`.
pub const REQUEST_ERRORS: &[&str] = &[
    "invalid_json",
    "invalid_request",
    "invalid_idempotency_key",
    "unauthorized",
    "forbidden",
    "not_found",
    "method_not_allowed",
    "conflict",
    "payload_too_large",
    "unsupported_media_type",
    "idempotency_key_reused",
    "validation_failed",
    "rate_limited",
    "request_timeout",
    "unavailable",
];

/// Text that must never reach a client.
const INTERNAL_TEXT: &[&str] = &[
    "postgres",
    "sqlx",
    "redis",
    "panicked",
    "SQLSTATE",
    "error returned from database",
];

/// `Ok` when an answer is within the contract: a documented status (never a 5xx); a non-2xx
/// body is a JSON object with a `result` string, and a `message` string for request errors;
/// no internal error text anywhere.
pub fn check_answer(status: u16, content_type: Option<&str>, body: &[u8]) -> Result<(), String> {
    if !DOCUMENTED_STATUSES.contains(&status) {
        return Err(format!("status {status} is not documented"));
    }
    let text = String::from_utf8_lossy(body);
    if let Some(t) = INTERNAL_TEXT
        .iter()
        .find(|t| text.to_lowercase().contains(&t.to_lowercase()))
    {
        return Err(format!("internal text {t:?} in {text:.200}"));
    }
    let json = content_type.is_some_and(|c| c.starts_with("application/json"));
    if (200..300).contains(&status) {
        return match json {
            true if serde_json::from_slice::<Value>(body).is_err() => {
                Err(format!("2xx body is not JSON: {text:.200}"))
            }
            _ => Ok(()),
        };
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|_| format!("{status} body is not JSON: {text:.200}"))?;
    let result = v["result"]
        .as_str()
        .filter(|r| !r.is_empty())
        .ok_or_else(|| format!("{status} body has no result: {v}"))?;
    if REQUEST_ERRORS.contains(&result) && !v["message"].is_string() {
        return Err(format!("{status} {result} without a message: {v}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_check_refuses_what_it_must() {
        let j = Some("application/json");
        assert!(check_answer(200, j, br#"{"result":"claimed"}"#).is_ok());
        assert!(check_answer(409, j, br#"{"result":"sold_out"}"#).is_ok());
        assert!(check_answer(422, j, br#"{"result":"validation_failed","message":"m"}"#).is_ok());
        assert!(check_answer(500, j, br#"{"result":"x","message":"m"}"#).is_err());
        assert!(check_answer(503, j, br#"{"result":"unavailable","message":"m"}"#).is_err());
        assert!(check_answer(422, j, br#"{"result":"validation_failed"}"#).is_err());
        assert!(check_answer(400, Some("text/plain"), b"Failed to parse").is_err());
        assert!(check_answer(
            422,
            j,
            br#"{"result":"validation_failed","message":"postgres: x"}"#
        )
        .is_err());
    }

    #[test]
    fn cases_are_deterministic_and_cover_every_field() {
        let e = vec![Endpoint {
            name: "e",
            method: Method::POST,
            path: "/x/{p}".into(),
            param: "a".into(),
            auth: Auth::None,
            keyed: true,
            body: Some(serde_json::json!({"a": 1, "b": "s"})),
        }];
        let a = cases(&e, 7, 10);
        let b = cases(&e, 7, 10);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        let n = odd_values().len();
        let fields = a
            .iter()
            .filter(|c| matches!(c.target, Target::Field(..)))
            .count();
        assert_eq!(fields, 2 * n);
        assert_eq!(
            body_of(&e[0], &Target::Field("a".into(), "1e400".into())).unwrap(),
            r#"{"a":1e400,"b":"s"}"#
        );
    }
}
