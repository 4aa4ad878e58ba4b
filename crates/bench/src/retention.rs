//! `tally bench retention`: the Redis CPU that keeping retention costs per
//! busy counter per minute at steady state, for each layout, and the first
//! cleaner pass at the peak.
//!
//! A busy counter is written every second (so every precision is) and holds
//! each precision's full window (`samples` slices). Every figure is Redis
//! CPU (`INFO cpu`, user + system deltas), never wall time, except the
//! first pass's wall time shown beside its CPU.
//!
//! - `default` and `ria` (retention by the cleaner): N counters filled at
//!   steady state at T0 and visited by a cleaner's first pass at T0 (`bench
//!   clean`'s checked first pass, [`crate::clean::first_pass`]); then a
//!   minute of traffic (every counter once a second, T0+1 .. T0+60, through
//!   `Counters::incr_many` on a clock set to each second); then that
//!   cleaner's regular pass at T0+60, which remembers T0 and so removes by
//!   name what passed the cutoff since. Its CPU ÷ N is the figure. Checked:
//!   it removed exactly those slices, and a sample of hashes holds exactly
//!   the window at the precisions due (plus the minute's new slices at the
//!   others).
//! - `expiring` (retention by Redis's expiry, no cleaner): (a) the extra work
//!   of a write that enters a new chunk (its chunks' expiry, the registry,
//!   the prune): the CPU of a round of N writes whose 1 s slice starts a
//!   chunk minus that of a round inside existing chunks (medians of
//!   `repeats` rounds each), per write; (b) Redis expiring a chunk key: N
//!   counters' full 1 s chunks set to expire a few seconds ahead, on a
//!   server of their own (why: the `expire` function), the CPU from just before they
//!   come due until `expired_keys` (INFO stats) has risen by N, less the
//!   idle CPU of the same length (measured just before, polled the same
//!   way), per key. A counter enters (and Redis later
//!   expires) 60 / (p × samples) chunks of precision p a minute, so the
//!   figure is Σ_p 60 / (p × samples) × (a + b). Checked: exactly N keys
//!   expired, a sample of them is gone, and a sample of counters reads back
//!   exactly what was written in its window.
//! - The first pass at the peak (`default`, `ria`, and `compact` when named;
//!   `expiring` has no cleaner, so no pass): `bench clean`'s checked first
//!   pass with every precision holding its window plus the slices that pass
//!   the cutoff between two visits, over `--peak-counters` (fewer if they
//!   would not fit in the memory available: the JSON says so). The peak is
//!   set up untimed by copying one counter written through the store
//!   (`restore_fill`: its hashes' `DUMP` restored under every other name);
//!   the clock runs on the pass only, which reports its Redis CPU per
//!   counter (the target: 60 µs), its wall time and `INFO commandstats`,
//!   and with `--perf-dir` a `perf record -g` of the server over it. The
//!   compact layout's one hash per counter holds 7 × 181 slices at the
//!   peak: the run raises `hash-max-listpack-entries` to that so it stays a
//!   listpack (a hashtable would take about 80 KB per busy counter).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use redis::AsyncCommands;
use tally::backend::redis::Layout;
use tally::backend::redis::layout::{DEFAULT_PREFIX, RIA_KNOWN, SpaceKeys, ria_member};
use tally::counters::settings::DEFAULT_CLEAN_INTERVAL;
use tally::engine::precision::is_due;
use tally::engine::{CellDelta, Value};
use tally::{Clock, CounterSettings, Counters, ManualClock, SystemClock};

use crate::clean::{
    FirstPass, PassArgs, SteadyPass, check_first_pass, counters_on, first_cleaner, first_pass,
    timed_pass,
};
use crate::server::{
    BenchRedis, Slices, common_chunk_start, fill, fill_count, hash_key, incr_each, info_now,
    write_deltas,
};
use crate::server::{command_stats, reset_command_stats};

/// Expiring layout: Redis CPU µs per busy counter per minute.
pub const EXPIRING_TARGET_US: f64 = 5.0;
/// Cleaned layouts: Redis CPU seconds of a regular pass over 1,000,000 busy
/// counters.
pub const REGULAR_TARGET_SECONDS: f64 = 15.0;
/// Cleaned layouts: seconds of a first pass at the peak over 1,000,000
/// counters.
pub const FIRST_TARGET_SECONDS: f64 = 60.0;
/// Cleaned layouts: Redis CPU µs per counter of a first pass at the peak.
pub const FIRST_TARGET_CPU_US: f64 = 60.0;
/// Bytes in a GiB.
const GIB: f64 = (1u64 << 30) as f64;
/// The counters the targets speak of.
const MILLION: f64 = 1_000_000.0;
/// Counters per write call.
const PER_CALL: usize = 100;
/// Redis memory per sample assumed when sizing the peak run (`bench
/// memory` measures 9.5 to 10.3 in the cleaned layouts; the rest is room
/// for the allocator).
const PEAK_BYTES_PER_SAMPLE: f64 = 12.0;
/// The idle period measured before the chunk keys come due.
const IDLE: Duration = Duration::from_secs(1);
/// How often INFO is polled while waiting for the keys to expire (and
/// while idle, the same).
const POLL: Duration = Duration::from_millis(20);
/// How long Redis may take to expire the keys once due.
const EXPIRE_WAIT: Duration = Duration::from_secs(60);

