//! `tally bench graphite`: the Graphite render and find API of a real
//! `tally serve`, over HTTP, next to graphite-web 1.1.10 answering the same
//! requests on the same data in the same run.
//!
//! - **Data.** Counters written through the library's write path (a
//!   manual clock at `now`, a whole number of 5-minute slices): `app.host<i>.requests`
//!   (`--series`, 100) for cases (a) to (c), `fleet.host<i>.requests`
//!   (`--many`, 1,000) for (d); the 120 newest slices of every precision
//!   hold a value. graphite-web serves whisper files written from
//!   [`tally::graphite::Source::export`] of the same store (one archive per
//!   precision; every backend's export must be the same), with gunicorn
//!   workers one per core (the test harness's [`GraphiteWeb`]; its
//!   virtual environment is `--graphite-venv`, else one the bench installs
//!   from PyPI with the pinned requirements into its cache directory).
//! - **Cases.** (a) one series, 120 points; (b) `sumSeries` over
//!   `--series` series; (c) `aliasByNode(summarize(app.*.requests, "5min",
//!   "sum"), 1)`; (d) `--many` series of 120 points. Every request is
//!   `GET /graphite/render?target=...&from=-2h&now=<now>&format=json`. Before
//!   timing, both servers' answers must agree (the Graphite tests' rule:
//!   equal, numbers to 1e-9 relative); a function Tally does not list in
//!   `/graphite/functions` fails its case ("function not implemented"),
//!   after the other cases ran.
//! - **Load.** `wrk` twice per case and server: one connection (sequential
//!   requests: the p50 and p99 are a request's time), then `--connections`
//!   connections (requests per second). The server's CPU per request
//!   (`/proc` of `tally serve` and Redis's `INFO cpu`; gunicorn's master and
//!   workers) is reported next to it, being less moved by other load than
//!   wall time, and so is the client's (wrk's CPU from `getrusage`) and
//!   `GET /healthz` on the same server with the same connections: a render
//!   rate well below it, and wrk using less than a core, mean the client
//!   is not what limits.
//! - **Library.** For (b), in the same run and process as the bench, the
//!   same slices read through [`SliceStore::read`] (the 100 series at the
//!   window's precision), then [`Source`]'s `fetch` (listing and read) and
//!   the whole render in process ([`Graphite::render`]): where the time of a
//!   request goes.
//! - **Find.** On an emptied store: `--find-hosts` × `--find-metrics`
//!   counters `app.host<h>.metric<m>` (100,000); `GET
//!   /graphite/metrics/find?query=app.*` and `app.host123.*` sequentially
//!   (one wrk connection), answers checked; on Redis next to a bare redis-rs
//!   pipeline of the range queries a listing by that prefix makes
//!   (`ZRANGEBYLEX registry [prefix (prefix' ` over every registry shard),
//!   with Redis's CPU per request.
//!
//! The targets (issue 18) are evaluated in the report: render requests per
//! second ≥ 20× graphite-web's for each case; (b) within 3× the library
//! read; find p50 ≤ 2 ms and p99 within 3× the bare pipeline's.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use serde::Serialize;
use serde_json::Value as Json;
use tally::Clock;
use tally::engine::{Batch, CellDelta, SeriesWrite, Value};
use tally::engine::{SliceRead, SliceSel, SliceStore};
use tally::graphite::{DEFAULT_QUANTILES, Namespace, Source};
use tally::{BackendConfig, ManualClock, Name, Tally};
use tally_graphite::Store as _;
use tally_graphite::{Fetch, Glob, Graphite, Limits};
use tally_testkit::{GraphiteWeb, GraphiteWebOptions, WhisperData, WhisperSeries};

use crate::serve::{Load, Served, WrkRun, run_wrk};
use crate::server::{BenchRedis, Kind, Which, machine, quantile};

/// The window every render reads: two hours back from `now`, which whisper
/// (and Tally) read from the 60 s precision: 120 points.
const FROM: &str = "-2h";
/// Its precision.
const STEP: u64 = 60;
/// Slices written per precision: what every precision keeps by default.
const SLICES: u64 = 120;

