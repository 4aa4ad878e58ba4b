//! `tally bench http` and `tally bench statsd`: ingest through a real
//! `tally serve` process.
//!
//! Both start this very binary as `tally serve` on free ports (on a fresh
//! SQLite directory, or on a `redis-server` the bench starts), drive it from
//! outside, stop it with SIGTERM (which flushes what it holds), and then read
//! the stored totals through the library: they must equal what the server
//! acknowledged.
//!
//! - `http`: `wrk` (Debian's package, a standard HTTP load generator) posts
//!   single increments (`POST /v1/counters/{name}/incr`) and batches
//!   (`POST /v1/incr`, `--batch` increments each) over `--counters` names.
//!   Baseline in the same run, same server, same connections: `wrk` on
//!   `GET /healthz`, the HTTP stack with no work behind it.
//! - `statsd`: the bench sends UDP datagrams of `--lines` counter lines as
//!   fast as it can for `--seconds`; the figure is lines the server accepted
//!   per second. Baseline in the same run: the same sender against a bare
//!   UDP socket that only receives (no parsing, no counting). UDP may drop
//!   datagrams under load; the check is on what the server accepted.
//! - `statsd --burst N`: then one sender sends N single-line datagrams as
//!   fast as it can to each receiver in turn: a bare socket with tally's
//!   receive buffer, `tally serve` on each backend, and the reference statsd
//!   daemon ([`tally_testkit::statsd`]); each one's loss is what it did not
//!   count, and must equal the kernel's drop counter for its socket (tally's
//!   from its own `/metrics`).

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde::Serialize;
use tally::{CounterSettings, SystemClock};

use crate::server::{BenchRedis, Kind, Opened, Which, check_totals, machine, stored_totals};
use tally_testkit::StatsdDaemon;

/// The `wrk` script: rotates over the counters, one or `batch` increments
/// per request ([`run_wrk`] adds the JSON summary at the end).
const WRK_SCRIPT: &str = r#"
local counters = tonumber(os.getenv("TALLY_BENCH_COUNTERS"))
local batch = tonumber(os.getenv("TALLY_BENCH_BATCH"))
local path = os.getenv("TALLY_BENCH_PATH")
local i = 0
request = function()
  i = i + 1
  if path == "/healthz" then
    return wrk.format("GET", path)
  end
  local headers = { ["Content-Type"] = "application/json" }
  if batch == 1 then
    return wrk.format("POST", "/v1/counters/bench." .. (i % counters) .. "/incr", headers, '{"count":1}')
  end
  local parts = {}
  for j = 1, batch do
    parts[j] = '{"name":"bench.' .. ((i * batch + j) % counters) .. '"}'
  end
  return wrk.format("POST", "/v1/incr", headers, '{"increments":[' .. table.concat(parts, ",") .. ']}')
end
"#;

/// A `tally serve` child, killed on drop unless stopped (also the carbon
/// and Graphite benches').
pub(crate) struct Served {
    child: Child,
    port: u16,
    dir: Option<tempfile::TempDir>,
}

impl Served {
    /// Starts `tally serve` on `kind` (SQLite in a new directory, or the
    /// bench's Redis), with `extra` flags; waits for its "serving on" line.
    pub(crate) fn start(kind: Kind, redis: Option<&BenchRedis>, extra: &[String]) -> Result<Self> {
        Self::start_in(kind, redis, None, extra)
    }