/// A layout to measure.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LayoutName {
    /// The default layout, cleaned by the cleaner.
    Default,
    /// The book's keys, cleaned by the cleaner.
    Ria,
    /// Chunks that Redis expires.
    Expiring,
    /// One hash per counter, cleaned by the cleaner (not measured unless
    /// named).
    Compact,
}

impl LayoutName {
    fn layout(self) -> Result<Layout> {
        Ok(match self {
            LayoutName::Default => Layout::default(),
            LayoutName::Ria => Layout::Ria,
            LayoutName::Expiring => Layout::parse("expiring", DEFAULT_PREFIX)?,
            LayoutName::Compact => Layout::parse("compact", DEFAULT_PREFIX)?,
        })
    }
}

/// The bench's parameters.
#[derive(clap::Args, Clone, Debug)]
pub struct RetentionArgs {
    /// Busy counters per layout.
    #[arg(long, default_value_t = 20_000)]
    pub counters: u64,
    /// Layouts to measure.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "default,ria,expiring"
    )]
    pub layouts: Vec<LayoutName>,
    /// Counters of the first pass at the peak (every layout measured but
    /// `expiring`, which has no cleaner; fewer if they would not fit in the
    /// memory available; 0 skips it).
    #[arg(long, default_value_t = 1_000_000)]
    pub peak_counters: u64,
    /// Rounds of each kind behind the expiring layout's medians.
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Record the redis-server with `perf record -g` during each first
    /// pass at the peak, into this directory.
    #[arg(long)]
    pub perf_dir: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub pass: PassArgs,
}

/// The bench's result.
#[derive(Debug, serde::Serialize)]
pub struct Retention {
    pub bench: &'static str,
    pub machine: serde_json::Value,
    /// Busy counters per layout.
    pub counters: u64,
    pub precisions: Vec<u64>,
    pub samples: u64,
    pub batch: usize,
    pub layouts: Vec<LayoutRetention>,
    /// The first pass at the peak, per cleaned layout measured.
    pub peak: Vec<PeakPass>,
}

/// One layout's retention cost at steady state.
#[derive(Debug, serde::Serialize)]
pub struct LayoutRetention {
    pub layout: LayoutName,
    /// Redis CPU microseconds spent on retention per busy counter per
    /// minute.
    pub us_per_busy_counter_per_minute: f64,
    #[serde(flatten)]
    pub work: Work,
    pub target: Target,
}

/// What retention does in a layout: the cleaner's regular pass (`default`,
/// `ria`, `compact`), or entering and expiring chunks (`expiring`). In the
/// JSON, a field `regular_pass` or `expiring`.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Work {
    RegularPass(RegularPass),
    Expiring(Expiring),
}

/// A figure against its target.
#[derive(Debug, serde::Serialize)]
pub struct Target {
    pub what: &'static str,
    pub limit: f64,
    pub measured: f64,
    /// True when `measured` is scaled linearly from fewer counters than
    /// the target speaks of.
    pub scaled: bool,
    pub met: bool,
}

impl Target {
    fn new(what: &'static str, limit: f64, measured: f64, scaled: bool) -> Self {
        Target {
            what,
            limit,
            measured,
            scaled,
            met: measured <= limit,
        }
    }
}

/// The cleaner's regular pass a minute after its previous visit.
#[derive(Debug, serde::Serialize)]
pub struct RegularPass {
    pub fill_seconds: f64,
    /// The first pass at T0 (no earlier visit; removes nothing).
    pub first_pass: SteadyPass,
    /// Writing the minute of traffic (wall).
    pub traffic_seconds: f64,
    pub increments: u64,
    /// The pass at T0 + 60.
    pub pass: SteadyPass,
    /// The precisions this pass visits.
    pub due_precisions: Vec<u64>,
    /// Slices per counter that passed the cutoff in the minute (the pass
    /// removed exactly `counters` times this).
    pub removed_per_counter: u64,
    /// Hashes whose length was checked after the pass.
    pub hashes_checked: u64,
    /// Where the pass's Redis time went: `INFO commandstats` over the pass
    /// (commands run by scripts counted on their own too).
    pub commands: BTreeMap<String, CommandCost>,
}

pub use crate::server::CommandCost;

