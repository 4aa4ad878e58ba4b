//! `tally bench stats`: statistics on a redis-server started here.
//!
//! - Ingest over 1 and 1,000 hot stats: exact (`Stats::record_many` from
//!   `writers` tasks, `batch` observations per call) and aggregated
//!   (`StatsWriter::record` from `adders` tasks, timed until the final flush
//!   is acknowledged), next to the book's `update_stats` (`book_update_stats`)
//!   measured in the same run on the same server. Every run starts on an
//!   empty server and ends with a check that every precision of every stat
//!   counts exactly the observations acknowledged.
//! - Quantile error: `quantile_values` seeded lognormal values recorded into
//!   one slice, p50/p90/p99 read back, compared to the exact nearest-rank
//!   quantiles of the same values.
//! - Memory and read latency of one busy stat at steady state: every
//!   retained slice of every precision written (through the store's write
//!   path) with what 1,000 lognormal observations a second (sigma 0.5 in
//!   log space) leave in it, then the memory of its keys and the latency of
//!   reading every precision, one at a time and all at once.
//!
//! Values are lognormal (median 100, sigma 0.5 in log space) from a seeded
//! generator, drawn before the clock starts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tally::backend::redis::Layout;
use tally::counters::WriterSettings;
use tally::engine::kinds::StatsValue;
use tally::engine::{Batch, CellDelta, SeriesWrite, Space, Value};
use tally::stats::{DEFAULT_QUANTILES, Observation};
use tally::{Clock, Stats, StatsSettings, StatsWriter, SystemClock};
use tally_testkit::normal_cdf;

use crate::bare::stat_write_commands;
use crate::ingest::{LoadArgs, check_sizes, finish};
use crate::pace::{ROUND, Timed, another_round, go_on};
use crate::server::{BenchRedis, Kind, Opened, keys_memory, quantile};

/// ln 100: a median of 100 (e.g. milliseconds).
const MU: f64 = 4.605_170_185_988_091;
/// The spread: sigma 0.5 in log space.
const SIGMA: f64 = 0.5;
/// Observations a second of the busy stat.
const BUSY_RATE: f64 = 1000.0;

/// The bench's parameters.
#[derive(clap::Args, Clone, Debug)]
#[command(mut_args(load_help))]
pub struct StatsArgs {
    /// Hot stats, one ingest run per size and mode.
    #[arg(long, value_delimiter = ',', default_value = "1,1000")]
    pub stats: Vec<u64>,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Values recorded for the quantile error.
    #[arg(long, default_value_t = 100_000)]
    pub quantile_values: usize,
    /// Timed reads per precision of the busy stat.
    #[arg(long, default_value_t = 200)]
    pub iterations: usize,
    /// Sketch accuracies at which the busy stat's memory and the quantile
    /// error are measured again (how they scale with the setting).
    #[arg(long, value_delimiter = ',', default_value = "0.005,0.01,0.02")]
    pub accuracies: Vec<f64>,
}

/// This bench's help of the [`LoadArgs`] it words for its observations.
const LOAD_HELP: [(&str, &str); 4] = [
    (
        "seconds",
        "Seconds of writing per ingest run (and of the book's algorithm)",
    ),
    ("writers", "Concurrent callers of the exact mode"),
    ("batch", "Observations per exact call"),
    ("adders", "Tasks recording through the aggregating writer"),
];

/// Gives `arg` its help of [`LOAD_HELP`], if it has one there. In place
/// (`mut_args`): `mut_arg` would move the argument to the end of the
/// completion scripts.
fn load_help(arg: clap::Arg) -> clap::Arg {
    match LOAD_HELP.iter().find(|(id, _)| arg.get_id() == *id) {
        Some(&(_, help)) => arg.help(help),
        None => arg,
    }
}

