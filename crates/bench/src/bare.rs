//! The bare client (issue 20 §2): the ceiling an ingest run is reported
//! against. A redis-rs client with no Lua, no validation and no write ids
//! sends, for the same picks of counter names as the run it stands beside,
//! the commands the layout itself needs for each increment, pipelined:
//!
//! - `default` layout: `ZADD {<prefix>:<shard>}:names 0 <name>` (the
//!   counter's registry shard), then one `HINCRBY
//!   {<prefix>:<shard>}:<p>:<name> <slice start> 1` per precision.
//! - `compact` layout: the same `ZADD`, then one `HINCRBY
//!   {<prefix>:<shard>}:@:<name> <(p << 32) | slice index> 1` per
//!   precision, all into the counter's one hash.
//!
//! BENCHMARKS.md lists the same commands, so the ceiling cannot move by
//! changing what is counted. It uses as many connections and as many
//! increments per round trip as the mode it is compared with: one per call
//! from `writers` connections for `exact`, `batch` for `exact-batch`, and
//! the aggregating writer's chunk from its lanes for `aggregated`. Its
//! writes are checked as the library's are: every precision of every
//! counter sums to what was sent.

use std::sync::Arc;

use anyhow::Result;
use tally::backend::redis::Layout;
use tally::backend::redis::layout::{
    DEFAULT_PREFIX, compact_field, default_registry, shard_of, tag,
};
use tally::engine::{Kind, Space};
use tally::{Clock, CounterSettings, SystemClock};

use crate::pace::{Timed, go_on, self_cpu_seconds};
use crate::server::BenchRedis;

/// The commands a read of statistic `name` at `precisions` sends in
/// `layout` (issue 20 §5), each as its words: what the store's read needs
/// for those slices, for a bare client to send in the same run (`tally
/// bench read`'s busy statistic). Today one `HGETALL` of each (series,
/// precision) hash, whose fields are slice starts and values each slice's
/// moments and sketch as one blob, and where the layout keeps statistics'
/// pending slices (`default`, `compact`) one `HMGET` of its `s` and `b`.
/// The one place the bench says which keys and commands a statistic's read
/// needs: change it with the statistics' storage, so the ceiling follows
/// what a read must fetch.
pub fn stat_read_commands(
    layout: &Layout,
    space: &Space,
    name: &str,
    precisions: &[u64],
) -> Vec<Vec<String>> {
    let keys = layout.space_keys(space);
    let mut commands: Vec<Vec<String>> = precisions
        .iter()
        .map(|&p| vec!["HGETALL".to_owned(), keys.hash(p, name)])
        .collect();
    if keys.folds(Kind::Stats) {
        commands.push(
            ["HMGET", &keys.pending(name), "s", "b"]
                .map(str::to_owned)
                .to_vec(),
        );
    }
    commands
}

/// The commands an exact write of one observation of statistic `name`,
/// at second `second`, sends through its pending slice in `layout`
/// (issue 20 §3), each as its words, for the bare client of `tally bench
/// stats`: `HMGET` of the pending slice's `s` and `b`, `HSET` of its `s`,
/// `b` (`blob`) and `t`, and `ZADD` of the name into its registry shard;
/// when `fold` (its first observation in that second), the fold's `HGET`
/// and `HSET` of the slice at each precision of `space` first. Plain
/// commands: no Lua, no merge, no check. The one place the bench says which
/// commands the design needs; BENCHMARKS.md lists the same.
pub fn stat_write_commands(
    layout: &Layout,
    space: &Space,
    name: &str,
    second: u64,
    blob: &[u8],
    fold: bool,
) -> Vec<Vec<Vec<u8>>> {
    let keys = layout.space_keys(space);
    let pending = keys.pending(name).into_bytes();
    let words = |w: &[&[u8]]| w.iter().map(|b| b.to_vec()).collect::<Vec<_>>();
    let mut commands = Vec::new();
    let mut t = Vec::new();
    for p in &space.precisions {
        let hash = keys.hash(p.seconds, name);
        let slice = p.slice_of_second(second);
        let field = keys.field(p.seconds, slice).unwrap_or(slice).to_string();
        if fold {
            commands.push(words(&[b"HGET", hash.as_bytes(), field.as_bytes()]));
            commands.push(words(&[b"HSET", hash.as_bytes(), field.as_bytes(), blob]));
        }
        t.push(format!("{}:{field}", p.seconds));
    }
    let finest = t
        .first()
        .and_then(|f| f.split(':').nth(1))
        .unwrap_or("0")
        .to_owned();
    commands.push(words(&[b"HMGET", &pending, b"s", b"b"]));
    commands.push(words(&[
        b"HSET",
        &pending,
        b"s",
        finest.as_bytes(),
        b"b",
        blob,
        b"t",
        t.join(" ").as_bytes(),
    ]));
    commands.push(words(&[
        b"ZADD",
        keys.registry(keys.shard(name)).as_bytes(),
        b"0",
        name.as_bytes(),
    ]));
    commands
}

