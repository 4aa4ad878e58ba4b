//! Daily views of many entities (issue 20 §4): views of `entities` ads
//! drawn from a Zipf distribution (s = 1.1, as ad views are: a few ads
//! take most of them), written for a few seconds each way on one
//! [`BenchRedis`], emptied between runs:
//!
//! - `exact`: [`DailyStats::incr_many`] batches, one `daily_incr.lua` call
//!   per batch (each entity's views merged per day in it);
//! - `aggregated`: the [`DailyWriter`], views merged per (entity, day) in
//!   process (its final flush inside the measured time);
//! - `exact-running` and `aggregated-running`: the same two with the
//!   running daily total ([`DailyTotal::Running`], `daily_running.lua`);
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
use tally::{
    Backend, BackendConfig, DailySettings, DailyStats, DailyTotal, Day, View, WriterSettings,
};

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
    /// Days of history each entity held before the runs (one view a day).
    pub history_days: u32,
    pub runs: Vec<ViewsRun>,
    /// Views per second against the bare client's.
    pub exact_ratio_to_bare: f64,
    pub aggregated_ratio_to_bare: f64,
    /// The same with the running daily total.
    pub exact_running_ratio_to_bare: f64,
    pub aggregated_running_ratio_to_bare: f64,
}

/// Ranks 1..=n drawn with probability ∝ 1/k^s, by Walker's alias
/// method (Vose's construction): one random number and one table entry a
/// draw, whatever n is, so that the bench's own draws cost the same small
/// amount in every mode (a binary search of a million cumulative weights
/// missed the caches at most of its 20 steps).
pub struct Zipf {
    /// Per column: the chance, scaled to 2^32, of keeping the column's own
    /// rank (low 32 bits), and the rank given otherwise (high 32 bits).
    columns: Vec<u64>,
}

impl Zipf {
    pub fn new(n: u64, s: f64) -> Self {
        assert!(
            n > 0 && n <= u64::from(u32::MAX),
            "1 to 2^32 - 1 ranks, got {n}"
        );
        let weights: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-s)).collect();
        let total: f64 = weights.iter().sum();
        // Each column's share scaled so that a column holds 1 on average.
        let mut share: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let (mut small, mut large): (Vec<u32>, Vec<u32>) =
            (0..n as u32).partition(|&i| share[i as usize] < 1.0);
        while let (Some(&lo), Some(&hi)) = (small.last(), large.last()) {
            small.pop();
            alias[lo as usize] = hi;
            share[hi as usize] -= 1.0 - share[lo as usize];
            if share[hi as usize] < 1.0 {
                large.pop();
                small.push(hi);
            }
        }
        // What is left (rounding) keeps its own rank always.
        for i in small.into_iter().chain(large) {
            share[i as usize] = 1.0;
        }
        let columns = share
            .iter()
            .zip(&alias)
            .map(|(&keep, &other)| {
                let keep = (keep.clamp(0.0, 1.0) * 4_294_967_296.0).min(4_294_967_295.0) as u64;
                u64::from(other) << 32 | keep
            })
            .collect();
        Zipf { columns }
    }

    /// A rank from 0 (the most frequent) to n − 1.
    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        let bits: u64 = rng.random();
        // The high half picks a column (Lemire's multiply, no division),
        // the low half decides between its rank and its alias.
        let column = ((bits >> 32) * self.columns.len() as u64) >> 32;
        let entry = self.columns[column as usize];
        if bits & 0xFFFF_FFFF < entry & 0xFFFF_FFFF {
            column
        } else {
            entry >> 32
        }
    }
}

