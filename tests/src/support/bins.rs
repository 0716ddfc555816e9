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

/// Runs `flashgate <args>` as an operator would: against the origin at `origin_url` with the
/// manager token `admin_token` in its environment, and nothing else of the test's environment;
/// on a blocking thread, off the test runtime's. Its output (status, stdout, stderr).
pub async fn run_admin_cli(
    origin_url: &str,
    admin_token: &str,
    args: Vec<String>,
) -> std::process::Output {
    let mut cmd = std::process::Command::new(flashgate_bin());
    cmd.args(args)
        .env_clear()
        .env("FLASHGATE_ORIGIN_URL", origin_url)
        .env("FLASHGATE_ADMIN_TOKEN", admin_token);
    tokio::task::spawn_blocking(move || cmd.output().expect("flashgate runs"))
        .await
        .expect("the CLI's task")
}
