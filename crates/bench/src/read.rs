//! `tally bench read`: read latency (p50, p99) of every precision of one
//! counter, and of 100 counters at once, at steady state (each precision
//! holding the samples kept), on a redis-server started here and on SQLite.
//!
//! On Redis both cleaned-layout reads (`default`) and the expiring layout's
//! (`expiring`, on the same server emptied, in the same run, its store clock held a
//! day ahead so no chunk expires or leaves the window while the bench
//! reads) are measured.
//!
//! Reads are sequential (one in flight), so each figure is a full round trip
//! plus decoding. The Redis baseline, measured in the same run on the same
//! server and data: an HGETALL of each hash read, in one pipeline, sent by a
//! bare redis-rs connection that decodes nothing (Tally reads hashes of
//! sums by DUMP). Before timing, the bench checks that a
//! read returns exactly the samples written.
//!
//! A busy statistic (issue 20 §5, Redis, default layout, on a server of its
//! own): every retained slice of every precision written as 1,000 lognormal
//! observations a second leave it (`tally bench stats`'s busy stat, at the
//! default accuracy of 1 %), then the memory of its keys, and the
//! latency (p50, p99) of reading every precision at once and each
//! precision alone (`Stats::get_all`, `Stats::get`, default quantiles),
//! each read alternating with a bare redis-rs client sending the commands
//! the read needs ([`crate::bare::stat_read_commands`]) and turning the
//! replies into nothing more than redis-rs values. Targets: every
//! precision p50 ≤ 2 ms, each read within 1.5x the bare client's, memory
//! ≤ 512 KiB.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, ensure};
use tally::backend::redis::Layout;
use tally::backend::redis::layout::DEFAULT_PREFIX;
use tally::stats::DEFAULT_QUANTILES;
use tally::{Clock, CounterSettings, Counters, ManualClock, Stats, StatsSettings, SystemClock};

use crate::bare::stat_read_commands;

use crate::server::{
    BenchRedis, Kind, Opened, Slices, Which, command_stats, fill, quantile, reset_command_stats,
};

/// One latency figure.
#[derive(Debug, serde::Serialize)]
pub struct Latency {
    pub backend: Kind,
    /// Redis only: the key layout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout: Option<&'static str>,
    pub read: &'static str,
    pub counters: usize,
    pub samples_per_read: u64,
    pub iterations: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    /// Redis, default layout only: the bare pipeline's figures.
    #[serde(flatten)]
    pub raw: Option<Raw>,
    /// Redis only: the server's own time per read (`INFO commandstats`
    /// DUMP and HGETALL microseconds ÷ reads, warm-up included), the part of the
    /// latency spent inside Redis; other load on the machine moves it much
    /// less than the latencies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_us_per_read: Option<f64>,
}

/// The bare pipeline's p50 and p99, and ours ÷ theirs.
#[derive(Debug, serde::Serialize)]
pub struct Raw {
    pub raw_p50_us: f64,
    pub raw_p99_us: f64,
    pub p99_ratio_to_raw: f64,
}

/// The bench's result.
#[derive(Debug, serde::Serialize)]
pub struct Read {
    pub bench: &'static str,
    pub machine: serde_json::Value,
    pub precisions: usize,
    pub samples: u64,
    pub runs: Vec<Latency>,
    /// Redis only: the expiring layout's figures ÷ the default layout's.
    #[serde(flatten)]
    pub expiring: Option<ExpiringRatios>,
    /// Redis only: reads of one busy statistic against a bare client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_stat: Option<BusyStat>,
}

/// Reading every precision of one counter in the expiring layout, each
/// figure ÷ the same in the default layout.
#[derive(Debug, serde::Serialize)]
pub struct ExpiringRatios {
    /// Of the p99.
    pub expiring_p99_ratio_to_default: f64,
    /// Of the p50.
    pub expiring_p50_ratio_to_default: f64,
    /// Of the server's time per read.
    pub expiring_redis_ratio_to_default: f64,
}

/// Reads of one busy statistic, each next to a bare client's.
#[derive(Debug, serde::Serialize)]
pub struct BusyStat {
    pub layout: &'static str,
    pub accuracy: f64,
    pub observations_held: u64,
    /// The memory of the stat's keys once it is written (`server::keys_memory`).
    pub bytes: i64,
    pub kib: f64,
    pub target_kib: f64,
    pub memory_met: bool,
    /// What the bare client sends for a read of every precision
    /// ([`crate::bare::stat_read_commands`]).
    pub bare_commands: Vec<String>,
    pub reads: Vec<StatRead>,
    /// The target of every precision's p50, µs.
    pub p50_target_us: f64,
    /// The target of each read's time ÷ the bare client's.
    pub ratio_target: f64,
}

