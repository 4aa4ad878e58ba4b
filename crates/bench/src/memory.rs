//! `tally bench memory`: Redis memory per stored sample at steady state.
//!
//! `counters` counters (100,000 by default) each hold, at every precision,
//! exactly the samples the cleaner keeps (120), written through the store's
//! real write path on a fresh redis-server. Memory per sample is the
//! `used_memory` delta (INFO memory) over the samples held, so it includes
//! every key, the registries and Redis's per-key overhead. The baseline,
//! measured in the same run on another fresh server: the same samples in
//! the book's own layout (`count:<p>:<name>` hashes and one `known:` set).
//! Afterwards a sample of hashes is checked: it holds exactly the samples
//! written, in the listpack encoding.
//!
//! The expiring layout is measured the same way on a third server, its
//! sample checked by reading every precision back. Its chunks carry a TTL
//! that Redis counts down in real time from the write, whatever the store's
//! clock says, so the bench picks its times for them (see
//! `ExpiringTimes`): its now starts a chunk at every precision, so each
//! precision's slices sit in two chunks as at any other time, the older
//! holding all but the newest; and they are written from a clock one finest
//! chunk earlier, so every chunk lives at least two finest spans less a
//! slice (239 s at the default 1 s × 120) from its write. The bench fails
//! rather than report a figure if the fill and the memory reading take
//! longer.
//!
//! Then the sparse case (issue 20): each counter counted once (one
//! increment at every precision, through `Counters::incr_many`, 1,000 a
//! call) on fresh servers, in the default layout and in the compact one
//! (one hash per counter): Redis memory and keys per counter, registries
//! included, every 50th counter read back at every precision first.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use tally::backend::redis::Layout;
use tally::{Backend, BackendConfig, Clock, CounterSettings, Counters, ManualClock, SystemClock};

use crate::server::{BenchRedis, Slices, check_samples, common_chunk_start, fill};
use crate::server::{hash_key, incr_each, used_memory};

/// One layout's figures.
#[derive(Debug, serde::Serialize)]
pub struct LayoutMemory {
    pub layout: &'static str,
    pub bytes: i64,
    pub bytes_per_sample: f64,
    pub write_seconds: f64,
    pub listpack_checked: u64,
}

/// The bench's result.
#[derive(Debug, serde::Serialize)]
pub struct Memory {
    pub bench: &'static str,
    pub machine: serde_json::Value,
    pub counters: u64,
    pub precisions: usize,
    pub samples_per_precision: u64,
    pub samples_held: u64,
    pub tally: LayoutMemory,
    pub book: LayoutMemory,
    pub ratio_to_book: f64,
    /// The expiring layout (`--layout expiring`).
    pub expiring: LayoutMemory,
    /// `expiring.bytes_per_sample` ÷ `tally.bytes_per_sample`.
    pub expiring_ratio_to_default: f64,
    /// Each counter counted once: the default layout.
    pub once_default: OnceMemory,
    /// Each counter counted once: the compact layout (`--layout compact`).
    pub once_compact: OnceMemory,
    /// `once_compact.bytes_per_counter` ÷ `once_default.bytes_per_counter`.
    pub once_compact_ratio_to_default: f64,
}

/// One layout's memory for counters counted once each.
#[derive(Debug, serde::Serialize)]
pub struct OnceMemory {
    pub layout: &'static str,
    pub counters: u64,
    pub bytes: i64,
    /// Redis memory per counter, its registry entry included.
    pub bytes_per_counter: f64,
    /// Keys per counter (DBSIZE ÷ counters: the registry shards and
    /// writer records included).
    pub keys_per_counter: f64,
    pub write_seconds: f64,
    /// Counters read back at every precision (each holding one slice of 1).
    pub checked: u64,
}

