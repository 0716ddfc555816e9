//! The last pass over the OpenAPI document's JSON, for the clients generated from it
//! (docs/OPENAPI.md):
//!
//! - **Plain text**: the handlers' doc comments are the operations' summaries and
//!   descriptions, and those comments link to Rust items (`` [`service::claim`] ``); a link
//!   becomes the code span of the item's last name (`` `claim` ``), and a summary longer than
//!   [`SUMMARY_MAX_CHARS`] keeps its first sentence, the rest going first in the description
//!   (generated clients copy summaries into one-line docstrings).
//! - **Origin-only operations**: the edge passes only `/api/v1/…` and this document through and
//!   answers every other path 404 `no such route` itself (docs/EDGE.md). Every other
//!   operation is marked `x-flashgate-origin-only: true` and says so in its description, so a
//!   client built from the edge's copy knows which calls need the origin's address.
//! - **Named variants**: each variant of a `oneOf` tagged by `result` gets a title, so a
//!   generated client names its types (`ClaimReplySoldOut`) instead of numbering them.
//! - **Replays of admin writes**: an operation with the optional `Idempotency-Key` of the admin
//!   writes answers a replay with `Idempotent-Replayed: true` (docs/ADMIN.md); its 2xx answers
//!   list that header.

use serde_json::Value;

/// Longest operation summary kept whole, in characters.
pub const SUMMARY_MAX_CHARS: usize = 120;

/// The extension that marks an operation the edge does not pass through.
pub const ORIGIN_ONLY: &str = "x-flashgate-origin-only";

const METHODS: [&str; 6] = ["get", "head", "post", "put", "patch", "delete"];

/// Whether the edge passes `path` through to the origin (the rule of the edge's router).
pub fn through_edge(path: &str) -> bool {
    path.starts_with("/api/v1/") || path == super::PATH
}

/// Applies the passes of the module documentation: to every operation of `doc`, and to every
/// schema of its components.
pub fn apply(doc: &mut Value) {
    if let Some(paths) = doc["paths"].as_object_mut() {
        for (path, item) in paths.iter_mut() {
            let origin_only = !through_edge(path);
            for m in METHODS {
                let Some(op) = item.get_mut(m).and_then(Value::as_object_mut) else {
                    continue;
                };
                let summary = op.get("summary").and_then(Value::as_str).map(plain);
                let mut description = op
                    .get("description")
                    .and_then(Value::as_str)
                    .map(plain)
                    .unwrap_or_default();
                if let Some(summary) = summary {
                    let (head, rest) = split_summary(&summary);
                    if !rest.is_empty() {
                        description = join(rest, &description);
                    }
                    op.insert("summary".into(), head.into());
                }
                if origin_only {
                    description = join(
                        &description,
                        "Served by the origin only: through the edge this path is 404 \
                         `no such route`.",
                    );
                    op.insert(ORIGIN_ONLY.into(), true.into());
                }
                if !description.is_empty() {
                    op.insert("description".into(), description.into());
                }
                if replays_admin_writes(op) {
                    add_replayed_header(op);
                }
            }
        }
    }
    if let Some(schemas) = doc["components"]["schemas"].as_object_mut() {
        for (name, schema) in schemas.iter_mut() {
            plain_descriptions(schema);
            title_variants(name, schema);
        }
    }
}

/// Gives each variant of a `oneOf` tagged by `result` the title `{schema}{Result}`
/// (`ClaimReplyAlreadyClaimed`), which generated clients use as its type name (without one
/// they number them).
fn title_variants(name: &str, schema: &mut Value) {
    let Some(variants) = schema.get_mut("oneOf").and_then(Value::as_array_mut) else {
        return;
    };
    for v in variants {
        if v.get("title").is_some() {
            continue;
        }
        if let Some(tag) = result_tag(v) {
            v["title"] = format!("{name}{}", camel(&tag)).into();
        }
    }
}

/// The one value of a variant's `result` property, directly or in one of its `allOf` parts.
fn result_tag(v: &Value) -> Option<String> {
    let direct = v["properties"]["result"]["enum"]
        .as_array()
        .filter(|e| e.len() == 1)
        .and_then(|e| e[0].as_str())
        .map(str::to_string);
    direct.or_else(|| v["allOf"].as_array()?.iter().find_map(result_tag))
}

