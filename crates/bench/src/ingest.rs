//! `tally bench ingest`: increments per second through the library, exact
//! and aggregated, over 1, 1,000 and 1,000,000 distinct counters, on a
//! redis-server started here and on the embedded SQLite store, next to two
//! baselines measured in the same run on the same server:
//!
//! - raw `redis-benchmark` pipelined HINCRBY (before and after the library
//!   runs); divided by the number of precisions it is the ceiling an exact
//!   write of every precision could reach;
//! - the book's algorithm ([`crate::book`]): a MULTI/EXEC of ZADD + HINCRBY
//!   per precision per increment, from 50 connections;
//! - per run, the bare client ([`crate::bare`]): the default layout's own
//!   commands for the same picks of names, pipelined as the mode sends
//!   (the ceiling of issue 20 §2), with its Redis and client CPU.
//!
//! Modes: `exact` (one increment per `incr_many` call, `writers` callers at
//! once: one round trip per increment), `exact-batch` (`batch` increments
//! per call, merged per slice, one round trip per call) and `aggregated`
//! (`CounterWriter::add` from `adders` tasks; the time runs until the final
//! flush is acknowledged, so it includes writing everything). Each run starts
//! on an empty store and ends with a check that every precision of every
//! counter sums to exactly what was acknowledged.
//!
//! `--daily-entities N` adds daily views of N entities
//! ([`crate::daily_views`]): exact, aggregated and the article's own
//! commands from a bare client, on a server of their own.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Result, ensure};
use tally::counters::{CounterWriter, WriterSettings};
use tally::engine::series::{Rules, SeriesWriter};
use tally::{Clock, CounterSettings, Counters, Increment, SystemClock};

use crate::bare::{self, Bare, BareLayout, Shape};
use crate::book;
use crate::daily_views::{self, DailyViews};
use crate::pace::{ROUND, Timed, another_round, self_cpu_seconds};
use crate::server::{
    BenchRedis, Kind, Opened, Which, check_totals, command_stats, reset_command_stats,
    stored_totals,
};

/// The bench's parameters.
#[derive(clap::Args, Clone, Debug)]
pub struct IngestArgs {
    /// Backends to measure.
    #[arg(long, value_enum, default_value = "both")]
    pub backend: Which,
    /// Distinct counters, one run per size.
    #[arg(long, value_delimiter = ',', default_value = "1,1000,1000000")]
    pub counters: Vec<u64>,
    /// Modes to run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "exact,exact-batch,aggregated"
    )]
    pub modes: Vec<Mode>,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Hot counters of the book's algorithm.
    #[arg(long, default_value_t = 1000)]
    pub book_counters: u64,
    /// The Redis key layout of Tally's runs and of the bare client's
    /// commands.
    #[arg(long, value_enum, default_value = "default")]
    pub key_layout: BareLayout,
    /// Requests of each redis-benchmark baseline.
    #[arg(long, default_value_t = 2_000_000)]
    pub benchmark_requests: u64,
    /// Daily views of this many entities drawn from a Zipf distribution
    /// (s = 1.1), exact, aggregated and the article's own HINCRBY from a
    /// bare client, on Redis (e.g. 1000000; none by default).
    #[arg(long)]
    pub daily_entities: Option<u64>,
    /// Only the daily views: no counter runs and no counter baselines.
    #[arg(long, requires = "daily_entities")]
    pub daily_only: bool,
    /// Days of history each daily entity holds before its run (one view a
    /// day, filled untimed): the steady state of a store that has counted
    /// them that long (0: every entity starts empty).
    #[arg(long, default_value_t = 0, requires = "daily_entities")]
    pub daily_history: u32,
}