/// Runs the five modes for `seconds` each.
pub async fn run(
    redis: &BenchRedis,
    entities: u64,
    seconds: f64,
    batch: usize,
    concurrency: usize,
    history: u32,
) -> Result<DailyViews> {
    ensure!(
        entities > 0
            && entities <= u64::from(u32::MAX)
            && seconds > 0.0
            && batch > 0
            && batch <= tally::daily::MAX_BATCH
            && history < tally::daily::DEFAULT_RETENTION_DAYS,
        "1 to {} entities, seconds > 0, a batch of 1 to {} and less than {} days of history",
        u32::MAX,
        tally::daily::MAX_BATCH,
        tally::daily::DEFAULT_RETENTION_DAYS
    );
    let concurrency = concurrency.max(1);
    let zipf = Arc::new(Zipf::new(entities, ZIPF_S));
    let duration = Duration::from_secs_f64(seconds);
    let mut runs = Vec::new();
    for mode in [
        "exact",
        "aggregated",
        "exact-running",
        "aggregated-running",
        "bare",
    ] {
        let total = if mode.ends_with("-running") {
            DailyTotal::Running
        } else {
            DailyTotal::Hash
        };
        redis.flush().await?;
        let backend = Backend::open(&BackendConfig::Redis {
            url: redis.url(),
            layout: Default::default(),
        })
        .await?;
        let daily = DailyStats::new(
            backend
                .daily_store(tally::daily::DEFAULT_ENTITY_PREFIX, total)
                .await?,
            DailySettings::default(),
        )?;
        let writer = mode
            .starts_with("aggregated")
            .then(|| DailyWriter::start(daily.clone(), WriterSettings::default()))
            .transpose()?;
        let today = daily.today();
        fill_history(redis, entities, history, today, total).await?;
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
                    // The ranks sent, counted once the clock has stopped:
                    // the bench's bookkeeping is no client's work.
                    let mut sent: Vec<u32> = Vec::new();
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
                            ("exact" | "exact-running", _, _) => {
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
                        sent.extend(picks.iter().map(|&e| e as u32));
                    }
                    anyhow::Ok(sent)
                })
            })
            .collect();
        let mut sent = Vec::with_capacity(tasks.len());
        for t in tasks {
            sent.push(t.await??);
        }
        if let Some(writer) = &writer {
            writer.shutdown().await;
        }
        let took = started.elapsed().as_secs_f64();
        let client_cpu = self_cpu_seconds() - client_before;
        let cpu = redis.cpu_seconds().await? - cpu_before;
        let mut counts: HashMap<u64, i64> = HashMap::new();
        for e in sent.into_iter().flatten() {
            *counts.entry(u64::from(e)).or_default() += 1;
        }
        let views: i64 = counts.values().sum();
        let per_view = 1e6 / views.max(1) as f64;
        let commands_us_per_view = command_stats(&mut redis.raw().await?)
            .await?
            .into_iter()
            .map(|(command, cost)| (command, cost.usec * per_view / 1e6))
            .collect();
        let (checked_entities, checked_views) = check(&daily, &counts, today, history).await?;
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
        history_days: history,
        exact_ratio_to_bare: rate("exact") / bare,
        aggregated_ratio_to_bare: rate("aggregated") / bare,
        exact_running_ratio_to_bare: rate("exact-running") / bare,
        aggregated_running_ratio_to_bare: rate("aggregated-running") / bare,
        runs,
    })
}

/// Gives each of the `entities` one view on each of the `history` days
/// before `today`, untimed: the article's hash, and under the running total
/// its `:stats` total too, as a store that had counted them holds.
async fn fill_history(
    redis: &BenchRedis,
    entities: u64,
    history: u32,
    today: Day,
    total: DailyTotal,
) -> Result<()> {
    if history == 0 {
        return Ok(());
    }
    let mut conn = redis.raw().await?;
    let days: Vec<u32> = (1..=history)
        .map(|i| today.plus(-(i as i32)).yyyymmdd())
        .collect();
    for start in (0..entities).step_by(1000) {
        let mut pipe = redis::pipe();
        for e in start..(start + 1000).min(entities) {
            let hset = pipe.cmd("HSET").arg(format!("{{advert:{e}}}:views"));
            for day in &days {
                hset.arg(day).arg(1);
            }
            hset.ignore();
            if total == DailyTotal::Running {
                pipe.cmd("HSET")
                    .arg(format!("{{advert:{e}}}:stats"))
                    .arg("total")
                    .arg(history)
                    .arg("first")
                    .arg(days[days.len() - 1])
                    .ignore();
            }
        }
        let () = pipe.query_async(&mut conn).await?;
    }
    Ok(())
}

/// Checks the stored totals and today's counts of the 1,000 busiest
/// entities and of 1,000 others against what was sent (and the `history`
/// days each held before); answers how many entities and views it checked.
async fn check(
    daily: &DailyStats,
    counts: &HashMap<u64, i64>,
    today: Day,
    history: u32,
) -> Result<(u64, u64)> {
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
            total == want + i64::from(history) && day == want,
            "entity {entity}: sent {want} views after {history} days of history, \
             stored total {total}, today {day}"
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
        let report = run(&redis, 2_000, 0.3, 100, 2, 3).await.unwrap();
        assert_eq!(report.runs.len(), 5);
        for r in &report.runs {
            assert!(r.views > 0 && r.redis_cpu_us_per_view > 0.0, "{r:?}");
        }
        let aggregated = report.runs[1].writer.unwrap();
        assert_eq!(aggregated.written, aggregated.accepted);
    }

    /// The alias table's columns give each rank exactly its weight's
    /// share (to the 2^-32 steps the table keeps).
    #[test]
    fn the_alias_table_holds_each_ranks_weight() {
        let n = 100_000u64;
        let zipf = Zipf::new(n, ZIPF_S);
        let mut chance = vec![0f64; n as usize];
        for (column, &entry) in zipf.columns.iter().enumerate() {
            let keep = (entry & 0xFFFF_FFFF) as f64 / 4_294_967_296.0;
            chance[column] += keep;
            chance[(entry >> 32) as usize] += 1.0 - keep;
        }
        let total: f64 = (1..=n).map(|k| (k as f64).powf(-ZIPF_S)).sum();
        for (k, got) in chance.iter().enumerate() {
            let want = ((k + 1) as f64).powf(-ZIPF_S) / total;
            let got = got / n as f64;
            assert!(
                (got - want).abs() <= want * 1e-6 + 1e-9 / n as f64,
                "rank {}: {got} against {want}",
                k + 1
            );
        }
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
