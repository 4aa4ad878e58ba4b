//! Daily views of many entities (issue 20 §4): views of `entities` ads
//! drawn from a Zipf distribution (s = 1.1, as ad views are: a few ads
//! take most of them), written for a few seconds each way on one
//! [`BenchRedis`], emptied between runs:
//!
//! - `exact`: [`DailyStats::incr_many`] batches, one `daily_incr.lua` call
//!   per batch (each entity's views merged per day in it);
//! - `aggregated`: the [`DailyWriter`], views merged per (entity, day) in
//!   process (its final flush inside the measured time);
//! - `bare`: the article's own commands from a bare redis-rs client,
//!   `HINCRBY {advert:<id>}:views <YYYYMMDD> 1` per view, pipelined by the
//!   batch, on the same entities: the ceiling the others are compared with.
//!
//! Each run reports views per second, Redis CPU per view (`INFO cpu`
//! differences) and where it went (`INFO commandstats`), and this
//! process's CPU per view; every run's totals are checked afterwards
//! through the library's read (which reads the bare client's hashes too)
//! on the 1,000 busiest entities and a sample of the others, against the
//! views sent. `tally bench ingest --daily-entities N` runs it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tally::daily::DailyWriter;
use tally::{Backend, BackendConfig, DailySettings, DailyStats, Day, View, WriterSettings};

use crate::pace::self_cpu_seconds;
use crate::server::{BenchRedis, command_stats, reset_command_stats};

/// The Zipf exponent of ad views.
pub const ZIPF_S: f64 = 1.1;

/// One way of writing the views.
#[derive(Debug, serde::Serialize)]
pub struct ViewsRun {
    pub mode: &'static str,
    pub views: u64,
    pub distinct_entities: u64,
    pub seconds: f64,
    pub views_per_second: f64,
    pub redis_cpu_us_per_view: f64,
    /// Where the server's time went, `INFO commandstats` over the run:
    /// microseconds per view by command (commands that scripts run are
    /// counted on their own too, inside `evalsha`'s time).
    pub commands_us_per_view: BTreeMap<String, f64>,
    /// This process's CPU microseconds per view (the client side).
    pub client_cpu_us_per_view: f64,
    /// The stored totals and today's counts of the checked entities equal
    /// the views sent to them (the run fails otherwise).
    pub totals_exact: bool,
    /// Entities checked, and the views sent to them.
    pub checked_entities: u64,
    pub checked_views: u64,
    /// The writer's chunks and duplicates (aggregated only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer: Option<tally::engine::writer::WriterStats>,
}

/// What the bench measured.
#[derive(Debug, serde::Serialize)]
pub struct DailyViews {
    pub bench: &'static str,
    pub entities: u64,
    pub zipf_s: f64,
    pub batch: usize,
    pub concurrency: usize,
    pub runs: Vec<ViewsRun>,
    /// Views per second against the bare client's.
    pub exact_ratio_to_bare: f64,
    pub aggregated_ratio_to_bare: f64,
}

/// Ranks 1..=n drawn with probability ∝ 1/k^s, by inverting the
/// cumulative weights (a binary search of a table of n doubles).
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: u64, s: f64) -> Self {
        let mut cdf = Vec::with_capacity(n as usize);
        let mut sum = 0.0;
        for k in 1..=n {
            sum += (k as f64).powf(-s);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        Zipf { cdf }
    }

    /// A rank from 0 (the most frequent) to n − 1.
    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.random();
        (self.cdf.partition_point(|&c| c < u) as u64).min(self.cdf.len() as u64 - 1)
    }
}

