//! `tally bench carbon`: carbon lines per second from one TCP connection
//! into `tally serve --carbon`, next to the rate at which the same lines go
//! through the library's gauge writer in the same run.
//!
//! The lines: `--names` gauges (`bench.carbon.<k>`), each set once per
//! round, a round `--interval` seconds after the one before (a fleet
//! reporting every interval, as collectd and Telegraf do), `--lines` in
//! all; line `i` sets its gauge to `i`, so the last value of each gauge is
//! known. Per backend (a `redis-server` the bench starts, default layout;
//! a fresh SQLite directory):
//! - the writer: the same points handed to the gauges' aggregating writer
//!   (`GaugesWriter::take`, waiting for room as `tally serve`'s does, with
//!   `tally serve`'s settings), in this process, in a task of its runtime
//!   as a connection's lines are, each as a `GaugeOp` made from its name,
//!   value and time: lines per second until the last is taken;
//! - carbon: `tally serve --carbon` on the same backend, the lines written
//!   to one TCP connection as fast as it takes them: lines per second from
//!   the first byte sent until `/metrics` counts them all accepted.
//!
//! Both write to the store while they take lines (the writer's flushes run
//! alongside); after each, the store is read: every gauge's current value
//! must be its last line's, and no line may have been refused. The two
//! measures alternate `--repeat` times, each on a fresh store, and the best
//! of each is reported (every repetition's time is in the JSON): on a
//! shared machine the best is the least disturbed.

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use serde::Serialize;
use tally::counters::{WhenFull, WriterSettings};
use tally::gauges::{GaugeOp, GaugesWriter};
use tally::{BackendConfig, Tally};

use crate::serve::{Served, backend_name};
use crate::server::{BenchRedis, Kind, Which, machine};

/// The lines per second a carbon listener is expected to take.
pub const TARGET_LINES_PER_SECOND: f64 = 200_000.0;

/// The fraction of the writer's rate it is expected to reach.
pub const TARGET_RATIO_TO_WRITER: f64 = 0.8;

/// The flags of `tally bench carbon`.
#[derive(clap::Args, Debug, Clone)]
pub struct CarbonArgs {
    /// Backends to run on.
    #[arg(long, value_enum, default_value = "both")]
    pub backend: Which,
    /// Lines sent (a whole number of rounds over the gauges).
    #[arg(long, default_value_t = 2_000_000)]
    pub lines: u64,
    /// Distinct gauges.
    #[arg(long, default_value_t = 10_000)]
    pub names: u64,
    /// Seconds between two points of a gauge.
    #[arg(long, default_value_t = 10)]
    pub interval: u64,
    /// Repetitions of both measures, alternately; the best of each is
    /// reported (the machine is shared: the best is the least disturbed).
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
}

/// One backend's runs: the best of each measure.
#[derive(Debug, Serialize)]
pub struct CarbonRun {
    backend: &'static str,
    /// Lines through the writer per second, in this process.
    writer_lines_per_second: f64,
    writer_seconds: f64,
    /// Lines through `tally serve --carbon` per second, from one TCP
    /// connection.
    carbon_lines_per_second: f64,
    carbon_seconds: f64,
    /// Redis: the server's CPU seconds while the writer took the lines, and
    /// while `tally serve` did (where the store's share of the time shows).
    #[serde(skip_serializing_if = "Option::is_none")]
    writer_redis_cpu_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    carbon_redis_cpu_seconds: Option<f64>,
    /// `carbon_lines_per_second / writer_lines_per_second`.
    ratio_to_writer: f64,
    /// The writer's flushes in its best run (the whole run, its final
    /// flush included), and the lines each took on average.
    writer_flushes: u64,
    writer_lines_per_flush: f64,
    /// The seconds of every repetition (the best are above).
    writer_runs_seconds: Vec<f64>,
    carbon_runs_seconds: Vec<f64>,
    /// Every gauge read back with its last line's value, both ways, and no
    /// line refused.
    gauges_exact: bool,
    /// Both targets met.
    met: bool,
}

/// `tally bench carbon`.
#[derive(Debug, Serialize)]
pub struct CarbonReport {
    bench: &'static str,
    machine: serde_json::Value,
    lines: u64,
    names: u64,
    interval_seconds: u64,
    repeat: u32,
    bytes: u64,
    target_lines_per_second: f64,
    target_ratio_to_writer: f64,
    runs: Vec<CarbonRun>,
}

