//! `tally bench clean`: the time of one cleaner pass over many counters
//! (1,000,000 by default) at every precision, on a redis-server started here.
//!
//! Each counter's hash at each precision holds `recent` samples the pass
//! keeps and `old` samples just past the cutoff that it removes, written
//! through the store's real write path. The timed pass is a first pass,
//! which visits every precision (later passes visit the coarse ones only
//! every `p / 60` passes), so it is the most expensive pass there is. The
//! target is the pass interval, 60 s.
//!
//! Then the steady state: the next pass a minute later (the precisions due
//! every pass), which removes by name what passed the cutoff since the
//! first, next to the same pass by a cleaner that reads every slice.
//!
//! The baseline, in the same run: the book's `clean_counters` (one
//! ZRANGE, one HKEYS and one HDEL round trip per hash, as published) over
//! the first `book_counters` counters of the same data in the book's layout
//! on a second server, extrapolated linearly to the same number of
//! counters. Afterwards the bench checks that the pass removed exactly the
//! old samples and that a sample of hashes holds exactly the recent ones.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, ensure};
use redis::AsyncCommands;
use tally::backend::redis::Layout;
use tally::engine::CleanReport;
use tally::{
    Backend, BackendConfig, CleanerSettings, Clock, CounterSettings, Counters, SystemClock,
    Timestamp,
};

use crate::server::{BenchRedis, Slices, check_samples, fill};

/// The bench's result.
#[derive(Debug, serde::Serialize)]
pub struct Clean {
    pub bench: &'static str,
    pub machine: serde_json::Value,
    pub counters: u64,
    pub precisions: usize,
    pub recent: u64,
    pub old: u64,
    pub batch: usize,
    pub fill_seconds: f64,
    pub pass_seconds: f64,
    /// The server's CPU seconds during the pass (other load on the machine
    /// moves this much less than wall time).
    pub pass_redis_cpu_seconds: f64,
    pub scanned: u64,
    pub samples_removed: u64,
    pub round_trips: u64,
    /// `pass_seconds` ÷ the 60 s pass interval.
    pub ratio_to_interval: f64,
    pub book_counters: u64,
    pub book_seconds: f64,
    /// The book's time per counter × `counters`.
    pub book_extrapolated_seconds: f64,
    /// `book_extrapolated_seconds` ÷ `pass_seconds`.
    pub speedup_over_book: f64,
    /// The next pass, a minute later (the precisions due every pass), as
    /// a cleaner runs it: removing by name the slices that passed the
    /// cutoff since its last visit.
    pub steady: SteadyPass,
    /// The same pass (the same precisions, the same number of slices
    /// removed) reading every slice, as the book's cleaner and a full pass
    /// do (`full_pass_every` 1).
    pub steady_reading: SteadyPass,
    /// Redis CPU of `steady_reading` ÷ Redis CPU of `steady`.
    pub steady_cpu_ratio: f64,
}

/// One pass after the first.
#[derive(Debug, serde::Serialize)]
pub struct SteadyPass {
    pub seconds: f64,
    pub redis_cpu_seconds: f64,
    /// Redis CPU microseconds per counter.
    pub redis_cpu_us_per_counter: f64,
    pub samples_removed: u64,
}

/// What the passes of `bench clean` and `bench retention` share.
#[derive(clap::Args, Clone, Debug)]
pub struct PassArgs {
    /// Counters per cleaner round trip.
    #[arg(long, default_value_t = tally::counters::settings::DEFAULT_CLEAN_BATCH)]
    pub batch: usize,
    /// Write calls in flight while filling.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
}

/// The bench's parameters.
#[derive(clap::Args, Clone, Debug)]
pub struct CleanArgs {
    /// Counters.
    #[arg(long, default_value_t = 1_000_000)]
    pub counters: u64,
    /// Samples per hash the pass keeps.
    #[arg(long, default_value_t = 2)]
    pub recent: u64,
    /// Samples per hash past the cutoff, which the pass removes.
    #[arg(long, default_value_t = 2)]
    pub old: u64,
    /// Counters the book's cleaner cleans (then extrapolated).
    #[arg(long, default_value_t = 5_000)]
    pub book_counters: u64,
    #[command(flatten)]
    pub pass: PassArgs,
}

/// A first pass (no earlier visit: every precision due, every slice read)
/// over counters filled through the real write path, checked: it scanned
/// every counter, removed exactly the `old` slices, and a sample of
/// counters holds exactly the `recent` ones. The counters and the cleaner
/// are handed back for later passes.
pub struct FirstPass {
    pub counters: Counters,
    pub cleaner: tally::Cleaner,
    pub fill_seconds: f64,
    pub pass: SteadyPass,
    pub report: CleanReport,
}