/// The expiring layout's two kinds of retention work.
#[derive(Debug, serde::Serialize)]
pub struct Expiring {
    pub fill_seconds: f64,
    /// Redis CPU seconds of each round of N writes whose 1 s slice starts a
    /// chunk.
    pub new_chunk_rounds_cpu_seconds: Vec<f64>,
    /// Redis CPU seconds of each round of N writes inside existing chunks.
    pub existing_chunk_rounds_cpu_seconds: Vec<f64>,
    /// (median new − median existing) ÷ N, in µs: the extra work of
    /// entering a chunk.
    pub roll_us_per_write: f64,
    /// The same by command (`INFO commandstats`, every round): server µs
    /// per write entering a chunk less per write inside one.
    pub roll_commands_us_per_write: BTreeMap<String, f64>,
    pub expire: Expire,
    /// Chunks a busy counter enters (and Redis expires) per minute, per
    /// precision: 60 / (p × samples).
    pub chunks_per_minute: Vec<ChunkRate>,
    pub chunks_per_minute_total: f64,
    /// Counters whose every precision was read back and compared.
    pub reads_checked: u64,
}

/// Chunks of one precision entered per busy counter per minute.
#[derive(Debug, serde::Serialize)]
pub struct ChunkRate {
    pub precision: u64,
    pub per_minute: f64,
}

/// Redis expiring N chunk keys.
#[derive(Debug, serde::Serialize)]
pub struct Expire {
    pub keys: u64,
    /// The keys' time to live when set.
    pub ttl_seconds: u64,
    pub idle_seconds: f64,
    pub idle_cpu_seconds: f64,
    /// From just before the keys came due until the last was expired.
    pub seconds: f64,
    pub cpu_seconds: f64,
    /// `cpu_seconds` less the idle CPU scaled to `seconds`.
    pub cpu_less_idle_seconds: f64,
    pub us_per_key: f64,
    /// INFO's `expired_keys` rise (checked equal to `keys`).
    pub expired_keys: u64,
    /// Keys checked gone afterwards.
    pub keys_checked_gone: u64,
}

/// A first pass with every precision at its peak.
#[derive(Debug, serde::Serialize)]
pub struct PeakPass {
    pub layout: LayoutName,
    pub requested_counters: u64,
    pub counters: u64,
    /// True when fewer counters than requested were used, for memory.
    pub reduced_for_memory: bool,
    pub memory_available_gib: f64,
    /// Redis memory the counters were estimated to need.
    pub estimated_gib: f64,
    /// Redis's `used_memory` once filled.
    pub used_memory_gib: f64,
    /// `hash-max-listpack-entries` as set for this run (the compact
    /// layout's one hash holds every precision's peak); `None`: the test
    /// servers' own (512).
    pub listpack_entries_set: Option<u64>,
    /// Slices per hash: the window plus those past the cutoff.
    pub recent: u64,
    pub old: u64,
    /// How the peak was set up (untimed): `restore`, see `restore_fill`.
    pub fill: &'static str,
    pub fill_seconds: f64,
    pub pass: SteadyPass,
    pub scanned: u64,
    pub round_trips: u64,
    /// Wall seconds per 1,000,000 counters (scaled when fewer were used).
    pub target: Target,
    /// Redis CPU microseconds per counter (issue 20: at most 60).
    pub cpu_target: Target,
    pub redis_pid: u32,
    /// The `perf record -g` of the redis-server over the pass, with
    /// `--perf-dir`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub perf_data: Option<String>,
    /// Where the pass's Redis time went: `INFO commandstats` over the pass
    /// (commands run by scripts counted on their own too).
    pub commands: BTreeMap<String, CommandCost>,
    /// The same per counter, in µs (without INFO and CONFIG).
    pub commands_us_per_counter: BTreeMap<String, f64>,
}

pub async fn run(args: RetentionArgs) -> Result<Retention> {
    ensure!(args.counters > 0, "--counters must be positive");
    ensure!(args.repeats > 0, "--repeats must be positive");
    ensure!(!args.layouts.is_empty(), "--layouts names no layout");
    let settings = CounterSettings::default();
    let names: Vec<String> = (0..args.counters).map(|i| format!("b{i}")).collect();
    let mut layouts = Vec::new();
    for &layout in &args.layouts {
        layouts.push(match layout {
            LayoutName::Expiring => expiring(&args, &settings, &names).await?,
            cleaned => regular(cleaned, &args, &settings, &names).await?,
        });
    }
    let mut peak = Vec::new();
    if args.peak_counters > 0 {
        for &layout in &args.layouts {
            if layout != LayoutName::Expiring {
                peak.push(peak_pass(layout, &args, &settings).await?);
            }
        }
    }
    Ok(Retention {
        bench: "retention",
        machine: crate::server::machine(),
        counters: args.counters,
        precisions: settings.precisions.clone(),
        samples: settings.samples,
        batch: args.pass.batch,
        layouts,
        peak,
    })
}

