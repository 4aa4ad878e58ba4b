//! Tally's benchmarks, behind `tally bench`: anyone can rerun them, each a
//! subcommand ([`BenchCommand`], run by [`run`]).
//!
//! Every bench measures its baseline in the same run (e.g. raw
//! `redis-benchmark` on the same server) and reports ratios, because this
//! kind of machine is shared and noisy. Every ingest bench checks afterwards
//! that the stored totals equal what it sent. `--json` prints one object per
//! bench for scripts and for BENCHMARKS.md.
//!
//! A tool crate, not a library for users: it starts its own servers through
//! `tally-testkit`, prints its results to stdout, and returns `anyhow`
//! errors for the `tally` binary to print. `http`, `statsd` and `carbon`
//! start the running executable as `tally serve`, so they run from the
//! `tally` binary.
//!
//! Layout: [`server`] (the shared harness: a Redis of the bench's own, the
//! backend under test, the totals check) under every bench module; [`book`]
//! (the book's algorithm) under [`ingest`]; [`serve`] under [`carbon`],
//! which shares its `tally serve` child; [`settings`] (what comes from
//! the binary's configuration) a leaf; this file parses and dispatches. The
//! reference statsd daemon [`serve`] races is the test harness's
//! (`tally_testkit::StatsdDaemon`).

pub mod bare;
pub mod book;
pub mod buffer;
pub mod carbon;
pub mod clean;
pub mod cluster;
pub mod daily_memory;
pub mod daily_views;
pub mod graphite;
pub mod ingest;
pub mod memory;
pub mod migrate;
mod pace;
pub mod plan;
pub mod read;
pub mod retention;
pub mod serve;
pub mod server;
pub mod settings;
pub mod stats;

use anyhow::Result;
use clap::Subcommand;

pub use settings::Settings;