/// Fills `names` with `slices` at every precision at `now` (on `clock`, in
/// `layout`, on `server`), then runs and checks a cleaner's first pass at
/// `now`.
pub async fn first_pass(
    server: &BenchRedis,
    layout: Layout,
    clock: Arc<dyn Clock>,
    names: &[String],
    slices: Slices,
    now: u64,
    args: &PassArgs,
) -> Result<FirstPass> {
    let settings = CounterSettings {
        samples: slices.samples,
        ..CounterSettings::default()
    };
    let np = settings.precisions.len() as u64;
    let n = names.len() as u64;
    // The book's registry has an entry per (counter, precision).
    let entries = if layout == Layout::Ria { n * np } else { n };
    let counters = counters_on(server, layout, &settings, clock).await?;
    let started = Instant::now();
    fill(&counters, names, slices, now, 100, args.concurrency).await?;
    let fill_seconds = started.elapsed().as_secs_f64();
    let mut cleaner = first_cleaner(&counters, args)?;
    let (pass, report) = timed_pass(server, &mut cleaner, now, n).await?;
    check_first_pass(&counters, names, slices, &report, entries).await?;
    Ok(FirstPass {
        counters,
        cleaner,
        fill_seconds,
        pass,
        report,
    })
}

/// The cleaner of a first pass: `args.batch` counters per round trip.
pub fn first_cleaner(counters: &Counters, args: &PassArgs) -> Result<tally::Cleaner> {
    Ok(counters.cleaner(CleanerSettings {
        batch: args.batch,
        ..CleanerSettings::default()
    })?)
}

/// Checks a first pass (`report`) over `names` filled with `slices` of
/// every precision: it scanned `entries` registry entries, removed exactly
/// the `old` slices, and a sample of counters holds exactly the `recent`
/// ones.
pub async fn check_first_pass(
    counters: &Counters,
    names: &[String],
    slices: Slices,
    report: &CleanReport,
    entries: u64,
) -> Result<()> {
    let np = counters.settings().precisions.len() as u64;
    let n = names.len() as u64;
    ensure!(
        report.scanned == entries && report.samples_removed == n * np * slices.old,
        "the first pass scanned {} registry entries and removed {} samples; expected {} and {}",
        report.scanned,
        report.samples_removed,
        entries,
        n * np * slices.old
    );
    check_samples(
        counters,
        names,
        names.len() / 100,
        slices.recent,
        |name, p, held| {
            format!(
                "{name} at {p} s holds {held} samples after the pass, not {}",
                slices.recent
            )
        },
    )
    .await?;
    Ok(())
}

/// [`first_pass`] on the system clock, at its current second (handed back
/// with the pass).
pub async fn first_pass_now(
    server: &BenchRedis,
    layout: Layout,
    names: &[String],
    slices: Slices,
    args: &PassArgs,
) -> Result<(u64, FirstPass)> {
    let now = SystemClock.now().whole_secs();
    let clock = Arc::new(SystemClock);
    let first = first_pass(server, layout, clock, names, slices, now, args).await?;
    Ok((now, first))
}

