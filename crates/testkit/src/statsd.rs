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
//! With [`StatsdOptions::console`] it also runs its own console backend:
//! what each flush prints (counters, timers, gauges, sets, as the daemon
//! parsed them) is read back and summed by [`StatsdDaemon::flushed`], which
//! waits until the flushes account for the lines sent (the daemon's own
//! `metrics_received`) rather than for a time.
//!
//! [`GraphiteCapture`] is the carbon end of statsd's Graphite backend: a TCP
//! listener on a free port keeping each connection's plaintext lines (statsd
//! opens one connection per flush) as one [`Flush`].
//!
//! What it does not do: set a receive buffer (the daemon runs as shipped,
//! with the system's default), or read anything into the lines it captures.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::process::{PATIENCE, free_port, require_binary};

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
    /// Also run the console backend, read back by [`StatsdDaemon::flushed`].
    pub console: bool,
}

impl Default for StatsdOptions {
    fn default() -> Self {
        StatsdOptions {
            flush_interval_ms: 3_600_000,
            graphite_port: None,
            percent_threshold: None,
            console: false,
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
    /// What it printed on stdout, line by line (console backend only).
    printed: Option<Arc<Mutex<Vec<String>>>>,
    node: PathBuf,
    _config: tempfile::TempDir,
}

/// What the console backend's flushes printed, summed over the flushes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Flushed {
    /// Lines the daemon received (`statsd.metrics_received`).
    pub lines: u64,
    /// Bad lines it counted (`statsd.bad_lines_seen`: one per bad sample).
    pub bad_lines: u64,
    /// Counters by key, summed (the daemon's own `statsd.*` left out).
    pub counters: BTreeMap<String, f64>,
    /// Timer values by key, sorted.
    pub timers: BTreeMap<String, Vec<f64>>,
    /// How many observations each timer's values stand for (the sum of
    /// 1/rate: `timer_data.<key>.count`).
    pub timer_counts: BTreeMap<String, f64>,
    /// Gauges by key, as of the last flush (`statsd.*` left out).
    pub gauges: BTreeMap<String, f64>,
    /// Set members by key.
    pub sets: BTreeMap<String, BTreeSet<String>>,
}

impl StatsdDaemon {
    /// The daemon with the default options (no backend, an hourly flush).
    pub fn start() -> Result<Self, String> {
        Self::start_with(&StatsdOptions::default())
    }

    /// The daemon with its console backend only, flushing every `flush`:
    /// read what it parsed with [`StatsdDaemon::flushed`].
    pub fn start_with_console(flush: Duration) -> Result<Self, String> {
        Self::start_with(&StatsdOptions {
            flush_interval_ms: (flush.as_millis() as u64).max(10),
            console: true,
            ..StatsdOptions::default()
        })
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
        let mut backends = Vec::new();
        if options.console {
            backends.push("\"./backends/console\"");
        }
        if let Some(g) = options.graphite_port {
            backends.push("\"./backends/graphite\"");
            text.push_str(&format!(", graphiteHost: \"127.0.0.1\", graphitePort: {g}"));
        }
        text.push_str(&format!(", backends: [{}]", backends.join(", ")));
        if let Some(pcts) = &options.percent_threshold {
            let list: Vec<String> = pcts.iter().map(f64::to_string).collect();
            text.push_str(&format!(", percentThreshold: [{}]", list.join(", ")));
        }
        text.push_str(" }\n");
        std::fs::write(&file, text).map_err(|e| format!("write statsd's config: {e}"))?;
        let mut child = Command::new(&node)
            .arg(&stats_js)
            .arg(&file)
            .current_dir(stats_js.parent().expect("stats.js sits in the package"))
            .stdin(Stdio::null())
            .stdout(if options.console {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start the reference statsd daemon with node: {e}"))?;
        let printed = child.stdout.take().map(|stdout| {
            let printed = Arc::new(Mutex::new(Vec::new()));
            let into = printed.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    into.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                }
            });
            printed
        });
        let mut daemon = StatsdDaemon {
            child,
            port,
            mgmt_port,
            describe: format!("statsd {STATSD_VERSION} (npm) on node {node_version}"),
            printed,
            node,
            _config: config,
        };
        let deadline = Instant::now() + PATIENCE;
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
                return Err(format!(
                    "the reference statsd daemon did not answer on its management port in {PATIENCE:?}"
                ));
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

