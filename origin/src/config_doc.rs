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

#[cfg(test)]
mod tests {
    use super::*;

    /// The section of docs/CONFIGURATION.md between the markers.
    fn page() -> (String, std::path::PathBuf) {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/CONFIGURATION.md");
        (
            std::fs::read_to_string(&path).expect("read docs/CONFIGURATION.md"),
            path,
        )
    }

    #[test]
    fn configuration_page_lists_every_setting_as_declared() {
        let (text, path) = page();
        let start = text
            .find(BEGIN_MARKER)
            .expect("begin marker in docs/CONFIGURATION.md");
        let body_start = start + BEGIN_MARKER.len() + 1;
        let end = text
            .find(END_MARKER)
            .expect("end marker in docs/CONFIGURATION.md");
        let want = settings_table();
        if std::env::var("FLASHGATE_BLESS").as_deref() == Ok("1") {
            let new = format!("{}{}{}", &text[..body_start], want, &text[end..]);
            std::fs::write(&path, new).expect("write docs/CONFIGURATION.md");
            return;
        }
        assert_eq!(
            &text[body_start..end],
            want,
            "docs/CONFIGURATION.md differs from the clap declarations: run \
             FLASHGATE_BLESS=1 cargo test -p flashgate-origin --lib config_doc"
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