/// `tally bench graphite`'s options.
#[derive(clap::Args, Debug, Clone)]
pub struct GraphiteArgs {
    /// Backends to run on.
    #[arg(long, value_enum, default_value = "both")]
    pub backend: Which,
    /// The render cases to run: a (one series), b (sumSeries), c
    /// (aliasByNode over summarize), d (many series).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "a,b,c,d")]
    pub cases: Vec<Case>,
    /// Seconds of load per wrk run.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// wrk's connections in the throughput runs.
    #[arg(long, default_value_t = 8)]
    pub connections: u32,
    /// Series of cases (b) and (c).
    #[arg(long, default_value_t = 100)]
    pub series: usize,
    /// Series of case (d).
    #[arg(long, default_value_t = 1000)]
    pub many: usize,
    /// Timed reads through the library, and bare find pipelines.
    #[arg(long, default_value_t = 500)]
    pub iterations: usize,
    /// Hosts of the find registry (`app.host<h>.metric<m>`).
    #[arg(long, default_value_t = 1000)]
    pub find_hosts: usize,
    /// Metrics per host of the find registry.
    #[arg(long, default_value_t = 100)]
    pub find_metrics: usize,
    /// Skip the find measurements.
    #[arg(long)]
    pub no_find: bool,
    /// gunicorn workers of graphite-web [default: one per core].
    #[arg(long)]
    pub workers: Option<usize>,
    /// A virtual environment holding graphite-web 1.1.10 as pinned in
    /// scripts/requirements-graphite.txt [default: one the bench installs
    /// from PyPI into ~/.cache/tally-bench/graphite-venv].
    #[arg(long, env = "TALLY_GRAPHITE_VENV", value_name = "DIR")]
    pub graphite_venv: Option<PathBuf>,
}

/// A render case.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Case {
    A,
    B,
    C,
    D,
}

impl Case {
    fn target(self) -> &'static str {
        match self {
            Case::A => "app.host0.requests",
            Case::B => "sumSeries(app.*.requests)",
            Case::C => "aliasByNode(summarize(app.*.requests,\"5min\",\"sum\"),1)",
            Case::D => "fleet.*.requests",
        }
    }

    /// The functions the target calls.
    fn functions(self) -> &'static [&'static str] {
        match self {
            Case::A | Case::D => &[],
            Case::B => &["sumSeries"],
            Case::C => &["aliasByNode", "summarize"],
        }
    }

    fn describe(self, args: &GraphiteArgs) -> String {
        match self {
            Case::A => format!("(a) one series, {SLICES} points"),
            Case::B => format!("(b) sumSeries over {} series", args.series),
            Case::C => format!(
                "(c) aliasByNode(summarize(5min, sum), 1) over {} series",
                args.series
            ),
            Case::D => format!("(d) {} series, {SLICES} points each", args.many),
        }
    }
}

/// One server's figures for one request.
#[derive(Debug, Serialize)]
pub struct Figures {
    /// Seconds of each of the two runs: `--seconds`, or 20 requests' time
    /// when that is longer.
    pub seconds: f64,
    /// wrk with one connection: a request's time.
    pub p50_us: u64,
    pub p99_us: u64,
    pub sequential_requests: u64,
    /// wrk with `--connections` connections.
    pub requests_per_second: f64,
    pub requests: u64,
    /// The server's CPU (milliseconds) per request in the throughput run:
    /// `tally serve` plus Redis, or gunicorn's master and workers.
    pub server_cpu_ms_per_request: f64,
    /// Cores the server and wrk used during the throughput run.
    pub server_cores: f64,
    pub client_cores: f64,
}

/// One backend's figures for one case.
#[derive(Debug, Serialize)]
pub struct TallyFigures {
    pub backend: Kind,
    #[serde(flatten)]
    pub figures: Figures,
    /// Requests per second ÷ graphite-web's, and graphite-web's time ÷
    /// Tally's at the p50 and in CPU per request.
    pub rps_ratio: f64,
    pub p50_ratio: f64,
    pub cpu_ratio: f64,
    /// The issue's target: `rps_ratio` ≥ 20.
    pub target_met: bool,
}

/// One render case.
#[derive(Debug, Serialize)]
pub struct RenderCase {
    pub case: Case,
    pub what: String,
    pub target: String,
    /// Series and points in the answer.
    pub series: usize,
    pub points: usize,
    pub answer_bytes: usize,
    /// Set when the case could not run (then no figures).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graphite_web: Option<Figures>,
    pub tally: Vec<TallyFigures>,
}

/// Case (b) next to the library, per backend (sequential, in process).
#[derive(Debug, Serialize)]
pub struct LibraryRead {
    pub backend: Kind,
    pub series: usize,
    pub iterations: usize,
    /// `SliceStore::read` of the same series at the window's precision.
    pub read_p50_us: f64,
    pub read_p99_us: f64,
    /// `Source::fetch` of the pattern: the listing and the same read.
    pub fetch_p50_us: f64,
    pub fetch_p99_us: f64,
    /// `Graphite::render` of the request in process: fetch, sumSeries, JSON.
    pub render_p50_us: f64,
    pub render_p99_us: f64,
    /// Tally's HTTP p50 (one connection) ÷ the read's p50.
    pub http_p50_ratio_to_read: f64,
    /// The issue's target: within 3×.
    pub target_met: bool,
}

/// `GET /healthz` on the same server with the throughput run's connections.
#[derive(Debug, Serialize)]
pub struct Healthz {
    pub backend: Kind,
    pub requests_per_second: f64,
    pub client_cores: f64,
}

