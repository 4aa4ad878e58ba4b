//! The reference statsd daemon: Etsy's, the npm package `statsd` pinned to
//! [`STATSD_VERSION`], and a listener that captures what its Graphite backend
//! writes.
//!
//! [`StatsdDaemon::start_with`] installs the package once into a cache
//! directory (`$XDG_CACHE_HOME/tally-bench/` or `~/.cache/tally-bench/`,
//! shared with `tally bench statsd`) with `npm install`, and runs it with
//! `node` on free ports: UDP on 127.0.0.1, its management port answering
//! before `start_with` returns, the flush interval, Graphite backend and
//! percentiles the options give. [`StatsdDaemon::packets_received`] asks the
//! management port for its own count of the datagrams it received. The
//! process is killed on drop.
//!
//! [`GraphiteCapture`] is the carbon end of statsd's Graphite backend: a TCP
//! listener on a free port keeping each connection's plaintext lines (statsd
//! opens one connection per flush) as one [`Flush`].
//!
//! What it does not do: set a receive buffer (the daemon runs as shipped,
//! with the system's default), or read anything into the lines it captures.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{free_port, require_binary};

/// The version of the npm package `statsd` the harness runs.
pub const STATSD_VERSION: &str = "0.9.0";

/// How to run the daemon.
#[derive(Clone, Debug)]
pub struct StatsdOptions {
    /// Milliseconds between flushes. Default: an hour (nothing resets its
    /// counts during a bench run).
    pub flush_interval_ms: u64,
    /// The port on 127.0.0.1 of a carbon plaintext receiver for statsd's
    /// Graphite backend (its defaults otherwise: `legacyNamespace`, counts
    /// flushed); `None`: no backend.
    pub graphite_port: Option<u16>,
    /// statsd's `percentThreshold`; `None`: its default (90).
    pub percent_threshold: Option<Vec<f64>>,
}

impl Default for StatsdOptions {
    fn default() -> Self {
        StatsdOptions {
            flush_interval_ms: 3_600_000,
            graphite_port: None,
            percent_threshold: None,
        }
    }
}

/// A running reference daemon, killed on drop.
pub struct StatsdDaemon {
    child: Child,
    /// Its UDP port on 127.0.0.1.
    pub port: u16,
    mgmt_port: u16,
    /// `statsd 0.9.0 (npm) on node v20...`.
    pub describe: String,
    _config: tempfile::TempDir,
}

impl StatsdDaemon {
    /// The daemon with the default options (no backend, an hourly flush).
    pub fn start() -> Result<Self, String> {
        Self::start_with(&StatsdOptions::default())
    }