/// A cleaned layout: the regular pass after a minute of traffic.
async fn regular(
    layout: LayoutName,
    args: &RetentionArgs,
    settings: &CounterSettings,
    names: &[String],
) -> Result<LayoutRetention> {
    let n = names.len() as u64;
    let samples = settings.samples;
    let server = BenchRedis::start();
    let t0 = SystemClock.now().whole_secs();
    let clock = ManualClock::at(t0 as f64 + 0.5);
    let slices = Slices {
        recent: samples,
        old: 0,
        samples,
    };
    let FirstPass {
        counters,
        mut cleaner,
        fill_seconds,
        pass: first,
        ..
    } = first_pass(
        &server,
        layout.layout()?,
        Arc::new(clock.clone()),
        names,
        slices,
        t0,
        &args.pass,
    )
    .await?;
    let started = Instant::now();
    for k in 1..=60 {
        clock.set((t0 + k) as f64 + 0.5);
        incr_each(&counters, names, PER_CALL, args.pass.concurrency).await?;
    }
    let traffic_seconds = started.elapsed().as_secs_f64();
    let mut conn = server.raw().await?;
    reset_command_stats(&mut conn).await?;
    let (pass, _) = timed_pass(&server, &mut cleaner, t0 + 60, n).await?;
    let commands = command_stats(&mut conn).await?;

    // Exactly what passed the cutoff in the minute, at the precisions due.
    let interval = DEFAULT_CLEAN_INTERVAL.as_secs();
    let new_in_minute = |p: u64| (t0 + 60) / p - t0 / p;
    let due: Vec<u64> = (settings.precisions.iter().copied())
        .filter(|&p| is_due(1, p, interval))
        .collect();
    let per_counter: u64 = due.iter().map(|&p| new_in_minute(p)).sum();
    ensure!(
        pass.samples_removed == n * per_counter,
        "the regular pass removed {} samples; {} passed the cutoff ({per_counter} per counter)",
        pass.samples_removed,
        n * per_counter
    );
    let mut checked = 0;
    let l = layout.layout()?;
    let expected = |p: u64| {
        if due.contains(&p) {
            samples
        } else {
            samples + new_in_minute(p)
        }
    };
    for name in names.iter().step_by((names.len() / 50).max(1)) {
        if layout == LayoutName::Compact {
            // One hash holds every precision's slices.
            let key = l.space_keys(counters.space()).hash(1, name);
            let len: u64 = conn.hlen(&key).await?;
            let want: u64 = settings.precisions.iter().map(|&p| expected(p)).sum();
            ensure!(
                len == want,
                "{key} holds {len} slices after the pass, not {want}"
            );
            checked += settings.precisions.len() as u64;
            continue;
        }
        for &p in &settings.precisions {
            let key =
                hash_key(&l, p, name)?.context("a cleaned layout has a hash per precision")?;
            let len: u64 = conn.hlen(&key).await?;
            let want = expected(p);
            ensure!(
                len == want,
                "{key} holds {len} slices after the pass, not {want}"
            );
            checked += 1;
        }
    }
    let us = pass.redis_cpu_us_per_counter;
    let scaled = pass.redis_cpu_seconds * MILLION / n as f64;
    Ok(LayoutRetention {
        layout,
        us_per_busy_counter_per_minute: us,
        target: Target::new(
            "regular pass over 1,000,000 busy counters, Redis CPU seconds",
            REGULAR_TARGET_SECONDS,
            scaled,
            n != MILLION as u64,
        ),
        work: Work::RegularPass(RegularPass {
            fill_seconds,
            first_pass: first,
            traffic_seconds,
            increments: 60 * n,
            pass,
            due_precisions: due,
            removed_per_counter: per_counter,
            hashes_checked: checked,
            commands,
        }),
    })
}