/// One find query on one backend.
#[derive(Debug, Serialize)]
pub struct FindRun {
    pub backend: Kind,
    pub query: String,
    pub nodes: usize,
    pub requests: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// Redis only: the server's side and the bare pipeline.
    #[serde(flatten)]
    pub redis: Option<FindOnRedis>,
    /// The issue's targets: p50 ≤ 2 ms, and (Redis) p99 within 3× the bare
    /// pipeline's.
    pub p50_target_met: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_target_met: Option<bool>,
}

/// A find on Redis: the server's side, and the bare pipeline next to it.
#[derive(Debug, Serialize)]
pub struct FindOnRedis {
    /// CPU inside Redis per find (`INFO cpu`).
    pub redis_cpu_us_per_find: f64,
    /// The bare pipeline of the listing's range queries over every registry
    /// shard, its names, and its figures.
    pub bare: BarePipeline,
    /// p99 ÷ the bare pipeline's.
    pub p99_ratio_to_bare: f64,
}

/// The bare `ZRANGEBYLEX` pipeline.
#[derive(Debug, Serialize)]
pub struct BarePipeline {
    pub shards: usize,
    pub names: usize,
    pub iterations: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub redis_cpu_us_per_pipeline: f64,
}

/// The bench's result.
#[derive(Debug, Serialize)]
pub struct Report {
    pub bench: &'static str,
    pub machine: serde_json::Value,
    pub graphite_web: String,
    pub workers: usize,
    pub now: i64,
    pub seconds: f64,
    pub connections: u32,
    pub renders: Vec<RenderCase>,
    pub healthz: Vec<Healthz>,
    pub library: Vec<LibraryRead>,
    pub find_names: usize,
    pub finds: Vec<FindRun>,
}

impl Report {
    /// Fails when a case could not run (after the report is printed).
    pub fn check(&self) -> Result<()> {
        let failed: Vec<String> = self
            .renders
            .iter()
            .filter_map(|c| c.failed.as_ref().map(|f| format!("{}: {f}", c.what)))
            .collect();
        ensure!(failed.is_empty(), "{}", failed.join("; "));
        Ok(())
    }
}

/// The wrk script: one GET of `TALLY_BENCH_PATH` ([`run_wrk`] adds the JSON
/// summary at the end).
const WRK_SCRIPT: &str = r#"
local path = os.getenv("TALLY_BENCH_PATH")
request = function()
  return wrk.format("GET", path)
end
"#;

/// The counters of the render cases.
fn render_names(args: &GraphiteArgs) -> Vec<String> {
    let app = (0..args.series).map(|i| format!("app.host{i}.requests"));
    let fleet = (0..args.many).map(|i| format!("fleet.host{i}.requests"));
    app.chain(fleet).collect()
}

/// The value of slice `slice` of precision `p` of the `i`th counter: small,
/// and not the same in every slice or series.
fn value(i: usize, p: u64, slice: u64) -> i64 {
    1 + ((slice / p + i as u64) % 7) as i64
}