/// One ingest run.
#[derive(Debug, serde::Serialize)]
pub struct Run {
    /// `book`, `bare`, `exact` or `aggregated`.
    pub mode: &'static str,
    pub stats: u64,
    pub observations: u64,
    pub seconds: f64,
    pub per_second: f64,
    /// The stored counts were checked against what was acknowledged (for
    /// `bare`, which merges nothing: every statistic it wrote is
    /// registered).
    pub counts_exact: bool,
    /// `per_second` ÷ the book's algorithm over the same stats.
    pub ratio_to_book: f64,
    /// `exact`: `per_second` ÷ the bare client's (the design's commands
    /// with no Lua: [`crate::bare::stat_write_commands`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_bare: Option<f64>,
    /// The server's CPU microseconds per observation.
    pub redis_cpu_us_per_observation: f64,
}

/// One quantile's error.
#[derive(Debug, serde::Serialize)]
pub struct QuantileError {
    pub q: f64,
    pub exact: f64,
    pub reported: f64,
    pub relative_error: f64,
}

/// Read latency of one precision (or of all, `precision` 0).
#[derive(Debug, serde::Serialize)]
pub struct ReadLatency {
    pub precision: u64,
    pub slices: usize,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// The busy stat at steady state.
#[derive(Debug, serde::Serialize)]
pub struct Busy {
    pub observations_per_second: f64,
    pub slices: u64,
    pub observations_held: u64,
    pub bytes: i64,
    pub kib: f64,
    pub target_kib: f64,
    pub reads: Vec<ReadLatency>,
}

/// The busy stat's memory and the quantile error at one sketch accuracy.
#[derive(Debug, serde::Serialize)]
pub struct AtAccuracy {
    pub accuracy: f64,
    pub bytes: i64,
    pub kib: f64,
    pub max_relative_error: f64,
}

/// The bench's result.
#[derive(Debug, serde::Serialize)]
pub struct StatsBench {
    pub bench: &'static str,
    pub machine: serde_json::Value,
    pub precisions: Vec<u64>,
    pub seconds: f64,
    pub writers: usize,
    pub batch: usize,
    pub adders: usize,
    pub book_connections: usize,
    pub runs: Vec<Run>,
    pub quantile_values: usize,
    pub quantile_errors: Vec<QuantileError>,
    pub max_relative_error: f64,
    pub accuracy: f64,
    pub busy: Busy,
    pub by_accuracy: Vec<AtAccuracy>,
}

pub async fn run(args: StatsArgs) -> Result<StatsBench> {
    ensure!(
        args.load.seconds > 0.0
            && args.load.writers > 0
            && args.load.adders > 0
            && args.load.book_connections > 0
            && args.iterations > 0
            && args.quantile_values > 0,
        "seconds, writers, adders, book connections, iterations and quantile values must be positive"
    );
    args.load.check_batch(tally::stats::MAX_BATCH)?;
    check_sizes("--stats", &args.stats)?;
    let mut by_settings = Vec::with_capacity(args.accuracies.len());
    for &accuracy in &args.accuracies {
        by_settings.push(
            StatsSettings {
                accuracy,
                ..StatsSettings::default()
            }
            .validate()
            .with_context(|| format!("--accuracies {accuracy}"))?,
        );
    }
    let settings = StatsSettings::default();
    let redis = BenchRedis::start();
    let values = Arc::new(lognormals(&mut StdRng::seed_from_u64(9), 65_536));
    let mut runs = Vec::new();
    for &distinct in &args.stats {
        let names: Arc<Vec<String>> = Arc::new((0..distinct).map(|i| format!("s{i}")).collect());
        redis.flush().await?;
        let cpu = redis.cpu_seconds().await?;
        let picks = Picks::new(names, values.clone());
        let (sent, secs) = book_update_stats(&redis, &picks, &args).await?;
        let book_cpu = (redis.cpu_seconds().await? - cpu) * 1e6 / sent.max(1) as f64;
        let book_rate = sent as f64 / secs;
        runs.push(Run {
            mode: "book",
            stats: distinct,
            observations: sent,
            seconds: secs,
            per_second: book_rate,
            counts_exact: true,
            ratio_to_book: 1.0,
            ratio_to_bare: None,
            redis_cpu_us_per_observation: book_cpu,
        });
        redis.flush().await?;
        let space = open_stats(&Opened::open(Kind::Redis, Some(&redis)).await?, &settings)
            .await?
            .space()
            .clone();
        let cpu = redis.cpu_seconds().await?;
        let (sent, secs) = bare(&redis, space, &picks, &args, &settings).await?;
        let bare_rate = sent as f64 / secs;
        runs.push(Run {
            mode: "bare",
            stats: distinct,
            observations: sent,
            seconds: secs,
            per_second: bare_rate,
            counts_exact: true,
            ratio_to_book: bare_rate / book_rate,
            ratio_to_bare: None,
            redis_cpu_us_per_observation: (redis.cpu_seconds().await? - cpu) * 1e6
                / sent.max(1) as f64,
        });
        for mode in ["exact", "aggregated"] {
            redis.flush().await?;
            let opened = Opened::open(Kind::Redis, Some(&redis)).await?;
            let stats = open_stats(&opened, &settings).await?;
            let cpu = redis.cpu_seconds().await?;
            let (sent, secs) = match mode {
                "exact" => exact(&stats, &picks, &args).await?,
                _ => aggregated(&stats, &picks, &args).await?,
            };
            let cpu_us = (redis.cpu_seconds().await? - cpu) * 1e6 / sent.max(1) as f64;
            check_counts(&stats, &picks.names, sent, mode).await?;
            runs.push(Run {
                mode,
                stats: distinct,
                observations: sent,
                seconds: secs,
                per_second: sent as f64 / secs,
                counts_exact: true,
                ratio_to_book: sent as f64 / secs / book_rate,
                ratio_to_bare: (mode == "exact").then(|| sent as f64 / secs / bare_rate),
                redis_cpu_us_per_observation: cpu_us,
            });
        }
    }

    redis.flush().await?;
    let opened = Opened::open(Kind::Redis, Some(&redis)).await?;
    let stats = open_stats(&opened, &settings).await?;
    let quantile_errors = quantile_error(&stats, args.quantile_values).await?;
    let max_relative_error = max_error(&quantile_errors);

    redis.flush().await?;
    let busy = busy_stat(&redis, &stats, args.iterations).await?;

    let mut by_accuracy = Vec::with_capacity(by_settings.len());
    for settings in &by_settings {
        redis.flush().await?;
        let stats = open_stats(&opened, settings).await?;
        let errors = quantile_error(&stats, args.quantile_values).await?;
        redis.flush().await?;
        let (bytes, _) = fill_busy(&redis, &stats).await?;
        by_accuracy.push(AtAccuracy {
            accuracy: settings.accuracy,
            bytes,
            kib: bytes as f64 / 1024.0,
            max_relative_error: max_error(&errors),
        });
    }
    Ok(StatsBench {
        bench: "stats",
        machine: crate::server::machine(),
        precisions: settings.precisions.clone(),
        seconds: args.load.seconds,
        writers: args.load.writers,
        batch: args.load.batch,
        adders: args.load.adders,
        book_connections: args.load.book_connections,
        runs,
        quantile_values: args.quantile_values,
        quantile_errors,
        max_relative_error,
        accuracy: settings.accuracy,
        busy,
        by_accuracy,
    })
}

/// The largest relative error of `errors`.
fn max_error(errors: &[QuantileError]) -> f64 {
    errors.iter().map(|e| e.relative_error).fold(0.0, f64::max)
}

/// Statistics with `settings` on the opened backend, on the system clock.
async fn open_stats(opened: &Opened, settings: &StatsSettings) -> Result<Stats> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = opened.backend.slice_store(clock.clone()).await?;
    Ok(Stats::with_clock(store, settings.clone(), clock)?)
}