/// One read of the busy statistic against the bare client's.
#[derive(Debug, serde::Serialize)]
pub struct StatRead {
    /// `every precision`, or `one precision`.
    pub read: &'static str,
    pub precisions: Vec<u64>,
    pub slices: usize,
    pub iterations: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub bare_p50_us: f64,
    pub bare_p99_us: f64,
    pub p50_ratio_to_bare: f64,
    pub p99_ratio_to_bare: f64,
    /// The server's time per read (`INFO commandstats` of the read
    /// commands ÷ reads, Tally's and the bare client's together: they send
    /// the same).
    pub redis_us_per_read: f64,
    /// p50 within 1.5x of the bare client's (and, for every precision,
    /// at most 2 ms).
    pub met: bool,
}

/// Busy-stat read targets.
const STAT_P50_TARGET_US: f64 = 2000.0;
const STAT_RATIO_TARGET: f64 = 1.5;
const STAT_KIB_TARGET: f64 = 512.0;

const MANY: usize = 100;

pub async fn run(backend: Which, iterations: usize) -> Result<Read> {
    ensure!(iterations > 0, "--iterations must be positive");
    let settings = CounterSettings::default();
    let np = settings.precisions.len();
    let mut runs = Vec::new();
    for kind in backend.kinds() {
        let redis = (kind == Kind::Redis).then(BenchRedis::start);
        let opened = Opened::open(kind, redis.as_ref()).await?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let now = clock.now().whole_secs();
        let counters = opened.counters(&settings, clock).await?;
        let layout = redis.as_ref().map(|_| "default");
        runs.extend(measure(&counters, redis.as_ref(), true, layout, now, iterations).await?);
        if let Some(redis) = &redis {
            // The expiring layout, on the same server emptied.
            drop(counters);
            redis.flush().await?;
            let now = now + 86_400;
            let clock: Arc<dyn Clock> = Arc::new(ManualClock::at(now as f64 + 0.5));
            let backend = tally::Backend::open(&tally::BackendConfig::Redis {
                url: redis.url(),
                layout: Layout::parse("expiring", DEFAULT_PREFIX)?,
            })
            .await?;
            let store = backend.counter_store(clock.clone()).await?;
            let counters = Counters::with_clock(store, settings.clone(), clock)?;
            runs.extend(
                measure(
                    &counters,
                    Some(redis),
                    false,
                    Some("expiring"),
                    now,
                    iterations,
                )
                .await?,
            );
        }
    }
    let expiring = expiring_ratios(&runs);
    let busy_stat = if backend.kinds().contains(&Kind::Redis) {
        Some(busy_stat((iterations / 10).max(5)).await?)
    } else {
        None
    };
    Ok(Read {
        bench: "read",
        machine: crate::server::machine(),
        precisions: np,
        samples: settings.samples,
        runs,
        expiring,
        busy_stat,
    })
}

/// The expiring layout's one-counter figures ÷ the default layout's, when
/// both were measured.
fn expiring_ratios(runs: &[Latency]) -> Option<ExpiringRatios> {
    let one = |layout: &str| {
        runs.iter()
            .find(|l| l.layout == Some(layout) && l.counters == 1)
    };
    let (e, d) = (one("expiring")?, one("default")?);
    Some(ExpiringRatios {
        expiring_p99_ratio_to_default: e.p99_us / d.p99_us,
        expiring_p50_ratio_to_default: e.p50_us / d.p50_us,
        expiring_redis_ratio_to_default: e.redis_us_per_read? / d.redis_us_per_read?,
    })
}