/// Writes the 120 newest slices of every precision at `now` for each of
/// `names` (the `i`th with [`value`]`(i, ..)`), 100 counters per call.
async fn write_render_data(tally: &Tally, names: &[String], now: u64) -> Result<()> {
    let counters = tally.counters();
    let precisions = counters.settings().precisions.clone();
    let store = counters.store().clone();
    let mut indexed: Vec<(usize, &String)> = names.iter().enumerate().collect();
    indexed.sort_by(|a, b| a.1.cmp(b.1));
    for chunk in indexed.chunks(100) {
        let writes = chunk
            .iter()
            .map(|&(i, name)| {
                let deltas = precisions
                    .iter()
                    .flat_map(|&p| {
                        let current = now / p * p;
                        (0..SLICES).rev().map(move |k| CellDelta {
                            precision: p,
                            slice: current - k * p,
                            delta: Value::Sum(value(i, p, current - k * p)),
                        })
                    })
                    .collect();
                Ok(SeriesWrite {
                    name: Name::new(name.as_str())?,
                    cells: deltas,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        store
            .apply(&Batch {
                space: counters.space().clone(),
                writes,
                seq: None,
            })
            .await?;
    }
    Ok(())
}

/// One slice at precision 60 for each of `names`, 1,000 counters per call,
/// 4 calls at once: enough for the registry.
async fn write_find_names(tally: &Tally, names: &[String], now: u64) -> Result<()> {
    let counters = tally.counters();
    let deltas = [CellDelta {
        precision: STEP,
        slice: now / STEP * STEP,
        delta: Value::Sum(1),
    }];
    crate::server::write_deltas(&counters, names, &deltas, 1000, 4).await
}

/// A backend opened by the bench at `now`: its Tally (manual clock), and
/// the directory `tally serve` opens for SQLite.
struct Store {
    kind: Kind,
    tally: Tally,
    dir: Option<tempfile::TempDir>,
}

impl Store {
    async fn open(kind: Kind, redis: Option<&BenchRedis>, now: i64) -> Result<Self> {
        let (config, dir) = match kind {
            Kind::Redis => (
                BackendConfig::Redis {
                    url: redis.context("a Redis run needs the bench's server")?.url(),
                    layout: Default::default(),
                },
                None,
            ),
            Kind::Sqlite => {
                let dir = tempfile::Builder::new()
                    .prefix("tally-bench-graphite-")
                    .tempdir()?;
                (BackendConfig::SqliteDir(dir.path().to_owned()), Some(dir))
            }
        };
        let tally = Tally::builder()
            .clock(Arc::new(ManualClock::at(now as f64)))
            .open_backend(config)
            .await?;
        Ok(Store { kind, tally, dir })
    }

    fn source(&self) -> Source {
        self.tally
            .graphite_source(Namespace::Tally, &DEFAULT_QUANTILES)
    }

    fn serve(&self, redis: Option<&BenchRedis>) -> Result<Served> {
        Served::start_in(self.kind, redis, self.dir.as_ref().map(|d| d.path()), &[])
    }
}

/// The whisper files of an export.
fn whisper(export: &[tally::graphite::Exported]) -> WhisperData {
    export
        .iter()
        .map(|leaf| WhisperSeries::exported(leaf.path.clone(), &leaf.archives, leaf.points.clone()))
        .collect()
}

/// The virtual environment to run graphite-web from: the one given, else
/// the bench's own in its cache directory (installed when missing).
fn venv(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(v) = given {
        return Ok(v.to_owned());
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .context("no XDG_CACHE_HOME or HOME for the bench's cache directory")?;
    let venv = cache.join("tally-bench").join("graphite-venv");
    tally_testkit::install_graphite_venv(&venv).map_err(anyhow::Error::msg)?;
    Ok(venv)
}

/// The render request of `target` at `now`.
fn render_path(target: &str, now: i64) -> String {
    format!(
        "/graphite/render?target={}&from={FROM}&now={now}&format=json",
        encode(target)
    )
}

/// Percent-encodes everything but unreserved characters.
fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One GET; the status and body.
fn get(addr: SocketAddr, path: &str) -> Result<(u16, Vec<u8>)> {
    let r = tally_testkit::http::request(addr, "GET", path, &[], &[])
        .with_context(|| format!("GET {path} on {addr}"))?;
    Ok((r.status, r.body))
}

/// The functions a Graphite server lists in `/functions`.
fn functions(addr: SocketAddr) -> Result<BTreeSet<String>> {
    let (status, body) = get(addr, "/graphite/functions")?;
    ensure!(status == 200, "/graphite/functions answered {status}");
    // An infinite default is written `1e9999` (graphite-web's replacement
    // for Infinity), which serde_json refuses as out of range; only the
    // names are needed here.
    let text = String::from_utf8_lossy(&body).replace("1e9999", "null");
    let json: Json = serde_json::from_str(&text).context("/graphite/functions")?;
    Ok(json
        .as_object()
        .context("/graphite/functions is no object")?
        .keys()
        .cloned()
        .collect())
}

/// Tally's and graphite-web's JSON agree: equal, but numbers to 1e-9
/// relative (absolute for zeros). The first difference, if any.
fn differs(at: &str, a: &Json, b: &Json) -> Option<String> {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            let (x, y) = (x.as_f64()?, y.as_f64()?);
            let close = if y == 0.0 {
                x.abs() <= 1e-9
            } else {
                ((x - y) / y).abs() <= 1e-9
            };
            (!close).then(|| format!("{at}: {x} where graphite-web has {y}"))
        }
        (Json::Array(xs), Json::Array(ys)) => {
            if xs.len() != ys.len() {
                return Some(format!(
                    "{at}: {} items where graphite-web has {}",
                    xs.len(),
                    ys.len()
                ));
            }
            xs.iter()
                .zip(ys)
                .enumerate()
                .find_map(|(i, (x, y))| differs(&format!("{at}[{i}]"), x, y))
        }
        (Json::Object(xs), Json::Object(ys)) => {
            let (kx, ky): (Vec<_>, Vec<_>) = (xs.keys().collect(), ys.keys().collect());
            let (mut sx, mut sy) = (kx.clone(), ky.clone());
            sx.sort();
            sy.sort();
            if sx != sy {
                return Some(format!("{at}: keys {kx:?} where graphite-web has {ky:?}"));
            }
            xs.iter()
                .find_map(|(k, x)| differs(&format!("{at}.{k}"), x, &ys[k]))
        }
        _ => (a != b).then(|| format!("{at}: {a} where graphite-web has {b}")),
    }
}

/// CPU seconds (user + system) of a process, from `/proc/<pid>/stat`.
fn process_cpu(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The fields after the command name (which may hold spaces).
    let Some((_, rest)) = stat.rsplit_once(") ") else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here; in
    // USER_HZ (100 on Linux).
    (ticks(11) + ticks(12)) / 100.0
}

/// A process and its children's CPU seconds (gunicorn's master and workers).
fn tree_cpu(pid: u32) -> f64 {
    let mut total = process_cpu(pid);
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let parent = std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(") ")
                        .and_then(|(_, r)| r.split_whitespace().nth(1).map(str::to_owned))
                })
                .and_then(|p| p.parse::<u32>().ok());
            if parent == Some(pid) {
                total += process_cpu(child);
            }
        }
    }
    total
}