    /// As [`Served::start`], on SQLite in `data_dir` when given (a store
    /// the bench filled first; not deleted).
    pub(crate) fn start_in(
        kind: Kind,
        redis: Option<&BenchRedis>,
        data_dir: Option<&std::path::Path>,
        extra: &[String],
    ) -> Result<Self> {
        let port = tally_testkit::free_port();
        let exe = std::env::current_exe().context("the tally binary's path")?;
        let mut cmd = Command::new(exe);
        let dir = match (kind, data_dir) {
            (Kind::Sqlite, Some(existing)) => {
                cmd.arg("--data-dir").arg(existing);
                None
            }
            (Kind::Sqlite, None) => {
                let dir = tempfile::Builder::new()
                    .prefix("tally-bench-serve-")
                    .tempdir()?;
                cmd.arg("--data-dir").arg(dir.path());
                Some(dir)
            }
            (Kind::Redis, _) => {
                let redis = redis.context("a Redis run needs the bench's server")?;
                cmd.args(["--redis", &redis.url()]);
                None
            }
        };
        cmd.args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--no-cleaner",
        ])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        let mut child = cmd.spawn().context("start tally serve")?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().context("serve's stdout")?).read_line(&mut line)?;
        ensure!(
            line.contains("serving on"),
            "tally serve did not start: {line:?}"
        );
        Ok(Served { child, port, dir })
    }

    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Its address.
    pub(crate) fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A counter from `/metrics` (0 when absent).
    pub(crate) fn metric(&self, name: &str) -> Result<u64> {
        Ok(self.metric_if_any(name)?.unwrap_or(0))
    }

    /// A counter from `/metrics` once it has stopped moving: requests (or
    /// datagrams) the load generator gave up on when its run ended may still
    /// be in the server's hands and be counted a moment later, so the figure
    /// is read until two reads 250 ms apart agree (for up to 10 s).
    fn settled_metric(&self, name: &str) -> Result<u64> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = self.metric(name)?;
        loop {
            std::thread::sleep(Duration::from_millis(250));
            let now = self.metric(name)?;
            if now == last || Instant::now() >= deadline {
                return Ok(now);
            }
            last = now;
        }
    }

    /// The whole `/metrics` text.
    pub(crate) fn metrics_text(&self) -> Result<String> {
        http_get(self.port, "/metrics")
    }

    /// A counter or gauge from `/metrics`, when it is there.
    fn metric_if_any(&self, name: &str) -> Result<Option<u64>> {
        let text = http_get(self.port, "/metrics")?;
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
            .map(|v| v.trim().parse::<f64>().map(|v| v as u64))
            .transpose()?)
    }

    /// Reads the counter `metric` from `/metrics` once settled, stops the
    /// server (flushing what it holds), then checks that the counters
    /// `names` hold that figure at every precision; returns it.
    async fn stop_and_check(
        self,
        kind: Kind,
        redis: Option<&BenchRedis>,
        names: &[String],
        metric: &str,
        what: &str,
    ) -> Result<u64> {
        let accepted = self.settled_metric(metric)?;
        let dir = self.stop()?;
        let opened = match (kind, &dir) {
            (Kind::Sqlite, Some(dir)) => Opened::open_existing(dir.path()).await?,
            _ => Opened::open(kind, redis).await?,
        };
        let api = opened
            .counters(&CounterSettings::default(), Arc::new(SystemClock))
            .await?;
        check_totals(what, &stored_totals(&api, names).await?, accepted)?;
        Ok(accepted)
    }

    /// SIGTERM, which flushes the writer; waits for a clean exit and
    /// hands back the SQLite directory (deleted when dropped).
    pub(crate) fn stop(mut self) -> Result<Option<tempfile::TempDir>> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        ensure!(status.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait()? {
                ensure!(status.success(), "tally serve exited with {status}");
                return Ok(self.dir.take());
            }
            ensure!(
                Instant::now() < deadline,
                "tally serve did not stop after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The counters the http and statsd runs write: `bench.0`, `bench.1`...
fn bench_names(counters: u64) -> Vec<String> {
    (0..counters).map(|i| format!("bench.{i}")).collect()
}

/// One plain HTTP/1.1 GET; the body.
fn http_get(port: u16, path: &str) -> Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    Ok(text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default())
}

/// What `wrk` reported.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct WrkRun {
    pub(crate) requests: u64,
    pub(crate) duration_us: u64,
    pub(crate) socket_errors: u64,
    pub(crate) non_2xx: u64,
    pub(crate) p50_us: u64,
    pub(crate) p99_us: u64,
}

impl WrkRun {
    pub(crate) fn per_second(&self) -> f64 {
        self.requests as f64 / (self.duration_us as f64 / 1e6)
    }
}