/// The expiring layout: entering a chunk, and Redis expiring one.
///
/// The store's clock is manual; Redis expires keys by its own clock, after
/// the seconds to live each write sets from the store's. The timeline
/// starts at `b`, a chunk start at every precision. (a) runs on the steady
/// state, filled at the last second of the 1 s chunk starting at `b`, at
/// later 1 s chunk starts that start no coarser chunk. (b) runs on a second
/// server holding only the N due chunks (see [`expire`]).
async fn expiring(
    args: &RetentionArgs,
    settings: &CounterSettings,
    names: &[String],
) -> Result<LayoutRetention> {
    let n = names.len() as u64;
    let (precisions, samples) = (&settings.precisions, settings.samples);
    let conc = args.pass.concurrency;
    let p1 = precisions[0];
    let span = p1 * samples;
    ensure!(
        samples > 1,
        "the expiring bench needs chunks of 2 slices or more"
    );
    let b = common_chunk_start(precisions, samples, SystemClock.now().whole_secs());
    let server = BenchRedis::start();
    let clock = ManualClock::at(0.0);
    let layout = LayoutName::Expiring.layout()?;
    let counters = counters_on(&server, layout, settings, Arc::new(clock.clone())).await?;
    let mut written = Written::default();

    let t_fill = b + span - p1;
    clock.set(t_fill as f64 + 0.5);
    let started = Instant::now();
    let slices = Slices {
        recent: samples,
        old: 0,
        samples,
    };
    fill(&counters, names, slices, t_fill, PER_CALL, conc).await?;
    let fill_seconds = started.elapsed().as_secs_f64();
    for &p in precisions {
        for s in slices.of(p, t_fill / p * p) {
            written.add(p, s, fill_count(p, s));
        }
    }

    // (a) Rounds entering a new 1 s chunk (and no coarser one), then rounds
    // inside it.
    let mut conn = server.raw().await?;
    let starts: Vec<u64> = (1..)
        .map(|j| b + j * span)
        .filter(|&s| precisions[1..].iter().all(|&p| s % (p * samples) != 0))
        .take(args.repeats)
        .collect();
    let (mut new, mut existing) = (Vec::new(), Vec::new());
    // Server µs by command: rounds entering a chunk count up, rounds
    // inside one count down.
    let mut by_command: BTreeMap<String, f64> = BTreeMap::new();
    for &start in &starts {
        for (at, cpus, sign) in [(start, &mut new, 1.0), (start + p1, &mut existing, -1.0)] {
            clock.set(at as f64 + 0.5);
            reset_command_stats(&mut conn).await?;
            let cpu = info_now(&mut conn).await?.cpu_seconds;
            incr_each(&counters, names, PER_CALL, conc).await?;
            cpus.push(info_now(&mut conn).await?.cpu_seconds - cpu);
            for (command, cost) in command_stats(&mut conn).await? {
                *by_command.entry(command).or_default() += sign * cost.usec;
            }
            written.incr(precisions, at);
        }
    }
    let roll = (median(&new) - median(&existing)) * 1e6 / n as f64;
    let rounds_writes = (n as usize * starts.len()) as f64;
    let roll_commands_us_per_write = by_command
        .into_iter()
        .filter(|(command, _)| command != "info" && command != "config")
        .map(|(command, usec)| (command, usec / rounds_writes))
        .collect();

    // Reads return exactly what was written in each window, though older
    // chunks are still in Redis.
    let now = clock.now().as_secs_f64();
    let sample: Vec<&String> = names.iter().step_by((names.len() / 50).max(1)).collect();
    for name in &sample {
        let got = counters.get_all(name).await?;
        ensure!(
            got.len() == precisions.len(),
            "{name}: {} series",
            got.len()
        );
        for series in got {
            let want = written.window(series.precision, samples, now);
            let have: Vec<(u64, i64)> = series.samples.iter().map(|s| (s.start, s.count)).collect();
            ensure!(
                have == want,
                "{name} at {} s reads {have:?}, but its window holds {want:?}",
                series.precision
            );
        }
    }
    drop(counters);
    drop(server);

    let expire = expire(settings, names, b, conc).await?;
    let rates: Vec<ChunkRate> = precisions
        .iter()
        .map(|&p| ChunkRate {
            precision: p,
            per_minute: 60.0 / (p * samples) as f64,
        })
        .collect();
    let total: f64 = rates.iter().map(|r| r.per_minute).sum();
    let us = total * (roll + expire.us_per_key);
    Ok(LayoutRetention {
        layout: LayoutName::Expiring,
        us_per_busy_counter_per_minute: us,
        target: Target::new(
            "Redis CPU us per busy counter per minute",
            EXPIRING_TARGET_US,
            us,
            false,
        ),
        work: Work::Expiring(Expiring {
            fill_seconds,
            new_chunk_rounds_cpu_seconds: new,
            existing_chunk_rounds_cpu_seconds: existing,
            roll_us_per_write: roll,
            roll_commands_us_per_write,
            expire,
            chunks_per_minute: rates,
            chunks_per_minute_total: total,
            reads_checked: sample.len() as u64,
        }),
    })
}