/// CPU seconds of this process's waited-for children (wrk, once it exits).
fn children_cpu() -> f64 {
    crate::pace::rusage_seconds(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
}

/// Where a server's CPU is read.
enum Cpu<'a> {
    /// `tally serve`, plus Redis when it is the backend.
    Tally(u32, Option<&'a BenchRedis>),
    /// gunicorn's master and its workers.
    Tree(u32),
}

impl Cpu<'_> {
    async fn seconds(&self) -> Result<f64> {
        Ok(match self {
            Cpu::Tally(pid, redis) => {
                let redis = match redis {
                    Some(r) => r.cpu_seconds().await?,
                    None => 0.0,
                };
                process_cpu(*pid) + redis
            }
            Cpu::Tree(pid) => tree_cpu(*pid),
        })
    }
}

/// wrk against `addr` + `path` with `load`; the run and the client's CPU seconds.
fn wrk(addr: SocketAddr, path: &str, load: Load) -> Result<(WrkRun, f64)> {
    let before = children_cpu();
    let run = run_wrk(
        WRK_SCRIPT,
        &format!("http://{addr}{path}"),
        load,
        &[("TALLY_BENCH_PATH", path.to_owned())],
    )?;
    ensure!(
        run.non_2xx == 0 && run.socket_errors == 0 && run.requests > 0,
        "wrk on {path}: {} requests, {} non-2xx answers, {} socket errors",
        run.requests,
        run.non_2xx,
        run.socket_errors
    );
    Ok((run, children_cpu() - before))
}

/// A request's figures on one server: a sequential run, then a loaded one.
async fn measure(
    addr: SocketAddr,
    path: &str,
    cpu: &Cpu<'_>,
    args: &GraphiteArgs,
) -> Result<Figures> {
    // Long enough for 20 requests one after the other (graphite-web takes
    // seconds over 1,000 series), at most 10 minutes.
    let started = Instant::now();
    let (status, _) = get(addr, path)?;
    ensure!(status == 200, "{path} answered {status}");
    let seconds = args
        .seconds
        .max(20.0 * started.elapsed().as_secs_f64())
        .min(600.0);
    let one = Load {
        threads: 1,
        connections: 1,
        seconds,
        timeout_seconds: Some(300),
    };
    let (sequential, _) = wrk(addr, path, one)?;
    let many = Load {
        threads: 2,
        connections: args.connections,
        seconds,
        timeout_seconds: Some(300),
    };
    let cpu_before = cpu.seconds().await?;
    let (loaded, client) = wrk(addr, path, many)?;
    let server = cpu.seconds().await? - cpu_before;
    let wall = loaded.duration_us as f64 / 1e6;
    Ok(Figures {
        seconds,
        p50_us: sequential.p50_us,
        p99_us: sequential.p99_us,
        sequential_requests: sequential.requests,
        requests_per_second: loaded.per_second(),
        requests: loaded.requests,
        server_cpu_ms_per_request: server * 1e3 / loaded.requests as f64,
        server_cores: server / wall,
        client_cores: client / wall,
    })
}

/// Times `iterations` sequential calls of `f` after a tenth as many
/// warm-up calls; (p50, p99) in microseconds.
async fn time<F, Fut, T>(iterations: usize, mut f: F) -> Result<(f64, f64)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    for _ in 0..iterations.div_ceil(10) {
        f().await?;
    }
    let mut us = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let started = Instant::now();
        std::hint::black_box(f().await?);
        us.push(started.elapsed().as_secs_f64() * 1e6);
    }
    us.sort_by(f64::total_cmp);
    Ok((quantile(&us, 0.5), quantile(&us, 0.99)))
}

/// Series and points of a render answer.
fn shape(json: &Json) -> (usize, usize) {
    let series = json.as_array().map_or(0, Vec::len);
    let points = json
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["datapoints"].as_array().map_or(0, Vec::len))
        .sum();
    (series, points)
}