/// The busy statistic: written, its memory measured, then each read timed
/// `iterations` times alternating with the bare client's.
async fn busy_stat(iterations: usize) -> Result<BusyStat> {
    let redis = BenchRedis::start();
    let opened = Opened::open(Kind::Redis, Some(&redis)).await?;
    let settings = StatsSettings::default();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = opened.backend.slice_store(clock.clone()).await?;
    let stats = Stats::with_clock(store, settings.clone(), clock)?;
    let (bytes, held) = crate::stats::fill_busy(&redis, &stats).await?;
    let layout = Layout::default();
    let mut conn = redis.raw().await?;
    let mut reads = Vec::new();
    let mut cases = vec![("every precision", settings.precisions.clone())];
    cases.extend((settings.precisions.iter()).map(|&p| ("one precision", vec![p])));
    let mut bare_commands = Vec::new();
    for (read, precisions) in cases {
        let commands = stat_read_commands(&layout, stats.space(), "busy", &precisions);
        if precisions.len() > 1 {
            bare_commands = commands.iter().map(|c| c.join(" ")).collect();
        }
        let mut pipe = redis::pipe();
        for command in &commands {
            let mut cmd = redis::cmd(&command[0]);
            for arg in &command[1..] {
                cmd.arg(arg);
            }
            pipe.add_command(cmd);
        }
        // The bare client fetches the data Tally reads.
        let first: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
        ensure!(
            first.iter().all(|v| match v {
                redis::Value::Map(m) => !m.is_empty(),
                redis::Value::Array(a) => !a.is_empty(),
                _ => false,
            }),
            "the bare client reads no data: the statistics' storage changed \
             (follow it in bare::stat_read_commands)"
        );
        let one = precisions.len() == 1;
        let mut slices = 0;
        let (mut ours, mut bare) = (Vec::new(), Vec::new());
        reset_command_stats(&mut conn).await?;
        let warm = iterations.div_ceil(10);
        for i in 0..warm + iterations {
            let started = Instant::now();
            slices = if one {
                stats
                    .get("busy", precisions[0], &DEFAULT_QUANTILES)
                    .await?
                    .len()
            } else {
                (stats.get_all("busy", &DEFAULT_QUANTILES).await?.iter())
                    .map(|s| s.slices.len())
                    .sum()
            };
            let t = started.elapsed().as_secs_f64() * 1e6;
            let started = Instant::now();
            let _: redis::Value = pipe.query_async(&mut conn).await?;
            let b = started.elapsed().as_secs_f64() * 1e6;
            if i >= warm {
                ours.push(t);
                bare.push(b);
            }
        }
        let stats_now = command_stats(&mut conn).await?;
        let server_us: f64 = ["hgetall", "dump"]
            .iter()
            .filter_map(|c| stats_now.get(*c))
            .map(|c| c.usec)
            .sum();
        ensure!(
            slices == precisions.len() * settings.samples as usize,
            "the busy stat read {slices} slices at {precisions:?}"
        );
        ours.sort_by(f64::total_cmp);
        bare.sort_by(f64::total_cmp);
        let (p50, p99) = (quantile(&ours, 0.5), quantile(&ours, 0.99));
        let (b50, b99) = (quantile(&bare, 0.5), quantile(&bare, 0.99));
        reads.push(StatRead {
            read,
            slices,
            iterations,
            p50_us: p50,
            p99_us: p99,
            bare_p50_us: b50,
            bare_p99_us: b99,
            p50_ratio_to_bare: p50 / b50,
            p99_ratio_to_bare: p99 / b99,
            redis_us_per_read: server_us / (2 * (warm + iterations)) as f64,
            met: p50 / b50 <= STAT_RATIO_TARGET && (one || p50 <= STAT_P50_TARGET_US),
            precisions,
        });
    }
    let kib = bytes as f64 / 1024.0;
    Ok(BusyStat {
        layout: "default",
        accuracy: settings.accuracy,
        observations_held: held,
        bytes,
        kib,
        target_kib: STAT_KIB_TARGET,
        memory_met: kib <= STAT_KIB_TARGET,
        bare_commands,
        reads,
        p50_target_us: STAT_P50_TARGET_US,
        ratio_target: STAT_RATIO_TARGET,
    })
}