/// What the bare client measured.
#[derive(Debug, serde::Serialize)]
pub struct Bare {
    /// The layout whose commands it sent.
    pub layout: BareLayout,
    /// Concurrent connections.
    pub connections: usize,
    /// Increments per round trip.
    pub per_round_trip: usize,
    pub distinct: u64,
    pub increments: u64,
    pub seconds: f64,
    pub per_second: f64,
    /// The server's CPU microseconds per increment.
    pub redis_cpu_us_per_increment: f64,
    /// This process's CPU microseconds per increment (the client's).
    pub client_cpu_us_per_increment: f64,
    /// Server microseconds per increment by command (`INFO commandstats`),
    /// when the caller measured them.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub commands_us_per_increment: std::collections::BTreeMap<String, f64>,
}

/// The layouts the bare client sends the commands of.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BareLayout {
    /// A hash per (counter, precision).
    Default,
    /// One hash per counter, a field per (precision, slice).
    Compact,
}

impl BareLayout {
    /// The layout Tally opens for it, under the default prefix.
    pub fn layout(self) -> Layout {
        match self {
            BareLayout::Default => Layout::default(),
            BareLayout::Compact => Layout::Compact {
                prefix: DEFAULT_PREFIX.to_owned(),
            },
        }
    }
}

/// How the bare client sends: `connections` at once, `per_round_trip`
/// increments in each pipeline.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub connections: usize,
    pub per_round_trip: usize,
}

/// Sends `layout`'s commands for `seconds`, each connection picking names
/// as `picks(connection)` does.
pub async fn run(
    redis: &BenchRedis,
    layout: BareLayout,
    settings: &CounterSettings,
    names: &Arc<Vec<String>>,
    shape: Shape,
    seconds: f64,
    picks: impl Fn(u64) -> Box<dyn FnMut() -> usize + Send>,
) -> Result<Bare> {
    let precisions = Arc::new(settings.precisions.clone());
    let mut conns = Vec::with_capacity(shape.connections);
    for _ in 0..shape.connections {
        conns.push(redis.raw().await?);
    }
    let (cpu, client) = (redis.cpu_seconds().await?, self_cpu_seconds());
    let timed = Timed::start(seconds);
    let deadline = timed.deadline;
    let sent = timed
        .join(conns.into_iter().enumerate().map(|(w, mut conn)| {
            let (names, precisions) = (names.clone(), precisions.clone());
            let mut pick = picks(w as u64);
            async move {
                let (mut passes, mut sent) = (0u64, 0u64);
                while go_on(deadline, &mut passes) {
                    let now = SystemClock.now().whole_secs();
                    let mut pipe = redis::pipe();
                    for _ in 0..shape.per_round_trip {
                        let name = &names[pick()];
                        let shard = shard_of(name);
                        pipe.cmd("ZADD")
                            .arg(default_registry(DEFAULT_PREFIX, shard))
                            .arg(0)
                            .arg(name)
                            .ignore();
                        // The layout's keys, without checking the name.
                        let tag = tag(DEFAULT_PREFIX, shard);
                        // Only the compact layout has one hash for all.
                        let one = if layout == BareLayout::Compact {
                            format!("{tag}:@:{name}")
                        } else {
                            String::new()
                        };
                        for &p in precisions.iter() {
                            let slice = now / p * p;
                            match layout {
                                BareLayout::Default => pipe
                                    .cmd("HINCRBY")
                                    .arg(format!("{tag}:{p}:{name}"))
                                    .arg(slice),
                                BareLayout::Compact => {
                                    pipe.cmd("HINCRBY").arg(&one).arg(compact_field(p, slice)?)
                                }
                            }
                            .arg(1)
                            .ignore();
                        }
                    }
                    let () = pipe.query_async(&mut conn).await?;
                    sent += shape.per_round_trip as u64;
                }
                Ok(sent)
            }
        }))
        .await?;
    let secs = timed.seconds();
    let n = sent.max(1) as f64;
    let redis_cpu_us = (redis.cpu_seconds().await? - cpu) * 1e6 / n;
    let client_cpu_us = (self_cpu_seconds() - client) * 1e6 / n;
    Ok(Bare {
        layout,
        connections: shape.connections,
        per_round_trip: shape.per_round_trip,
        distinct: names.len() as u64,
        increments: sent,
        seconds: secs,
        per_second: sent as f64 / secs,
        redis_cpu_us_per_increment: redis_cpu_us,
        client_cpu_us_per_increment: client_cpu_us,
        commands_us_per_increment: Default::default(),
    })
}