    /// Installs the package when it is not in the cache yet, starts the
    /// daemon with `options`, and waits for its management port to answer
    /// (its UDP socket is bound before that port is).
    pub fn start_with(options: &StatsdOptions) -> Result<Self, String> {
        let stats_js = statsd_install()?;
        let node = require_binary(
            "node",
            &[],
            "Install Node.js (Debian: `apt-get install nodejs npm`)",
        );
        let node_version = Command::new(&node)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        let port = free_port();
        let mgmt_port = free_port();
        let config = tempfile::Builder::new()
            .prefix("tally-statsd-")
            .tempdir()
            .map_err(|e| format!("a directory for statsd's config: {e}"))?;
        let file = config.path().join("config.js");
        let mut text = format!(
            "{{ port: {port}, address: \"127.0.0.1\", mgmt_port: {mgmt_port}, \
             mgmt_address: \"127.0.0.1\", flushInterval: {}, automaticConfigReload: false",
            options.flush_interval_ms
        );
        match options.graphite_port {
            Some(g) => text.push_str(&format!(
                ", backends: [\"./backends/graphite\"], graphiteHost: \"127.0.0.1\", \
                 graphitePort: {g}"
            )),
            None => text.push_str(", backends: []"),
        }
        if let Some(pcts) = &options.percent_threshold {
            let list: Vec<String> = pcts.iter().map(f64::to_string).collect();
            text.push_str(&format!(", percentThreshold: [{}]", list.join(", ")));
        }
        text.push_str(" }\n");
        std::fs::write(&file, text).map_err(|e| format!("write statsd's config: {e}"))?;
        let child = Command::new(node)
            .arg(&stats_js)
            .arg(&file)
            .current_dir(stats_js.parent().expect("stats.js sits in the package"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start the reference statsd daemon with node: {e}"))?;
        let mut daemon = StatsdDaemon {
            child,
            port,
            mgmt_port,
            describe: format!("statsd {STATSD_VERSION} (npm) on node {node_version}"),
            _config: config,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if daemon.packets_received().is_ok() {
                return Ok(daemon);
            }
            if let Ok(Some(status)) = daemon.child.try_wait() {
                return Err(format!(
                    "the reference statsd daemon exited at start with {status}"
                ));
            }
            if Instant::now() >= deadline {
                return Err(
                    "the reference statsd daemon did not answer on its management port in 30 s"
                        .into(),
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The daemon's own count of the datagrams it received
    /// (`statsd.packets_received`, from the management command `counters`).
    pub fn packets_received(&self) -> Result<u64, String> {
        let io = |e: std::io::Error| format!("statsd's management port: {e}");
        let mut stream = TcpStream::connect(("127.0.0.1", self.mgmt_port)).map_err(io)?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(io)?;
        stream.write_all(b"counters\n").map_err(io)?;
        let mut text = String::new();
        let mut buf = [0u8; 4096];
        while !text.contains("END") {
            let n = stream.read(&mut buf).map_err(io)?;
            if n == 0 {
                return Err(format!("the management port closed before END: {text:?}"));
            }
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        packets_received(&text)
            .ok_or_else(|| format!("no statsd.packets_received in the daemon's counters: {text}"))
    }
}

impl Drop for StatsdDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `statsd.packets_received` in the text of the `counters` command
/// (Node's `util.inspect` of an object: `'statsd.packets_received': 12,`).
fn packets_received(text: &str) -> Option<u64> {
    let (_, rest) = text.split_once("'statsd.packets_received':")?;
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The cache directory of the pinned package, installed there when missing;
/// the path of its `stats.js`. Installs into a directory of its own first and
/// renames it into place, so that tests installing at once do not meet.
pub fn statsd_install() -> Result<PathBuf, String> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .unwrap_or_else(std::env::temp_dir);
    let parent = cache.join("tally-bench");
    let dir = parent.join(format!("statsd-{STATSD_VERSION}"));
    let stats_js = |dir: &std::path::Path| dir.join("node_modules/statsd/stats.js");
    if stats_js(&dir).is_file() {
        return Ok(stats_js(&dir));
    }
    std::fs::create_dir_all(&parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
    let staging = tempfile::Builder::new()
        .prefix(&format!("statsd-{STATSD_VERSION}-"))
        .tempdir_in(&parent)
        .map_err(|e| format!("a directory in {}: {e}", parent.display()))?;
    std::fs::write(
        staging.path().join("package.json"),
        "{ \"private\": true }\n",
    )
    .map_err(|e| format!("write package.json: {e}"))?;
    let npm = require_binary(
        "npm",
        &[],
        "Install npm (Debian: `apt-get install npm`) to fetch the reference statsd daemon",
    );
    let out = Command::new(npm)
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            &format!("statsd@{STATSD_VERSION}"),
        ])
        .current_dir(staging.path())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("run npm install: {e}"))?;
    if !(out.status.success() && stats_js(staging.path()).is_file()) {
        return Err(format!(
            "`npm install statsd@{STATSD_VERSION}` failed (the npm registry must be reachable): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    // Another installer may have won the race: its copy is as good.
    let staged = staging.keep();
    if std::fs::rename(&staged, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&staged);
    }
    if stats_js(&dir).is_file() {
        Ok(stats_js(&dir))
    } else {
        Err(format!("no {} after installing", stats_js(&dir).display()))
    }
}

/// One connection's lines: one flush of statsd's Graphite backend.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Flush {
    /// `(path, value as written, timestamp)` of each line, in order.
    pub lines: Vec<(String, String, i64)>,
}

impl Flush {
    /// The value written for `path`, as a number.
    pub fn value(&self, path: &str) -> Option<f64> {
        self.lines
            .iter()
            .find(|(p, _, _)| p == path)
            .and_then(|(_, v, _)| v.parse().ok())
    }
}

/// A carbon plaintext receiver on a free loopback port keeping what each
/// connection sent; its thread ends with the process (the listener is never
/// closed by the test).
pub struct GraphiteCapture {
    port: u16,
    flushes: Arc<Mutex<Vec<Flush>>>,
}

impl GraphiteCapture {
    /// Listens on 127.0.0.1 and a free port.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local addr").port();
        let flushes = Arc::new(Mutex::new(Vec::new()));
        let kept = flushes.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
                let mut text = String::new();
                if stream.read_to_string(&mut text).is_err() {
                    continue;
                }
                let lines = text
                    .lines()
                    .filter_map(|l| {
                        let mut parts = l.split(' ');
                        let (p, v, t) = (parts.next()?, parts.next()?, parts.next()?);
                        Some((p.to_owned(), v.to_owned(), t.parse().ok()?))
                    })
                    .collect();
                kept.lock().unwrap().push(Flush { lines });
            }
        });
        GraphiteCapture { port, flushes }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The first flush for which `wanted` holds, waiting up to `timeout`.
    pub fn wait_for(&self, timeout: Duration, wanted: impl Fn(&Flush) -> bool) -> Option<Flush> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(f) = self.flushes.lock().unwrap().iter().find(|f| wanted(f)) {
                return Some(f.clone());
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_packets_received_from_the_counters_command() {
        let text = "{\n  'statsd.bad_lines_seen': 0,\n  'statsd.packets_received': 100000,\n  \
                    'statsd.metrics_received': 100000,\n  'bench.1': 5\n}\nEND\n\n";
        assert_eq!(packets_received(text), Some(100_000));
        assert_eq!(packets_received("{}\nEND\n"), None);
    }
}
