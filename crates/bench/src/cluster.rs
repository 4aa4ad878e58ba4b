//! `tally bench cluster`: ingest throughput on a Redis Cluster of 1 master
//! and of 3 masters, started by the harness in the same run, with the same
//! workload: concurrent writers sending counter batches (default layout) and
//! daily views. Reports writes per second for each and the 3-vs-1 ratio, and
//! checks afterwards that the stored totals equal what was sent.

use std::sync::Arc;

use anyhow::{Context, Result, ensure};
use tally::{
    Backend, BackendConfig, CounterSettings, Counters, DailySettings, DailyStats, Increment,
    ManualClock, SystemClock, View,
};
use tally_testkit::{ClusterOptions, RedisCluster};

use crate::pace::{BatchStore, Timed};

/// One cluster's figures.
#[derive(Debug, serde::Serialize)]
pub struct Ingest {
    pub masters: usize,
    pub counter_increments_per_second: f64,
    pub daily_views_per_second: f64,
}

/// The bench's result.
#[derive(Debug, serde::Serialize)]
pub struct ClusterBench {
    pub bench: &'static str,
    pub seconds: f64,
    pub writers: usize,
    pub one: Ingest,
    pub three: Ingest,
    pub counters_ratio_3_to_1: f64,
    pub daily_ratio_3_to_1: f64,
}

pub async fn run(seconds: f64, writers: usize) -> Result<ClusterBench> {
    ensure!(
        seconds > 0.0 && writers > 0,
        "seconds and writers must be positive"
    );
    let one = measure(1, seconds, writers).await?;
    let three = measure(3, seconds, writers).await?;
    Ok(ClusterBench {
        bench: "cluster",
        seconds,
        writers,
        counters_ratio_3_to_1: three.counter_increments_per_second
            / one.counter_increments_per_second,
        daily_ratio_3_to_1: three.daily_views_per_second / one.daily_views_per_second,
        one,
        three,
    })
}

async fn measure(masters: usize, seconds: f64, writers: usize) -> Result<Ingest> {
    let cluster = RedisCluster::start_with(ClusterOptions {
        masters,
        replicas_per_master: 0,
        ..ClusterOptions::default()
    });
    let backend = Backend::open(&BackendConfig::RedisCluster {
        urls: cluster.urls(),
        layout: Default::default(),
    })
    .await
    .with_context(|| format!("{masters} master(s): opening the cluster"))?;
    let clock = Arc::new(ManualClock::at(
        tally::Clock::now(&SystemClock).whole_secs() as f64,
    ));
    let store = backend.counter_store(clock.clone()).await?;
    let settings = CounterSettings {
        precisions: vec![60, 86_400],
        samples: 10,
    };
    let counters = Counters::with_clock(store, settings, clock.clone())?;
    let daily = DailyStats::with_clock(
        backend
            .daily_store("advert", tally::DailyTotal::Hash)
            .await?,
        DailySettings::default(),
        clock,
    )?;

    // Counters first, then daily views, each for `seconds`.
    let (sent, counter_rate) = write(&counters, seconds, writers, increments)
        .await
        .with_context(|| format!("{masters} master(s): writing counters"))?;
    // Check: every increment is stored once.
    let names: Vec<String> = (0..NAMES).map(name).collect();
    let mut stored = 0i64;
    for chunk in names.chunks(1000) {
        let read = counters.get_many(chunk, Some(86_400)).await;
        for series in read.with_context(|| format!("{masters} master(s): reading counters"))? {
            stored += series[0].samples.iter().map(|s| s.count).sum::<i64>();
        }
    }
    ensure!(
        stored as u64 == sent,
        "{masters} master(s): stored {stored} != sent {sent}"
    );

    let (_, daily_rate) = write(&daily, seconds, writers, views)
        .await
        .with_context(|| format!("{masters} master(s): writing daily views"))?;
    drop(cluster);
    Ok(Ingest {
        masters,
        counter_increments_per_second: counter_rate,
        daily_views_per_second: daily_rate,
    })
}

/// `writers` writers sending batches to `store` for `seconds`, writer `w`'s
/// `n`th batch (from 0) `batch(w, n)`: what they sent, and how many a second.
async fn write<S: BatchStore>(
    store: &S,
    seconds: f64,
    writers: usize,
    batch: fn(u64, u64) -> Vec<S::Item>,
) -> Result<(u64, f64)> {
    let timed = Timed::start(seconds);
    let sent = timed
        .write_batches(store, writers as u64, |w| {
            let mut n = 0;
            move || {
                n += 1;
                batch(w, n - 1)
            }
        })
        .await?;
    Ok((sent, sent as f64 / timed.seconds()))
}

/// The workload: batches of `BATCH`, spread over `NAMES` counters and
/// `ENTITIES` daily entities.
const NAMES: u64 = 10_000;
const ENTITIES: u64 = 100_000;
const BATCH: u64 = 100;

/// The counter names.
fn name(i: u64) -> String {
    format!("n{i}")
}

/// Writer `w`'s `n`th batch of counter increments.
fn increments(w: u64, n: u64) -> Vec<Increment> {
    (0..BATCH)
        .map(|k| Increment::new(name((w * 7919 + n + k * 131) % NAMES), 1))
        .collect()
}

/// Writer `w`'s `n`th batch of daily views.
fn views(w: u64, n: u64) -> Vec<View> {
    (0..BATCH)
        .map(|k| View {
            entity: ((w * 104_729 + n * BATCH + k * 7) % ENTITIES).to_string(),
            count: 1,
            at: None,
        })
        .collect()
}