impl CarbonReport {
    /// The report in words: the lines, then per backend both rates, their
    /// ratio and whether the targets are met.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "{} lines over {} gauges, a round every {} s ({} bytes), best of {}; targets \
             {:.0} lines/s and {:.2} of the writer",
            self.lines,
            self.names,
            self.interval_seconds,
            self.bytes,
            self.repeat,
            self.target_lines_per_second,
            self.target_ratio_to_writer
        );
        for r in &self.runs {
            let cpu = match (r.carbon_redis_cpu_seconds, r.writer_redis_cpu_seconds) {
                (Some(c), Some(w)) => format!(" (Redis CPU {c:.2} s and {w:.2} s)"),
                _ => String::new(),
            };
            out.push_str(&format!(
                "\n{:<6}: carbon {:>9.0} lines/s ({:.2} s), writer {:>9.0} lines/s ({:.2} s): \
                 x{:.2} of the writer{cpu}; gauges exact; {}",
                r.backend,
                r.carbon_lines_per_second,
                r.carbon_seconds,
                r.writer_lines_per_second,
                r.writer_seconds,
                r.ratio_to_writer,
                if r.met {
                    "targets met"
                } else {
                    "target MISSED"
                }
            ));
        }
        out
    }
}

/// The lines of a run, as text and as points.
struct Lines {
    names: Vec<String>,
    /// (gauge, value, time) of each line.
    points: Vec<(u32, f64, f64)>,
    text: Arc<Vec<u8>>,
}

impl Lines {
    fn new(lines: u64, names: u64, interval: u64) -> Self {
        let rounds = lines / names;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        // The last round a little before now.
        let first = now - interval * rounds;
        let names_text: Vec<String> = (0..names).map(|k| format!("bench.carbon.{k}")).collect();
        let mut points = Vec::with_capacity(lines as usize);
        let mut text = Vec::with_capacity(lines as usize * 32);
        for i in 0..rounds * names {
            let (round, k) = (i / names, i % names);
            let at = (first + interval * round) as f64;
            points.push((k as u32, i as f64, at));
            writeln!(text, "{} {i} {at}", names_text[k as usize]).expect("write to a Vec");
        }
        Lines {
            names: names_text,
            points,
            text: Arc::new(text),
        }
    }

    /// The last value sent to gauge `k`.
    fn last(&self, k: usize) -> f64 {
        let names = self.names.len();
        (self.points.len() - names + k) as f64
    }
}

/// `tally serve`'s writer settings (its default flush interval, waiting
/// when full).
fn serve_settings() -> WriterSettings {
    WriterSettings {
        flush_interval: Duration::from_millis(200),
        when_full: WhenFull::Wait,
        ..WriterSettings::default()
    }
}