/// The benchmarks.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Time the pure slice math of one increment (a smoke check of the harness).
    Plan {
        /// Increments to plan.
        #[arg(long, default_value_t = 1_000_000)]
        increments: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Increments per second through the library (exact and aggregated) over
    /// 1, 1,000 and 1,000,000 counters, on a redis-server started here and on
    /// SQLite, next to raw redis-benchmark HINCRBY and the book's algorithm
    /// measured in the same run; checks the stored totals after each run.
    Ingest {
        #[command(flatten)]
        args: ingest::IngestArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Read latency (p50, p99) of every precision of one counter and of 100
    /// counters at once, at steady state, on Redis (next to a bare pipeline
    /// of the same HGETALLs) and on SQLite.
    Read {
        /// Backends to measure.
        #[arg(long, value_enum, default_value = "both")]
        backend: server::Which,
        /// Timed reads of one counter (a tenth as many of 100 counters).
        #[arg(long, default_value_t = 2000)]
        iterations: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Redis memory per stored sample at steady state (every precision
    /// holding the samples kept), Tally's layout next to the book's; and
    /// per counter counted once, the default layout next to the compact.
    Memory {
        /// Counters.
        #[arg(long, default_value_t = 100_000)]
        counters: u64,
        /// Write calls in flight.
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Time of one cleaner pass (every precision due) over many counters,
    /// next to the book's cleaner on a subset, extrapolated.
    Clean {
        #[command(flatten)]
        args: clean::CleanArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Redis CPU spent on retention per busy counter per minute at steady
    /// state, per layout (the cleaner's regular pass for `default` and
    /// `ria`; entering and expiring chunks for `expiring`), and the first
    /// cleaner pass with every precision at its peak.
    Retention {
        #[command(flatten)]
        args: retention::RetentionArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// `tally migrate` of many counters from SQLite to Redis, in samples
    /// per second, next to writing the same samples straight into Redis.
    Migrate {
        #[command(flatten)]
        args: migrate::MigrateArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// HTTP ingest on a `tally serve` process, driven by `wrk` (single and
    /// batch increments), against `GET /healthz` on the same server; stored
    /// totals checked against what the server accepted.
    Http {
        /// Backends to run on.
        #[arg(long, value_enum, default_value = "both")]
        backend: server::Which,
        /// Seconds of load per run.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Open connections.
        #[arg(long, default_value_t = 50)]
        connections: u32,
        /// Distinct counters the increments rotate over.
        #[arg(long, default_value_t = 1000)]
        counters: u64,
        /// Increments per batch request.
        #[arg(long, default_value_t = 100)]
        batch: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// statsd lines a `tally serve` process takes per second, against a bare
    /// UDP socket fed by the same sender; stored totals checked.
    Statsd {
        /// Backends to run on.
        #[arg(long, value_enum, default_value = "both")]
        backend: server::Which,
        /// Seconds of sending per run.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Counter lines per datagram.
        #[arg(long, default_value_t = 20)]
        lines: usize,
        /// Distinct counters.
        #[arg(long, default_value_t = 1000)]
        counters: u64,
        /// Then send a burst of N single-line datagrams, as fast as one
        /// sender can, to a bare socket with tally's receive buffer, to
        /// `tally serve` (default buffer) and to the reference statsd daemon
        /// (npm `statsd`, installed into ~/.cache/tally-bench); reports each
        /// one's loss.
        #[arg(long, value_name = "N")]
        burst: Option<u64>,
        /// The receive buffer `tally serve` and the bare socket ask for in
        /// the burst [default: tally's, 8388608].
        #[arg(long, value_name = "BYTES", requires = "burst")]
        recv_buffer: Option<usize>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// carbon lines per second from one TCP connection into `tally serve
    /// --carbon` (Redis, default layout, and SQLite), next to the same lines
    /// through the library's gauge writer in the same run; every gauge read
    /// back.
    Carbon {
        #[command(flatten)]
        args: carbon::CarbonArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Ingest throughput on a Redis Cluster of 1 master vs 3 masters, both
    /// started here (needs redis-server and redis-cli).
    Cluster {
        /// Seconds of writing per workload and cluster.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Concurrent writers.
        #[arg(long, default_value_t = 8)]
        writers: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Statistics on a redis-server started here: ingest (exact and
    /// aggregated) over 1 and 1,000 stats next to the book's `update_stats`
    /// in the same run, counts checked; quantile error against exact
    /// quantiles; Redis memory and read latency of one busy stat at steady
    /// state.
    Stats {
        #[command(flatten)]
        args: stats::StatsArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The Graphite render and find API of `tally serve` over HTTP (Redis and
    /// SQLite) next to graphite-web 1.1.10 on the same data in the same run
    /// (one series; sumSeries over 100; aliasByNode over summarize; 1,000
    /// series), the library's read of the same slices, and find of one
    /// level among 100,000 names next to a bare ZRANGEBYLEX pipeline.
    Graphite {
        #[command(flatten)]
        args: graphite::GraphiteArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Redis memory per entity of the daily statistics (and of the seed's
    /// bare layout) at DAYS days of data, on servers started here.
    DailyMemory {
        /// Entities.
        #[arg(long, default_value_t = 1_000_000)]
        entities: u64,
        /// Days of data per entity.
        #[arg(long, default_value_t = 30)]
        days: u32,
        /// Write batches in flight.
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// SQL statements and wall time of one increment stream written naively
    /// (one upsert per increment) and through the buffer, in the same run.
    /// Creates and drops its own tables (`tally_bench_*`) in the sink.
    Buffer {
        /// The sink URL (postgres://... or sqlite:PATH) [default: from the config file].
        #[arg(long, env = "TALLY_SINK", value_name = "URL")]
        sink: Option<String>,
        /// Increments in the stream.
        #[arg(long, default_value_t = 20_000)]
        increments: u64,
        /// Rows they go to (half go to row 0, a hot row).
        #[arg(long, default_value_t = 100)]
        rows: u64,
        /// Concurrent writers.
        #[arg(long, default_value_t = 16)]
        writers: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Prints a bench's result: one line of JSON with `--json`, else as `human`
/// writes it.
fn report<T: serde::Serialize>(
    r: &T,
    json: bool,
    human: impl FnOnce(&T) -> Result<()>,
) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
        Ok(())
    } else {
        human(r)
    }
}

/// Runs one bench and prints its result (one line of JSON with `--json`).
pub async fn run(command: BenchCommand, settings: &Settings) -> Result<()> {
    match command {
        BenchCommand::Plan { increments, json } => {
            plan::run(increments, json, &settings.counters.precisions)
        }
        BenchCommand::Ingest { args, json } => {
            let r = ingest::run(args).await?;
            report(&r, json, |r| {
                if let Some(b) = &r.redis {
                    println!(
                        "redis-benchmark HINCRBY: {:.0} / {:.0} ops/s (before / after); ceiling {:.0} increments/s over {} precisions",
                        b.hincrby_ops_per_second[0],
                        b.hincrby_ops_per_second[1],
                        b.ceiling_increments_per_second,
                        r.precisions
                    );
                    println!(
                        "book's algorithm: {:.0} increments/s ({} connections, {} counters)",
                        b.book.per_second, b.book.connections, b.book.distinct
                    );
                }
                for run in &r.runs {
                    let ratios = match &run.redis {
                        Some(ingest::RedisRun {
                            ratio_to_ceiling: Some(c),
                            ratio_to_book: b,
                            cpu_ratio_to_ceiling: Some(cpu),
                            ..
                        }) => {
                            format!("  {c:.2} of ceiling ({cpu:.2} in Redis CPU), x{b:.1} the book")
                        }
                        _ => String::new(),
                    };
                    println!(
                        "{:<6} {:<11} {:>8} counters: {:>11.0} increments/s ({} in {:.2} s, totals exact){ratios}",
                        format!("{:?}", run.backend).to_lowercase(),
                        serde_json::to_value(run.mode)?.as_str().unwrap_or_default(),
                        run.distinct,
                        run.per_second,
                        run.increments,
                        run.seconds
                    );
                    if let Some(x) = &run.redis {
                        let (bare, ratio) = (&x.bare, x.ratio_to_bare);
                        println!(
                            "       {ratio:.2} of the bare client ({:.0} increments/s, {} connections x {} a round trip); \
                             Redis CPU {:.2} / {:.2} us, client CPU {:.2} / {:.2} us per increment (Tally / bare)",
                            bare.per_second,
                            bare.connections,
                            bare.per_round_trip,
                            x.redis_cpu_us_per_increment,
                            bare.redis_cpu_us_per_increment,
                            run.client_cpu_us_per_increment,
                            bare.client_cpu_us_per_increment
                        );
                    }
                }
                if let Some(d) = &r.daily {
                    println!(
                        "daily views of {} entities (Zipf s = {}), {} views a call, {} callers:",
                        d.entities, d.zipf_s, d.batch, d.concurrency
                    );
                    for run in &d.runs {
                        println!(
                            "  {:<10} {:>11.0} views/s ({} views, {} entities, totals exact); \
                             Redis CPU {:.2} us, client CPU {:.2} us per view",
                            run.mode,
                            run.views_per_second,
                            run.views,
                            run.distinct_entities,
                            run.redis_cpu_us_per_view,
                            run.client_cpu_us_per_view
                        );
                    }
                    println!(
                        "  exact {:.2}x and aggregated {:.2}x the article's commands from a bare client \
                         (running total: {:.2}x and {:.2}x)",
                        d.exact_ratio_to_bare,
                        d.aggregated_ratio_to_bare,
                        d.exact_running_ratio_to_bare,
                        d.aggregated_running_ratio_to_bare
                    );
                }
                Ok(())
            })
        }
        BenchCommand::Read {
            backend,
            iterations,
            json,
        } => {
            let r = read::run(backend, iterations).await?;
            report(&r, json, |r| {
                for l in &r.runs {
                    let raw = match (&l.raw, l.redis_us_per_read) {
                        (Some(raw), Some(s)) => format!(
                            "  (bare pipeline p50 {:.0} us, p99 {:.0} us; p99 x{:.2}; inside Redis {s:.0} us)",
                            raw.raw_p50_us, raw.raw_p99_us, raw.p99_ratio_to_raw
                        ),
                        _ => String::new(),
                    };
                    let backend = match l.layout {
                        Some(layout) => format!("redis ({layout})"),
                        None => format!("{:?}", l.backend).to_lowercase(),
                    };
                    println!(
                        "{backend:<16} {}: {} samples, p50 {:.0} us, p99 {:.0} us{raw}",
                        l.read, l.samples_per_read, l.p50_us, l.p99_us
                    );
                }
                if let Some(x) = &r.expiring {
                    println!(
                        "expiring vs default, one counter's p99: x{:.2}",
                        x.expiring_p99_ratio_to_default
                    );
                }
                if let Some(b) = &r.busy_stat {
                    println!(
                        "busy stat ({} observations held): {:.1} KiB of Redis memory \
                         (target {} KiB{})",
                        b.observations_held,
                        b.kib,
                        b.target_kib,
                        if b.memory_met { ": met" } else { ": MISSED" }
                    );
                    for x in &b.reads {
                        println!(
                            "busy stat, {} {:?}: {} slices, p50 {:.0} us, p99 {:.0} us; bare \
                             client p50 {:.0} us, p99 {:.0} us; p50 x{:.2}; inside Redis {:.0} \
                             us{}",
                            x.read,
                            x.precisions,
                            x.slices,
                            x.p50_us,
                            x.p99_us,
                            x.bare_p50_us,
                            x.bare_p99_us,
                            x.p50_ratio_to_bare,
                            x.redis_us_per_read,
                            if x.met { ": met" } else { ": MISSED" }
                        );
                    }
                }
                Ok(())
            })
        }
        BenchCommand::Memory {
            counters,
            concurrency,
            json,
        } => {
            let r = memory::run(counters, concurrency).await?;
            report(&r, json, |r| {
                println!(
                    "{} counters x {} precisions x {} samples = {} samples held",
                    r.counters, r.precisions, r.samples_per_precision, r.samples_held
                );
                for l in [&r.tally, &r.book, &r.expiring] {
                    println!(
                        "{:<8} layout: {:.2} bytes/sample ({} bytes; written in {:.1} s; {} checked)",
                        l.layout, l.bytes_per_sample, l.bytes, l.write_seconds, l.listpack_checked
                    );
                }
                println!(
                    "tally vs book: x{:.2}; expiring vs tally: x{:.2}",
                    r.ratio_to_book, r.expiring_ratio_to_default
                );
                for l in [&r.once_default, &r.once_compact] {
                    println!(
                        "counted once, {:<8} layout: {:.1} bytes/counter, {:.2} keys/counter \
                         ({} counters, {} bytes; written in {:.1} s; {} read back)",
                        l.layout,
                        l.bytes_per_counter,
                        l.keys_per_counter,
                        l.counters,
                        l.bytes,
                        l.write_seconds,
                        l.checked
                    );
                }
                println!(
                    "counted once, compact vs default: x{:.2}",
                    r.once_compact_ratio_to_default
                );
                Ok(())
            })
        }
        BenchCommand::Migrate { args, json } => {
            let r = migrate::run(args).await?;
            report(&r, json, |r| {
                println!(
                    "migrated {} counters ({} samples) from SQLite to Redis in {:.2} s: \
                     {:.0} samples/s, x{:.2} of writing them straight into Redis ({:.0}/s); exact",
                    r.counters,
                    r.samples,
                    r.migrate_seconds,
                    r.samples_per_second,
                    r.ratio_to_direct,
                    r.direct_samples_per_second
                );
                Ok(())
            })
        }
        BenchCommand::Clean { args, json } => {
            let r = clean::run(args).await?;
            report(&r, json, |r| {
                println!(
                    "pass over {} counters x {} precisions ({} kept + {} removed per hash): {:.2} s \
                     ({:.2} of the 60 s interval; Redis CPU {:.2} s), {} samples removed in {} round trips",
                    r.counters,
                    r.precisions,
                    r.recent,
                    r.old,
                    r.pass_seconds,
                    r.ratio_to_interval,
                    r.pass_redis_cpu_seconds,
                    r.samples_removed,
                    r.round_trips
                );
                println!(
                    "book's cleaner: {:.2} s for {} counters, {:.0} s extrapolated: x{:.1} slower",
                    r.book_seconds,
                    r.book_counters,
                    r.book_extrapolated_seconds,
                    r.speedup_over_book
                );
                println!(
                    "next pass a minute later: Redis CPU {:.1} us per counter removing by name, \
                     {:.1} us reading every slice (x{:.1}), {} samples removed",
                    r.steady.redis_cpu_us_per_counter,
                    r.steady_reading.redis_cpu_us_per_counter,
                    r.steady_cpu_ratio,
                    r.steady.samples_removed
                );
                Ok(())
            })
        }
        BenchCommand::Retention { args, json } => {
            let r = retention::run(args).await?;
            report(&r, json, print_retention)
        }
        BenchCommand::Http {
            backend,
            seconds,
            connections,
            counters,
            batch,
            json,
        } => {
            let r = serve::http(backend, seconds, connections, counters, batch).await?;
            report(&r, json, print_pretty)
        }
        BenchCommand::Statsd {
            backend,
            seconds,
            lines,
            counters,
            burst,
            recv_buffer,
            json,
        } => {
            let burst = burst.map(|datagrams| serve::Burst {
                datagrams,
                recv_buffer: recv_buffer.unwrap_or(tally::server::udp::DEFAULT_RECV_BUFFER),
            });
            let r = serve::statsd(backend, seconds, lines, counters, burst).await?;
            report(&r, json, print_pretty)
        }
        BenchCommand::Carbon { args, json } => {
            let r = carbon::run(args).await?;
            report(&r, json, |r| {
                println!("{}", r.summary());
                Ok(())
            })
        }
        BenchCommand::Cluster {
            seconds,
            writers,
            json,
        } => {
            let r = cluster::run(seconds, writers).await?;
            report(&r, json, |r| {
                for i in [&r.one, &r.three] {
                    println!(
                        "{} master(s): {:>10.0} counter increments/s {:>10.0} daily views/s",
                        i.masters, i.counter_increments_per_second, i.daily_views_per_second
                    );
                }
                println!(
                    "3 vs 1 master: counters x{:.2}, daily views x{:.2} ({} writers, {} s each)",
                    r.counters_ratio_3_to_1, r.daily_ratio_3_to_1, r.writers, r.seconds
                );
                Ok(())
            })
        }
        BenchCommand::Stats { args, json } => {
            let r = stats::run(args).await?;
            report(&r, json, |r| {
                for run in &r.runs {
                    println!(
                        "{:<10} {:>5} stats: {:>11.0} observations/s ({} in {:.2} s, counts exact) x{:.1} the book, {:.2} us Redis CPU each",
                        run.mode,
                        run.stats,
                        run.per_second,
                        run.observations,
                        run.seconds,
                        run.ratio_to_book,
                        run.redis_cpu_us_per_observation
                    );
                }
                for e in &r.quantile_errors {
                    println!(
                        "p{}: {:.3} read, {:.3} exact: {:.4} relative error",
                        e.q * 100.0,
                        e.reported,
                        e.exact,
                        e.relative_error
                    );
                }
                println!(
                    "max relative error {:.4} over {} values (accuracy {})",
                    r.max_relative_error, r.quantile_values, r.accuracy
                );
                let b = &r.busy;
                println!(
                    "busy stat ({} obs/s, {} slices full): {} bytes = {:.1} KiB in Redis (target {} KiB)",
                    b.observations_per_second, b.slices, b.bytes, b.kib, b.target_kib
                );
                for l in &b.reads {
                    let what = match l.precision {
                        0 => "every precision".to_owned(),
                        p => format!("precision {p} s"),
                    };
                    println!(
                        "read {what}: {} slices, p50 {:.0} us, p99 {:.0} us",
                        l.slices, l.p50_us, l.p99_us
                    );
                }
                for a in &r.by_accuracy {
                    println!(
                        "accuracy {}: busy stat {:.1} KiB, max quantile error {:.4}",
                        a.accuracy, a.kib, a.max_relative_error
                    );
                }
                Ok(())
            })
        }
        BenchCommand::Graphite { args, json } => {
            let r = graphite::run(args).await?;
            report(&r, json, print_graphite)?;
            r.check()
        }
        BenchCommand::DailyMemory {
            entities,
            days,
            concurrency,
            json,
        } => {
            let r = daily_memory::run(entities, days, concurrency).await?;
            report(&r, json, |r| {
                println!(
                    "{} entities x {} days: {:.1} bytes/entity (seed layout {:.1}, x{:.2}); \
                     {} views written in {:.1} s",
                    r.entities,
                    r.days,
                    r.tally_bytes_per_entity,
                    r.seed_bytes_per_entity,
                    r.ratio_to_seed,
                    r.views_written,
                    r.tally_write_seconds
                );
                Ok(())
            })
        }
        BenchCommand::Buffer {
            sink,
            increments,
            rows,
            writers,
            json,
        } => {
            buffer::run(
                buffer::BufferBench {
                    sink,
                    increments,
                    rows,
                    writers,
                    json,
                },
                settings,
            )
            .await
        }
    }
}

/// The human output of a bench without one of its own: its JSON, indented.
fn print_pretty<T: serde::Serialize>(r: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(r)?);
    Ok(())
}

/// `bench graphite`'s human output: per case each server's figures, then
/// the library and the finds, each against its target.
fn print_graphite(r: &graphite::Report) -> Result<()> {
    let met = |m: bool| if m { "met" } else { "MISSED" };
    println!(
        "graphite-web 1.1.10, {} workers; wrk {} connections, {} s per run; now={}",
        r.workers, r.connections, r.seconds, r.now
    );
    for c in &r.renders {
        println!("{}: {}", c.what, c.target);
        if let Some(f) = &c.failed {
            println!("  FAILED: {f}");
            continue;
        }
        println!(
            "  answer: {} series, {} points, {} bytes (same as graphite-web's)",
            c.series, c.points, c.answer_bytes
        );
        let line = |who: &str, f: &graphite::Figures| {
            println!(
                "  {who:<13} p50 {:>8} us  p99 {:>8} us  {:>9.1} req/s  {:>8.3} ms CPU/req  (server {:.2} cores, wrk {:.2})",
                f.p50_us,
                f.p99_us,
                f.requests_per_second,
                f.server_cpu_ms_per_request,
                f.server_cores,
                f.client_cores
            )
        };
        if let Some(g) = &c.graphite_web {
            line("graphite-web", g);
        }
        for t in &c.tally {
            line(&format!("tally {:?}", t.backend).to_lowercase(), &t.figures);
            println!(
                "                x{:.1} req/s, x{:.1} p50, x{:.1} CPU/req: {} (x20 req/s)",
                t.rps_ratio,
                t.p50_ratio,
                t.cpu_ratio,
                met(t.target_met)
            );
        }
    }
    for h in &r.healthz {
        println!(
            "GET /healthz, {:?}: {:.0} req/s (wrk {:.2} cores)",
            h.backend, h.requests_per_second, h.client_cores
        );
    }
    for l in &r.library {
        println!(
            "(b) in process, {:?}: read p50 {:.0} us p99 {:.0} us; fetch p50 {:.0} us; render p50 {:.0} us; HTTP p50 x{:.2} the read: {} (x3)",
            l.backend,
            l.read_p50_us,
            l.read_p99_us,
            l.fetch_p50_us,
            l.render_p50_us,
            l.http_p50_ratio_to_read,
            met(l.target_met)
        );
    }
    for f in &r.finds {
        let bare = match (&f.redis, f.p99_target_met) {
            (Some(x), Some(m)) => format!(
                "; bare pipeline ({} names) p50 {:.0} us p99 {:.0} us, p99 x{:.2}: {} (x3)",
                x.bare.names,
                x.bare.p50_us,
                x.bare.p99_us,
                x.p99_ratio_to_bare,
                met(m)
            ),
            _ => String::new(),
        };
        println!(
            "find {} on {:?} among {} names: {} nodes, p50 {} us p99 {} us: {} (2 ms){bare}",
            f.query,
            f.backend,
            r.find_names,
            f.nodes,
            f.p50_us,
            f.p99_us,
            met(f.p50_target_met)
        );
    }
    Ok(())
}

/// `bench retention`'s human output: per layout the figure with what it is
/// made of (so a reader can recompute it), then the first passes at the
/// peak, each against its target.
fn print_retention(r: &retention::Retention) -> Result<()> {
    let status = |t: &retention::Target| {
        format!(
            "{:.2} {}against the target {} ({}){}",
            t.measured,
            if t.scaled { "scaled " } else { "" },
            t.limit,
            t.what,
            if t.met { ": met" } else { ": MISSED" }
        )
    };
    for l in &r.layouts {
        let name = serde_json::to_value(l.layout)?;
        let name = name.as_str().unwrap_or_default();
        match &l.work {
            retention::Work::RegularPass(p) => {
                println!(
                    "{name}: regular pass over {} busy counters a minute after the last: {:.3} s, \
                     Redis CPU {:.3} s, removed {} ({} per counter at {:?} s, exact): \
                     {:.2} us per busy counter per minute",
                    r.counters,
                    p.pass.seconds,
                    p.pass.redis_cpu_seconds,
                    p.pass.samples_removed,
                    p.removed_per_counter,
                    p.due_precisions,
                    l.us_per_busy_counter_per_minute
                );
            }
            retention::Work::Expiring(e) => {
                let x = &e.expire;
                println!(
                    "{name}: entering a chunk {:.2} us per write (rounds of {} writes, Redis CPU s: \
                     new chunk {:.3?}, inside one {:.3?})",
                    e.roll_us_per_write,
                    r.counters,
                    e.new_chunk_rounds_cpu_seconds,
                    e.existing_chunk_rounds_cpu_seconds
                );
                println!(
                    "{name}: expiring a chunk key {:.2} us ({} keys in {:.2} s: Redis CPU {:.4} s less \
                     idle {:.4} s per {:.2} s)",
                    x.us_per_key,
                    x.keys,
                    x.seconds,
                    x.cpu_seconds,
                    x.idle_cpu_seconds,
                    x.idle_seconds
                );
                let rates: Vec<String> = e
                    .chunks_per_minute
                    .iter()
                    .map(|c| format!("{} s {:.5}", c.precision, c.per_minute))
                    .collect();
                println!(
                    "{name}: chunks per counter per minute: {} (total {:.4}); x ({:.2} + {:.2}) us = \
                     {:.2} us per busy counter per minute",
                    rates.join(", "),
                    e.chunks_per_minute_total,
                    e.roll_us_per_write,
                    x.us_per_key,
                    l.us_per_busy_counter_per_minute
                );
            }
        }
        println!("{name}: {}", status(&l.target));
    }
    for p in &r.peak {
        let name = serde_json::to_value(p.layout)?;
        println!(
            "{} first pass at the peak: {} counters{} x {} precisions x ({} + {}) slices: \
             {:.2} s, Redis CPU {:.2} s; {}; {}",
            name.as_str().unwrap_or_default(),
            p.counters,
            if p.reduced_for_memory {
                format!(" (of {} asked: memory)", p.requested_counters)
            } else {
                String::new()
            },
            r.precisions.len(),
            p.recent,
            p.old,
            p.pass.seconds,
            p.pass.redis_cpu_seconds,
            status(&p.target),
            status(&p.cpu_target)
        );
    }
    Ok(())
}
