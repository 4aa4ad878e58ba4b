//! The reference statsd daemon (Etsy's, the npm package `statsd`, pinned to
//! [`VERSION`]) as the opponent of `tally bench statsd --burst`.
//!
//! [`StatsdDaemon::start`] installs the package once into a cache directory
//! (`$XDG_CACHE_HOME/tally-bench/` or `~/.cache/tally-bench/`) with `npm
//! install`, and runs it with `node` on free ports: UDP on 127.0.0.1, no
//! backend, a flush interval of an hour so that nothing resets its counts
//! during a run. [`StatsdDaemon::packets_received`] asks its management port
//! (`counters`) for its own count of the datagrams it received. The process
//! is killed on drop.
//!
//! What it does not do: set a receive buffer (the daemon runs as shipped,
//! with the system's default) or measure anything itself.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

/// The version of the npm package `statsd` the bench runs.
pub const VERSION: &str = "0.9.0";

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
    /// Installs the package when it is not in the cache yet, starts the
    /// daemon, and waits for its management port to answer.
    pub fn start() -> Result<Self> {
        let stats_js = install()?;
        let node = tally_testkit::require_binary(
            "node",
            &[],
            "Install Node.js (Debian: `apt-get install nodejs npm`)",
        );
        let node_version = Command::new(&node)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        let port = tally_testkit::free_port();
        let mgmt_port = tally_testkit::free_port();
        let config = tempfile::Builder::new()
            .prefix("tally-bench-statsd-")
            .tempdir()?;
        let file = config.path().join("config.js");
        std::fs::write(
            &file,
            format!(
                "{{ port: {port}, address: \"127.0.0.1\", mgmt_port: {mgmt_port}, \
                 mgmt_address: \"127.0.0.1\", flushInterval: 3600000, backends: [], \
                 automaticConfigReload: false }}\n"
            ),
        )?;
        let child = Command::new(node)
            .arg(&stats_js)
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start the reference statsd daemon with node")?;
        let mut daemon = StatsdDaemon {
            child,
            port,
            mgmt_port,
            describe: format!("statsd {VERSION} (npm) on node {node_version}"),
            _config: config,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if daemon.packets_received().is_ok() {
                return Ok(daemon);
            }
            if let Some(status) = daemon.child.try_wait()? {
                bail!("the reference statsd daemon exited at start with {status}");
            }
            ensure!(
                Instant::now() < deadline,
                "the reference statsd daemon did not answer on its management port in 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The daemon's own count of the datagrams it received
    /// (`statsd.packets_received`, from the management command `counters`).
    pub fn packets_received(&self) -> Result<u64> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.mgmt_port))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.write_all(b"counters\n")?;
        let mut text = String::new();
        let mut buf = [0u8; 4096];
        while !text.contains("END") {
            let n = stream.read(&mut buf)?;
            ensure!(n > 0, "the management port closed before END: {text:?}");
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        packets_received(&text)
            .with_context(|| format!("no statsd.packets_received in the daemon's counters: {text}"))
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
/// the path of its `stats.js`.
fn install() -> Result<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .unwrap_or_else(std::env::temp_dir);
    let dir = cache.join("tally-bench").join(format!("statsd-{VERSION}"));
    let stats_js = dir.join("node_modules/statsd/stats.js");
    if stats_js.is_file() {
        return Ok(stats_js);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    std::fs::write(dir.join("package.json"), "{ \"private\": true }\n")?;
    let npm = tally_testkit::require_binary(
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
            &format!("statsd@{VERSION}"),
        ])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .context("run npm install")?;
    ensure!(
        out.status.success() && stats_js.is_file(),
        "`npm install statsd@{VERSION}` in {} failed (the npm registry must be reachable): {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(stats_js)
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