pub async fn run(args: CarbonArgs) -> Result<CarbonReport> {
    ensure!(
        args.names >= 1 && args.lines >= args.names && args.interval >= 1 && args.repeat >= 1,
        "--names, --interval and --repeat at least 1, --lines at least --names"
    );
    ensure!(
        args.names <= u64::from(u32::MAX) && args.lines <= 1 << 40,
        "--names or --lines too large"
    );
    let lines = Arc::new(Lines::new(args.lines, args.names, args.interval));
    let sent = lines.points.len() as u64;
    let redis = args
        .backend
        .kinds()
        .contains(&Kind::Redis)
        .then(BenchRedis::start);
    let mut runs = Vec::new();
    for kind in args.backend.kinds() {
        let backend = backend_name(kind);
        let (mut writer, mut carbon) = (Vec::new(), Vec::new());
        // Alternately, so that both see the same load on a shared machine.
        for _ in 0..args.repeat {
            writer.push(writer_once(kind, redis.as_ref(), &lines).await?);
            carbon.push(carbon_once(kind, redis.as_ref(), &lines).await?);
        }
        let best = |timed: &[Timed]| {
            *timed
                .iter()
                .min_by(|a, b| a.seconds.total_cmp(&b.seconds))
                .expect("at least one repetition")
        };
        let (w, c) = (best(&writer), best(&carbon));
        let writer_rate = sent as f64 / w.seconds;
        let carbon_rate = sent as f64 / c.seconds;
        let ratio = carbon_rate / writer_rate;
        runs.push(CarbonRun {
            backend,
            writer_lines_per_second: writer_rate,
            writer_seconds: w.seconds,
            carbon_lines_per_second: carbon_rate,
            carbon_seconds: c.seconds,
            writer_redis_cpu_seconds: w.redis_cpu_seconds,
            carbon_redis_cpu_seconds: c.redis_cpu_seconds,
            ratio_to_writer: ratio,
            writer_flushes: w.flushes.map_or(0, |f| f.0),
            writer_lines_per_flush: w.flushes.map_or(0.0, |f| f.1),
            writer_runs_seconds: writer.iter().map(|t| t.seconds).collect(),
            carbon_runs_seconds: carbon.iter().map(|t| t.seconds).collect(),
            gauges_exact: true,
            met: carbon_rate >= TARGET_LINES_PER_SECOND && ratio >= TARGET_RATIO_TO_WRITER,
        });
    }
    Ok(CarbonReport {
        bench: "carbon",
        machine: machine(),
        lines: sent,
        names: args.names,
        interval_seconds: args.interval,
        repeat: args.repeat,
        bytes: lines.text.len() as u64,
        target_lines_per_second: TARGET_LINES_PER_SECOND,
        target_ratio_to_writer: TARGET_RATIO_TO_WRITER,
        runs,
    })
}

/// One timed repetition.
#[derive(Clone, Copy, Debug)]
struct Timed {
    seconds: f64,
    /// Redis's CPU seconds meanwhile (Redis runs).
    redis_cpu_seconds: Option<f64>,
    /// The writer's flushes that wrote something, and the entries each took
    /// on average (the writer's own run; `tally serve` does not show its
    /// gauges' writer).
    flushes: Option<(u64, f64)>,
}

/// The lines through the writer, in this process, on a fresh store; every
/// gauge checked afterwards.
async fn writer_once(kind: Kind, redis: Option<&BenchRedis>, lines: &Arc<Lines>) -> Result<Timed> {
    let backend = backend_name(kind);
    let on_redis = redis.filter(|_| kind == Kind::Redis);
    let (config, dir) = fresh(kind, redis).await?;
    let tally = Tally::builder()
        .writer_settings(serve_settings())
        .open_backend(config)
        .await?;
    let cpu_before = redis_cpu(on_redis).await?;
    // In a task of the runtime, as a connection's lines are.
    let seconds = tokio::spawn({
        let (writer, lines) = (tally.gauges_writer(), lines.clone());
        async move { take_all(&writer, &lines).await }
    })
    .await??;
    let redis_cpu_seconds = delta(cpu_before, redis_cpu(on_redis).await?);
    tally.shutdown().await;
    let stats = tally.gauges_writer().stats();
    check_gauges(&tally, lines, &format!("writer {backend}")).await?;
    drop((tally, dir));
    Ok(Timed {
        seconds,
        redis_cpu_seconds,
        flushes: Some((
            stats.flushes,
            lines.points.len() as f64 / stats.flushes.max(1) as f64,
        )),
    })
}