/// (b) Redis expiring N chunk keys, on a server of its own whose only keys
/// with a time to live are those N (each counter's 1 s chunk starting at
/// `b`, written whole, `samples` slices, then given a few seconds to live)
/// and as many live ones (a slice of the next chunk). Redis's active expiry
/// samples keys with a time to live and stops while fewer than a tenth of
/// those it samples have expired, so among the steady state's other chunks
/// (a dozen per counter, the 1 s chunks due together a twelfth of them) it
/// expires them at about 20 keys a second (hz 10) and the wait would take
/// many minutes; at half the keys, it expires them at once. What this
/// leaves out, sampling more live keys per expired one, is the baseline
/// work Redis does every cycle whether or not a key is due.
async fn expire(
    settings: &CounterSettings,
    names: &[String],
    b: u64,
    conc: usize,
) -> Result<Expire> {
    let n = names.len() as u64;
    let (p1, samples) = (settings.precisions[0], settings.samples);
    let span = p1 * samples;
    let server = BenchRedis::start();
    let clock = ManualClock::at(b as f64 + 0.5);
    let layout = LayoutName::Expiring.layout()?;
    let counters = counters_on(&server, layout.clone(), settings, Arc::new(clock.clone())).await?;
    let keys = layout.space_keys(counters.space());
    let chunk: Vec<CellDelta> = (0..samples)
        .map(|k| CellDelta {
            precision: p1,
            slice: b + k * p1,
            delta: Value::Sum(1),
        })
        .collect();
    let started = Instant::now();
    write_deltas(&counters, names, &chunk, PER_CALL, conc).await?;
    let round = started.elapsed().as_secs_f64();
    // The keys then get a time to live leaving room for a round (the one
    // just timed wrote `samples` times as much) and the idle period.
    let ttl = (2.0 * round + IDLE.as_secs_f64() + 2.0).ceil() as u64;
    ensure!(
        ttl < span,
        "a round of {n} writes took {round:.1} s, too long for the 1 s chunks' {span} s: \
         lower --counters"
    );
    let expires_at = b + 2 * span - p1;
    clock.set((expires_at - ttl) as f64 + 0.5);
    let mut conn = server.raw().await?;
    // A write into the chunk and the next one: one proving nothing about
    // which chunks have their expiry, so it sets theirs (the next chunk's
    // keys live `span` s longer and stay through the measure).
    let set_at = Instant::now();
    let both = [
        chunk[samples as usize - 1].clone(),
        CellDelta {
            precision: p1,
            slice: b + span,
            delta: Value::Sum(1),
        },
    ];
    write_deltas(&counters, names, &both, PER_CALL, conc).await?;
    let sample: Vec<&String> = names.iter().step_by((names.len() / 50).max(1)).collect();
    for name in &sample {
        let key = keys.chunk(p1, b, name);
        let (left, len): (i64, u64) = redis::pipe()
            .ttl(&key)
            .hlen(&key)
            .query_async(&mut conn)
            .await?;
        ensure!(
            left > 0 && left <= ttl as i64 && len == samples,
            "{key} holds {len} slices and lives {left} s, not {samples} for at most {ttl} s"
        );
    }
    let due = set_at + Duration::from_secs(ttl);
    let idle_from = due - IDLE - Duration::from_millis(200);
    ensure!(
        Instant::now() < idle_from,
        "setting the keys' expiry took too long to leave an idle period before they come due"
    );
    tokio::time::sleep_until(idle_from.into()).await;
    let idle = poll(&mut conn, IDLE, None).await?;
    ensure!(
        idle.expired == 0,
        "{} keys expired during the idle period",
        idle.expired
    );
    let busy = poll(&mut conn, EXPIRE_WAIT + IDLE, Some(n)).await?;
    if busy.expired < n {
        bail!(
            "Redis expired {} of the {n} chunk keys within {} s of their due time",
            busy.expired,
            (EXPIRE_WAIT + IDLE).as_secs()
        );
    }
    ensure!(
        busy.expired == n,
        "{} keys expired where {n} were due",
        busy.expired
    );
    let mut gone = 0;
    for name in &sample {
        let key = keys.chunk(p1, b, name);
        let exists: bool = conn.exists(&key).await?;
        ensure!(!exists, "{key} is still there after it expired");
        gone += 1;
    }
    let less_idle = busy.cpu - idle.cpu / idle.seconds * busy.seconds;
    Ok(Expire {
        keys: n,
        ttl_seconds: ttl,
        idle_seconds: idle.seconds,
        idle_cpu_seconds: idle.cpu,
        seconds: busy.seconds,
        cpu_seconds: busy.cpu,
        cpu_less_idle_seconds: less_idle,
        us_per_key: less_idle * 1e6 / n as f64,
        expired_keys: busy.expired,
        keys_checked_gone: gone,
    })
}