/// What the ingest runs record: names of `names` with values of `values`,
/// each writer taking its own stride through both.
#[derive(Clone)]
struct Picks {
    names: Arc<Vec<String>>,
    values: Arc<Vec<f64>>,
    i: usize,
}

impl Picks {
    fn new(names: Arc<Vec<String>>, values: Arc<Vec<f64>>) -> Self {
        Picks {
            names,
            values,
            i: 0,
        }
    }

    /// The picks of writer `w`.
    fn of_writer(&self, w: usize) -> Self {
        Picks {
            i: w * 7919,
            ..self.clone()
        }
    }

    /// The next observation's name and value.
    fn next(&mut self) -> (&str, f64) {
        self.i += 131;
        (
            &self.names[self.i % self.names.len()],
            self.values[self.i % self.values.len()],
        )
    }
}

/// `n` lognormal values (median 100, sigma 0.5), by Box-Muller.
fn lognormals(rng: &mut StdRng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let u1: f64 = 1.0 - rng.random::<f64>();
            let u2: f64 = rng.random();
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            (MU + SIGMA * z).exp()
        })
        .collect()
}

/// The book's `update_stats` ("Redis in Action" 5.2.3), as published, from
/// `book_connections` connections over `names` for `seconds`: per
/// observation WATCH the hour's start key, GET it, then MULTI (rolling the
/// hour over when it changed), ZADD two temporary keys, ZUNIONSTORE the
/// stat with them (AGGREGATE MIN, then MAX), DEL them, ZINCRBY count, sum
/// and sumsq, EXEC; retried while the WATCH fails. Afterwards the stats'
/// `count` members must add up to the observations acknowledged.
async fn book_update_stats(
    redis: &BenchRedis,
    picks: &Picks,
    args: &StatsArgs,
) -> Result<(u64, f64)> {
    let mut conns = Vec::with_capacity(args.load.book_connections);
    for _ in 0..args.load.book_connections {
        conns.push(redis.raw().await?);
    }
    let timed = Timed::start(args.load.seconds);
    let deadline = timed.deadline;
    let sent = timed
        .join(conns.into_iter().enumerate().map(|(w, mut conn)| {
            let mut picks = picks.of_writer(w);
            async move {
                let mut temp = 0u64;
                let (mut passes, mut sent) = (0u64, 0u64);
                while crate::pace::go_on(deadline, &mut passes) {
                    let (name, value) = picks.next();
                    let destination = format!("stats:{name}:book");
                    let start_key = format!("{destination}:start");
                    loop {
                        let () = redis::cmd("WATCH")
                            .arg(&start_key)
                            .query_async(&mut conn)
                            .await?;
                        let now = SystemClock.now().as_secs_f64() as u64;
                        let hour_start = (now / 3600 * 3600).to_string();
                        let existing: Option<String> = redis::cmd("GET")
                            .arg(&start_key)
                            .query_async(&mut conn)
                            .await?;
                        let mut pipe = redis::pipe();
                        pipe.atomic();
                        match &existing {
                            Some(e) if e.parse::<u64>().unwrap_or(0) < now / 3600 * 3600 => {
                                pipe.cmd("RENAME")
                                    .arg(&destination)
                                    .arg(format!("{destination}:last"))
                                    .ignore();
                                pipe.cmd("RENAME")
                                    .arg(&start_key)
                                    .arg(format!("{destination}:pstart"))
                                    .ignore();
                                pipe.cmd("SET").arg(&start_key).arg(&hour_start).ignore();
                            }
                            Some(_) => {}
                            None => {
                                pipe.cmd("SET").arg(&start_key).arg(&hour_start).ignore();
                            }
                        }
                        temp += 1;
                        let tkey1 = format!("tmp:{w}:{temp}:1");
                        let tkey2 = format!("tmp:{w}:{temp}:2");
                        pipe.cmd("ZADD").arg(&tkey1).arg(value).arg("min").ignore();
                        pipe.cmd("ZADD").arg(&tkey2).arg(value).arg("max").ignore();
                        for (tkey, how) in [(&tkey1, "MIN"), (&tkey2, "MAX")] {
                            pipe.cmd("ZUNIONSTORE")
                                .arg(&destination)
                                .arg(2)
                                .arg(&destination)
                                .arg(tkey)
                                .arg("AGGREGATE")
                                .arg(how)
                                .ignore();
                        }
                        pipe.cmd("DEL").arg(&tkey1).arg(&tkey2).ignore();
                        pipe.cmd("ZINCRBY").arg(&destination).arg(1).arg("count");
                        pipe.cmd("ZINCRBY").arg(&destination).arg(value).arg("sum");
                        pipe.cmd("ZINCRBY")
                            .arg(&destination)
                            .arg(value * value)
                            .arg("sumsq");
                        // EXEC answers nil when the watched key changed: retry.
                        let done: Option<Vec<redis::Value>> = pipe.query_async(&mut conn).await?;
                        if done.is_some() {
                            break;
                        }
                    }
                    sent += 1;
                }
                Ok(sent)
            }
        }))
        .await?;
    let secs = timed.seconds();
    let mut conn = redis.raw().await?;
    let mut counted = 0.0;
    for name in picks.names.iter() {
        for key in [
            format!("stats:{name}:book"),
            format!("stats:{name}:book:last"),
        ] {
            let c: Option<f64> = redis::cmd("ZSCORE")
                .arg(&key)
                .arg("count")
                .query_async(&mut conn)
                .await?;
            counted += c.unwrap_or(0.0);
        }
    }
    ensure!(
        counted == sent as f64,
        "the book's update_stats: the stats count {counted} but {sent} observations were acknowledged"
    );
    Ok((sent, secs))
}