/// The load of a write bench, which `bench ingest` and `bench stats`
/// share: how long each run writes, from how many exact callers and
/// aggregating tasks, how much per exact call, and the book's connections.
/// `bench stats` words the help for its observations, with `mut_args` on
/// [`StatsArgs`](crate::stats::StatsArgs).
#[derive(clap::Args, Clone, Debug)]
pub struct LoadArgs {
    /// Seconds of writing per run.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Concurrent callers of the exact modes.
    #[arg(long, default_value_t = 50)]
    pub writers: usize,
    /// Increments per call in `exact-batch`.
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
    /// Tasks adding to the writer.
    #[arg(long, default_value_t = 2)]
    pub adders: usize,
    /// Connections of the book's algorithm.
    #[arg(long, default_value_t = 50)]
    pub book_connections: usize,
}

impl LoadArgs {
    /// Refuses a `--batch` outside 1 to `max_batch`, the library's limit.
    pub(crate) fn check_batch(&self, max_batch: usize) -> Result<()> {
        ensure!(
            (1..=max_batch).contains(&self.batch),
            "--batch must be 1 to {max_batch}"
        );
        Ok(())
    }
}

/// Refuses an empty list of sizes, or a size of 0, passed as `flag`.
pub(crate) fn check_sizes(flag: &str, sizes: &[u64]) -> Result<()> {
    ensure!(
        !sizes.is_empty() && sizes.iter().all(|&n| n > 0),
        "{flag} needs positive sizes"
    );
    Ok(())
}

/// How increments reach the store.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// One increment per call (one round trip each).
    Exact,
    /// `batch` increments per call.
    ExactBatch,
    /// Through the aggregating writer.
    Aggregated,
}

/// One run's figures.
#[derive(Debug, serde::Serialize)]
pub struct Run {
    pub backend: Kind,
    pub mode: Mode,
    pub distinct: u64,
    pub increments: u64,
    pub seconds: f64,
    pub per_second: f64,
    pub totals_exact: bool,
    /// This process's CPU microseconds per increment (the library's client
    /// side; on SQLite, the store's work too).
    pub client_cpu_us_per_increment: f64,
    /// Redis only: the run next to its baselines and inside the server.
    #[serde(flatten)]
    pub redis: Option<RedisRun>,
}

/// A Redis run's figures next to its baselines, and the server's side.
#[derive(Debug, serde::Serialize)]
pub struct RedisRun {
    /// The bare client on the same picks, pipelined alike.
    pub bare: Bare,
    /// `per_second` ÷ the bare client's.
    pub ratio_to_bare: f64,
    /// `per_second` ÷ (raw HINCRBY ops/s ÷ precisions), once the HINCRBY
    /// after the runs is measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_ceiling: Option<f64>,
    /// `per_second` ÷ the book's algorithm.
    pub ratio_to_book: f64,
    /// The server's CPU microseconds per increment.
    pub redis_cpu_us_per_increment: f64,
    /// Where the server's time went, `INFO commandstats` over the run:
    /// microseconds per increment by command (commands that scripts run are
    /// counted on their own too, inside `evalsha`'s time).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub commands_us_per_increment: BTreeMap<String, f64>,
    /// The ceiling in CPU terms (raw HINCRBY CPU per op × precisions) ÷
    /// `redis_cpu_us_per_increment`: the share of the ceiling reached if the
    /// server were the only limit, set with `ratio_to_ceiling`. Other load
    /// on the machine moves it much less than `ratio_to_ceiling`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ratio_to_ceiling: Option<f64>,
}

/// The Redis baselines of the run.
#[derive(Debug, serde::Serialize)]
pub struct Baselines {
    /// `redis-benchmark` HINCRBY ops/s before and after the library runs.
    pub hincrby_ops_per_second: [f64; 2],
    /// Their mean ÷ the number of precisions.
    pub ceiling_increments_per_second: f64,
    /// The server's CPU microseconds per HINCRBY in those runs.
    pub hincrby_redis_cpu_us: [f64; 2],
    pub book: book::Book,
}