pub async fn run(args: GraphiteArgs) -> Result<Report> {
    ensure!(
        args.series >= 1 && args.many >= 1 && args.iterations >= 1,
        "--series, --many and --iterations must be at least 1"
    );
    ensure!(
        !args.cases.contains(&Case::A) || args.series >= 1,
        "case (a) reads app.host0.requests"
    );
    let venv = venv(args.graphite_venv.as_deref())?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = args.workers.unwrap_or(cores).max(1);
    let real_now = tally::SystemClock.now().whole_secs() as i64;
    // Whole 5-minute slices: 120 points at 60 s, summarize's buckets whole.
    let now = real_now / 300 * 300;
    let kinds = args.backend.kinds();
    let redis = kinds.contains(&Kind::Redis).then(BenchRedis::start);

    // The data, on every backend; one export for graphite-web.
    let names = render_names(&args);
    let mut stores = Vec::new();
    for &kind in &kinds {
        let store = Store::open(kind, redis.as_ref(), now).await?;
        write_render_data(&store.tally, &names, now as u64).await?;
        stores.push(store);
    }
    let export = stores[0].source().export(now).await?;
    for other in &stores[1..] {
        ensure!(
            other.source().export(now).await? == export,
            "{:?} holds other slices than {:?}",
            other.kind,
            stores[0].kind
        );
    }
    let data = whisper(&export);
    let graphite = tokio::task::spawn_blocking(move || {
        GraphiteWeb::try_start_with(
            &data,
            GraphiteWebOptions {
                workers,
                venv: Some(venv),
                ..Default::default()
            },
        )
    })
    .await?
    .map_err(anyhow::Error::msg)?;
    let graphite_cpu = Cpu::Tree(graphite.pid().context("graphite-web's pid")?);
    let served: Vec<Served> = stores
        .iter()
        .map(|s| s.serve(redis.as_ref()))
        .collect::<Result<_>>()?;
    let tally_functions = match served.first() {
        Some(s) => functions(s.addr())?,
        None => BTreeSet::new(),
    };

    let mut renders = Vec::new();
    for &case in &args.cases {
        let path = render_path(case.target(), now);
        let mut out = RenderCase {
            case,
            what: case.describe(&args),
            target: case.target().to_owned(),
            series: 0,
            points: 0,
            answer_bytes: 0,
            failed: None,
            graphite_web: None,
            tally: Vec::new(),
        };
        let missing: Vec<&str> = case
            .functions()
            .iter()
            .copied()
            .filter(|f| !tally_functions.contains(*f))
            .collect();
        if !missing.is_empty() {
            out.failed = Some(format!(
                "function not implemented: {} (not in Tally's /graphite/functions)",
                missing.join(", ")
            ));
            renders.push(out);
            continue;
        }
        // Both answer, and alike, before anything is timed.
        let (status, theirs) = get(graphite.addr(), &path)?;
        ensure!(
            status == 200,
            "graphite-web answered {status} to {path}: {}",
            String::from_utf8_lossy(&theirs)
        );
        let theirs: Json = serde_json::from_slice(&theirs).with_context(|| {
            format!(
                "graphite-web's answer to {path}: {}",
                String::from_utf8_lossy(&theirs)
            )
        })?;
        (out.series, out.points) = shape(&theirs);
        ensure!(out.series > 0, "graphite-web found no series for {path}");
        for (store, server) in stores.iter().zip(&served) {
            let (status, ours) = get(server.addr(), &path)?;
            ensure!(
                status == 200,
                "Tally ({:?}) answered {status} to {path}: {}",
                store.kind,
                String::from_utf8_lossy(&ours)
            );
            out.answer_bytes = ours.len();
            let ours: Json = serde_json::from_slice(&ours).with_context(|| {
                format!(
                    "Tally's ({:?}) answer to {path}: {}",
                    store.kind,
                    String::from_utf8_lossy(&ours)
                )
            })?;
            if let Some(d) = differs("answer", &ours, &theirs) {
                bail!(
                    "Tally ({:?}) and graphite-web answer {path} differently: {d}",
                    store.kind
                );
            }
        }
        let g = measure(graphite.addr(), &path, &graphite_cpu, &args).await?;
        for (store, server) in stores.iter().zip(&served) {
            let redis = (store.kind == Kind::Redis)
                .then_some(redis.as_ref())
                .flatten();
            let cpu = Cpu::Tally(server.pid(), redis);
            let t = measure(server.addr(), &path, &cpu, &args).await?;
            let rps_ratio = t.requests_per_second / g.requests_per_second;
            out.tally.push(TallyFigures {
                backend: store.kind,
                rps_ratio,
                p50_ratio: g.p50_us as f64 / t.p50_us.max(1) as f64,
                cpu_ratio: g.server_cpu_ms_per_request / t.server_cpu_ms_per_request,
                target_met: rps_ratio >= 20.0,
                figures: t,
            });
        }
        out.graphite_web = Some(g);
        renders.push(out);
    }

    // The client's ceiling: /healthz on each server, the same load.
    let mut healthz = Vec::new();
    for (store, server) in stores.iter().zip(&served) {
        let load = Load {
            threads: 2,
            connections: args.connections,
            seconds: args.seconds,
            timeout_seconds: None,
        };
        let (run, client) = wrk(server.addr(), "/healthz", load)?;
        healthz.push(Healthz {
            backend: store.kind,
            requests_per_second: run.per_second(),
            client_cores: client / (run.duration_us as f64 / 1e6),
        });
    }

    // (b) through the library, in this process.
    let mut library = Vec::new();
    if let Some(b) = renders
        .iter()
        .find(|c| c.case == Case::B && c.failed.is_none())
    {
        for store in &stores {
            let http_p50 = b
                .tally
                .iter()
                .find(|t| t.backend == store.kind)
                .map_or(0, |t| t.figures.p50_us);
            library.push(library_read(store, &args, now, http_p50).await?);
        }
    }
    drop(served);
    drop(graphite);

    let mut finds = Vec::new();
    let find_names = if args.no_find {
        0
    } else {
        args.find_hosts * args.find_metrics
    };
    if !args.no_find {
        drop(stores);
        if let Some(r) = &redis {
            r.flush().await?;
        }
        for &kind in &kinds {
            finds.extend(find_runs(kind, redis.as_ref(), &args, now).await?);
        }
    }

    Ok(Report {
        bench: "graphite",
        machine: machine(),
        graphite_web: "graphite-web 1.1.10 (gunicorn, sync workers)".into(),
        workers,
        now,
        seconds: args.seconds,
        connections: args.connections,
        renders,
        healthz,
        library,
        find_names,
        finds,
    })
}