pub async fn run(counters: u64, concurrency: usize) -> Result<Memory> {
    ensure!(counters > 0, "--counters must be positive");
    let settings = CounterSettings::default();
    let names: Vec<String> = (0..counters).map(|i| format!("m{i}")).collect();
    let now = SystemClock.now().whole_secs();
    let tally = measure(
        "tally",
        Layout::default(),
        &settings,
        &names,
        now,
        concurrency,
    )
    .await?;
    let book = measure("book", Layout::Ria, &settings, &names, now, concurrency).await?;
    let expiring = measure(
        "expiring",
        Layout::parse("expiring", tally::backend::redis::layout::DEFAULT_PREFIX)?,
        &settings,
        &names,
        now,
        concurrency,
    )
    .await?;
    let once_default = measure_once("default", Layout::default(), &names, concurrency).await?;
    let once_compact = measure_once(
        "compact",
        Layout::parse("compact", tally::backend::redis::layout::DEFAULT_PREFIX)?,
        &names,
        concurrency,
    )
    .await?;
    let held = counters * settings.precisions.len() as u64 * settings.samples;
    Ok(Memory {
        bench: "memory",
        machine: crate::server::machine(),
        counters,
        precisions: settings.precisions.len(),
        samples_per_precision: settings.samples,
        samples_held: held,
        ratio_to_book: tally.bytes_per_sample / book.bytes_per_sample,
        expiring_ratio_to_default: expiring.bytes_per_sample / tally.bytes_per_sample,
        tally,
        book,
        expiring,
        once_compact_ratio_to_default: once_compact.bytes_per_counter
            / once_default.bytes_per_counter,
        once_default,
        once_compact,
    })
}

/// Counts each of `names` once, now, at the default precisions in `layout`
/// on a fresh server: the memory and keys that cost per counter.
async fn measure_once(
    label: &'static str,
    layout: Layout,
    names: &[String],
    concurrency: usize,
) -> Result<OnceMemory> {
    let server = BenchRedis::start();
    let backend = Backend::open(&BackendConfig::Redis {
        url: server.url(),
        layout,
    })
    .await?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = backend.counter_store(clock.clone()).await?;
    let settings = CounterSettings::default();
    let counters = Counters::with_clock(store, settings.clone(), clock)?;
    let before = used_memory(&server.url()).await?;
    let started = Instant::now();
    incr_each(&counters, names, 1_000, concurrency).await?;
    let write_seconds = started.elapsed().as_secs_f64();
    let bytes = used_memory(&server.url()).await? - before;
    let mut conn = server.raw().await?;
    let keys: u64 = redis::cmd("DBSIZE").query_async(&mut conn).await?;
    let mut checked = 0;
    for name in names.iter().step_by((names.len() / 50).max(1)) {
        for &p in &settings.precisions {
            let got = counters.get(name, p).await?;
            ensure!(
                got.len() == 1 && got[0].count == 1,
                "{label}: {name} at {p} s reads {got:?}, not one slice of 1"
            );
        }
        checked += 1;
    }
    let n = names.len() as f64;
    Ok(OnceMemory {
        layout: label,
        counters: names.len() as u64,
        bytes,
        bytes_per_counter: bytes as f64 / n,
        keys_per_counter: keys as f64 / n,
        write_seconds,
        checked,
    })
}

/// The expiring layout's times. Redis counts a chunk's TTL (its expiry
/// minus the store's clock at the write) down in real time, so a chunk
/// written close to its expiry goes while the bench still fills or reads:
/// at an arbitrary now, the older 1 s chunk of the first counters could
/// live as little as a second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ExpiringTimes {
    /// The fill's and the reads' now: a chunk start at every precision, so
    /// each precision's kept slices are the newest 119 of the chunk before
    /// and the first of this one (two hashes, as at any other time), and
    /// the older chunk lives until its last slice leaves the window, 119
    /// slices after now.
    now: u64,
    /// The store's clock during the fill: one finest chunk before `now`
    /// (the layout takes writes up to one chunk ahead of its clock), which
    /// lengthens every TTL by that chunk.
    write_at: u64,
    /// The shortest TTL the fill sets: the older finest chunk's.
    life: u64,
}

impl ExpiringTimes {
    /// The times after `after`, for `settings`' precisions and samples.
    fn after(settings: &CounterSettings, after: u64) -> Self {
        let (precisions, samples) = (&settings.precisions, settings.samples);
        let now = common_chunk_start(precisions, samples, after);
        let finest = precisions.iter().min().copied().unwrap_or(1);
        let span = finest * samples;
        let write_at = now - span;
        // The older finest chunk's last slice starts at `now - finest` and
        // leaves the window `span` later.
        let life = now - finest + span - write_at;
        ExpiringTimes {
            now,
            write_at,
            life,
        }
    }
}

