//! Fault test: sustained aggregated load while Redis connections are killed
//! and the server is killed with SIGKILL and restarted, many times. Every
//! increment the writer acknowledged must be stored exactly once, and
//! every observation the statistics' aggregating writer acknowledged too
//! (exact counts and sums at every precision), and every view the daily
//! statistics' aggregating writer acknowledged (exact totals).

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Fixture, Kind};
use tally::counters::{CounterWriter, WriterSettings};
use tally::stats::StatsWriter;
use tally::{CounterSettings, StatsSettings};
use tally_testkit::RedisOptions;

const COUNTERS: u64 = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_increments_survive_dropped_connections_and_restarts() {
    for kind in [
        Kind::RedisDefault,
        Kind::RedisRia,
        Kind::RedisExpiring,
        Kind::RedisCompact,
    ] {
        run(kind).await;
    }
}

async fn run(kind: Kind) {
    let settings = CounterSettings {
        precisions: vec![1, 60, 86400],
        samples: 100_000,
    };
    let mut f = Fixture::build(
        kind,
        settings,
        RedisOptions {
            durable: true,
            ..RedisOptions::default()
        },
    )
    .await;
    let server = Arc::new(Mutex::new(f.server.take().expect("a Redis fixture")));
    let agg_settings = WriterSettings {
        flush_interval: Duration::from_millis(5),
        chunk_counters: 8,
        lanes: 3,
        ..WriterSettings::default()
    };
    let agg = CounterWriter::start(f.counters.clone(), agg_settings.clone()).unwrap();
    let stats = f
        .stats(StatsSettings {
            precisions: vec![1, 60, 86400],
            samples: 100_000,
            ..StatsSettings::default()
        })
        .await;
    let stats_writer = StatsWriter::start(stats.clone(), agg_settings.clone()).unwrap();
    let daily = f.daily(tally::DailySettings::default()).await;
    let daily_writer = tally::daily::DailyWriter::start(daily.clone(), agg_settings).unwrap();
    // Acknowledged views per entity.
    let viewed: Arc<Vec<AtomicU64>> = Arc::new((0..COUNTERS).map(|_| AtomicU64::new(0)).collect());

    // Writers: acknowledged increments per counter.
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..COUNTERS).map(|_| AtomicU64::new(0)).collect());
    // Acknowledged observations per stat: how many, and the sum of their
    // (whole) values.
    let observed: Arc<Vec<(AtomicU64, AtomicU64)>> = Arc::new(
        (0..COUNTERS)
            .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4u64 {
        let (agg, acked, stop) = (agg.clone(), acked.clone(), stop.clone());
        let (stats_writer, observed) = (stats_writer.clone(), observed.clone());
        let (daily_writer, viewed) = (daily_writer.clone(), viewed.clone());
        writers.push(tokio::spawn(async move {
            let mut i = w;
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let c = i % COUNTERS;
                let count = (i % 3) as i64 + 1;
                if agg.add(&format!("fault:{c}"), count, None).await.is_ok() {
                    acked[c as usize].fetch_add(count as u64, Ordering::Relaxed);
                }
                let value = (i % 97) as f64;
                if stats_writer
                    .record(&format!("fault:{c}"), value, None)
                    .await
                    .is_ok()
                {
                    let (n, sum) = &observed[c as usize];
                    n.fetch_add(1, Ordering::Relaxed);
                    sum.fetch_add(i % 97, Ordering::Relaxed);
                }
                if daily_writer
                    .add(&format!("fault:{c}"), count, None)
                    .await
                    .is_ok()
                {
                    viewed[c as usize].fetch_add(count as u64, Ordering::Relaxed);
                }
                i += 4;
                n += 1;
                // Yield now and then, so writers never starve the runtime.
                if n.is_multiple_of(64) {
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
            }
        }));
    }

    // Chaos: 45 faults, 150 ms apart: two connection kills for every SIGKILL
    // and restart of the server. Between two faults the writers get through
    // at least 1/45 of the load the checks below ask for (250 increments'
    // worth, 125 observations), however slow the machine is.
    let load = || {
        let increments: u64 = acked.iter().map(|a| a.load(Ordering::Relaxed)).sum();
        let observations: u64 = observed.iter().map(|o| o.0.load(Ordering::Relaxed)).sum();
        (increments, observations)
    };
    let (mut kills, mut restarts) = (0, 0);
    for event in 0..45 {
        let (increments, observations) = load();
        tokio::time::sleep(Duration::from_millis(150)).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while load().0 < increments + 250 || load().1 < observations + 125 {
            assert!(
                std::time::Instant::now() < deadline,
                "the writers stalled after fault {event}: {:?}",
                load()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if event % 3 == 2 {
            let server = server.clone();
            tokio::task::spawn_blocking(move || server.lock().unwrap().restart())
                .await
                .unwrap();
            restarts += 1;
        } else {
            let reply = server
                .lock()
                .unwrap()
                .command("CLIENT KILL TYPE normal")
                .unwrap_or_default();
            assert!(reply.starts_with(':'), "CLIENT KILL answered {reply:?}");
            kills += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    agg.shutdown().await;
    stats_writer.shutdown().await;
    daily_writer.shutdown().await;
    let daily_figures = daily_writer.stats();
    assert_eq!(daily_figures.rejected, 0);
    assert_eq!(
        daily_figures.written, daily_figures.accepted,
        "{daily_figures:?}"
    );
    let mut total_viewed = 0;
    for c in 0..COUNTERS as usize {
        let want = viewed[c].load(Ordering::Relaxed) as i64;
        total_viewed += want;
        assert_eq!(
            daily.total(&format!("fault:{c}")).await.unwrap(),
            want,
            "{kind:?} entity {c}"
        );
    }
    assert!(
        total_viewed > 10_000,
        "too few views to mean anything: {total_viewed}"
    );
    let stats_figures = stats_writer.stats();
    assert!(
        stats_figures.retries > 0,
        "the faults never made a statistics flush fail: {stats_figures:?}"
    );
    assert_eq!(stats_figures.rejected, 0);
    assert_eq!(
        stats_figures.written, stats_figures.accepted,
        "{stats_figures:?}"
    );
    let stats_service = stats;
    let stats = agg.stats();
    assert!(
        stats.retries > 0,
        "the faults never made a flush fail: {stats:?}"
    );
    assert_eq!(stats.rejected, 0);
    assert_eq!(stats.written, stats.accepted, "{stats:?}");

    let names: Vec<String> = (0..COUNTERS).map(|c| format!("fault:{c}")).collect();
    let stored = f.counters.get_many(&names, None).await.unwrap();
    let mut total_acked = 0;
    for (c, series) in stored.iter().enumerate() {
        let want = acked[c].load(Ordering::Relaxed) as i64;
        total_acked += want;
        for s in series {
            let got: i64 = s.samples.iter().map(|x| x.count).sum();
            assert_eq!(
                got, want,
                "{kind:?} counter {c} at precision {}",
                s.precision
            );
        }
    }
    assert!(
        total_acked > 10_000,
        "too little load to mean anything: {total_acked}"
    );
    let mut total_observed = 0;
    for c in 0..COUNTERS as usize {
        let (n, sum) = (&observed[c].0, &observed[c].1);
        let (n, sum) = (n.load(Ordering::Relaxed), sum.load(Ordering::Relaxed));
        total_observed += n;
        for series in stats_service
            .get_all(&format!("fault:{c}"), &[])
            .await
            .unwrap()
        {
            let got_n: u64 = series.slices.iter().map(|s| s.summary.count).sum();
            let got_sum: f64 = series.slices.iter().map(|s| s.summary.sum).sum();
            assert_eq!(
                (got_n, got_sum),
                (n, sum as f64),
                "{kind:?} stat {c} at precision {}",
                series.precision
            );
        }
    }
    assert!(
        total_observed > 5_000,
        "too few observations to mean anything: {total_observed}"
    );
    eprintln!(
        "{kind:?}: {total_acked} increments acknowledged and stored exactly through {kills} \
         connection kills and {restarts} restarts ({} retried chunk writes, {} duplicates skipped); \
         {total_observed} observations stored exactly ({} retried, {} duplicates skipped); \
         {total_viewed} views stored exactly ({} retried, {} duplicate writes skipped)",
        stats.retries,
        stats.duplicates,
        stats_figures.retries,
        stats_figures.duplicates,
        daily_figures.retries,
        daily_figures.duplicates
    );
}