    /// What the console backend's flushes printed so far, summed, once
    /// they account for at least `lines` lines received; fails if they do
    /// not within `timeout` (a datagram lost, or a daemon gone).
    pub fn flushed(&self, lines: u64, timeout: Duration) -> Result<Flushed, String> {
        let printed = self.printed.as_ref().ok_or_else(|| {
            String::from("the daemon runs without its console backend (start_with_console)")
        })?;
        let deadline = Instant::now() + timeout;
        loop {
            let blocks = flush_blocks(&printed.lock().unwrap_or_else(|p| p.into_inner()));
            let flushed = self.sum(&blocks)?;
            if flushed.lines >= lines {
                return Ok(flushed);
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the daemon's flushes account for {} of {lines} lines",
                    flushed.lines
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The flushes' objects (Node's `util.inspect` text) read as JSON by
    /// node itself, and summed.
    fn sum(&self, blocks: &[String]) -> Result<Flushed, String> {
        let mut flushed = Flushed::default();
        if blocks.is_empty() {
            return Ok(flushed);
        }
        let mut node = Command::new(&self.node)
            .args([
                "-e",
                "let s = ''; process.stdin.on('data', d => s += d).on('end', () => \
                 process.stdout.write(JSON.stringify(eval('(' + s + ')'))));",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("run node to read the console backend's output: {e}"))?;
        let text = format!("[{}]", blocks.join(",\n"));
        node.stdin
            .take()
            .ok_or_else(|| String::from("node's stdin"))?
            .write_all(text.as_bytes())
            .map_err(|e| format!("write to node: {e}"))?;
        let out = node
            .wait_with_output()
            .map_err(|e| format!("read node's output: {e}"))?;
        let all: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("the console backend's output is not an object ({e}): {text}"))?;
        for flush in all.as_array().into_iter().flatten() {
            add(&mut flushed, flush);
        }
        for values in flushed.timers.values_mut() {
            values.sort_by(f64::total_cmp);
        }
        Ok(flushed)
    }
}

impl Drop for StatsdDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The complete objects the console backend printed: each starts after a
/// `Flushing stats at` line and ends at a line that is only `}`.
fn flush_blocks(lines: &[String]) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in lines {
        if line.starts_with("Flushing stats at") {
            block = Some(Vec::new());
        } else if let Some(b) = block.as_mut() {
            b.push(line);
            if line == "}" {
                blocks.push(b.join("\n"));
                block = None;
            }
        }
    }
    blocks
}

/// Adds one flush's figures to `into`.
fn add(into: &mut Flushed, flush: &Value) {
    let number = |v: &Value| v.as_f64().unwrap_or(0.0);
    let own = |key: &str| key.starts_with("statsd.");
    for (key, v) in flush["counters"].as_object().into_iter().flatten() {
        match key.as_str() {
            "statsd.metrics_received" => into.lines += number(v) as u64,
            "statsd.bad_lines_seen" => into.bad_lines += number(v) as u64,
            k if own(k) => {}
            k => *into.counters.entry(k.to_owned()).or_default() += number(v),
        }
    }
    for (key, v) in flush["timers"].as_object().into_iter().flatten() {
        let values = into.timers.entry(key.clone()).or_default();
        values.extend(v.as_array().into_iter().flatten().map(number));
    }
    for (key, v) in flush["timer_data"].as_object().into_iter().flatten() {
        *into.timer_counts.entry(key.clone()).or_default() += number(&v["count"]);
    }
    for (key, v) in flush["gauges"].as_object().into_iter().flatten() {
        if !own(key) {
            into.gauges.insert(key.clone(), number(v));
        }
    }
    for (key, v) in flush["sets"].as_object().into_iter().flatten() {
        let members = into.sets.entry(key.clone()).or_default();
        members.extend(
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m.as_str().map(str::to_owned)),
        );
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

    #[test]
    fn flush_blocks_are_the_complete_objects_printed() {
        let printed: Vec<String> = [
            "25 Nov 14:01:22 - server is up INFO",
            "Flushing stats at  Wed Nov 25 2026",
            "{",
            "  counters: { hits: 3 },",
            "}",
            "25 Nov 14:01:23 - DEBUG: Bad line: 1 in msg \"pk:1:2|h\"",
            "Flushing stats at  Wed Nov 25 2026",
            "{",
            "  counters: {",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(flush_blocks(&printed), ["{\n  counters: { hits: 3 },\n}"]);
    }

    #[test]
    fn flushes_add_up() {
        let mut f = Flushed::default();
        for flush in [
            serde_json::json!({
                "counters": {"statsd.metrics_received": 3, "statsd.bad_lines_seen": 1, "hits": 2},
                "timers": {"lat": [3, 1]},
                "timer_data": {"lat": {"count": 4}},
                "gauges": {"statsd.timestamp_lag": 0.1, "q": 5},
                "sets": {"u": ["a"]},
            }),
            serde_json::json!({
                "counters": {"statsd.metrics_received": 1, "hits": 1},
                "timers": {"lat": [2]},
                "timer_data": {"lat": {"count": 1}},
                "gauges": {"q": -1},
                "sets": {"u": ["b", "a"]},
            }),
        ] {
            add(&mut f, &flush);
        }
        assert_eq!((f.lines, f.bad_lines), (4, 1));
        assert_eq!(f.counters["hits"], 3.0);
        assert_eq!(f.timers["lat"], [3.0, 1.0, 2.0]);
        assert_eq!(f.timer_counts["lat"], 5.0);
        assert_eq!(f.gauges, BTreeMap::from([("q".to_owned(), -1.0)]));
        assert_eq!(f.sets["u"].len(), 2);
    }
}
