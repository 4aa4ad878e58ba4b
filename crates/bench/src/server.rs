//! What every bench shares: a `redis-server` of its own, `redis-benchmark`
//! against it, the backend under test, and the totals check.
//!
//! Benches start their own server through the test harness (on a free
//! loopback port, killed when the bench ends), so nothing else writes to it
//! and the same-run baseline (`redis-benchmark`) hits the very same process.
//! A bench on the embedded store gets a fresh SQLite file in a temporary
//! directory per run. Nothing here measures anything by itself.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use tally::backend::redis::Layout;
use tally::engine::{Batch, CellDelta, SeriesWrite, Space, Value};
use tally::{Backend, BackendConfig, Clock, CounterSettings, Counters};
use tally_testkit::{RedisOptions, RedisServer, require_binary};

/// Which backends a bench runs on.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Which {
    /// A redis-server started by the bench.
    Redis,
    /// The embedded SQLite store, in a temporary directory.
    Sqlite,
    /// Both, Redis first.
    Both,
}

impl Which {
    /// The backends to run, in order.
    pub fn kinds(self) -> Vec<Kind> {
        match self {
            Which::Redis => vec![Kind::Redis],
            Which::Sqlite => vec![Kind::Sqlite],
            Which::Both => vec![Kind::Redis, Kind::Sqlite],
        }
    }
}

/// One backend under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Redis,
    Sqlite,
}

/// A redis-server for one bench, killed on drop.
pub struct BenchRedis {
    server: RedisServer,
}

impl BenchRedis {
    /// Starts a non-persistent server on a free port (as the tests do).
    pub fn start() -> Self {
        BenchRedis {
            // DEBUG HTSTATS tells `used_memory` when the keyspace's tables
            // have finished rehashing.
            server: RedisServer::start_with(RedisOptions {
                args: vec![("enable-debug-command".into(), "local".into())],
                ..RedisOptions::default()
            }),
        }
    }

