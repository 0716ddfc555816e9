//! The origin's layers, lowest first (docs/ARCHITECTURE.md, "Layers"). A module may use the
//! modules of its own layer and of the layers below it; [`KNOWN_UPWARD`] lists the imports that
//! still run upward, and a test fails on any other, so a new one is a decision, not an accident.

/// Each layer's top-level modules of `origin/src`, lowest first.
pub const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundation",
        &[
            "secret",
            "cache",
            "panics",
            "error",
            "db",
            "redis_conn",
            "migrate",
            "telemetry",
            "metrics",
            "reply",
            "outbox",
            // The capacity plan: pure arithmetic, no module of its own crate.
            "plan",
        ],
    ),
    (
        "record and gate",
        &[
            "idempotency",
            "gate",
            "campaigns",
            "customer_tokens",
            "webhooks",
        ],
    ),
    (
        "products",
        &[
            "claims", "holds", "giveaway", "promo", "queue", "access", "gifts", "admin",
        ],
    ),
    ("repairs", &["repair"]),
    (
        "wiring",
        &["config", "config_doc", "metrics_doc", "state", "layers"],
    ),
    ("entry points", &["http", "server", "cli", "main", "lib"]),
];

/// Imports that run from a lower layer to a higher one today, as (from, to) module pairs.
/// Shrink it; never grow it without saying why in docs/ARCHITECTURE.md.
pub const KNOWN_UPWARD: &[(&str, &str)] = &[
    // The waiting room takes the whole state instead of its handles.
    ("queue", "state"),
];

/// The layer index of a top-level module, `None` for one not listed.
pub fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::Path;

    /// Every `crate::<module>` path in code (comments left out) of every file under `dir`, as
    /// (the file's top-level module, the module it names, "file:line").
    fn references(dir: &Path, src: &Path, out: &mut Vec<(String, String, String)>) {
        for entry in std::fs::read_dir(dir).expect("read origin/src") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                references(&path, src, out);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = path.strip_prefix(src).expect("under src");
            let top = rel
                .components()
                .next()
                .and_then(|c| c.as_os_str().to_str())
                .map(|s| s.trim_end_matches(".rs").to_string())
                .expect("a top-level module");
            let text = std::fs::read_to_string(&path).expect("read a source file");
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                let mut rest = code;
                while let Some(at) = rest.find("crate::") {
                    rest = &rest[at + "crate::".len()..];
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    out.push((top.clone(), name, format!("{}:{}", rel.display(), n + 1)));
                }
            }
        }
    }

    fn upward() -> Vec<(String, String, String)> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut refs = Vec::new();
        references(&src, &src, &mut refs);
        refs.into_iter()
            .filter(|(from, to, _)| match (layer_of(from), layer_of(to)) {
                (Some(a), Some(b)) => b > a,
                _ => false,
            })
            .collect()
    }

    #[test]
    fn every_top_level_module_has_a_layer() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let unlisted: Vec<String> = std::fs::read_dir(&src)
            .expect("read origin/src")
            .map(|e| {
                e.expect("dir entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .map(|name| name.trim_end_matches(".rs").to_string())
            .filter(|name| layer_of(name).is_none())
            .collect();
        assert!(
            unlisted.is_empty(),
            "modules without a layer in layers.rs: {unlisted:?}"
        );
    }

    #[test]
    fn no_import_runs_up_a_layer_unless_it_is_known() {
        let known: BTreeSet<(&str, &str)> = KNOWN_UPWARD.iter().copied().collect();
        let new: Vec<String> = upward()
            .into_iter()
            .filter(|(from, to, _)| !known.contains(&(from.as_str(), to.as_str())))
            .map(|(from, to, at)| format!("{at}: {from} -> {to}"))
            .collect();
        assert!(
            new.is_empty(),
            "imports that run up a layer (docs/ARCHITECTURE.md, \"Layers\"):\n{}",
            new.join("\n")
        );
    }

    #[test]
    fn every_known_upward_import_still_exists() {
        let seen: BTreeSet<(String, String)> = upward()
            .into_iter()
            .map(|(from, to, _)| (from, to))
            .collect();
        for (from, to) in KNOWN_UPWARD {
            assert!(
                seen.contains(&(from.to_string(), to.to_string())),
                "{from} -> {to} no longer runs upward: remove it from KNOWN_UPWARD"
            );
        }
    }
}
