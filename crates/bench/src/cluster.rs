//! `tally bench cluster`: ingest throughput on a Redis Cluster of 1 master
//! and of 3 masters, started by the harness in the same run, with the same
//! workload: concurrent writers sending counter batches (default layout) and
//! daily views. Reports writes per second for each and the 3-vs-1 ratio, and
//! checks afterwards that the stored totals equal what was sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use tally::{
    Backend, BackendConfig, CounterSettings, Counters, DailySettings, DailyStats, Increment,
    ManualClock, SystemClock, View,
};
use tally_testkit::{ClusterOptions, RedisCluster};

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

const NAMES: u64 = 10_000;
const BATCH: u64 = 100;

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
    .await?;
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
        backend.daily_store("advert").await?,
        DailySettings::default(),
        clock,
    )?;

    // Counters first, then daily views, each for `seconds`.
    let sent = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..writers as u64)
        .map(|w| {
            let (c, sent) = (counters.clone(), sent.clone());
            tokio::spawn(async move {
                let mut i = w * 7919;
                let mut passes = 0u64;
                while crate::pace::go_on(deadline, &mut passes) {
                    let batch: Vec<Increment> = (0..BATCH)
                        .map(|k| Increment::new(format!("n{}", (i + k * 131) % NAMES), 1))
                        .collect();
                    i += 1;
                    c.incr_many(&batch).await?;
                    sent.fetch_add(BATCH, Ordering::Relaxed);
                }
                anyhow::Ok(())
            })
        })
        .collect();
    let started = Instant::now();
    for t in tasks {
        t.await??;
    }
    let counter_rate = sent.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    // Check: every increment is stored once.
    let names: Vec<String> = (0..NAMES).map(|i| format!("n{i}")).collect();
    let mut stored = 0i64;
    for chunk in names.chunks(1000) {
        for series in counters.get_many(chunk, Some(86_400)).await? {
            stored += series[0].samples.iter().map(|s| s.count).sum::<i64>();
        }
    }
    ensure!(
        stored as u64 == sent.load(Ordering::Relaxed),
        "{masters} master(s): stored {stored} != sent {}",
        sent.load(Ordering::Relaxed)
    );

    let views = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..writers as u64)
        .map(|w| {
            let (d, views) = (daily.clone(), views.clone());
            tokio::spawn(async move {
                let mut i = w * 104_729;
                let mut passes = 0u64;
                while crate::pace::go_on(deadline, &mut passes) {
                    let batch: Vec<View> = (0..BATCH)
                        .map(|k| View {
                            entity: ((i + k * 7) % 100_000).to_string(),
                            count: 1,
                            at: None,
                        })
                        .collect();
                    i += BATCH;
                    d.incr_many(&batch).await?;
                    views.fetch_add(BATCH, Ordering::Relaxed);
                }
                anyhow::Ok(())
            })
        })
        .collect();
    let started = Instant::now();
    for t in tasks {
        t.await??;
    }
    let daily_rate = views.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    drop(cluster);
    Ok(Ingest {
        masters,
        counter_increments_per_second: counter_rate,
        daily_views_per_second: daily_rate,
    })
}