/// Fills 100 counters with every precision's kept samples, checks one
/// reads back whole, then times reading one counter and all 100. With
/// `redis`, also the server's time per read, and with `raw_baseline` the
/// bare pipeline's (the default layout's HGETALLs).
async fn measure(
    counters: &Counters,
    redis: Option<&BenchRedis>,
    raw_baseline: bool,
    layout: Option<&'static str>,
    now: u64,
    iterations: usize,
) -> Result<Vec<Latency>> {
    let settings = counters.settings().clone();
    let np = settings.precisions.len();
    let kind = if layout.is_some() {
        Kind::Redis
    } else {
        Kind::Sqlite
    };
    let names: Vec<String> = (0..MANY).map(|i| format!("r{i}")).collect();
    fill(
        counters,
        &names,
        Slices {
            recent: settings.samples,
            old: 0,
            samples: settings.samples,
        },
        now,
        10,
        2,
    )
    .await?;
    // The data is what was written: every precision holds its samples.
    let one = counters.get_all(&names[0]).await?;
    ensure!(
        one.len() == np
            && one
                .iter()
                .all(|s| s.samples.len() as u64 == settings.samples),
        "a counter does not read back the samples written"
    );
    let per_counter = np as u64 * settings.samples;
    let mut runs = Vec::new();
    for (read, batch) in [("all precisions of one counter", 1), ("100 counters", MANY)] {
        let chunk = &names[..batch];
        // A read of 100 counters moves 100 times the data: a tenth of
        // the iterations.
        let iterations = if batch == 1 {
            iterations
        } else {
            iterations.div_ceil(10)
        };
        if let Some(r) = redis {
            reset_stats(r).await?;
        }
        let times = time(iterations, || async {
            let got = counters.get_many(chunk, None).await?;
            ensure!(got.len() == batch, "short read");
            Ok(())
        })
        .await?;
        let server_us = match redis {
            // Every read timed, and its warm-up.
            Some(r) => Some(
                read_commands_total_us(r).await? / (iterations + iterations.div_ceil(10)) as f64,
            ),
            None => None,
        };
        let raw = match redis.filter(|_| raw_baseline) {
            Some(r) => Some(raw_times(r, counters, chunk, iterations).await?),
            None => None,
        };
        let mut l = latency(
            kind,
            read,
            batch,
            per_counter * batch as u64,
            &times,
            raw.as_deref(),
        );
        l.layout = layout;
        l.redis_us_per_read = server_us;
        runs.push(l);
    }
    Ok(runs)
}

/// Microseconds of each of `n` sequential calls of `f` (after 10% warm-up).
async fn time<F, Fut>(n: usize, mut f: F) -> Result<Vec<f64>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    for _ in 0..n.div_ceil(10) {
        f().await?;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        f().await?;
        out.push(started.elapsed().as_secs_f64() * 1e6);
    }
    out.sort_by(f64::total_cmp);
    Ok(out)
}

async fn reset_stats(r: &BenchRedis) -> Result<()> {
    reset_command_stats(&mut r.raw().await?).await
}

/// The server time of the reads' commands since the last reset, in µs:
/// DUMP (hashes of sums) and HGETALL (a hash in another encoding).
async fn read_commands_total_us(r: &BenchRedis) -> Result<f64> {
    let stats = command_stats(&mut r.raw().await?).await?;
    let mut read = ["hgetall", "dump"]
        .iter()
        .filter_map(|c| stats.get(*c))
        .map(|c| c.usec)
        .peekable();
    anyhow::ensure!(
        read.peek().is_some(),
        "INFO commandstats has no DUMP or HGETALL"
    );
    Ok(read.sum())
}

/// The same HGETALLs as one bare pipeline, decoded into nothing.
async fn raw_times(
    redis: &BenchRedis,
    counters: &Counters,
    names: &[String],
    n: usize,
) -> Result<Vec<f64>> {
    let mut conn = redis.raw().await?;
    let mut pipe = redis::pipe();
    for name in names {
        let shard = tally::backend::redis::layout::shard_of(name);
        for p in &counters.settings().precisions {
            pipe.cmd("HGETALL")
                .arg(format!("{{tally:{shard}}}:{p}:{name}"));
        }
    }
    let first: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
    let holds_data = first.iter().all(|v| match v {
        redis::Value::Map(m) => !m.is_empty(),
        redis::Value::Array(a) => !a.is_empty(),
        _ => false,
    });
    ensure!(
        holds_data,
        "the bare pipeline reads no data: the key layout changed"
    );
    time(n, || {
        let (pipe, mut conn) = (&pipe, conn.clone());
        async move {
            let _: redis::Value = pipe.query_async(&mut conn).await?;
            Ok(())
        }
    })
    .await
}

fn latency(
    backend: Kind,
    read: &'static str,
    counters: usize,
    samples: u64,
    times: &[f64],
    raw: Option<&[f64]>,
) -> Latency {
    let p99 = quantile(times, 0.99);
    Latency {
        backend,
        layout: None,
        read,
        counters,
        samples_per_read: samples,
        iterations: times.len(),
        p50_us: quantile(times, 0.5),
        p99_us: p99,
        mean_us: times.iter().sum::<f64>() / times.len() as f64,
        raw: raw.map(|r| Raw {
            raw_p50_us: quantile(r, 0.5),
            raw_p99_us: quantile(r, 0.99),
            p99_ratio_to_raw: p99 / quantile(r, 0.99),
        }),
        redis_us_per_read: None,
    }
}
