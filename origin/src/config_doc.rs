//! The origin's settings as a Markdown table, rendered from the clap declarations of
//! [`crate::config::Config`], so docs/CONFIGURATION.md cannot drift from the code: a test
//! compares the page's generated section with [`settings_table`] and fails when they differ
//! (`FLASHGATE_BLESS=1 cargo test -p flashgate-origin --lib config_doc` rewrites it).

use clap::Args;

/// The line before the generated table in docs/CONFIGURATION.md.
pub const BEGIN_MARKER: &str =
    "<!-- generated from origin/src/config.rs by config_doc::settings_table; do not edit -->";
/// The line after it.
pub const END_MARKER: &str = "<!-- end of generated settings -->";

/// One Markdown table, one row per `flashgate serve` setting in declaration order:
/// `| variable | flag | default | meaning |`. The meaning is the setting's doc comment on one
/// line, with rustdoc links shown as code; a setting without a default says `–`.
pub fn settings_table() -> String {
    let command = crate::config::Config::augment_args(clap::Command::new("serve"));
    let mut out =
        String::from("| variable | flag | default | meaning |\n| --- | --- | --- | --- |\n");
    for arg in command.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if long == "help" {
            continue;
        }
        let env = arg
            .get_env()
            .map(|e| format!("`{}`", e.to_string_lossy()))
            .unwrap_or_else(|| "–".into());
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let default = match (defaults.is_empty(), defaults.join(",")) {
            (true, _) => "–".to_string(),
            (false, d) if d.is_empty() => "(empty)".to_string(),
            (false, d) => format!("`{d}`"),
        };
        let help = arg
            .get_long_help()
            .or_else(|| arg.get_help())
            .map(|h| one_line(&h.to_string()))
            .unwrap_or_default();
        out.push_str(&format!("| {env} | `--{long}` | {default} | {help} |\n"));
    }
    out
}

/// A doc comment on one line for a table cell: whitespace collapsed, `[`x`]` and
/// `[`x`](…)`-less rustdoc links shown as plain code, `|` escaped.
fn one_line(doc: &str) -> String {
    let flat = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    flat.replace("[`", "`")
        .replace("`]", "`")
        .replace('|', "\\|")
}

/// For the tests of generated doc sections (this module's and [`crate::metrics_doc`]'s): the
/// part of `page` (a path from the repository root) between the lines `begin` and `end` must be
/// `want`, else the test fails naming `test`, the filter that rewrites it; with
/// `FLASHGATE_BLESS=1` it is rewritten instead.
#[cfg(test)]
pub(crate) fn check_section(page: &str, begin: &str, end: &str, want: &str, test: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(page);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {page}: {e}"));
    let from = text
        .find(begin)
        .unwrap_or_else(|| panic!("begin marker in {page}"))
        + begin.len()
        + 1;
    let to = text
        .find(end)
        .unwrap_or_else(|| panic!("end marker in {page}"));
    if std::env::var("FLASHGATE_BLESS").as_deref() == Ok("1") {
        let new = format!("{}{}{}", &text[..from], want, &text[to..]);
        std::fs::write(&path, new).unwrap_or_else(|e| panic!("write {page}: {e}"));
        return;
    }
    assert_eq!(
        &text[from..to],
        want,
        "{page} differs from the code: run \
         FLASHGATE_BLESS=1 cargo test -p flashgate-origin --lib {test}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_page_lists_every_setting_as_declared() {
        check_section(
            "docs/CONFIGURATION.md",
            BEGIN_MARKER,
            END_MARKER,
            &settings_table(),
            "config_doc",
        );
    }

    #[test]
    fn the_table_has_a_row_per_setting_with_its_variable_and_default() {
        let table = settings_table();
        assert!(table.contains("| `FLASHGATE_LISTEN` | `--listen` | `127.0.0.1:8080` |"));
        assert!(table.contains("| `DATABASE_URL` | `--database-url` | – |"));
        assert!(
            table.contains("`FLASHGATE_JWT_LEEWAY_SECONDS`"),
            "flattened settings too"
        );
        assert!(!table.contains("--help"));
    }
}