/// Runs the three modes for `seconds` each.
pub async fn run(
    redis: &BenchRedis,
    entities: u64,
    seconds: f64,
    batch: usize,
    concurrency: usize,
) -> Result<DailyViews> {
    ensure!(
        entities > 0 && seconds > 0.0 && batch > 0 && batch <= tally::daily::MAX_BATCH,
        "entities > 0, seconds > 0 and a batch of 1 to {}",
        tally::daily::MAX_BATCH
    );
    let concurrency = concurrency.max(1);
    let zipf = Arc::new(Zipf::new(entities, ZIPF_S));
    let duration = Duration::from_secs_f64(seconds);
    let mut runs = Vec::new();
    for mode in ["exact", "aggregated", "bare"] {
        redis.flush().await?;
        let backend = Backend::open(&BackendConfig::Redis {
            url: redis.url(),
            layout: Default::default(),
        })
        .await?;
        let daily = DailyStats::new(
            backend
                .daily_store(tally::daily::DEFAULT_ENTITY_PREFIX)
                .await?,
            DailySettings::default(),
        )?;
        let writer = (mode == "aggregated")
            .then(|| DailyWriter::start(daily.clone(), WriterSettings::default()))
            .transpose()?;
        let today = daily.today();
        if mode != "bare" {
            // The script loaded once before the clock starts, not by every
            // first concurrent call after the flush (NOSCRIPT, then SCRIPT
            // LOAD each).
            daily.incr("warm-up").await?;
        }
        reset_command_stats(&mut redis.raw().await?).await?;
        let cpu_before = redis.cpu_seconds().await?;
        let client_before = self_cpu_seconds();
        let started = Instant::now();
        let deadline = started + duration;
        let tasks: Vec<_> = (0..concurrency)
            .map(|task| {
                let (zipf, daily, writer) = (zipf.clone(), daily.clone(), writer.clone());
                let url = redis.url();
                tokio::spawn(async move {
                    let mut rng = StdRng::seed_from_u64(20 + task as u64);
                    let mut counts: HashMap<u64, i64> = HashMap::new();
                    let mut bare = match mode {
                        "bare" => Some(
                            redis::Client::open(url)?
                                .get_multiplexed_async_connection()
                                .await?,
                        ),
                        _ => None,
                    };
                    while Instant::now() < deadline {
                        let picks: Vec<u64> = (0..batch).map(|_| zipf.sample(&mut rng)).collect();
                        match (mode, &writer, &mut bare) {
                            ("exact", _, _) => {
                                let views: Vec<View> = picks
                                    .iter()
                                    .map(|e| View {
                                        entity: e.to_string(),
                                        count: 1,
                                        at: None,
                                    })
                                    .collect();
                                daily.incr_many(&views).await?;
                            }
                            (_, Some(writer), _) => {
                                for e in &picks {
                                    writer.add(&e.to_string(), 1, None).await?;
                                }
                                tokio::task::yield_now().await;
                            }
                            (_, _, Some(conn)) => {
                                let mut pipe = redis::pipe();
                                for e in &picks {
                                    pipe.cmd("HINCRBY")
                                        .arg(format!("{{advert:{e}}}:views"))
                                        .arg(today.yyyymmdd())
                                        .arg(1)
                                        .ignore();
                                }
                                let () = pipe.query_async(conn).await?;
                            }
                            _ => unreachable!("every mode has its client"),
                        }
                        for e in picks {
                            *counts.entry(e).or_default() += 1;
                        }
                    }
                    anyhow::Ok(counts)
                })
            })
            .collect();
        let mut counts: HashMap<u64, i64> = HashMap::new();
        for t in tasks {
            for (e, n) in t.await?? {
                *counts.entry(e).or_default() += n;
            }
        }
        if let Some(writer) = &writer {
            writer.shutdown().await;
        }
        let took = started.elapsed().as_secs_f64();
        let client_cpu = self_cpu_seconds() - client_before;
        let cpu = redis.cpu_seconds().await? - cpu_before;
        let views: i64 = counts.values().sum();
        let per_view = 1e6 / views.max(1) as f64;
        let commands_us_per_view = command_stats(&mut redis.raw().await?)
            .await?
            .into_iter()
            .map(|(command, cost)| (command, cost.usec * per_view / 1e6))
            .collect();
        let (checked_entities, checked_views) = check(&daily, &counts, today).await?;
        runs.push(ViewsRun {
            mode,
            views: views as u64,
            distinct_entities: counts.len() as u64,
            seconds: took,
            views_per_second: views as f64 / took,
            redis_cpu_us_per_view: cpu * per_view,
            commands_us_per_view,
            client_cpu_us_per_view: client_cpu * per_view,
            totals_exact: true,
            checked_entities,
            checked_views,
            writer: writer.map(|w| w.stats()),
        });
    }
    let rate = |mode: &str| {
        runs.iter()
            .find(|r| r.mode == mode)
            .map_or(0.0, |r| r.views_per_second)
    };
    let bare = rate("bare").max(f64::MIN_POSITIVE);
    Ok(DailyViews {
        bench: "daily-views",
        entities,
        zipf_s: ZIPF_S,
        batch,
        concurrency,
        exact_ratio_to_bare: rate("exact") / bare,
        aggregated_ratio_to_bare: rate("aggregated") / bare,
        runs,
    })
}

/// Checks the stored totals and today's counts of the 1,000 busiest
/// entities and of 1,000 others against what was sent; answers how many
/// entities and views it checked.
async fn check(daily: &DailyStats, counts: &HashMap<u64, i64>, today: Day) -> Result<(u64, u64)> {
    ensure!(
        daily.today() == today,
        "the day changed during the run; run again"
    );
    let mut by_views: Vec<(&u64, &i64)> = counts.iter().collect();
    by_views.sort_unstable_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let step = (by_views.len() / 1000).max(1);
    let sample = by_views
        .iter()
        .take(1000)
        .chain(by_views.iter().skip(1000).step_by(step));
    let (mut entities, mut views) = (0u64, 0u64);
    for &(e, &want) in sample {
        entities += 1;
        views += want as u64;
        let entity = e.to_string();
        let total = daily.total(&entity).await?;
        let day = daily.day(&entity, today).await?;
        ensure!(
            total == want && day == want,
            "entity {entity}: sent {want} views, stored total {total}, today {day}"
        );
    }
    Ok((entities, views))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every mode runs and its totals check, on a small scale.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_mode_writes_what_it_sent() {
        let redis = BenchRedis::start();
        let report = run(&redis, 2_000, 0.3, 100, 2).await.unwrap();
        assert_eq!(report.runs.len(), 3);
        for r in &report.runs {
            assert!(r.views > 0 && r.redis_cpu_us_per_view > 0.0, "{r:?}");
        }
        let aggregated = report.runs[1].writer.unwrap();
        assert_eq!(aggregated.written, aggregated.accepted);
    }

    #[test]
    fn zipf_ranks_follow_their_weights() {
        let zipf = Zipf::new(1000, ZIPF_S);
        let mut rng = StdRng::seed_from_u64(1);
        let mut seen = vec![0u64; 1000];
        let n = 200_000;
        for _ in 0..n {
            seen[zipf.sample(&mut rng) as usize] += 1;
        }
        let h: f64 = (1..=1000).map(|k| (k as f64).powf(-ZIPF_S)).sum();
        for k in [1usize, 2, 10] {
            let want = n as f64 * (k as f64).powf(-ZIPF_S) / h;
            let got = seen[k - 1] as f64;
            assert!(
                (got - want).abs() < 5.0 * want.sqrt() + 1.0,
                "rank {k}: {got} vs {want}"
            );
        }
    }
}
