//! What the edge worker tells its operator: claim answers counted by result and by who
//! answered (`edge`: the worker itself; `origin`: forwarded and relayed), kept per isolate
//! since it started, and served in the Prometheus text format at [`METRICS_PATH`] to a caller
//! with the bearer token `FLASHGATE_EDGE_METRICS_TOKEN` (the route answers 404 when the token
//! is not configured). Each isolate counts its own answers: a scrape reaches one isolate.

use std::borrow::Cow;
use std::collections::BTreeMap;

use subtle::ConstantTimeEq;

use crate::decide::Answer;

/// The path of the metrics route.
pub const METRICS_PATH: &str = "/__flashgate/metrics";

/// The `result` label of an answer whose body carries no usable `result`.
pub const OTHER_RESULT: &str = "other";

/// Longest `result` value kept as a label (longer ones count as [`OTHER_RESULT`]).
const MAX_RESULT_LEN: usize = 40;

/// Claim answers by (result, answered by).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts(BTreeMap<(String, &'static str), u64>);

impl Counts {
    /// Counts one claim answer: `body` (its JSON `result` is the label) sent by `answered_by`
    /// (`edge` or `origin`; any other value counts as `origin`).
    pub fn add(&mut self, body: &[u8], answered_by: &str) {
        let by = if answered_by == "edge" {
            "edge"
        } else {
            "origin"
        };
        let result = result_of(body);
        // Found by a scan (a few dozen entries at most): no key is built for a known label.
        match self
            .0
            .iter_mut()
            .find(|((r, b), _)| *r == result && *b == by)
        {
            Some((_, n)) => *n += 1,
            None => {
                self.0.insert((result.into_owned(), by), 1);
            }
        }
    }

    /// The count of (result, answered by).
    pub fn get(&self, result: &str, answered_by: &str) -> u64 {
        self.0
            .iter()
            .filter(|((r, b), _)| r == result && *b == answered_by)
            .map(|(_, n)| n)
            .sum()
    }

    /// The counts in the Prometheus text exposition format
    /// (`flashgate_edge_claims_total{result,answered_by}`).
    pub fn render(&self) -> String {
        let name = "flashgate_edge_claims_total";
        let mut out = format!(
            "# HELP {name} Claim answers of this isolate by result and by who answered.\n# TYPE {name} counter\n"
        );
        for ((result, by), n) in &self.0 {
            out.push_str(&format!(
                "{name}{{result=\"{result}\",answered_by=\"{by}\"}} {n}\n"
            ));
        }
        out
    }
}

/// The `result` of a JSON answer body when it is a short snake_case word (every result code
/// is), else [`OTHER_RESULT`]: the label stays bounded whatever a body says.
///
/// Every answer of the edge and the origin starts with its `result` (`{"result":"sold_out",…`):
/// such a body is read without a JSON parser (a third of a sold-out answer's instructions went
/// to one); any other body is parsed.
pub fn result_of(body: &[u8]) -> Cow<'_, str> {
    fn label(r: &str) -> Option<&str> {
        let ok = !r.is_empty()
            && r.len() <= MAX_RESULT_LEN
            && r.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        ok.then_some(r)
    }
    if let Some(rest) = body.strip_prefix(br#"{"result":""#) {
        let end = rest.iter().position(|&b| b == b'"');
        if let Some(word) = end.and_then(|e| std::str::from_utf8(&rest[..e]).ok()) {
            let next = end.and_then(|e| rest.get(e + 1));
            if matches!(next, Some(b',') | Some(b'}')) {
                return Cow::Borrowed(label(word).unwrap_or(OTHER_RESULT));
            }
        }
    }
    #[derive(serde::Deserialize)]
    struct Shape {
        result: String,
    }
    match serde_json::from_slice::<Shape>(body) {
        Ok(s) if label(&s.result).is_some() => Cow::Owned(s.result),
        _ => Cow::Borrowed(OTHER_RESULT),
    }
}

/// Who may read the metrics: `Ok(())` when `authorization` is `Bearer <token>` with the
/// configured token (compared in constant time); else the answer: 404 `not_found` when no
/// token is configured (the route does not exist), 401 `unauthorized` otherwise.
pub fn check_reader(configured: Option<&str>, authorization: Option<&str>) -> Result<(), Answer> {
    let Some(token) = configured else {
        return Err(Answer::no_such_route());
    };
    let given = authorization.and_then(flashgate_shared::token::bearer);
    match given {
        Some(g) if bool::from(g.as_bytes().ct_eq(token.as_bytes())) => Ok(()),
        _ => Err(Answer::error(
            401,
            flashgate_shared::api::codes::UNAUTHORIZED,
            "the metrics need the edge metrics token",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_result_and_answerer_with_bounded_labels() {
        let mut c = Counts::default();
        c.add(br#"{"result":"sold_out"}"#, "edge");
        c.add(br#"{"result":"sold_out"}"#, "edge");
        c.add(br#"{"result":"claimed","claim":{}}"#, "origin");
        c.add(br#"{"result":"Robert'); DROP"}"#, "origin");
        c.add(b"not json", "something");
        assert_eq!(c.get("sold_out", "edge"), 2);
        assert_eq!(c.get("claimed", "origin"), 1);
        assert_eq!(c.get(OTHER_RESULT, "origin"), 2);
        let text = c.render();
        assert!(text
            .contains("flashgate_edge_claims_total{result=\"sold_out\",answered_by=\"edge\"} 2\n"));
        assert!(text.starts_with("# HELP flashgate_edge_claims_total"));
    }

    #[test]
    fn the_result_read_without_a_parser_is_the_parsed_one() {
        let parsed = |body: &[u8]| {
            #[derive(serde::Deserialize)]
            struct Shape {
                result: String,
            }
            serde_json::from_slice::<Shape>(body)
                .ok()
                .map(|s| s.result)
                .filter(|r| {
                    !r.is_empty()
                        && r.len() <= MAX_RESULT_LEN
                        && r.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                })
                .unwrap_or_else(|| OTHER_RESULT.to_string())
        };
        let long = format!(r#"{{"result":"{}"}}"#, "a".repeat(MAX_RESULT_LEN + 1));
        let bodies: [&[u8]; 13] = [
            br#"{"result":"sold_out","message":"x"}"#,
            br#"{"result":"claimed"}"#,
            br#"{"result":"","message":"x"}"#,
            br#"{"result":"Sold_Out"}"#,
            br#"{"result":"sold_out"x"}"#,
            br#"{"result":"sold_out" , "message":"x"}"#,
            br#"{"result":"sold_out"x"#,
            br#"{"result":"sold_out"#,
            br#"{"message":"x","result":"queued"}"#,
            br#"{ "result": "queued" }"#,
            b"not json",
            b"",
            long.as_bytes(),
        ];
        for body in bodies {
            assert_eq!(
                result_of(body),
                parsed(body),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn only_the_configured_token_reads_the_metrics() {
        assert_eq!(
            check_reader(None, Some("Bearer x")).unwrap_err().status,
            404
        );
        assert_eq!(check_reader(Some("tok"), None).unwrap_err().status, 401);
        assert_eq!(
            check_reader(Some("tok"), Some("Bearer nope"))
                .unwrap_err()
                .status,
            401
        );
        assert!(check_reader(Some("tok"), Some("Bearer tok")).is_ok());
    }
}
