//! The book's algorithm as a baseline ("Redis in Action" 5.2, `update_counter`):
//! each increment is one MULTI/EXEC pipeline of ZADD `known:` + HINCRBY
//! `count:<p>:<name>` per precision, sent by `connections` concurrent
//! connections as a web app's workers would send it. Written to the book's
//! own keys, so Tally's `ria` layout reads them back for the totals check.

use std::sync::Arc;

use anyhow::Result;
use tally::backend::redis::Layout;
use tally::{Backend, BackendConfig, Clock, Counters, SystemClock};

use crate::pace::Timed;
use crate::server::{BenchRedis, check_totals, stored_totals};

/// What the baseline measured.
#[derive(Debug, serde::Serialize)]
pub struct Book {
    pub connections: usize,
    pub distinct: u64,
    pub increments: u64,
    pub seconds: f64,
    pub per_second: f64,
    /// The server's CPU microseconds per increment.
    pub redis_cpu_us_per_increment: f64,
    pub totals_exact: bool,
}

/// Runs the book's `update_counter` for `seconds` over `distinct` counters,
/// then checks the book's keys hold what was sent.
pub async fn run(
    redis: &BenchRedis,
    counters_settings: &tally::CounterSettings,
    distinct: u64,
    connections: usize,
    seconds: f64,
) -> Result<Book> {
    let names: Arc<Vec<String>> = Arc::new((0..distinct).map(|i| format!("c{i}")).collect());
    let precisions = Arc::new(counters_settings.precisions.clone());
    let mut conns = Vec::with_capacity(connections);
    for _ in 0..connections {
        // One TCP connection per worker, as separate web workers have.
        conns.push(redis.raw().await?);
    }
    let cpu = redis.cpu_seconds().await?;
    let timed = Timed::start(seconds);
    let deadline = timed.deadline;
    let sent = timed
        .join(conns.into_iter().enumerate().map(|(w, mut conn)| {
            let (names, precisions) = (names.clone(), precisions.clone());
            async move {
                let mut i = w as u64 * 7919;
                let (mut passes, mut sent) = (0u64, 0u64);
                while crate::pace::go_on(deadline, &mut passes) {
                    let name = &names[(i % distinct) as usize];
                    i += 131;
                    let now = SystemClock.now().as_secs_f64();
                    let mut pipe = redis::pipe();
                    pipe.atomic();
                    for &p in precisions.iter() {
                        let pnow = (now / p as f64) as u64 * p;
                        let hash = format!("{p}:{name}");
                        pipe.cmd("ZADD").arg("known:").arg(0).arg(&hash).ignore();
                        pipe.cmd("HINCRBY")
                            .arg(format!("count:{hash}"))
                            .arg(pnow)
                            .arg(1)
                            .ignore();
                    }
                    let () = pipe.query_async(&mut conn).await?;
                    sent += 1;
                }
                Ok(sent)
            }
        }))
        .await?;
    let secs = timed.seconds();
    let cpu_us = (redis.cpu_seconds().await? - cpu) * 1e6 / sent.max(1) as f64;
    // The book's keys, read back through the `ria` layout.
    let backend = Backend::open(&BackendConfig::Redis {
        url: redis.url(),
        layout: Layout::Ria,
    })
    .await?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = backend.counter_store(clock.clone()).await?;
    let counters = Counters::with_clock(store, counters_settings.clone(), clock)?;
    let totals = stored_totals(&counters, &names).await?;
    check_totals("the book's algorithm", &totals, sent)?;
    Ok(Book {
        connections,
        distinct,
        increments: sent,
        seconds: secs,
        per_second: sent as f64 / secs,
        redis_cpu_us_per_increment: cpu_us,
        totals_exact: true,
    })
}