    /// Its `redis://` URL.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.server.port()
    }

    /// A plain client connection (for baselines, FLUSHALL and INFO), with
    /// the library's response timeout (redis-rs's default, 500 ms, is too
    /// short for a FLUSHALL of a million keys).
    pub async fn raw(&self) -> Result<redis::aio::MultiplexedConnection> {
        let config = redis::AsyncConnectionConfig::new()
            .set_response_timeout(Some(tally::backend::redis::RESPONSE_TIMEOUT));
        Ok(redis::Client::open(self.url())?
            .get_multiplexed_async_connection_with_config(&config)
            .await?)
    }

    /// CPU seconds the server has used so far (user + system, from `INFO
    /// cpu`): differences of it are the server's work, which other load on
    /// the machine inflates much less than wall time.
    pub async fn cpu_seconds(&self) -> Result<f64> {
        let mut conn = self.raw().await?;
        Ok(info_now(&mut conn).await?.cpu_seconds)
    }

    /// Empties the server between runs and waits for the memory to be freed.
    pub async fn flush(&self) -> Result<()> {
        let mut conn = self.raw().await?;
        let () = redis::cmd("FLUSHALL")
            .arg("SYNC")
            .query_async(&mut conn)
            .await?;
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// `redis-benchmark` pipelined HINCRBY on this server: `clients`
    /// connections, `pipeline` commands per round trip, `requests` in all,
    /// over 1,000 small hashes (listpacks, as counter hashes are). Returns
    /// operations per second.
    pub fn hincrby_ops(&self, requests: u64, clients: u32, pipeline: u32) -> Result<f64> {
        let binary = require_binary(
            "redis-benchmark",
            &["/usr/bin"],
            "Install it with `sudo apt-get install redis-tools`",
        );
        let out = Command::new(binary)
            .args(["-h", "127.0.0.1", "-p", &self.port().to_string()])
            .args(["-c", &clients.to_string(), "-P", &pipeline.to_string()])
            .args(["-n", &requests.to_string(), "-r", "1000", "--csv"])
            .args(["hincrby", "bench:{__rand_int__}", "60", "1"])
            .output()
            .context("run redis-benchmark")?;
        ensure!(
            out.status.success(),
            "redis-benchmark failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        parse_rps(&String::from_utf8_lossy(&out.stdout))
    }
}

/// What one `INFO cpu stats` says.
#[derive(Clone, Copy, Debug)]
pub struct InfoNow {
    /// `used_cpu_user` + `used_cpu_sys`.
    pub cpu_seconds: f64,
    /// `expired_keys`: keys Redis has expired since it started.
    pub expired_keys: u64,
}

/// One `INFO cpu stats` on `conn` (a connection kept open, so that polling
/// does not open connections).
pub async fn info_now(conn: &mut redis::aio::MultiplexedConnection) -> Result<InfoNow> {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .arg("stats")
        .query_async(conn)
        .await?;
    let field = |name: &str| -> Result<f64> {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .with_context(|| format!("INFO has no {name}"))
    };
    Ok(InfoNow {
        cpu_seconds: field("used_cpu_user:")? + field("used_cpu_sys:")?,
        expired_keys: field("expired_keys:")? as u64,
    })
}

/// The requests per second from `redis-benchmark --csv` output.
pub fn parse_rps(csv: &str) -> Result<f64> {
    for line in csv.lines() {
        let fields: Vec<&str> = line.split("\",\"").collect();
        if fields.len() >= 2 && !line.starts_with("\"test\"") {
            return fields[1]
                .trim_matches('"')
                .parse()
                .with_context(|| format!("redis-benchmark printed {line:?}"));
        }
    }
    bail!("redis-benchmark printed no result: {csv:?}")
}

/// A backend opened for one run: Redis (on the bench's server) or a fresh
/// SQLite file. Drop it to close (and delete) the SQLite file.
pub struct Opened {
    pub backend: Backend,
    _dir: Option<tempfile::TempDir>,
}

impl Opened {
    /// Opens `kind`: on `redis` (which must be given for Redis) or a new
    /// SQLite file in a temporary directory.
    pub async fn open(kind: Kind, redis: Option<&BenchRedis>) -> Result<Self> {
        Self::open_in(kind, redis, Layout::default()).await
    }

    /// [`Opened::open`], Redis in `layout`.
    pub async fn open_in(kind: Kind, redis: Option<&BenchRedis>, layout: Layout) -> Result<Self> {
        match kind {
            Kind::Redis => {
                let server = redis.context("a Redis run needs the bench's server")?;
                Ok(Opened {
                    backend: Backend::open(&BackendConfig::Redis {
                        url: server.url(),
                        layout,
                    })
                    .await?,
                    _dir: None,
                })
            }
            Kind::Sqlite => {
                let dir = tempfile::Builder::new()
                    .prefix("tally-bench-")
                    .tempdir()
                    .context("temporary directory for the SQLite store")?;
                let path: PathBuf = dir.path().to_owned();
                Ok(Opened {
                    backend: Backend::open(&BackendConfig::SqliteDir(path)).await?,
                    _dir: Some(dir),
                })
            }
        }
    }

    /// The SQLite store in `dir`, left by another process (not deleted).
    pub async fn open_existing(dir: &std::path::Path) -> Result<Self> {
        Ok(Opened {
            backend: Backend::open(&BackendConfig::SqliteDir(dir.to_owned())).await?,
            _dir: None,
        })
    }

    /// Counters on this backend with `settings`, on `clock`.
    pub async fn counters(
        &self,
        settings: &CounterSettings,
        clock: Arc<dyn Clock>,
    ) -> Result<Counters> {
        let store = self.backend.counter_store(clock.clone()).await?;
        Ok(Counters::with_clock(store, settings.clone(), clock)?)
    }
}

/// Which slices [`fill`] writes per precision `p`, with `current` the start
/// of the slice holding now: `recent` slices `current, current - p, ...`,
/// and `old` slices just past the cleaner's cutoff for `samples` kept
/// (`current - (samples + 1) p, ...`), which a pass at now removes.
#[derive(Clone, Copy, Debug)]
pub struct Slices {
    pub recent: u64,
    pub old: u64,
    pub samples: u64,
}

impl Slices {
    /// The slice starts written at precision `p` when the slice holding now
    /// starts at `current`, oldest first.
    pub fn of(self, p: u64, current: u64) -> impl Iterator<Item = u64> {
        let old = (1..=self.old)
            .rev()
            .filter_map(move |j| current.checked_sub((self.samples + j) * p));
        let recent = (0..self.recent)
            .rev()
            .filter_map(move |k| current.checked_sub(k * p));
        old.chain(recent)
    }
}

/// The count [`fill`] writes into the slice starting at `slice` of
/// precision `p`: small, and not the same in every slice.
pub fn fill_count(p: u64, slice: u64) -> i64 {
    1 + (slice / p % 5) as i64
}

/// Writes, through the store's real write path, the `slices` of every
/// precision for each of `names`, with small counts ([`fill_count`]).
/// Sends `per_call` counters per call, `concurrency` calls at once.
/// Returns the samples written.
pub async fn fill(
    counters: &Counters,
    names: &[String],
    slices: Slices,
    now: u64,
    per_call: usize,
    concurrency: usize,
) -> Result<u64> {
    let precisions = counters.settings().precisions.clone();
    let deltas: Vec<CellDelta> = precisions
        .iter()
        .flat_map(|&p| {
            let current = now / p * p;
            slices.of(p, current).map(move |slice| CellDelta {
                precision: p,
                slice,
                delta: Value::Sum(fill_count(p, slice)),
            })
        })
        .collect();
    write_deltas(counters, names, &deltas, per_call, concurrency).await?;
    Ok(names.len() as u64 * precisions.len() as u64 * (slices.recent + slices.old))
}

/// Writes the same `deltas` (ordered by precision, then slice) to each of
/// `names` through the store's write path, `per_call` counters per call,
/// `concurrency` calls at once.
pub async fn write_deltas(
    counters: &Counters,
    names: &[String],
    deltas: &[CellDelta],
    per_call: usize,
    concurrency: usize,
) -> Result<()> {
    use futures::StreamExt;
    let store = counters.store().clone();
    // The counters' space over the precisions the deltas write.
    let mut precisions: Vec<u64> = deltas.iter().map(|d| d.precision).collect();
    precisions.sort_unstable();
    precisions.dedup();
    let space = Arc::new(Space::counters(&precisions, counters.settings().samples));
    let results: Vec<Result<()>> = futures::stream::iter(names.chunks(per_call.max(1)))
        .map(|chunk| {
            let (store, space) = (store.clone(), space.clone());
            let mut chunk: Vec<&String> = chunk.iter().collect();
            chunk.sort_unstable();
            let counters = chunk
                .into_iter()
                .map(|name| {
                    Ok(SeriesWrite {
                        name: tally::Name::new(name.as_str())?,
                        cells: deltas.to_vec(),
                    })
                })
                .collect::<Result<Vec<_>>>();
            async move {
                let batch = Batch {
                    space,
                    writes: counters?,
                    seq: None,
                };
                store.apply(&batch).await?;
                Ok(())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    results.into_iter().collect()
}

/// Adds 1 to each of `names` now (by the counters' clock), at every
/// precision, through [`Counters::incr_many`]: `per_call` counters per
/// call, `concurrency` calls at once.
pub async fn incr_each(
    counters: &Counters,
    names: &[String],
    per_call: usize,
    concurrency: usize,
) -> Result<()> {
    use futures::StreamExt;
    let results: Vec<Result<()>> = futures::stream::iter(names.chunks(per_call.max(1)))
        .map(|chunk| async move {
            let increments: Vec<tally::Increment> = chunk
                .iter()
                .map(|name| tally::Increment::new(name.as_str(), 1))
                .collect();
            Ok(counters.incr_many(&increments).await?)
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    results.into_iter().collect()
}

/// The hash of `name` at precision `p` in a layout with a hash per
/// precision (`None` in the expiring layout, which keeps a hash per chunk,
/// and the compact layout, whose one hash per series holds every precision).
pub fn hash_key(layout: &Layout, p: u64, name: &str) -> Result<Option<String>> {
    Ok(match layout {
        Layout::Ria => Some(tally::backend::redis::layout::ria_hash(p, name)),
        Layout::Default { prefix } => Some(tally::backend::redis::layout::default_hash(
            prefix,
            p,
            &tally::Name::new(name)?,
        )),
        Layout::Expiring { .. } | Layout::Compact { .. } => None,
    })
}

/// Sums every stored sample of `names`, per precision, reading 1,000
/// counters per call; used to check that what is stored is what was sent.
pub async fn stored_totals(counters: &Counters, names: &[String]) -> Result<Vec<i64>> {
    let precisions = counters.settings().precisions.len();
    let mut totals = vec![0i64; precisions];
    for chunk in names.chunks(1000) {
        for per in counters.get_many(chunk, None).await? {
            for (j, series) in per.iter().enumerate() {
                totals[j] += series.samples.iter().map(|s| s.count).sum::<i64>();
            }
        }
    }
    Ok(totals)
}

/// Fails unless every precision holds exactly `sent`.
pub fn check_totals(what: &str, totals: &[i64], sent: u64) -> Result<()> {
    for (j, &t) in totals.iter().enumerate() {
        ensure!(
            t == sent as i64,
            "{what}: precision #{j} holds {t} but {sent} increments were acknowledged"
        );
    }
    Ok(())
}

/// The `q`-quantile (0..=1) of sorted `values`, by nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// A short description of this machine: CPUs, memory, kernel, redis-server
/// version, for the JSON of every bench.
pub fn machine() -> serde_json::Value {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_default();
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| (kb / 1048576.0 * 10.0).round() / 10.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let redis = Command::new("redis-server")
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    serde_json::json!({ "cpus": cpus, "cpu": model, "memory_gib": mem_gib, "kernel": kernel, "redis": redis })
}

/// The first second after `after` that starts a chunk of the expiring
/// layout at every precision (a chunk holds `samples` slices).
pub fn common_chunk_start(precisions: &[u64], samples: u64, after: u64) -> u64 {
    let common = precisions.iter().fold(1, |a, &p| lcm(a, p * samples));
    (after / common + 1) * common
}

pub(crate) fn lcm(a: u64, b: u64) -> u64 {
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    a / gcd(a, b) * b
}

/// Reads every series of every `step`-th of `names` and checks that each
/// holds `samples` samples; `err(name, precision, held)` says what is wrong
/// otherwise. Returns the series checked.
pub async fn check_samples(
    counters: &Counters,
    names: &[String],
    step: usize,
    samples: u64,
    err: impl Fn(&str, u64, usize) -> String,
) -> Result<u64> {
    let mut checked = 0;
    for name in names.iter().step_by(step.max(1)) {
        for series in counters.get_all(name).await? {
            ensure!(
                series.samples.len() as u64 == samples,
                "{}",
                err(name, series.precision, series.samples.len())
            );
            checked += 1;
        }
    }
    Ok(checked)
}

/// The memory of every key in db 0 of the server at `url`, by Redis's own
/// account of each (`MEMORY USAGE <key> SAMPLES 0`: its name, its value
/// with every element, and its entry in the keyspace). Unlike a growth of
/// `used_memory`, it leaves out the clients' buffers, which a fill's large
/// commands grow and Redis shrinks only after 2 s idle (80 KiB of query
/// buffer right after the busy statistic's fill), and the script cache.
pub async fn keys_memory(url: &str) -> Result<i64> {
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let mut cursor = 0u64;
    let mut bytes = 0i64;
    loop {
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await?;
        for key in keys {
            let usage: Option<i64> = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(&key)
                .arg("SAMPLES")
                .arg(0)
                .query_async(&mut conn)
                .await?;
            bytes += usage.unwrap_or(0);
        }
        if next == 0 {
            return Ok(bytes);
        }
        cursor = next;
    }
}

/// `used_memory` from INFO memory of the server at `url`, once db 0's key
/// tables are not rehashing. A table that has just grown keeps its old
/// buckets until Redis's cron has moved them (a few ms); read in between,
/// `used_memory` counts both tables: 1 MiB more at 131,072 keys, which is
/// how the memory rows once moved by 0.6 to 2 % with the order of a fill's
/// commands. A server that refuses `DEBUG` (`enable-debug-command no`, as an
/// outside `--redis` may) is read at once.
pub async fn used_memory(url: &str) -> Result<i64> {
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stats: redis::RedisResult<String> = redis::cmd("DEBUG")
            .arg("HTSTATS")
            .arg(0)
            .query_async(&mut conn)
            .await;
        match stats {
            Ok(stats) if stats.contains("rehashing target") => {
                ensure!(
                    Instant::now() < deadline,
                    "db 0 was still rehashing after 60 s"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            _ => break,
        }
    }
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await?;
    for line in info.lines() {
        if let Some(v) = line.strip_prefix("used_memory:") {
            return Ok(v.trim().parse()?);
        }
    }
    bail!("INFO memory has no used_memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_redis_benchmark_csv() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\"\n\"hincrby bench:{__rand_int__} 60 1\",\"1353179.88\",\"2.175\"\n";
        assert_eq!(parse_rps(csv).unwrap(), 1353179.88);
        assert!(parse_rps("").is_err());
    }

    #[test]
    fn old_slices_are_past_the_cutoff_and_recent_ones_are_kept() {
        let s = Slices {
            recent: 2,
            old: 2,
            samples: 120,
        };
        let now = 1_700_000_000u64;
        let current = now / 60 * 60;
        let got: Vec<u64> = s.of(60, current).collect();
        assert_eq!(
            got,
            vec![
                current - 122 * 60,
                current - 121 * 60,
                current - 60,
                current
            ]
        );
        let cutoff = now as i64 - 120 * 60;
        assert_eq!(got.iter().filter(|&&x| x as i64 <= cutoff).count(), 2);
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v, 1.0), 100.0);
        assert_eq!(quantile(&[3.0], 0.99), 3.0);
    }
}

/// One command's calls and server microseconds (`INFO commandstats`).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct CommandCost {
    pub calls: u64,
    pub usec: f64,
}

/// Resets the server's `INFO commandstats`.
pub(crate) async fn reset_command_stats(
    conn: &mut redis::aio::MultiplexedConnection,
) -> Result<()> {
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await?;
    Ok(())
}

/// Calls and server microseconds per command since the last reset.
pub(crate) async fn command_stats(
    conn: &mut redis::aio::MultiplexedConnection,
) -> Result<BTreeMap<String, CommandCost>> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    let mut out = BTreeMap::new();
    for line in info.lines() {
        let Some((command, fields)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let field = |name: &str| {
            fields
                .split(',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse::<f64>().ok())
        };
        if let (Some(calls), Some(usec)) = (field("calls"), field("usec")) {
            out.insert(
                command.to_owned(),
                CommandCost {
                    calls: calls as u64,
                    usec,
                },
            );
        }
    }
    Ok(out)
}