/// `writers` tasks calling `record_many` with `batch` observations (now)
/// for `seconds`.
async fn exact(stats: &Stats, picks: &Picks, args: &StatsArgs) -> Result<(u64, f64)> {
    let timed = Timed::start(args.load.seconds);
    let batch = args.load.batch;
    let sent = timed
        .write_batches(stats, args.load.writers as u64, |w| {
            let mut picks = picks.of_writer(w as usize);
            move || {
                (0..batch)
                    .map(|_| {
                        let (name, value) = picks.next();
                        Observation::new(name, value)
                    })
                    .collect()
            }
        })
        .await?;
    Ok((sent, timed.seconds()))
}

/// The bare client over the same picks (issue 20 §2: the ceiling of exact
/// statistics): `writers` connections of `batch` observations a round
/// trip, each observation's commands from
/// [`crate::bare::stat_write_commands`] in the default layout with one
/// observation's blob, the fold's commands for a statistic's first
/// observation in a second (counted once for all connections, as the store
/// folds once). It merges nothing, so what it stores is not checked beyond
/// every statistic it wrote being registered.
async fn bare(
    redis: &BenchRedis,
    space: Arc<Space>,
    picks: &Picks,
    args: &StatsArgs,
    settings: &StatsSettings,
) -> Result<(u64, f64)> {
    let mut one = StatsValue::new(settings.sketch()?);
    one.record(100.0)?;
    let mut blob = Vec::new();
    Value::Stats(Box::new(one)).encode(&mut blob);
    let blob = Arc::new(blob);
    let layout = Arc::new(Layout::default());
    let seen: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let mut conns = Vec::with_capacity(args.load.writers);
    for _ in 0..args.load.writers {
        conns.push(redis.raw().await?);
    }
    let timed = Timed::start(args.load.seconds);
    let deadline = timed.deadline;
    let batch = args.load.batch;
    let sent = timed
        .join(conns.into_iter().enumerate().map(|(w, mut conn)| {
            let mut picks = picks.of_writer(w);
            let (blob, layout, space, seen) =
                (blob.clone(), layout.clone(), space.clone(), seen.clone());
            async move {
                let (mut passes, mut sent) = (0u64, 0u64);
                while go_on(deadline, &mut passes) {
                    let second = SystemClock.now().as_secs_f64() as u64;
                    let mut pipe = redis::pipe();
                    for _ in 0..batch {
                        let (name, _) = picks.next();
                        let fold = seen
                            .lock()
                            .expect("not poisoned")
                            .insert(name.to_owned(), second)
                            != Some(second);
                        for words in stat_write_commands(&layout, &space, name, second, &blob, fold)
                        {
                            let mut cmd = redis::Cmd::new();
                            for word in words {
                                cmd.arg(word);
                            }
                            pipe.add_command(cmd).ignore();
                        }
                    }
                    let () = pipe.query_async(&mut conn).await?;
                    sent += batch as u64;
                }
                Ok(sent)
            }
        }))
        .await?;
    let secs = timed.seconds();
    let written = seen.lock().expect("not poisoned").len() as u64;
    let keys = layout.space_keys(&space);
    let mut conn = redis.raw().await?;
    let mut registered = 0u64;
    for shard in 0..tally::backend::redis::layout::SHARDS {
        let n: u64 = redis::cmd("ZCARD")
            .arg(keys.registry(shard))
            .query_async(&mut conn)
            .await?;
        registered += n;
    }
    ensure!(
        registered == written,
        "the bare client wrote {written} statistics but {registered} are registered"
    );
    Ok((sent, secs))
}