pub async fn run(args: CleanArgs) -> Result<Clean> {
    ensure!(
        args.counters > 0 && args.recent > 0 && args.book_counters > 0,
        "--counters, --recent and --book-counters must be positive"
    );
    let settings = CounterSettings::default();
    let np = settings.precisions.len();
    let slices = Slices {
        recent: args.recent,
        old: args.old,
        samples: settings.samples,
    };
    let names: Vec<String> = (0..args.counters).map(|i| format!("k{i}")).collect();

    let server = BenchRedis::start();
    let (now, first) =
        first_pass_now(&server, Layout::default(), &names, slices, &args.pass).await?;
    let FirstPass {
        counters,
        mut cleaner,
        fill_seconds,
        pass,
        report,
    } = first;

    // The steady state: a remembering pass a minute later, then the same
    // work for a cleaner that reads every slice (its pass 0 visits every
    // precision and is not timed; its pass 1, another minute later, is).
    let (steady, _) = timed_pass(&server, &mut cleaner, now + 60, args.counters).await?;
    let mut reading = counters.cleaner(CleanerSettings {
        batch: args.pass.batch,
        full_pass_every: 1,
        ..CleanerSettings::default()
    })?;
    reading.pass_at(Timestamp::from_secs(now + 60)?).await?;
    let (steady_reading, _) = timed_pass(&server, &mut reading, now + 120, args.counters).await?;
    ensure!(
        steady.samples_removed == steady_reading.samples_removed,
        "the two steady passes removed {} and {} samples",
        steady.samples_removed,
        steady_reading.samples_removed
    );
    drop(counters);
    drop(server);

    // The book's cleaner on the same data in its own layout.
    let book_n = args.book_counters.min(args.counters);
    let server = BenchRedis::start();
    let book = counters_on(&server, Layout::Ria, &settings, Arc::new(SystemClock)).await?;
    fill(
        &book,
        &names[..book_n as usize],
        slices,
        now,
        100,
        args.pass.concurrency,
    )
    .await?;
    let mut conn = server.raw().await?;
    let started = Instant::now();
    let removed = book_clean_pass(&mut conn, now as f64, settings.samples).await?;
    let book_seconds = started.elapsed().as_secs_f64();
    ensure!(
        removed == book_n * np as u64 * args.old,
        "the book's pass removed {removed} samples"
    );
    let book_extrapolated = book_seconds / book_n as f64 * args.counters as f64;
    Ok(Clean {
        bench: "clean",
        machine: crate::server::machine(),
        counters: args.counters,
        precisions: np,
        recent: args.recent,
        old: args.old,
        batch: args.pass.batch,
        fill_seconds,
        pass_seconds: pass.seconds,
        pass_redis_cpu_seconds: pass.redis_cpu_seconds,
        scanned: report.scanned,
        samples_removed: report.samples_removed,
        round_trips: report.round_trips,
        ratio_to_interval: pass.seconds / 60.0,
        book_counters: book_n,
        book_seconds,
        book_extrapolated_seconds: book_extrapolated,
        speedup_over_book: book_extrapolated / pass.seconds,
        steady_cpu_ratio: steady_reading.redis_cpu_seconds / steady.redis_cpu_seconds,
        steady,
        steady_reading,
    })
}

/// One pass of `cleaner` at `at`, timed, with the server's CPU.
pub async fn timed_pass(
    server: &BenchRedis,
    cleaner: &mut tally::Cleaner,
    at: u64,
    counters: u64,
) -> Result<(SteadyPass, CleanReport)> {
    let cpu = server.cpu_seconds().await?;
    let started = Instant::now();
    let report = cleaner.pass_at(Timestamp::from_secs(at)?).await?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu = server.cpu_seconds().await? - cpu;
    let pass = SteadyPass {
        seconds,
        redis_cpu_seconds: cpu,
        redis_cpu_us_per_counter: cpu * 1e6 / counters as f64,
        samples_removed: report.samples_removed,
    };
    Ok((pass, report))
}

/// Counters on `server` in `layout` with `settings`, on `clock`.
pub async fn counters_on(
    server: &BenchRedis,
    layout: Layout,
    settings: &CounterSettings,
    clock: Arc<dyn Clock>,
) -> Result<Counters> {
    let backend = Backend::open(&BackendConfig::Redis {
        url: server.url(),
        layout,
    })
    .await?;
    let store = backend.counter_store(clock.clone()).await?;
    Ok(Counters::with_clock(store, settings.clone(), clock)?)
}

/// The first pass of the book's `clean_counters`, command for command (as
/// published: ZCARD and ZRANGE per member, HKEYS, HDEL; HLEN and ZREM when a
/// hash empties). Returns the samples removed.
async fn book_clean_pass(
    conn: &mut redis::aio::MultiplexedConnection,
    now: f64,
    sample_count: u64,
) -> Result<u64> {
    let mut index: isize = 0;
    let mut removed = 0u64;
    loop {
        let zcard: isize = conn.zcard("known:").await?;
        if index >= zcard {
            break;
        }
        let hash: Vec<String> = conn.zrange("known:", index, index).await?;
        index += 1;
        let Some(hash) = hash.into_iter().next() else {
            break;
        };
        let prec: u64 = hash.split(':').next().unwrap_or("1").parse()?;
        let hkey = format!("count:{hash}");
        let cutoff = now - (sample_count * prec) as f64;
        let mut samples: Vec<u64> = conn
            .hkeys::<_, Vec<String>>(&hkey)
            .await?
            .iter()
            .map(|k| k.parse())
            .collect::<std::result::Result<_, _>>()?;
        samples.sort_unstable();
        let remove = samples.partition_point(|&x| (x as f64) <= cutoff);
        if remove > 0 {
            let n: u64 = conn.hdel(&hkey, &samples[..remove]).await?;
            removed += n;
            if remove == samples.len() {
                let len: i64 = conn.hlen(&hkey).await?;
                if len == 0 {
                    let _: i64 = conn.zrem("known:", &hash).await?;
                    index -= 1;
                }
            }
        }
    }
    Ok(removed)
}
