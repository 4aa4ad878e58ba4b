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
//! written, in the listpack encoding. The expiring layout is measured the
//! same way on a third server, with the store's clock held a day ahead of
//! the bench's start (its reads and expiry times follow that clock, so a
//! long fill does not see its oldest slices expire or leave the window);
//! its sample is checked by reading every precision back.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, ensure};
use tally::backend::redis::Layout;
use tally::{Backend, BackendConfig, Clock, CounterSettings, Counters, ManualClock, SystemClock};

use crate::server::{BenchRedis, Slices, fill};
use crate::server::{hash_key, used_memory};

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
    // A day ahead: every expiry the writes set (from the store's clock) is
    // then in the server's future, however long the fill takes.
    let expiring = measure(
        "expiring",
        Layout::parse("expiring", tally::backend::redis::layout::DEFAULT_PREFIX)?,
        &settings,
        &names,
        now + 86_400,
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
    })
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
    let clock: Arc<dyn Clock> = if layout.is_expiring() {
        Arc::new(ManualClock::at(now as f64 + 0.5))
    } else {
        Arc::new(SystemClock)
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
    // Check a sample: exact sample counts, listpack encoding.
    let mut conn = server.raw().await?;
    let mut checked = 0;
    if layout.is_expiring() {
        for name in names.iter().step_by((names.len() / 50).max(1)) {
            for series in counters.get_all(name).await? {
                ensure!(
                    series.samples.len() as u64 == settings.samples,
                    "{name} at {} s reads {} samples, not {}",
                    series.precision,
                    series.samples.len(),
                    settings.samples
                );
                checked += 1;
            }
        }
    }
    for name in names
        .iter()
        .step_by((names.len() / 50).max(1))
        .filter(|_| !layout.is_expiring())
    {
        for &p in &settings.precisions {
            // The expiring layout was checked by reading, above.
            let Some(key) = hash_key(&layout, p, name)? else {
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
    Ok(LayoutMemory {
        layout: label,
        bytes,
        bytes_per_sample: bytes as f64 / held as f64,
        write_seconds,
        listpack_checked: checked,
    })
}
