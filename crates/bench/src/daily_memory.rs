//! `tally bench daily-memory`: Redis memory per entity of the daily
//! statistics at N days of data, for many entities (1,000,000 by default),
//! against the seed's bare layout (one hash per entity, no total, no TTL)
//! holding the same days, measured in the same run on a fresh server each.
//!
//! Memory is `INFO memory` `used_memory` after minus before. Tally's data is
//! written through the library's real write path (one `daily_incr.lua` call
//! per entity and day); the baseline with pipelined HINCRBY, as the seed
//! does. Afterwards, every entity's total is checked on a sample.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, ensure};
use futures::StreamExt;
use tally::{
    Backend, BackendConfig, DailySettings, DailyStats, Day, ManualClock, SystemClock, View,
};
use tally_testkit::RedisServer;

use crate::server::used_memory;

/// What the bench measured.
#[derive(Debug, serde::Serialize)]
pub struct DailyMemory {
    pub bench: &'static str,
    pub entities: u64,
    pub days: u32,
    pub tally_bytes_per_entity: f64,
    pub seed_bytes_per_entity: f64,
    pub ratio_to_seed: f64,
    pub tally_write_seconds: f64,
    pub views_written: u64,
}

pub async fn run(entities: u64, days: u32, concurrency: usize) -> Result<DailyMemory> {
    ensure!(
        entities > 0 && days > 0 && days <= 90,
        "entities > 0 and 1 to 90 days"
    );
    // Tally: through the library, on its own server.
    let server = RedisServer::start();
    let url = server.url();
    let backend = Backend::open(&BackendConfig::Redis {
        url: url.clone(),
        layout: Default::default(),
    })
    .await?;
    let now = tally::Clock::now(&SystemClock).whole_secs() as f64;
    let clock = ManualClock::at(now);
    let store = backend
        .daily_store("advert", tally::DailyTotal::Hash)
        .await?;
    let daily = DailyStats::with_clock(store, DailySettings::default(), Arc::new(clock))?;
    let before = used_memory(&url).await?;
    let started = Instant::now();
    let batch = 1000u64;
    let batches = entities.div_ceil(batch) * u64::from(days);
    let results: Vec<Result<()>> = futures::stream::iter(0..batches)
        .map(|b| {
            let daily = daily.clone();
            async move {
                let day = (b % u64::from(days)) as f64;
                let first = b / u64::from(days) * batch;
                let views: Vec<View> = (first..(first + batch).min(entities))
                    .map(|e| View {
                        entity: e.to_string(),
                        count: 1 + ((e + day as u64) % 7) as i64,
                        at: Some(now - day * 86_400.0),
                    })
                    .collect();
                daily.incr_many(&views).await?;
                Ok(())
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    for r in results {
        r?;
    }
    let write_seconds = started.elapsed().as_secs_f64();
    let tally_bytes = used_memory(&url).await? - before;
    // Check a sample of totals.
    for e in (0..entities).step_by((entities / 100).max(1) as usize) {
        let want: i64 = (0..u64::from(days)).map(|d| 1 + ((e + d) % 7) as i64).sum();
        ensure!(
            daily.total(&e.to_string()).await? == want,
            "entity {e}: total is not what was written"
        );
    }
    drop(server);

    // The seed's layout on a fresh server: HINCRBY {advert:<id>}:views YYYYMMDD.
    let server = RedisServer::start();
    let url = server.url();
    let mut conn = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let before = used_memory(&url).await?;
    let today = Day::of(tally::Timestamp::from_secs_f64(now)?, 0);
    for first in (0..entities).step_by(batch as usize) {
        let mut pipe = redis::pipe();
        for e in first..(first + batch).min(entities) {
            for d in 0..days {
                pipe.cmd("HINCRBY")
                    .arg(format!("{{advert:{e}}}:views"))
                    .arg(today.plus(-(d as i32)).yyyymmdd())
                    .arg(1 + (e + u64::from(d)) % 7)
                    .ignore();
            }
        }
        let () = pipe.query_async(&mut conn).await?;
    }
    let seed_bytes = used_memory(&url).await? - before;
    let per = |bytes: i64| bytes as f64 / entities as f64;
    Ok(DailyMemory {
        bench: "daily-memory",
        entities,
        days,
        tally_bytes_per_entity: per(tally_bytes),
        seed_bytes_per_entity: per(seed_bytes),
        ratio_to_seed: tally_bytes as f64 / seed_bytes as f64,
        tally_write_seconds: write_seconds,
        views_written: entities * u64::from(days),
    })
}
