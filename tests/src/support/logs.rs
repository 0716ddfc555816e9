//! The log lines of the origins of one test binary, written as `FLASHGATE_LOG_FORMAT=json`
//! writes them (one JSON object a line, with the list of spans) into memory and read back.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

/// Every log line written since [`json_logs`] was first called.
pub struct JsonLogs(Arc<Mutex<Vec<u8>>>);

/// Installs the process's log subscriber on first call, with `filter` (`RUST_LOG` syntax; a
/// later call's filter is ignored: there is one subscriber per process), and returns its lines.
pub fn json_logs(filter: &str) -> &'static JsonLogs {
    static LOGS: OnceLock<JsonLogs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        tracing_subscriber::fmt()
            .json()
            .with_current_span(false)
            .with_env_filter(filter)
            .with_writer(move || Sink(sink.clone()))
            .init();
        JsonLogs(buf)
    })
}

impl JsonLogs {
    /// Everything written so far, as written.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log buffer")).into_owned()
    }

    /// The lines written so far, parsed (a line that is not JSON is left out).
    pub fn lines(&self) -> Vec<Value> {
        self.text()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The access lines (one per request, [`flashgate_origin::metrics::ACCESS_LOG_TARGET`]).
    pub fn access_lines(&self) -> Vec<Value> {
        self.lines()
            .into_iter()
            .filter(|v| v["target"] == flashgate_origin::metrics::ACCESS_LOG_TARGET)
            .collect()
    }
}

/// The `request` span of a log line, if the line was written inside one.
pub fn request_span(line: &Value) -> Option<&Value> {
    line["spans"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == "request")
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