/// The lines through `tally serve --carbon` from one TCP connection, on a
/// fresh store; no line refused, every gauge checked after SIGTERM.
async fn carbon_once(kind: Kind, redis: Option<&BenchRedis>, lines: &Arc<Lines>) -> Result<Timed> {
    let backend = backend_name(kind);
    let on_redis = redis.filter(|_| kind == Kind::Redis);
    let sent = lines.points.len() as u64;
    let (config, _) = fresh(kind, redis).await?;
    let port = tally_testkit::free_port();
    let served = Served::start(
        kind,
        redis,
        &["--carbon".into(), format!("127.0.0.1:{port}")],
    )?;
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .with_context(|| format!("connect to carbon on port {port}"))?;
    let text = lines.text.clone();
    let cpu_before = redis_cpu(on_redis).await?;
    let started = Instant::now();
    let sender = std::thread::spawn(move || -> std::io::Result<()> {
        stream.write_all(&text)?;
        stream.shutdown(std::net::Shutdown::Write)
    });
    let deadline = started + Duration::from_secs(600);
    loop {
        let accepted = served.metric("tally_carbon_lines_accepted_total")?;
        if accepted >= sent {
            break;
        }
        let refused = refused(&served)?;
        ensure!(
            refused == 0,
            "carbon {backend}: {refused} lines refused: {}",
            served.metrics_text()?
        );
        ensure!(
            Instant::now() < deadline,
            "carbon {backend}: {accepted} of {sent} lines accepted after 10 minutes"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let seconds = started.elapsed().as_secs_f64();
    let redis_cpu_seconds = delta(cpu_before, redis_cpu(on_redis).await?);
    sender
        .join()
        .map_err(|_| anyhow::anyhow!("the sending thread panicked"))??;
    ensure!(
        refused(&served)? == 0 && served.metric("tally_carbon_lines_accepted_total")? == sent,
        "carbon {backend}: not every line was accepted once: {}",
        served.metrics_text()?
    );
    let dir = served.stop()?;
    let config = match (&dir, config) {
        (Some(d), BackendConfig::SqliteDir(_)) => BackendConfig::SqliteDir(d.path().to_owned()),
        (_, config) => config,
    };
    let tally = Tally::builder().open_backend(config).await?;
    check_gauges(&tally, lines, &format!("carbon {backend}")).await?;
    Ok(Timed {
        seconds,
        redis_cpu_seconds,
        flushes: None,
    })
}

/// A fresh store of `kind`: the bench's Redis emptied, or a new SQLite
/// directory (deleted when the handle is dropped).
async fn fresh(
    kind: Kind,
    redis: Option<&BenchRedis>,
) -> Result<(BackendConfig, Option<tempfile::TempDir>)> {
    match kind {
        Kind::Redis => {
            let redis = redis.context("a Redis run needs the bench's server")?;
            redis.flush().await?;
            Ok((
                BackendConfig::Redis {
                    url: redis.url(),
                    layout: Default::default(),
                },
                None,
            ))
        }
        Kind::Sqlite => {
            let dir = tempfile::Builder::new()
                .prefix("tally-bench-carbon-")
                .tempdir()?;
            Ok((BackendConfig::SqliteDir(dir.path().to_owned()), Some(dir)))
        }
    }
}

/// The Redis server's CPU seconds so far, on a Redis run.
async fn redis_cpu(redis: Option<&BenchRedis>) -> Result<Option<f64>> {
    match redis {
        Some(r) => Ok(Some(r.cpu_seconds().await?)),
        None => Ok(None),
    }
}

fn delta(before: Option<f64>, after: Option<f64>) -> Option<f64> {
    Some(after? - before?)
}

/// Hands every point to `writer` as a gauge set; the seconds it took.
async fn take_all(writer: &GaugesWriter, lines: &Lines) -> Result<f64> {
    let started = Instant::now();
    for &(k, value, at) in &lines.points {
        writer
            .take(&GaugeOp::set(lines.names[k as usize].as_str(), value).at(at))
            .await?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Lines `tally serve` refused so far, every reason.
fn refused(served: &Served) -> Result<u64> {
    Ok(served
        .metrics_text()?
        .lines()
        .filter(|l| l.starts_with("tally_carbon_lines_rejected_total{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum())
}

/// Checks that every gauge reads its last line's value.
async fn check_gauges(tally: &Tally, lines: &Lines, what: &str) -> Result<()> {
    let gauges = tally.gauges();
    for (k, name) in lines.names.iter().enumerate() {
        let current = gauges.current(name).await?;
        ensure!(
            current == Some(lines.last(k)),
            "{what}: gauge {name} reads {current:?}, its last line set {}",
            lines.last(k)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_rounds_over_the_gauges() {
        let l = Lines::new(7, 3, 10);
        assert_eq!(l.points.len(), 6);
        let text = String::from_utf8(l.text.to_vec()).unwrap();
        let first: Vec<&str> = text.lines().collect();
        assert_eq!(first.len(), 6);
        assert!(first[0].starts_with("bench.carbon.0 0 "), "{text}");
        assert!(first[4].starts_with("bench.carbon.1 4 "), "{text}");
        assert_eq!(l.points[4].2 - l.points[1].2, 10.0);
        assert_eq!((l.last(0), l.last(2)), (3.0, 5.0));
    }
}