/// A cleaned layout's first pass with every precision at its peak.
async fn peak_pass(
    layout: LayoutName,
    args: &RetentionArgs,
    settings: &CounterSettings,
) -> Result<PeakPass> {
    let samples = settings.samples;
    let old = settings.peak_samples(DEFAULT_CLEAN_INTERVAL) - samples;
    let np = settings.precisions.len() as u64;
    let per_counter = (np * (samples + old)) as f64;
    let available = mem_available_bytes()?;
    let fits = (available * 0.8 / (per_counter * PEAK_BYTES_PER_SAMPLE)) as u64;
    let counters = args.peak_counters.min(fits);
    ensure!(
        counters > 0,
        "not one counter at the peak fits in the memory available"
    );
    let names: Vec<String> = (0..counters).map(|i| format!("k{i}")).collect();
    let server = BenchRedis::start();
    let mut conn = server.raw().await?;
    // The compact layout's one hash holds every precision's peak (7 × 181
    // fields at the defaults): a listpack only if the server allows that
    // many entries, else a hashtable of several times the memory, which a
    // million busy counters would not fit in here.
    let listpack_entries_set = if layout == LayoutName::Compact {
        let entries = np * (samples + old);
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("hash-max-listpack-entries")
            .arg(entries)
            .query_async(&mut conn)
            .await?;
        Some(entries)
    } else {
        None
    };
    let slices = Slices {
        recent: samples,
        old,
        samples,
    };
    let l = layout.layout()?;
    let n = names.len() as u64;
    // The book's registry has an entry per (counter, precision).
    let entries = if l == Layout::Ria { n * np } else { n };
    let now = SystemClock.now().whole_secs();
    let store = counters_on(&server, l.clone(), settings, Arc::new(SystemClock)).await?;
    let started = Instant::now();
    restore_fill(&server, &store, &l, &names, slices, now, &args.pass).await?;
    let fill_seconds = started.elapsed().as_secs_f64();
    let used_memory_gib = crate::server::used_memory(&server.url()).await? as f64 / GIB;

    let mut cleaner = first_cleaner(&store, &args.pass)?;
    let redis_pid = redis_pid(&mut conn).await?;
    reset_command_stats(&mut conn).await?;
    let perf = match &args.perf_dir {
        Some(dir) => Some(Perf::record(dir, layout, redis_pid)?),
        None => None,
    };
    let (pass, report) = timed_pass(&server, &mut cleaner, now, n).await?;
    let perf_data = match perf {
        Some(perf) => Some(perf.stop()?),
        None => None,
    };
    let commands = command_stats(&mut conn).await?;
    check_first_pass(&store, &names, slices, &report, entries).await?;
    let commands_us_per_counter = commands
        .iter()
        // The bench's own (`config|resetstat`, `info`).
        .filter(|(command, _)| !command.starts_with("config") && !command.starts_with("info"))
        .map(|(command, cost)| (command.clone(), cost.usec / n as f64))
        .collect();
    Ok(PeakPass {
        layout,
        requested_counters: args.peak_counters,
        counters,
        reduced_for_memory: counters < args.peak_counters,
        memory_available_gib: available / GIB,
        estimated_gib: counters as f64 * per_counter * PEAK_BYTES_PER_SAMPLE / GIB,
        used_memory_gib,
        listpack_entries_set,
        recent: samples,
        old,
        fill: "restore",
        fill_seconds,
        scanned: report.scanned,
        round_trips: report.round_trips,
        target: Target::new(
            "first pass at the peak over 1,000,000 counters, wall seconds",
            FIRST_TARGET_SECONDS,
            pass.seconds * MILLION / counters as f64,
            counters != MILLION as u64,
        ),
        cpu_target: Target::new(
            "first pass at the peak, Redis CPU us per counter",
            FIRST_TARGET_CPU_US,
            pass.redis_cpu_us_per_counter,
            false,
        ),
        redis_pid,
        perf_data,
        commands,
        commands_us_per_counter,
        pass,
    })
}

/// Pipelines of [`restore_fill`]: counters per round trip.
const RESTORE_PER_PIPE: usize = 500;

