//! The edge worker in workerd for tests: building it once per test binary and running it in
//! front of a test origin, behind Miniflare (the default: its Cache API, `CF-Connecting-IP` from
//! the client's socket and the worker's console output in the log) or in plain workerd (the
//! runtime of the scripts, a configuration from `edge-worker/workerd-config.mjs`).

use super::{eventually_blocking, test_config, unique};

/// The repository root (the parent of the tests crate).
pub fn repo_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// Builds the edge worker once per test binary (`edge_tools_install` + `edge_build` of
/// scripts/lib/edge.sh), unless `FLASHGATE_EDGE_PREBUILT=1` says a caller already did.
pub fn ensure_edge_built() {
    use std::sync::Mutex;
    static BUILT: Mutex<bool> = Mutex::new(false);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if *built {
        return;
    }
    if std::env::var("FLASHGATE_EDGE_PREBUILT").as_deref() != Ok("1") {
        let ok = std::process::Command::new("bash")
            .arg("-c")
            .arg(". scripts/lib/edge.sh && edge_tools_install && edge_build")
            .current_dir(repo_root())
            .status()
            .expect("run bash")
            .success();
        assert!(ok, "edge_build failed");
    }
    assert!(
        repo_root().join("edge-worker/build/index.js").exists(),
        "edge-worker/build/index.js missing: run `. scripts/lib/edge.sh && edge_build`"
    );
    *built = true;
}

/// How the worker is run: both are workerd, the first behind Miniflare's Node front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeRuntime {
    /// `edge-worker/run-miniflare.mjs`.
    Miniflare,
    /// `workerd serve` with the configuration `edge-worker/workerd-config.mjs` writes from
    /// wrangler.toml and the settings.
    Workerd,
}

/// The built edge worker in workerd (Miniflare, `edge-worker/run-miniflare.mjs`, unless
/// started with [`TestEdge::start_in`]) on a free port in front of an origin; stopped with
/// SIGTERM (so workerd goes too) on drop.
pub struct TestEdge {
    child: std::process::Child,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// The base URL of every copy of the worker, [`TestEdge::url`] first (more than one only
    /// from [`TestEdge::start_isolates`]).
    pub isolates: Vec<String>,
}

impl TestEdge {
    /// Starts the edge in front of `origin_url` with the test customer-token secret and the
    /// extra worker settings in `env` (e.g. `FLASHGATE_STATUS_TTL_MS`, `FLASHGATE_EDGE_SECRET`).
    pub fn start(origin_url: &str, env: &[(&str, String)]) -> TestEdge {
        Self::spawn(origin_url, env, std::process::Stdio::inherit())
    }

    /// [`TestEdge::start`] in the given runtime.
    pub fn start_in(runtime: EdgeRuntime, origin_url: &str, env: &[(&str, String)]) -> TestEdge {
        match runtime {
            EdgeRuntime::Miniflare => Self::start(origin_url, env),
            EdgeRuntime::Workerd => Self::spawn_workerd(origin_url, env, 1),
        }
    }

    /// `copies` copies of the worker in one plain workerd, each its own isolate on its own port
    /// (`FLASHGATE_EDGE_ISOLATES` of `edge-worker/workerd-config.mjs`), sharing what the
    /// isolates of one location share: the rate-limit bindings' stand-in.
    pub fn start_isolates(origin_url: &str, env: &[(&str, String)], copies: usize) -> TestEdge {
        Self::spawn_workerd(origin_url, env, copies)
    }

    /// Plain workerd: the configuration is written next to the test's temporary files (it
    /// holds the secrets) and removed once workerd has read it.
    fn spawn_workerd(origin_url: &str, env: &[(&str, String)], copies: usize) -> TestEdge {
        use std::time::Duration;
        ensure_edge_built();
        let edge_dir = repo_root().join("edge-worker");
        let config = std::env::temp_dir().join(format!("{}.capnp", unique("edge")));
        let mut gen = std::process::Command::new("node");
        gen.arg(edge_dir.join("workerd-config.mjs"))
            .arg(&config)
            .arg("0")
            .env("FLASHGATE_ORIGIN_URL", origin_url)
            .env("FLASHGATE_EDGE_ISOLATES", copies.to_string())
            .env(
                "FLASHGATE_CUSTOMER_TOKEN_SECRET",
                super::raw::customer_secret(&test_config()),
            );
        for (k, v) in env {
            gen.env(k, v);
        }
        let out = gen.output().expect("run node workerd-config.mjs");
        assert!(
            out.status.success(),
            "workerd-config.mjs failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let isolates: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .collect();
        assert_eq!(isolates.len(), copies, "one URL per copy");
        let child = std::process::Command::new(edge_dir.join("node_modules/.bin/workerd"))
            .arg("serve")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start workerd");
        let url = isolates[0].clone();
        let mut edge = TestEdge {
            child,
            url,
            isolates,
        };
        for url in edge.isolates.clone() {
            let addr = url.trim_start_matches("http://").to_string();
            let up = eventually_blocking(Duration::from_secs(30), || {
                if let Ok(Some(st)) = edge.child.try_wait() {
                    panic!("workerd exited: {st}");
                }
                std::net::TcpStream::connect(&addr).ok()
            });
            assert!(up.is_some(), "workerd did not listen on {addr} in 30 s");
        }
        let _ = std::fs::remove_file(&config);
        edge
    }

    /// [`TestEdge::start`] with the runtime's and the worker's log (stderr) written to `log`.
    pub fn start_logged(
        origin_url: &str,
        env: &[(&str, String)],
        log: &std::path::Path,
    ) -> TestEdge {
        let file = std::fs::File::create(log).expect("edge log file");
        Self::spawn(origin_url, env, file.into())
    }

    fn spawn(origin_url: &str, env: &[(&str, String)], stderr: std::process::Stdio) -> TestEdge {
        use std::time::Duration;
        ensure_edge_built();
        let url_file = std::env::temp_dir().join(format!("{}.url", unique("edge")));
        let mut cmd = std::process::Command::new("node");
        cmd.arg(repo_root().join("edge-worker/run-miniflare.mjs"))
            .env("EDGE_PORT", "0")
            .env("EDGE_URL_FILE", &url_file)
            .env("FLASHGATE_ORIGIN_URL", origin_url)
            .env(
                "FLASHGATE_CUSTOMER_TOKEN_SECRET",
                super::raw::customer_secret(&test_config()),
            )
            .stdout(std::process::Stdio::null())
            .stderr(stderr);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut edge = TestEdge {
            child: cmd.spawn().expect("start node run-miniflare.mjs"),
            url: String::new(),
            isolates: Vec::new(),
        };
        let started = eventually_blocking(Duration::from_secs(30), || {
            if let Ok(Some(st)) = edge.child.try_wait() {
                panic!("miniflare exited: {st}");
            }
            let url = std::fs::read_to_string(&url_file).ok()?;
            Some(url.trim().to_string()).filter(|u| !u.is_empty())
        });
        edge.url = started.expect("miniflare did not start in 30 s");
        edge.isolates = vec![edge.url.clone()];
        let _ = std::fs::remove_file(&url_file);
        edge
    }
}

impl Drop for TestEdge {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let child = &mut self.child;
        let gone = eventually_blocking(std::time::Duration::from_secs(5), || {
            child.try_wait().ok().flatten()
        });
        if gone.is_some() {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