/// `adders` tasks calling `StatsWriter::record` for `seconds`, then a
/// flush; the time includes the flush.
async fn aggregated(stats: &Stats, picks: &Picks, args: &StatsArgs) -> Result<(u64, f64)> {
    let writer = StatsWriter::start(stats.clone(), WriterSettings::default())?;
    let timed = Timed::start(args.load.seconds);
    let deadline = timed.deadline;
    let sent = timed
        .join((0..args.load.adders).map(|w| {
            let (writer, mut picks) = (writer.clone(), picks.of_writer(w));
            async move {
                let mut sent = 0u64;
                loop {
                    for _ in 0..ROUND {
                        let (name, value) = picks.next();
                        writer.record(name, value, None).await?;
                    }
                    if !another_round(deadline, &mut sent).await {
                        break Ok(sent);
                    }
                }
            }
        }))
        .await?;
    let seconds = finish(&writer, &timed, sent, "the stats writer", "observations").await?;
    Ok((sent, seconds))
}

/// Fails unless every precision of `names` counts exactly `sent`.
async fn check_counts(stats: &Stats, names: &[String], sent: u64, what: &str) -> Result<()> {
    let mut totals = vec![0u64; stats.settings().precisions.len()];
    for name in names {
        for (j, series) in stats.get_all(name, &[]).await?.iter().enumerate() {
            totals[j] += series.slices.iter().map(|s| s.summary.count).sum::<u64>();
        }
    }
    for (p, t) in stats.settings().precisions.iter().zip(totals) {
        ensure!(
            t == sent,
            "{what} over {} stats: precision {p} s counts {t} but {sent} observations were acknowledged",
            names.len()
        );
    }
    Ok(())
}