/// Case (b) through the library on `store`.
async fn library_read(
    store: &Store,
    args: &GraphiteArgs,
    now: i64,
    http_p50_us: u64,
) -> Result<LibraryRead> {
    let tally = &store.tally;
    let counters = tally.counters();
    let space = counters.space().clone();
    let slices: Arc<dyn SliceStore> = tally.backend().slice_store(tally.clock().clone()).await?;
    let archives = tally::graphite::archives(&space);
    let from = now - 7200;
    let window = tally_graphite::window(&archives, from, now, now).context("no window")?;
    ensure!(
        window.step == STEP as i64,
        "the window is at {} s, not {STEP} s",
        window.step
    );
    let names: Vec<Name> = (0..args.series)
        .map(|i| Name::new(format!("app.host{i}.requests")))
        .collect::<tally::Result<_>>()?;
    let sel = SliceSel::Range {
        from: window.start as u64,
        to: window.end as u64 - 1,
    };
    let got = slices
        .read(SliceRead::new(&space, &names, &[STEP]).slices(sel))
        .await?;
    let read_slices: usize = got.iter().map(|per| per[0].len()).sum();
    ensure!(
        read_slices == args.series * SLICES as usize,
        "the library read {read_slices} slices of {} series, not {} each",
        args.series,
        SLICES
    );
    let (read_p50, read_p99) = time(args.iterations, || {
        let slices = slices.clone();
        let (space, names) = (&space, &names);
        async move {
            Ok(slices
                .read(SliceRead::new(space, names, &[STEP]).slices(sel))
                .await?)
        }
    })
    .await?;
    let source = store.source();
    let glob = Glob::parse("app.*.requests")?;
    let (fetch_p50, fetch_p99) = time(args.iterations, || {
        let (source, glob) = (&source, &glob);
        async move {
            let got = source
                .fetch(Fetch {
                    patterns: std::slice::from_ref(glob),
                    from,
                    until: now,
                    now,
                    max_series: 100_000,
                })
                .await?;
            Ok(got)
        }
    })
    .await?;
    let graphite = Graphite::new();
    let limits = Limits {
        max_series: 100_000,
        max_points: 100_000_000,
        max_find: 100_000,
    };
    let params: Vec<(String, String)> = vec![
        ("target".into(), Case::B.target().into()),
        ("from".into(), FROM.into()),
        ("now".into(), now.to_string()),
        ("format".into(), "json".into()),
    ];
    let (render_p50, render_p99) = time(args.iterations, || {
        let (graphite, source, params, limits) = (&graphite, &source, &params, &limits);
        async move {
            let answer = graphite.render(source, params, now, limits).await;
            ensure!(answer.status == 200, "in-process render: {}", answer.status);
            Ok(answer.body.len())
        }
    })
    .await?;
    let ratio = http_p50_us as f64 / read_p50;
    Ok(LibraryRead {
        backend: store.kind,
        series: args.series,
        iterations: args.iterations,
        read_p50_us: read_p50,
        read_p99_us: read_p99,
        fetch_p50_us: fetch_p50,
        fetch_p99_us: fetch_p99,
        render_p50_us: render_p50,
        render_p99_us: render_p99,
        http_p50_ratio_to_read: ratio,
        target_met: ratio <= 3.0,
    })
}

