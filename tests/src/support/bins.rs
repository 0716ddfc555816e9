//! The binaries of this build that tests run as a user would.

use std::path::PathBuf;

/// The `flashgate` binary of this build: `target/<profile>/flashgate`, next to the calling
/// test's `deps/` directory. `cargo test --workspace` builds it; with `cargo test -p
/// flashgate-tests`, build it first (`cargo build -p flashgate-origin --bin flashgate`).
/// Panics (a test failure naming the command) when it is missing.
pub fn flashgate_bin() -> PathBuf {
    let me = std::env::current_exe().expect("the test's path");
    let bin = me
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>")
        .join("flashgate");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p flashgate-origin --bin flashgate` first",
        bin.display()
    );
    bin
}