/// Records `n` seeded lognormal values into one slice of every precision
/// and compares the p50/p90/p99 read back (of the day slice) to the exact
/// nearest-rank quantiles.
async fn quantile_error(stats: &Stats, n: usize) -> Result<Vec<QuantileError>> {
    let mut values = lognormals(&mut StdRng::seed_from_u64(50), n);
    // The middle of a day slice, so every precision's slice holds them all.
    let now = SystemClock.now().as_secs_f64() as u64;
    let at = (now / 86_400 * 86_400 + 43_200).min(now) as f64;
    for chunk in values.chunks(tally::stats::MAX_BATCH) {
        let observations: Vec<Observation> = chunk
            .iter()
            .map(|&v| Observation::new("quantiles", v).at(at))
            .collect();
        stats.record_many(&observations).await?;
    }
    values.sort_by(f64::total_cmp);
    let slices = stats.get("quantiles", 86_400, &DEFAULT_QUANTILES).await?;
    let slice = slices.last().context("the day slice was written")?;
    ensure!(
        slice.summary.count == n as u64,
        "the quantile slice counts {} of {n} values",
        slice.summary.count
    );
    DEFAULT_QUANTILES
        .iter()
        .map(|&q| {
            let exact = quantile(&values, q);
            let reported = slice
                .summary
                .quantile(q)
                .with_context(|| format!("no quantile {q} read back"))?;
            Ok(QuantileError {
                q,
                exact,
                reported,
                relative_error: (reported - exact).abs() / exact,
            })
        })
        .collect()
}