/// `already_claimed` → `AlreadyClaimed`.
fn camel(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Whether `op` takes the admin writes' optional `Idempotency-Key` (the customer and service
/// calls require theirs and replay without a marker).
fn replays_admin_writes(op: &serde_json::Map<String, Value>) -> bool {
    op.get("parameters")
        .and_then(Value::as_array)
        .is_some_and(|ps| {
            ps.iter().any(|p| {
                p["name"] == "Idempotency-Key" && p["in"] == "header" && p["required"] != true
            })
        })
}

/// `Idempotent-Replayed` on every 2xx answer of `op`.
fn add_replayed_header(op: &mut serde_json::Map<String, Value>) {
    let Some(answers) = op.get_mut("responses").and_then(Value::as_object_mut) else {
        return;
    };
    for (status, answer) in answers.iter_mut() {
        if !status.starts_with('2') {
            continue;
        }
        answer["headers"][crate::http::admin::idempotency::REPLAYED_HEADER] = serde_json::json!({
            "description": "`true` when this is the kept reply of an earlier request with the \
                same Idempotency-Key and body (nothing was changed again); absent on a first reply.",
            "schema": {"type": "string", "enum": ["true"]},
        });
    }
}

/// Every `description` inside `v`, in plain text.
fn plain_descriptions(v: &mut Value) {
    match v {
        Value::Object(o) => {
            for (k, child) in o.iter_mut() {
                match child {
                    Value::String(s) if k == "description" => *s = plain(s),
                    _ => plain_descriptions(child),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(plain_descriptions),
        _ => {}
    }
}

/// `text` with each Rust doc link as a code span of the item's last name:
/// `` [`a::b::c`] `` and `` [`c`](a::b) `` become `` `c` ``.
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("[`") {
        let Some(end) = rest[at + 2..].find("`]") else {
            break;
        };
        let item = &rest[at + 2..at + 2 + end];
        out.push_str(&rest[..at]);
        let name = item.rsplit("::").next().unwrap_or(item);
        out.push('`');
        out.push_str(name.trim_end_matches("()"));
        out.push('`');
        rest = &rest[at + 2 + end + 2..];
        // A link target after the text, `(…)` right after the brackets, goes too.
        if let Some(target) = rest.strip_prefix('(') {
            if let Some(close) = target.find(')') {
                if !target[..close].contains(char::is_whitespace) {
                    rest = &target[close + 1..];
                }
            }
        }
    }
    out.push_str(rest);
    out
}

/// A summary cut to its first sentence when longer than [`SUMMARY_MAX_CHARS`]: `(head, rest)`.
fn split_summary(summary: &str) -> (&str, &str) {
    if summary.chars().count() <= SUMMARY_MAX_CHARS {
        return (summary, "");
    }
    match summary.find(". ") {
        Some(at) => (&summary[..=at], summary[at + 2..].trim_start()),
        None => (summary, ""),
    }
}

/// `a` and `b` as paragraphs of one text (either may be empty).
fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}\n\n{b}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_links_become_code_spans_of_the_last_name() {
        assert_eq!(
            plain("Runs [`service::claim`] after [`crate::queue::check_claim`]."),
            "Runs `claim` after `check_claim`."
        );
        assert_eq!(plain("See [`Reply`](crate::reply) now"), "See `Reply` now");
        assert_eq!(plain("One of [`codes`]."), "One of `codes`.");
        assert_eq!(plain("no links [here] `x`"), "no links [here] `x`");
        assert_eq!(plain("broken [`x"), "broken [`x");
    }

    #[test]
    fn long_summaries_keep_their_first_sentence() {
        let long = format!("Short head. {}", "word ".repeat(40));
        let (head, rest) = split_summary(&long);
        assert_eq!(head, "Short head.");
        assert!(rest.starts_with("word"));
        assert_eq!(split_summary("Fine. As is."), ("Fine. As is.", ""));
    }

    #[test]
    fn tagged_variants_get_titles() {
        let mut s = serde_json::json!({"oneOf": [
            {"type": "object", "properties": {"result": {"type": "string", "enum": ["sold_out"]}}},
            {"allOf": [{"$ref": "#/x"}, {"properties": {"result": {"enum": ["already_claimed"]}}}]},
            {"type": "object"},
        ]});
        title_variants("ClaimReply", &mut s);
        assert_eq!(s["oneOf"][0]["title"], "ClaimReplySoldOut");
        assert_eq!(s["oneOf"][1]["title"], "ClaimReplyAlreadyClaimed");
        assert!(s["oneOf"][2].get("title").is_none());
    }

    #[test]
    fn only_public_paths_and_the_document_go_through_the_edge() {
        assert!(through_edge("/api/v1/campaigns/{id}/claims"));
        assert!(through_edge("/openapi.json"));
        assert!(!through_edge("/admin/v1/campaigns"));
        assert!(!through_edge("/readyz"));
        assert!(!through_edge("/edge/v1/campaigns/{id}/winners-filter"));
    }
}
