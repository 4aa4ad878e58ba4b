//! `tally bench migrate`: `tally migrate` of many counters (1,000,000 by
//! default) from the embedded SQLite store to a redis-server started here,
//! in samples per second, checked exact afterwards.
//!
//! The source is filled through the store's write path with `samples`
//! slices per counter and precision (every precision of the defaults). The
//! baseline, in the same run: the same samples written straight into a
//! second, empty redis-server through the store's write path (100 counters
//! per call, as the migration batches them), which is what a migration
//! could at best approach. Afterwards the bench checks that the migration
//! copied every sample and that a sample of counters reads the same on
//! both sides.

use std::time::Instant;

use anyhow::{Result, ensure};
use tally::migrate::{MigrateSettings, migrate};
use tally::{Clock, SystemClock, Tally};

use crate::server::{BenchRedis, Slices, fill};

/// The bench's parameters.
#[derive(clap::Args, Clone, Debug)]
pub struct MigrateArgs {
    /// Counters.
    #[arg(long, default_value_t = 1_000_000)]
    pub counters: u64,
    /// Samples per counter and precision.
    #[arg(long, default_value_t = 2)]
    pub samples: u64,
    /// Counters per migration batch.
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
    /// Write calls in flight while filling.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
}

/// The bench's result.
#[derive(Debug, serde::Serialize)]
pub struct MigrateBench {
    pub bench: &'static str,
    pub machine: serde_json::Value,
    pub counters: u64,
    pub precisions: usize,
    pub samples: u64,
    pub fill_seconds: f64,
    pub migrate_seconds: f64,
    pub samples_per_second: f64,
    pub batches: u64,
    /// The same samples written straight into Redis (the baseline).
    pub direct_seconds: f64,
    pub direct_samples_per_second: f64,
    /// `samples_per_second` ÷ `direct_samples_per_second`.
    pub ratio_to_direct: f64,
    pub exact: bool,
}

pub async fn run(args: MigrateArgs) -> Result<MigrateBench> {
    ensure!(
        args.counters > 0 && args.samples > 0 && args.batch > 0,
        "--counters, --samples and --batch must be positive"
    );
    let now = SystemClock.now().whole_secs();
    let names: Vec<String> = (0..args.counters).map(|i| format!("m{i}")).collect();
    let slices = Slices {
        recent: args.samples,
        old: 0,
        samples: tally::CounterSettings::default().samples,
    };
    let dir = tempfile::tempdir()?;
    let sqlite = Tally::open(dir.path().join("data").to_str().unwrap_or_default()).await?;
    let started = Instant::now();
    let written = fill(
        &sqlite.counters(),
        &names,
        slices,
        now,
        100,
        args.concurrency,
    )
    .await?;
    let fill_seconds = started.elapsed().as_secs_f64();

    let server = BenchRedis::start();
    let redis = Tally::open(&server.url()).await?;
    let settings = MigrateSettings {
        names_per_batch: args.batch,
        ..MigrateSettings::new("bench")
    };
    let started = Instant::now();
    let report = migrate(&sqlite, &redis, &settings, |_| {}).await?;
    let migrate_seconds = started.elapsed().as_secs_f64();
    let counters = &report.spaces[0];
    ensure!(
        counters.series == args.counters && counters.slices == written,
        "the migration copied {} counters and {} samples; the source holds {} and {written}",
        counters.series,
        counters.slices,
        args.counters
    );
    for name in names.iter().step_by((names.len() / 100).max(1)) {
        let (a, b) = (
            sqlite.counters().get_all(name).await?,
            redis.counters().get_all(name).await?,
        );
        ensure!(a == b, "{name} reads differently after the migration");
    }

    // The baseline: the same samples written straight into Redis.
    let direct_server = BenchRedis::start();
    let direct = Tally::open(&direct_server.url()).await?;
    let started = Instant::now();
    fill(
        &direct.counters(),
        &names,
        slices,
        now,
        args.batch,
        args.concurrency,
    )
    .await?;
    let direct_seconds = started.elapsed().as_secs_f64();
    let samples_per_second = written as f64 / migrate_seconds;
    let direct_samples_per_second = written as f64 / direct_seconds;
    Ok(MigrateBench {
        bench: "migrate",
        machine: crate::server::machine(),
        counters: args.counters,
        precisions: sqlite.counters().settings().precisions.len(),
        samples: written,
        fill_seconds,
        migrate_seconds,
        samples_per_second,
        batches: counters.batches_written,
        direct_seconds,
        direct_samples_per_second,
        ratio_to_direct: samples_per_second / direct_samples_per_second,
        exact: true,
    })
}