/// The bench's result.
#[derive(Debug, serde::Serialize)]
pub struct Ingest {
    pub bench: &'static str,
    pub machine: serde_json::Value,
    pub precisions: usize,
    pub seconds: f64,
    pub writers: usize,
    pub batch: usize,
    pub adders: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis: Option<Baselines>,
    pub runs: Vec<Run>,
    /// `--daily-entities`: daily views, exact and aggregated, against the
    /// article's commands from a bare client ([`crate::daily_views`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daily: Option<DailyViews>,
}

pub async fn run(args: IngestArgs) -> Result<Ingest> {
    ensure!(
        args.load.seconds > 0.0 && args.load.writers > 0 && args.load.adders > 0,
        "seconds, writers and adders must be positive"
    );
    args.load.check_batch(tally::counters::MAX_BATCH)?;
    check_sizes("--counters", &args.counters)?;
    ensure!(
        args.daily_entities.is_none() || args.backend.kinds().contains(&Kind::Redis),
        "--daily-entities runs on Redis: pass --backend redis or both"
    );
    let settings = CounterSettings::default();
    let np = settings.precisions.len();
    let mut runs = Vec::new();
    let mut baselines = None;
    let kinds = if args.daily_only {
        Vec::new()
    } else {
        args.backend.kinds()
    };
    for kind in kinds {
        let redis = (kind == Kind::Redis).then(BenchRedis::start);
        let mut before = 0.0;
        let mut before_cpu = 0.0;
        let mut book_rate = 0.0;
        let mut book_result = None;
        if let Some(r) = &redis {
            (before, before_cpu) = hincrby(r, args.benchmark_requests).await?;
            r.flush().await?;
            let b = book::run(
                r,
                &settings,
                args.book_counters,
                args.load.book_connections,
                args.load.seconds,
            )
            .await?;
            book_rate = b.per_second;
            book_result = Some(b);
            r.flush().await?;
        }
        let first = runs.len();
        for &distinct in &args.counters {
            for &mode in &args.modes {
                let opened =
                    Opened::open_in(kind, redis.as_ref(), args.key_layout.layout()).await?;
                let clock: Arc<dyn Clock> = Arc::new(SystemClock);
                let counters = opened.counters(&settings, clock).await?;
                let cpu_before = match &redis {
                    Some(r) => {
                        reset_command_stats(&mut r.raw().await?).await?;
                        r.cpu_seconds().await?
                    }
                    None => 0.0,
                };
                let client_before = self_cpu_seconds();
                let (increments, seconds) = match mode {
                    Mode::Exact => exact(&counters, distinct, &args, 1).await?,
                    Mode::ExactBatch => exact(&counters, distinct, &args, args.load.batch).await?,
                    Mode::Aggregated => aggregated(&counters, distinct, &args).await?,
                };
                let client_cpu_us = (self_cpu_seconds() - client_before) * 1e6 / increments as f64;
                let server = match &redis {
                    Some(r) => Some((
                        (r.cpu_seconds().await? - cpu_before) * 1e6 / increments as f64,
                        commands_per_increment(r, increments).await?,
                    )),
                    None => None,
                };
                let names: Vec<String> = (0..distinct).map(name).collect();
                let totals = match kind {
                    Kind::Redis => stored_totals(&counters, &names).await?,
                    Kind::Sqlite => listed_totals(&counters).await?,
                };
                check_totals(
                    &format!("{kind:?} {mode:?} over {distinct} counters"),
                    &totals,
                    increments,
                )?;
                let bare = match &redis {
                    Some(r) => {
                        r.flush().await?;
                        let shape = bare_shape(mode, &args);
                        let names = Arc::new(names);
                        reset_command_stats(&mut r.raw().await?).await?;
                        let mut b = bare::run(
                            r,
                            args.key_layout,
                            &settings,
                            &names,
                            shape,
                            args.load.seconds,
                            |w| {
                                let mut picks = Picks::new(&names, w);
                                Box::new(move || picks.index())
                            },
                        )
                        .await?;
                        b.commands_us_per_increment =
                            commands_per_increment(r, b.increments).await?;
                        check_totals(
                            &format!("the bare client beside {mode:?} over {distinct} counters"),
                            &stored_totals(&counters, &names).await?,
                            b.increments,
                        )?;
                        Some(b)
                    }
                    None => None,
                };
                let per_second = increments as f64 / seconds;
                runs.push(Run {
                    backend: kind,
                    mode,
                    distinct,
                    increments,
                    seconds,
                    per_second,
                    totals_exact: true,
                    client_cpu_us_per_increment: client_cpu_us,
                    redis: bare.zip(server).map(|(bare, (cpu_us, commands))| RedisRun {
                        ratio_to_bare: per_second / bare.per_second,
                        bare,
                        ratio_to_ceiling: None,
                        ratio_to_book: per_second / book_rate,
                        redis_cpu_us_per_increment: cpu_us,
                        commands_us_per_increment: commands,
                        cpu_ratio_to_ceiling: None,
                    }),
                });
                drop(counters);
                drop(opened);
                if let Some(r) = &redis {
                    r.flush().await?;
                }
            }
        }
        if let Some(r) = &redis {
            let (after, after_cpu) = hincrby(r, args.benchmark_requests).await?;
            let ceiling = (before + after) / 2.0 / np as f64;
            let ceiling_cpu_us = (before_cpu + after_cpu) / 2.0 * np as f64;
            for run in &mut runs[first..] {
                if let Some(x) = &mut run.redis {
                    x.ratio_to_ceiling = Some(run.per_second / ceiling);
                    x.cpu_ratio_to_ceiling = Some(ceiling_cpu_us / x.redis_cpu_us_per_increment);
                }
            }
            baselines = Some(Baselines {
                hincrby_ops_per_second: [before, after],
                ceiling_increments_per_second: ceiling,
                hincrby_redis_cpu_us: [before_cpu, after_cpu],
                book: book_result.expect("measured above"),
            });
        }
    }
    let daily = match args.daily_entities {
        Some(entities) => Some(
            daily_views::run(
                &BenchRedis::start(),
                entities,
                args.load.seconds,
                args.load.batch.min(tally::daily::MAX_BATCH),
                args.load.writers,
                args.daily_history,
            )
            .await?,
        ),
        None => None,
    };
    Ok(Ingest {
        bench: "ingest",
        machine: crate::server::machine(),
        precisions: np,
        seconds: args.load.seconds,
        writers: args.load.writers,
        batch: args.load.batch,
        adders: args.load.adders,
        redis: baselines,
        runs,
        daily,
    })
}