/// The find queries on `kind`, on a registry of its own.
async fn find_runs(
    kind: Kind,
    redis: Option<&BenchRedis>,
    args: &GraphiteArgs,
    now: i64,
) -> Result<Vec<FindRun>> {
    let store = Store::open(kind, redis, now).await?;
    let names: Vec<String> = (0..args.find_hosts)
        .flat_map(|h| (0..args.find_metrics).map(move |m| format!("app.host{h}.metric{m}")))
        .collect();
    write_find_names(&store.tally, &names, now as u64).await?;
    let server = store.serve(redis)?;
    let probe_host = 123.min(args.find_hosts - 1);
    let queries = [
        (
            "app.*".to_owned(),
            "app.".to_owned(),
            (0..args.find_hosts)
                .map(|h| format!("app.host{h}"))
                .collect::<BTreeSet<_>>(),
        ),
        (
            format!("app.host{probe_host}.*"),
            format!("app.host{probe_host}."),
            (0..args.find_metrics)
                .map(|m| format!("app.host{probe_host}.metric{m}"))
                .collect(),
        ),
    ];
    let mut runs = Vec::new();
    for (query, prefix, expected) in queries {
        let path = format!("/graphite/metrics/find?query={}", encode(&query));
        let (status, body) = get(server.addr(), &path)?;
        ensure!(
            status == 200,
            "find {query} answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
        let json: Json = serde_json::from_slice(&body)?;
        let ids: BTreeSet<String> = json
            .as_array()
            .context("find answered no list")?
            .iter()
            .filter_map(|n| n["id"].as_str().map(str::to_owned))
            .collect();
        ensure!(
            ids == expected,
            "find {query} answered {} nodes, not the {} expected",
            ids.len(),
            expected.len()
        );
        let cpu_before = match redis {
            Some(r) if kind == Kind::Redis => Some(r.cpu_seconds().await?),
            _ => None,
        };
        let one = Load {
            threads: 1,
            connections: 1,
            seconds: args.seconds,
            timeout_seconds: Some(300),
        };
        let (run, _) = wrk(server.addr(), &path, one)?;
        let on_redis = match (redis, cpu_before) {
            (Some(r), Some(before)) => {
                let cpu_us = (r.cpu_seconds().await? - before) * 1e6 / run.requests as f64;
                let bare = bare_pipeline(r, &prefix, args.iterations).await?;
                ensure!(
                    bare.names == names.iter().filter(|n| n.starts_with(&prefix)).count(),
                    "the bare pipeline listed {} names under {prefix}",
                    bare.names
                );
                Some(FindOnRedis {
                    redis_cpu_us_per_find: cpu_us,
                    p99_ratio_to_bare: run.p99_us as f64 / bare.p99_us,
                    bare,
                })
            }
            _ => None,
        };
        runs.push(FindRun {
            backend: kind,
            query: query.clone(),
            nodes: ids.len(),
            requests: run.requests,
            p50_us: run.p50_us,
            p99_us: run.p99_us,
            p99_target_met: on_redis.as_ref().map(|x| x.p99_ratio_to_bare <= 3.0),
            redis: on_redis,
            p50_target_met: run.p50_us <= 2000,
        });
    }
    server.stop()?;
    Ok(runs)
}

/// `ZRANGEBYLEX <registry> [prefix (prefix'` over every registry shard of
/// the counters (default layout), in one pipeline from a bare redis-rs
/// connection, `iterations` times in a row.
async fn bare_pipeline(
    redis: &BenchRedis,
    prefix: &str,
    iterations: usize,
) -> Result<BarePipeline> {
    use tally::backend::redis::layout::{DEFAULT_PREFIX, SHARDS, default_registry};
    let upper = tally::name::prefix_upper(prefix).context("a prefix with an upper bound")?;
    let mut pipe = redis::pipe();
    for shard in 0..SHARDS {
        pipe.cmd("ZRANGEBYLEX")
            .arg(default_registry(DEFAULT_PREFIX, shard))
            .arg(format!("[{prefix}"))
            .arg(format!("({upper}"));
    }
    let mut conn = redis.raw().await?;
    let first: Vec<Vec<String>> = pipe.query_async(&mut conn).await?;
    // Timed: received and parsed, not decoded into strings.
    let names = first.iter().map(Vec::len).sum();
    let before = redis.cpu_seconds().await?;
    let (p50, p99) = time(iterations, || {
        let (pipe, mut conn) = (&pipe, conn.clone());
        async move {
            let got: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
            Ok(got)
        }
    })
    .await?;
    let cpu = redis.cpu_seconds().await? - before;
    Ok(BarePipeline {
        shards: SHARDS as usize,
        names,
        iterations,
        p50_us: p50,
        p99_us: p99,
        redis_cpu_us_per_pipeline: cpu * 1e6 / (iterations + iterations.div_ceil(10)) as f64,
    })
}