/// What `n` lognormal observations leave in one slice: each sketch bucket
/// gets its expected count, rounded up or down at random (so sparse tail
/// buckets are as occupied as real traffic leaves them), recorded at the
/// bucket's value.
fn busy_slice(settings: &StatsSettings, rng: &mut StdRng, n: f64) -> Result<StatsValue> {
    let sketch = settings.sketch()?;
    let ln_gamma = (sketch.bucket_value(1) / sketch.bucket_value(0)).ln();
    let mut s = StatsValue::new(sketch);
    let lo = ((MU - 8.0 * SIGMA) / ln_gamma).floor() as i32;
    let hi = ((MU + 8.0 * SIGMA) / ln_gamma).ceil() as i32;
    for i in lo..=hi {
        let p = normal_cdf((f64::from(i) * ln_gamma - MU) / SIGMA)
            - normal_cdf((f64::from(i - 1) * ln_gamma - MU) / SIGMA);
        let expected = n * p;
        let c = (expected + rng.random::<f64>()).floor() as u64;
        if c > 0 {
            s.record_weighted(sketch.bucket_value(i), c)?;
        }
    }
    Ok(s)
}

/// Fills every retained slice of every precision of one stat as 1,000
/// lognormal observations a second leave it, then measures its
/// memory (its keys') and the read latency of every precision.
async fn busy_stat(redis: &BenchRedis, stats: &Stats, iterations: usize) -> Result<Busy> {
    let settings = stats.settings().clone();
    let (bytes, held) = fill_busy(redis, stats).await?;
    let mut reads = Vec::new();
    for &p in &settings.precisions {
        let mut times = Vec::with_capacity(iterations);
        let mut slices = 0;
        for _ in 0..iterations {
            let t = Instant::now();
            slices = stats.get("busy", p, &DEFAULT_QUANTILES).await?.len();
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
        reads.push(latency(p, slices, times));
    }
    let mut times = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        stats.get_all("busy", &DEFAULT_QUANTILES).await?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let total_slices = settings.precisions.len() * settings.samples as usize;
    reads.push(latency(0, total_slices, times));
    Ok(Busy {
        observations_per_second: BUSY_RATE,
        slices: settings.precisions.len() as u64 * settings.samples,
        observations_held: held,
        bytes,
        kib: bytes as f64 / 1024.0,
        target_kib: 512.0,
        reads,
    })
}

/// Writes the busy stat (the `busy` of [`busy_stat`]) and checks it reads
/// back whole; returns the memory of its keys (`keys_memory`) and the
/// observations held.
pub(crate) async fn fill_busy(redis: &BenchRedis, stats: &Stats) -> Result<(i64, u64)> {
    let settings = stats.settings().clone();
    let name = tally::Name::new("busy")?;
    let mut rng = StdRng::seed_from_u64(86_400);
    let now = SystemClock.now().as_secs_f64() as u64;
    ensure!(
        keys_memory(&redis.url()).await? == 0,
        "the busy statistic is written on an empty server"
    );
    let mut held = 0u64;
    for &p in &settings.precisions {
        let current = now / p * p;
        let mut cells = Vec::new();
        for k in (0..settings.samples).rev() {
            let slice = current - k * p;
            let value = busy_slice(&settings, &mut rng, BUSY_RATE * p as f64)?;
            held += value.count();
            cells.push(CellDelta {
                precision: p,
                slice,
                delta: Value::Stats(Box::new(value)),
            });
        }
        for chunk in cells.chunks(10) {
            let batch = Batch {
                space: stats.space().clone(),
                writes: vec![SeriesWrite {
                    name: name.clone(),
                    cells: chunk.to_vec(),
                }],
                seq: None,
            };
            stats.store().apply(&batch).await?;
        }
    }
    let bytes = keys_memory(&redis.url()).await?;
    let all = stats.get_all("busy", &DEFAULT_QUANTILES).await?;
    let counted: u64 = all
        .iter()
        .map(|s| s.slices.iter().map(|x| x.summary.count).sum::<u64>())
        .sum();
    ensure!(
        counted == held,
        "the busy stat counts {counted} observations but {held} were written"
    );
    Ok((bytes, held))
}

/// p50 and p99 of `times` (microseconds).
fn latency(precision: u64, slices: usize, mut times: Vec<f64>) -> ReadLatency {
    times.sort_by(f64::total_cmp);
    ReadLatency {
        precision,
        slices,
        p50_us: quantile(&times, 0.5),
        p99_us: quantile(&times, 0.99),
    }
}