/// `redis-benchmark` HINCRBY on `r`: ops per second, and the server's CPU
/// microseconds per op.
async fn hincrby(r: &BenchRedis, requests: u64) -> Result<(f64, f64)> {
    let cpu = r.cpu_seconds().await?;
    let ops = r.hincrby_ops(requests, 50, 64)?;
    let cpu_us = (r.cpu_seconds().await? - cpu) * 1e6 / requests as f64;
    Ok((ops, cpu_us))
}

/// `INFO commandstats` since the last reset: server microseconds per
/// increment by command, over `increments`.
async fn commands_per_increment(r: &BenchRedis, increments: u64) -> Result<BTreeMap<String, f64>> {
    let n = increments.max(1) as f64;
    Ok(command_stats(&mut r.raw().await?)
        .await?
        .into_iter()
        .map(|(command, cost)| (command, cost.usec / n))
        .collect())
}

/// How the bare client beside a run of `mode` sends: as many connections
/// and increments per round trip as the mode does.
fn bare_shape(mode: Mode, args: &IngestArgs) -> Shape {
    let writer = WriterSettings::default();
    match mode {
        Mode::Exact => Shape {
            connections: args.load.writers,
            per_round_trip: 1,
        },
        Mode::ExactBatch => Shape {
            connections: args.load.writers,
            per_round_trip: args.load.batch,
        },
        Mode::Aggregated => Shape {
            connections: writer.lanes,
            per_round_trip: writer.chunk_counters,
        },
    }
}