fn wrk(
    base: &str,
    path: &str,
    counters: u64,
    batch: u64,
    seconds: f64,
    connections: u32,
) -> Result<WrkRun> {
    run_wrk(
        WRK_SCRIPT,
        &format!("{base}{path}"),
        Load {
            threads: 2,
            connections,
            seconds,
            timeout_seconds: None,
        },
        &[
            ("TALLY_BENCH_COUNTERS", counters.to_string()),
            ("TALLY_BENCH_BATCH", batch.to_string()),
            ("TALLY_BENCH_PATH", path.to_owned()),
        ],
    )
}

/// How hard `wrk` drives a server.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Load {
    pub(crate) threads: u32,
    pub(crate) connections: u32,
    pub(crate) seconds: f64,
    /// wrk's per-request timeout (its default: 2 s).
    pub(crate) timeout_seconds: Option<u32>,
}

/// The end of every wrk script: prints the `TALLY_WRK {json}` line
/// [`run_wrk`] reads.
const WRK_DONE: &str = r#"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('TALLY_WRK {"requests":%d,"duration_us":%d,"socket_errors":%d,"non_2xx":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
"#;

/// Runs `wrk` with `script` (its requests; [`WRK_DONE`] is added) against
/// `url` with `env`.
pub(crate) fn run_wrk(
    script: &str,
    url: &str,
    load: Load,
    env: &[(&str, String)],
) -> Result<WrkRun> {
    let wrk =
        tally_testkit::require_binary("wrk", &[], "Install it with `sudo apt-get install wrk`");
    let file = tempfile::Builder::new().suffix(".lua").tempfile()?;
    std::fs::write(file.path(), format!("{script}{WRK_DONE}"))?;
    let mut cmd = Command::new(wrk);
    cmd.args([
        "-t",
        &load.threads.clamp(1, load.connections.max(1)).to_string(),
        "-c",
        &load.connections.to_string(),
        "-d",
        &format!("{:.0}s", load.seconds.ceil().max(1.0)),
    ]);
    if let Some(t) = load.timeout_seconds {
        cmd.args(["--timeout", &format!("{t}s")]);
    }
    cmd.arg("-s").arg(file.path()).arg(url);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().context("run wrk")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("TALLY_WRK "))
        .with_context(|| {
            format!(
                "wrk printed no summary: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    Ok(serde_json::from_str(line)?)
}

/// One HTTP run.
#[derive(Debug, Serialize)]
pub struct HttpRun {
    backend: &'static str,
    kind: &'static str,
    batch: u64,
    wrk: WrkRun,
    requests_per_second: f64,
    increments_per_second: f64,
    /// Requests per second as a fraction of `GET /healthz` on the same
    /// server in the same run.
    ratio_to_healthz: f64,
    server_accepted: u64,
    totals_exact: bool,
}

/// `tally bench http`.
#[derive(Debug, Serialize)]
pub struct HttpReport {
    bench: &'static str,
    machine: serde_json::Value,
    seconds: f64,
    connections: u32,
    counters: u64,
    healthz: Vec<(String, WrkRun)>,
    runs: Vec<HttpRun>,
}

pub async fn http(
    which: Which,
    seconds: f64,
    connections: u32,
    counters: u64,
    batch: u64,
) -> Result<HttpReport> {
    ensure!(
        counters >= 1 && (1..=10_000).contains(&batch),
        "counters >= 1 and batch in 1..=10000"
    );
    let redis = which.kinds().contains(&Kind::Redis).then(BenchRedis::start);
    let mut report = HttpReport {
        bench: "http",
        machine: machine(),
        seconds,
        connections,
        counters,
        healthz: Vec::new(),
        runs: Vec::new(),
    };
    for kind in which.kinds() {
        let backend = match kind {
            Kind::Redis => "redis",
            Kind::Sqlite => "sqlite",
        };
        for (label, n) in [("single", 1u64), ("batch", batch)] {
            if let Some(r) = &redis {
                r.flush().await?;
            }
            let served = Served::start(
                kind,
                redis.as_ref(),
                &["--flush-interval-ms".into(), "200".into()],
            )?;
            let base = served.base();
            let healthz = wrk(&base, "/healthz", counters, 1, seconds, connections)?;
            let path = if n == 1 {
                "/v1/counters/bench.0/incr"
            } else {
                "/v1/incr"
            };
            let run = wrk(&base, path, counters, n, seconds, connections)?;
            let accepted = served
                .stop_and_check(
                    kind,
                    redis.as_ref(),
                    &bench_names(counters),
                    "tally_increments_accepted_total",
                    &format!("http {backend} {label}"),
                )
                .await?;
            // Every request wrk saw succeed added `n`; requests cut by the end
            // of the run may have been accepted without wrk seeing the answer.
            ensure!(
                run.non_2xx == 0 && accepted >= run.requests * n,
                "http {backend} {label}: {} non-2xx answers, {accepted} accepted for {} requests of {n}",
                run.non_2xx,
                run.requests
            );
            report.runs.push(HttpRun {
                backend,
                kind: label,
                batch: n,
                requests_per_second: run.per_second(),
                increments_per_second: run.per_second() * n as f64,
                ratio_to_healthz: run.per_second() / healthz.per_second(),
                server_accepted: accepted,
                totals_exact: true,
                wrk: run,
            });
            report.healthz.push((format!("{backend} {label}"), healthz));
        }
    }
    Ok(report)
}

/// One statsd run.
#[derive(Debug, Serialize)]
pub struct StatsdRun {
    backend: &'static str,
    datagrams_sent: u64,
    lines_sent: u64,
    lines_accepted: u64,
    lines_per_second: f64,
    datagrams_per_second: f64,
    /// Datagrams the server took per second as a fraction of what a bare
    /// receiving socket took in the same run.
    ratio_to_bare_socket: f64,
    totals_exact: bool,
}

/// `tally bench statsd`.
#[derive(Debug, Serialize)]
pub struct StatsdReport {
    bench: &'static str,
    machine: serde_json::Value,
    seconds: f64,
    lines_per_datagram: usize,
    counters: u64,
    bare_socket_datagrams_per_second: f64,
    runs: Vec<StatsdRun>,
    /// With `--burst`: loss under a burst, per receiver.
    #[serde(skip_serializing_if = "Option::is_none")]
    burst: Option<BurstReport>,
}

/// Sends datagrams of `lines` counter lines to `to` for `seconds`; returns
/// datagrams sent.
fn blast(to: SocketAddr, lines: usize, counters: u64, seconds: f64) -> Result<u64> {
    let socket = UdpSocket::bind("127.0.0.1:0")?;
    let packets: Vec<Vec<u8>> = (0..counters.min(64))
        .map(|k| {
            (0..lines)
                .map(|j| format!("bench.{}:1|c\n", (k * lines as u64 + j as u64) % counters))
                .collect::<String>()
                .into_bytes()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let mut sent = 0u64;
    let mut passes = 0u64;
    while crate::pace::go_on(deadline, &mut passes) {
        for p in &packets {
            // A full socket buffer drops the datagram, as UDP does.
            if socket.send_to(p, to).is_ok() {
                sent += 1;
            }
        }
    }
    Ok(sent)
}

/// A bare UDP socket read by a thread that only counts datagrams: the
/// baseline of every statsd run.
struct BareSocket {
    addr: SocketAddr,
    received: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl BareSocket {
    fn start(socket: UdpSocket) -> Result<Self> {
        socket.set_nonblocking(false)?;
        socket.set_read_timeout(Some(Duration::from_millis(100)))?;
        let addr = socket.local_addr()?;
        let received = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (received, stop) = (received.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65_535];
                while !stop.load(Ordering::Relaxed) {
                    if socket.recv_from(&mut buf).is_ok() {
                        received.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        Ok(BareSocket {
            addr,
            received,
            stop,
            thread,
        })
    }

    fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Stops the thread; the datagrams it received.
    fn stop(self) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("receiver thread panicked"))?;
        Ok(self.received.load(Ordering::Relaxed))
    }
}

pub async fn statsd(
    which: Which,
    seconds: f64,
    lines: usize,
    counters: u64,
    burst: Option<Burst>,
) -> Result<StatsdReport> {
    ensure!(
        (1..=200).contains(&lines) && counters >= 1,
        "lines in 1..=200, counters >= 1"
    );
    if let Some(b) = &burst {
        ensure!(b.datagrams >= 1, "--burst must be at least 1 datagram");
        tally::server::udp::check_recv_buffer(b.recv_buffer)?;
    }
    // Baseline: a bare socket that only receives.
    let bare = BareSocket::start(UdpSocket::bind("127.0.0.1:0")?)?;
    let started = Instant::now();
    blast(bare.addr, lines, counters, seconds)?;
    let took = started.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(300));
    let bare_rate = bare.stop()? as f64 / took;

    let redis = which.kinds().contains(&Kind::Redis).then(BenchRedis::start);
    let mut runs = Vec::new();
    for kind in which.kinds() {
        let backend = backend_name(kind);
        let port = tally_testkit::free_port();
        let served = Served::start(
            kind,
            redis.as_ref(),
            &["--statsd".into(), format!("127.0.0.1:{port}")],
        )?;
        let to: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let started = Instant::now();
        let datagrams = blast(to, lines, counters, seconds)?;
        let took = started.elapsed().as_secs_f64();
        // Let the listener drain its socket buffer, then read its figures.
        std::thread::sleep(Duration::from_millis(500));
        let accepted = served
            .stop_and_check(
                kind,
                redis.as_ref(),
                &bench_names(counters),
                "tally_statsd_lines_accepted_total",
                &format!("statsd {backend}"),
            )
            .await?;
        if accepted == 0 {
            bail!("statsd {backend}: the server accepted no line");
        }
        let datagrams_taken = accepted as f64 / lines as f64;
        runs.push(StatsdRun {
            backend,
            datagrams_sent: datagrams,
            lines_sent: datagrams * lines as u64,
            lines_accepted: accepted,
            lines_per_second: accepted as f64 / took,
            datagrams_per_second: datagrams_taken / took,
            ratio_to_bare_socket: datagrams_taken / took / bare_rate,
            totals_exact: true,
        });
    }
    let burst = match burst {
        Some(b) => Some(burst_runs(which, redis.as_ref(), b, counters).await?),
        None => None,
    };
    Ok(StatsdReport {
        bench: "statsd",
        machine: machine(),
        seconds,
        lines_per_datagram: lines,
        counters,
        bare_socket_datagrams_per_second: bare_rate,
        runs,
        burst,
    })
}

pub(crate) fn backend_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Redis => "redis",
        Kind::Sqlite => "sqlite",
    }
}

/// What `--burst` asks for.
#[derive(Clone, Copy, Debug)]
pub struct Burst {
    /// Single-line datagrams sent to each receiver.
    pub datagrams: u64,
    /// The receive buffer tally and the bare socket ask for.
    pub recv_buffer: usize,
}

/// One receiver under the burst.
#[derive(Debug, Serialize)]
pub struct BurstRun {
    /// `bare socket`, `tally sqlite`, `tally redis` or `statsd`.
    receiver: String,
    /// Its receive buffer as the kernel reports it (SO_RCVBUF; Linux
    /// reports twice what was set). The reference daemon sets none: the
    /// system default.
    recv_buffer_bytes: Option<u64>,
    datagrams_sent: u64,
    /// Seconds the sender took to send them.
    send_seconds: f64,
    datagrams_received: u64,
    lost: u64,
    loss_percent: f64,
    /// The kernel's drop counter for the receiving socket over the burst
    /// (`/proc/net/udp`; tally's from its own `/metrics`).
    kernel_drops: Option<u64>,
    /// Tally only: datagrams received as a fraction of the bare socket's,
    /// and of the reference daemon's, in the same run.
    #[serde(skip_serializing_if = "Option::is_none")]
    received_ratio_to_bare_socket: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    received_ratio_to_statsd: Option<f64>,
    /// Tally only: the stored totals equal the lines it accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    totals_exact: Option<bool>,
}

/// `tally bench statsd --burst N`.
#[derive(Debug, Serialize)]
pub struct BurstReport {
    /// Single-line datagrams per burst, sent from one socket as fast as it
    /// can over loopback.
    datagrams: u64,
    /// The receive buffer `tally serve` asks for (`--statsd-recv-buffer`;
    /// by default 8 MiB); the bare socket asks for the same.
    recv_buffer_requested: u64,
    /// Whether SO_RCVBUFFORCE took (the bench may pass the cap).
    recv_buffer_forced: bool,
    /// `net.core.rmem_max` and `net.core.rmem_default` on this machine.
    rmem_max: Option<u64>,
    rmem_default: Option<u64>,
    /// The reference daemon: package and node version.
    statsd: String,
    /// The issue's target for tally: at most this loss.
    target_loss_percent: f64,
    runs: Vec<BurstRun>,
}

/// The burst's datagrams: `bench.<i>:1|c`, a name the reference daemon
/// takes too (it reads `:` as its multi-value separator).
fn burst_packets(counters: u64) -> Vec<Vec<u8>> {
    (0..counters)
        .map(|i| format!("bench.{i}:1|c").into_bytes())
        .collect()
}

/// Sends `n` datagrams to `to` from one socket as fast as it can, cycling
/// over `packets`; datagrams the kernel took and the seconds it took.
fn send_burst(to: SocketAddr, packets: &[Vec<u8>], n: u64) -> Result<(u64, f64)> {
    let socket = UdpSocket::bind("127.0.0.1:0")?;
    let started = Instant::now();
    let mut sent = 0;
    for p in packets.iter().cycle().take(n as usize) {
        if socket.send_to(p, to).is_ok() {
            sent += 1;
        }
    }
    Ok((sent, started.elapsed().as_secs_f64()))
}

/// Sends probe datagrams until the receiver counts one, then waits for the
/// stragglers: the receiver is listening, and its count before the burst.
fn probe(to: SocketAddr, packet: &[u8], mut count: impl FnMut() -> Result<u64>) -> Result<u64> {
    let socket = UdpSocket::bind("127.0.0.1:0")?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut sent = 0;
    while count()? == 0 {
        ensure!(
            Instant::now() < deadline,
            "{to} received none of {sent} probe datagrams in 20 s"
        );
        socket.send_to(packet, to)?;
        sent += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    settle(count, sent)
}

/// Waits until `count` reaches `target` or has not moved for a second; its
/// last value.
fn settle(mut count: impl FnMut() -> Result<u64>, target: u64) -> Result<u64> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last = count()?;
    let mut since = Instant::now();
    while last < target && since.elapsed() < Duration::from_secs(1) {
        ensure!(
            Instant::now() < deadline,
            "still receiving after 120 s ({last} of {target})"
        );
        std::thread::sleep(Duration::from_millis(50));
        let now = count()?;
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
    Ok(last)
}

/// The kernel's drop counter of the UDP socket bound to `port` on this
/// machine, from `/proc/net/udp`.
fn drops_on_port(port: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/udp").ok()?;
    tally::server::udp::udp_rows(&table)
        .find(|r| r.local_port == port)
        .map(|r| r.drops)
}

fn sysctl(name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/sys/net/core/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

impl BurstRun {
    fn new(
        receiver: String,
        recv_buffer_bytes: Option<u64>,
        (sent, send_seconds): (u64, f64),
        received: u64,
        kernel_drops: Option<u64>,
    ) -> Self {
        let lost = sent.saturating_sub(received);
        BurstRun {
            receiver,
            recv_buffer_bytes,
            datagrams_sent: sent,
            send_seconds,
            datagrams_received: received,
            lost,
            loss_percent: 100.0 * lost as f64 / sent.max(1) as f64,
            kernel_drops,
            received_ratio_to_bare_socket: None,
            received_ratio_to_statsd: None,
            totals_exact: None,
        }
    }
}

/// The burst, sent in turn to a bare socket with tally's default buffer,
/// to `tally serve` on each backend, and to the reference daemon.
async fn burst_runs(
    which: Which,
    redis: Option<&BenchRedis>,
    burst: Burst,
    counters: u64,
) -> Result<BurstReport> {
    let n = burst.datagrams;
    let packets = burst_packets(counters.min(n));
    let names: Vec<String> = (0..counters.min(n)).map(|i| format!("bench.{i}")).collect();
    let requested = burst.recv_buffer;
    let mut runs = Vec::new();

    // The baseline: a bare socket set up exactly as tally's.
    let (socket, buffer) = tally::server::udp::bind("127.0.0.1:0".parse()?, requested)?;
    let bare = BareSocket::start(socket.into_std()?)?;
    let base = probe(bare.addr, &packets[0], || Ok(bare.received()))?;
    let drops_before = drops_on_port(bare.addr.port());
    let sent = send_burst(bare.addr, &packets, n)?;
    let received = settle(|| Ok(bare.received()), base + sent.0)? - base;
    let drops = drops_on_port(bare.addr.port())
        .zip(drops_before)
        .map(|(after, before)| after.saturating_sub(before));
    bare.stop()?;
    runs.push(BurstRun::new(
        "bare socket".into(),
        Some(buffer.effective as u64),
        sent,
        received,
        drops,
    ));
    let bare_received = received;

    for kind in which.kinds() {
        if let Some(r) = redis {
            r.flush().await?;
        }
        let backend = backend_name(kind);
        let port = tally_testkit::free_port();
        let served = Served::start(
            kind,
            redis,
            &[
                "--statsd".into(),
                format!("127.0.0.1:{port}"),
                "--statsd-recv-buffer".into(),
                requested.to_string(),
            ],
        )?;
        let to: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let datagrams = || served.metric("tally_statsd_datagrams_received_total");
        let base = probe(to, &packets[0], datagrams)?;
        let drops_metric = "tally_statsd_kernel_drops_total";
        let drops_before = served
            .metric_if_any(drops_metric)?
            .with_context(|| format!("tally serve's /metrics has no {drops_metric}"))?;
        let sent = send_burst(to, &packets, n)?;
        let received = settle(datagrams, base + sent.0)? - base;
        let drops = served
            .metric_if_any(drops_metric)?
            .unwrap_or(0)
            .saturating_sub(drops_before);
        let lost = sent.0.saturating_sub(received);
        ensure!(
            drops == lost,
            "tally {backend}: {drops_metric} rose by {drops}, but {lost} of {} datagrams were lost",
            sent.0
        );
        let recv_buffer = served.metric_if_any("tally_statsd_receive_buffer_bytes")?;
        served
            .stop_and_check(
                kind,
                redis,
                &names,
                "tally_statsd_lines_accepted_total",
                &format!("statsd burst {backend}"),
            )
            .await?;
        let mut run = BurstRun::new(
            format!("tally {backend}"),
            recv_buffer,
            sent,
            received,
            Some(drops),
        );
        run.received_ratio_to_bare_socket = Some(received as f64 / bare_received.max(1) as f64);
        run.totals_exact = Some(true);
        runs.push(run);
    }

    let daemon = StatsdDaemon::start().map_err(anyhow::Error::msg)?;
    let to: SocketAddr = format!("127.0.0.1:{}", daemon.port).parse()?;
    let received_by_daemon = || daemon.packets_received().map_err(anyhow::Error::msg);
    let base = probe(to, &packets[0], received_by_daemon)?;
    let drops_before = drops_on_port(daemon.port);
    let sent = send_burst(to, &packets, n)?;
    let received = settle(received_by_daemon, base + sent.0)? - base;
    let drops = drops_on_port(daemon.port)
        .zip(drops_before)
        .map(|(after, before)| after.saturating_sub(before));
    let statsd_received = received;
    runs.push(BurstRun::new(
        "statsd".into(),
        sysctl("rmem_default"),
        sent,
        received,
        drops,
    ));
    for run in runs.iter_mut().filter(|r| r.receiver.starts_with("tally")) {
        run.received_ratio_to_statsd =
            Some(run.datagrams_received as f64 / statsd_received.max(1) as f64);
    }
    Ok(BurstReport {
        datagrams: n,
        recv_buffer_requested: requested as u64,
        recv_buffer_forced: buffer.forced,
        rmem_max: sysctl("rmem_max"),
        rmem_default: sysctl("rmem_default"),
        statsd: daemon.describe.clone(),
        target_loss_percent: 1.0,
        runs,
    })
}
