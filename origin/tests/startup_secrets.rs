//! `flashgate serve` refuses to start with an empty or short secret: it exits non-zero at
//! start-up, before connecting to anything, with a message naming the variable.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const GOOD: &str = "a-secret-of-exactly-thirty-two-b";

/// Runs `flashgate serve` with the given settings on top of valid ones; returns its exit code
/// and stderr. Fails the test when it is still running after 20 s (it started).
fn serve_with(overrides: &[(&str, &str)]) -> (i32, String) {
    let err = std::env::temp_dir().join(format!("flashgate-startup-{}.err", std::process::id()));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flashgate"));
    cmd.arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FLASHGATE_LISTEN", "127.0.0.1:0")
        .env("DATABASE_URL", "postgres://postgres@127.0.0.1:1/none")
        .env("REDIS_URL", "redis://127.0.0.1:1")
        .env("FLASHGATE_ADMIN_TOKEN", GOOD)
        .env("FLASHGATE_CUSTOMER_TOKEN_SECRET", GOOD)
        .env("FLASHGATE_SERVICE_TOKEN", GOOD)
        .env("FLASHGATE_EDGE_SECRET", GOOD)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).expect("stderr file"));
    for (k, v) in overrides {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start flashgate serve");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("flashgate serve did not exit with {overrides:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&err).unwrap_or_default();
    let _ = std::fs::remove_file(&err);
    (status.code().unwrap_or(-1), text)
}

#[test]
fn serve_refuses_empty_or_short_secrets_naming_the_variable() {
    for (variable, value) in [
        ("FLASHGATE_CUSTOMER_TOKEN_SECRET", ""),
        ("FLASHGATE_CUSTOMER_TOKEN_SECRET", "short-secret"),
        ("FLASHGATE_SERVICE_TOKEN", "0123456789abcdef0123456789abcde"),
        ("FLASHGATE_EDGE_SECRET", "edge"),
        ("FLASHGATE_ADMIN_TOKEN", "admin"),
    ] {
        let (code, stderr) = serve_with(&[(variable, value)]);
        assert_ne!(code, 0, "{variable}={value:?} started: {stderr}");
        assert!(
            stderr.contains(&format!("{variable} must be at least 32 bytes long")),
            "{variable}={value:?}: {stderr}"
        );
        assert!(
            value.is_empty() || !stderr.contains(value),
            "the secret leaked: {stderr}"
        );
    }
    let (code, stderr) = serve_with(&[("FLASHGATE_ADMIN_TOKENS", "ops:viewer:short-viewer-token")]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("FLASHGATE_ADMIN_TOKENS (token ops) must be at least 32 bytes long"),
        "{stderr}"
    );
}