async fn measure(
    label: &'static str,
    layout: Layout,
    settings: &CounterSettings,
    names: &[String],
    now: u64,
    concurrency: usize,
) -> Result<LayoutMemory> {
    let server = BenchRedis::start();
    let backend = Backend::open(&BackendConfig::Redis {
        url: server.url(),
        layout: layout.clone(),
    })
    .await?;
    // The expiring layout fills and reads at its own times, on a manual
    // clock; the others on the system's.
    let expiring = layout
        .is_expiring()
        .then(|| ExpiringTimes::after(settings, now));
    let now = expiring.map_or(now, |times| times.now);
    let manual = ManualClock::default();
    let clock: Arc<dyn Clock> = match expiring {
        Some(times) => {
            manual.set(times.write_at as f64 + 0.5);
            Arc::new(manual.clone())
        }
        None => Arc::new(SystemClock),
    };
    let store = backend.counter_store(clock.clone()).await?;
    let counters = Counters::with_clock(store, settings.clone(), clock)?;
    let before = used_memory(&server.url()).await?;
    let started = Instant::now();
    let held = fill(
        &counters,
        names,
        Slices {
            recent: settings.samples,
            old: 0,
            samples: settings.samples,
        },
        now,
        20,
        concurrency,
    )
    .await?;
    let write_seconds = started.elapsed().as_secs_f64();
    let bytes = used_memory(&server.url()).await? - before;
    let step = names.len() / 50;
    let checked = if let Some(times) = expiring {
        // Counted from the fill's start, every chunk was still alive when
        // the memory was read.
        ensure!(
            started.elapsed() < Duration::from_secs(times.life),
            "the expiring fill and its memory reading took {:.0} s, longer than its \
             finest chunks live ({} s): use fewer --counters",
            started.elapsed().as_secs_f64(),
            times.life
        );
        manual.set(now as f64 + 0.5);
        check_samples(&counters, names, step, settings.samples, |name, p, held| {
            format!(
                "{name} at {p} s reads {held} samples, not {}",
                settings.samples
            )
        })
        .await?
    } else {
        listpack_check(&server, &layout, settings, names, step).await?
    };
    Ok(LayoutMemory {
        layout: label,
        bytes,
        bytes_per_sample: bytes as f64 / held as f64,
        write_seconds,
        listpack_checked: checked,
    })
}

/// Checks that the hashes of every `step`-th of `names` (default and ria
/// layouts) hold `settings.samples` samples in the listpack encoding.
async fn listpack_check(
    server: &BenchRedis,
    layout: &Layout,
    settings: &CounterSettings,
    names: &[String],
    step: usize,
) -> Result<u64> {
    let mut conn = server.raw().await?;
    let mut checked = 0;
    for name in names.iter().step_by(step.max(1)) {
        for &p in &settings.precisions {
            let Some(key) = hash_key(layout, p, name)? else {
                continue;
            };
            let (len, encoding): (u64, String) = redis::pipe()
                .cmd("HLEN")
                .arg(&key)
                .cmd("OBJECT")
                .arg("ENCODING")
                .arg(&key)
                .query_async(&mut conn)
                .await?;
            ensure!(
                len == settings.samples && encoding == "listpack",
                "{key}: {len} samples in {encoding} encoding"
            );
            checked += 1;
        }
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expiring_fill_writes_two_chunks_per_precision_that_live_239_s() {
        let settings = CounterSettings::default();
        let t = ExpiringTimes::after(&settings, 1_764_000_000);
        assert!(t.now > 1_764_000_000);
        for &p in &settings.precisions {
            let span = p * settings.samples;
            let oldest = t.now - (settings.samples - 1) * p;
            assert_eq!(t.now % span, 0, "{p} s: the newest slice starts a chunk");
            assert_eq!(oldest / span + 1, t.now / span, "{p} s: two chunks");
            // The layout takes the write at `write_at`: at most one chunk ahead.
            assert!(t.now / span <= t.write_at / span + 1, "{p} s");
        }
        assert_eq!(t.life, 239);
    }
}