/// The bench's counter names.
fn name(i: u64) -> String {
    format!("c{i}")
}

/// A writer's picks, spread over the counters' names: a stride prime to
/// any size used here, from a different start per writer.
struct Picks {
    names: Arc<Vec<String>>,
    start: u64,
    step: u64,
}

impl Picks {
    /// The picks of writer `w`.
    fn new(names: &Arc<Vec<String>>, w: u64) -> Self {
        Picks {
            names: names.clone(),
            start: w * 7919,
            step: 0,
        }
    }

    /// The next name.
    fn next(&mut self) -> &str {
        let i = self.index();
        &self.names[i]
    }

    /// The next name's index.
    fn index(&mut self) -> usize {
        self.step += 1;
        let distinct = self.names.len() as u64;
        (self.start.wrapping_add(self.step.wrapping_mul(1_000_003)) % distinct) as usize
    }
}

/// `writers` callers sending `batch` increments per call for `seconds`.
async fn exact(
    counters: &Counters,
    distinct: u64,
    args: &IngestArgs,
    batch: usize,
) -> Result<(u64, f64)> {
    let names: Arc<Vec<String>> = Arc::new((0..distinct).map(name).collect());
    let timed = Timed::start(args.load.seconds);
    let sent = timed
        .write_batches(counters, args.load.writers as u64, |w| {
            let mut picks = Picks::new(&names, w);
            move || {
                (0..batch)
                    .map(|_| Increment::new(picks.next(), 1))
                    .collect()
            }
        })
        .await?;
    Ok((sent, timed.seconds()))
}

/// `adders` tasks calling `CounterWriter::add` for `seconds`, then a flush; the
/// time includes the flush.
async fn aggregated(counters: &Counters, distinct: u64, args: &IngestArgs) -> Result<(u64, f64)> {
    let agg = CounterWriter::start(counters.clone(), WriterSettings::default())?;
    let names: Arc<Vec<String>> = Arc::new((0..distinct).map(name).collect());
    let timed = Timed::start(args.load.seconds);
    let deadline = timed.deadline;
    let sent = timed
        .join((0..args.load.adders as u64).map(|w| {
            let (agg, mut picks) = (agg.clone(), Picks::new(&names, w));
            async move {
                let mut sent = 0u64;
                loop {
                    for _ in 0..ROUND {
                        agg.add(picks.next(), 1, None).await?;
                    }
                    if !another_round(deadline, &mut sent).await {
                        break Ok(sent);
                    }
                }
            }
        }))
        .await?;
    let seconds = finish(&agg, &timed, sent, "the writer", "increments").await?;
    Ok((sent, seconds))
}

/// Totals over every registered counter, page by page (for stores whose
/// listing is cheap).
async fn listed_totals(counters: &Counters) -> Result<Vec<i64>> {
    let mut totals = vec![0i64; counters.settings().precisions.len()];
    let mut after: Option<String> = None;
    loop {
        let page = counters.list(after.as_deref(), 1000).await?;
        for (j, t) in stored_totals(counters, &page.names)
            .await?
            .into_iter()
            .enumerate()
        {
            totals[j] += t;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    Ok(totals)
}

/// Ends an aggregated run of `timed`: flushes `writer` (the run's time
/// includes the flush), shuts it down and checks that it took and wrote
/// every one of the `sent` items and refused none. The run's seconds.
pub(crate) async fn finish<R: Rules>(
    writer: &SeriesWriter<R>,
    timed: &Timed,
    sent: u64,
    name: &str,
    items: &str,
) -> Result<f64> {
    writer.flush().await?;
    let seconds = timed.seconds();
    let figures = writer.stats();
    writer.shutdown().await;
    ensure!(
        figures.accepted == sent && figures.written == sent && figures.rejected == 0,
        "{name} accepted {} and wrote {} of {sent} {items}",
        figures.accepted,
        figures.written
    );
    Ok(seconds)
}