/// Fills `names` with `slices` of every precision at `now`, as
/// [`crate::server::fill`] does, without its cost: the first name through
/// the store's write path (so its hashes are what Tally writes), then every
/// other name a copy of it, pipelined with no Lua: the `DUMP` of each of
/// its hashes `RESTORE`d under the other name's key (the compact layout's
/// one hash once) and the name's registry entries added (`ZADD`, one per
/// precision in the book's `known:`). Every counter holds the same slices
/// and counts ([`crate::server::fill_count`] depends only on the slice).
async fn restore_fill(
    server: &BenchRedis,
    counters: &Counters,
    layout: &Layout,
    names: &[String],
    slices: Slices,
    now: u64,
    args: &PassArgs,
) -> Result<()> {
    use futures::{StreamExt, TryStreamExt};
    let Some((first, rest)) = names.split_first() else {
        return Ok(());
    };
    fill(counters, std::slice::from_ref(first), slices, now, 1, 1).await?;
    let space = counters.space().clone();
    let keys = layout.space_keys(&space);
    let precisions = counters.settings().precisions.clone();
    let mut conn = server.raw().await?;
    // (precision, DUMP payload) of each distinct hash of the template.
    let mut hashes: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for &p in &precisions {
        let key = keys.hash(p, first);
        if seen.insert(key.clone()) {
            let payload: Option<Vec<u8>> =
                redis::cmd("DUMP").arg(&key).query_async(&mut conn).await?;
            hashes.push((
                p,
                payload.with_context(|| format!("{key} was not written"))?,
            ));
        }
    }
    let (hashes, precisions) = (&hashes, &precisions);
    futures::stream::iter(rest.chunks(RESTORE_PER_PIPE))
        .map(|chunk| {
            let mut conn = conn.clone();
            async move {
                let mut pipe = redis::pipe();
                for name in chunk {
                    for (p, payload) in hashes {
                        pipe.cmd("RESTORE")
                            .arg(keys.hash(*p, name))
                            .arg(0)
                            .arg(payload.as_slice())
                            .ignore();
                    }
                    if keys == SpaceKeys::Book {
                        for &p in precisions {
                            pipe.zadd(RIA_KNOWN, ria_member(p, name), 0).ignore();
                        }
                    } else {
                        pipe.zadd(keys.registry(keys.shard(name)), name.as_str(), 0)
                            .ignore();
                    }
                }
                let () = pipe.query_async(&mut conn).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(args.concurrency.max(1))
        .try_collect::<()>()
        .await
}

/// The redis-server's process id (`INFO server`).
async fn redis_pid(conn: &mut redis::aio::MultiplexedConnection) -> Result<u32> {
    let info: String = redis::cmd("INFO").arg("server").query_async(conn).await?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|v| v.trim().parse().ok())
        .context("INFO server names no process_id")
}

/// `perf record -g` of the redis-server over a pass, stopped by SIGINT.
struct Perf {
    child: std::process::Child,
    out: std::path::PathBuf,
}

impl Perf {
    fn record(dir: &std::path::Path, layout: LayoutName, pid: u32) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let name = serde_json::to_value(layout)?;
        let out = dir.join(format!(
            "retention-peak-{}.perf.data",
            name.as_str().unwrap_or("layout")
        ));
        let child = std::process::Command::new("perf")
            .args(["record", "-g", "-q", "-p", &pid.to_string(), "-o"])
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .spawn()
            .context("start perf record (is perf installed?)")?;
        // perf attaches before the pass starts.
        std::thread::sleep(Duration::from_millis(500));
        Ok(Perf { child, out })
    }

    /// Stops the recording (SIGINT, as perf expects) and waits for it.
    fn stop(mut self) -> Result<String> {
        let status = std::process::Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()?;
        ensure!(status.success(), "could not stop perf record");
        self.child.wait()?;
        Ok(self.out.display().to_string())
    }
}

/// What a counter was written, per (precision, slice start), to compare
/// reads with.
#[derive(Default)]
struct Written(BTreeMap<(u64, u64), i64>);

impl Written {
    fn add(&mut self, p: u64, slice: u64, count: i64) {
        *self.0.entry((p, slice)).or_default() += count;
    }

    /// One increment at `at` at every precision.
    fn incr(&mut self, precisions: &[u64], at: u64) {
        for &p in precisions {
            self.add(p, at / p * p, 1);
        }
    }

    /// The slices of precision `p` a read at `now` returns: those still in
    /// the window of `samples` slices, oldest first.
    fn window(&self, p: u64, samples: u64, now: f64) -> Vec<(u64, i64)> {
        self.0
            .range((p, 0)..=(p, u64::MAX))
            .filter(|&(&(_, s), _)| ((s + samples * p) as f64) > now && s as f64 <= now)
            .map(|(&(_, s), &c)| (s, c))
            .collect()
    }
}

/// CPU, time and expired keys over one polled period.
struct Period {
    cpu: f64,
    seconds: f64,
    expired: u64,
}

/// Polls INFO every [`POLL`] for `limit`, or until `until` keys expired.
async fn poll(
    conn: &mut redis::aio::MultiplexedConnection,
    limit: Duration,
    until: Option<u64>,
) -> Result<Period> {
    let start = info_now(conn).await?;
    let started = Instant::now();
    loop {
        tokio::time::sleep(POLL).await;
        let now = info_now(conn).await?;
        let expired = now.expired_keys - start.expired_keys;
        let elapsed = started.elapsed();
        if until.is_some_and(|n| expired >= n) || elapsed >= limit {
            return Ok(Period {
                cpu: now.cpu_seconds - start.cpu_seconds,
                seconds: elapsed.as_secs_f64(),
                expired,
            });
        }
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// `MemAvailable` from /proc/meminfo, in bytes.
fn mem_available_bytes() -> Result<f64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").context("read /proc/meminfo")?;
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map(|kib| kib * 1024.0)
        .context("/proc/meminfo has no MemAvailable")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_holds_the_slices_a_read_returns() {
        let mut w = Written::default();
        for s in 0..10 {
            w.add(1, s, 1);
        }
        w.incr(&[1, 5], 9);
        // At 9.5 with 3 slices kept: 7, 8, 9.
        assert_eq!(w.window(1, 3, 9.5), vec![(7, 1), (8, 1), (9, 2)]);
        assert_eq!(w.window(5, 3, 9.5), vec![(5, 1)]);
    }

    #[test]
    fn medians_and_common_multiples() {
        use crate::server::lcm;
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(lcm(120, 600), 600);
        assert_eq!(lcm(18_000 * 120, 86_400 * 120), 51_840_000);
    }
}
