//! The aggregating writer of daily statistics: repeated views of the same
//! (entity, day) merged in process, written in batches, each exactly once.
//!
//! [`DailyWriter::add`] validates a view exactly as
//! [`DailyStats::incr_many`] does (the entity id, a count of at least 1,
//! the time) and merges it into a sharded in-memory table keyed by entity
//! (so a view of a waiting entity is merged with nothing allocated), an
//! entry per (entity, day), with a checked add (a count that would overflow is
//! refused as bad input and nothing is merged). A background flusher takes
//! the table every `flush_interval` (or as soon as it holds
//! `flush_entries` entries), sorts it by entity and writes it in chunks of
//! `chunk_counters` (entity, day) writes on `lanes` concurrent lanes, with
//! [`DailyStore::incr_lane`]: one store call per chunk (on Redis one
//! `daily_incr.lua` call, one per cluster slot of the chunk's entities; on
//! SQLite one transaction).
//!
//! Exactly once, as the engine's writer does it ([`WriteSeq`]): the writer
//! draws a random id, and each lane numbers its chunks 1, 2, 3... and
//! sends the next only once the last was acknowledged. The store keeps one
//! record per (writer, lane), the last number applied (per cluster slot on
//! a cluster), and applies a call whose number is not above it as a no-op.
//! A chunk that fails because the backend is unavailable is sent again
//! whole, with the same number, with backoff, until it is acknowledged. So
//! while the process lives, a view that `add` accepted is written exactly
//! once; at shutdown the final flush retries for up to [`SHUTDOWN_GRACE`](crate::engine::writer::SHUTDOWN_GRACE),
//! then logs what it loses. An entity the store refuses for good (its
//! total or a day would overflow) is dropped alone, counted in
//! [`WriterStats::rejected`] and logged; its neighbours are written.
//!
//! Once shutdown begins every add is refused, checked under the shard lock,
//! so no add lands in a table after the final flush took it.
//!
//! Bounded memory: at most `max_entries` (entity, day) entries wait. When
//! full, [`DailyWriter::add`] waits for the next flush ([`WhenFull::Wait`])
//! or fails with [`Error::Overloaded`] ([`WhenFull::Error`]);
//! [`DailyWriter::try_add`] never waits. In the store, the lane records
//! are one small key (Redis; one per cluster slot written) or row (SQLite)
//! per lane, kept 7 days after their last use: bounded by the writers, not
//! by the writes.
//!
//! [`DailyStore::incr_lane`]: crate::daily::DailyStore::incr_lane

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rustc_hash::FxBuildHasher;
use tokio::sync::mpsc;

use super::{DailyStats, DailyWrite, DailyWritten, Day, MAX_BATCH, View};
use crate::engine::plan;
use crate::engine::writer::{
    Backoff, Base, Control, Handle, Shards, WhenFull, WriterSettings, WriterState, WriterStats,
    retryable, run_flusher,
};
use crate::engine::{Applied, WriteSeq};
use crate::error::{Error, Result};
use crate::name::Name;

/// An (entity, day) entry: the merged views and how many adds they stand
/// for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Entry {
    count: i64,
    adds: u64,
}

/// What waits for one entity: an entry per day (nearly always one).
#[derive(Debug, Default)]
struct Waiting {
    days: Vec<(Day, Entry)>,
}

impl Waiting {
    fn day(&mut self, day: Day) -> Option<&mut Entry> {
        self.days
            .iter_mut()
            .find_map(|(d, e)| (*d == day).then_some(e))
    }
}

/// Keyed by entity, so that a view of an entity that waits already is
/// found by its `&str`, with no [`Name`] made.
type Table = HashMap<Name, Waiting, FxBuildHasher>;

/// Writes taken from the table for one store call, and the adds each
/// stands for.
struct Chunk {
    writes: Vec<DailyWrite>,
    adds: Vec<u64>,
}

#[derive(Default)]
struct Shard {
    table: Table,
}

struct Inner {
    base: Base,
    daily: DailyStats,
    shards: Shards<Shard>,
}

impl WriterState for Inner {
    fn base(&self) -> &Base {
        &self.base
    }
}

/// A handle on the aggregating writer of daily statistics. Cheap to clone;
/// the flusher stops (after a final flush) when [`DailyWriter::shutdown`]
/// is called or the last handle is dropped.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let views = tally.daily_writer();
/// for _ in 0..3 {
///     views.add("ad-7", 1, None).await?; // merged in memory
/// }
/// views.flush().await?; // written once, as one write of 3
/// assert_eq!(tally.daily().total("ad-7").await?, 3);
/// tally.shutdown().await; // flushes and stops the writer
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct DailyWriter {
    inner: Handle<Inner>,
}

impl std::fmt::Debug for DailyWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.debug(f, "DailyWriter", &[])
    }
}

impl DailyWriter {
    /// Starts a writer of `daily`; spawns its flusher on the current tokio
    /// runtime.
    pub fn start(daily: DailyStats, settings: WriterSettings) -> Result<Self> {
        let settings = settings.validate()?;
        let inner = Inner {
            base: Base::new("daily writer", "(entity, day)", settings),
            daily,
            shards: Shards::new(),
        };
        Ok(DailyWriter {
            inner: Handle::start(inner, flusher),
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> &WriterSettings {
        self.inner.settings()
    }

    /// Merges `count` views of `entity` at `at` (default now), waiting for
    /// room when full and so configured.
    pub async fn add(&self, entity: &str, count: i64, at: Option<f64>) -> Result<()> {
        let day = self.check_one(entity, count, at)?;
        self.merging(1, || self.merge_one(entity, day, count)).await
    }

    /// Runs `merge` of `views` checked views until it finds room, waiting
    /// for a flush each time the table is full, when so configured.
    async fn merging(&self, views: usize, merge: impl Fn() -> Result<()>) -> Result<()> {
        let base = &self.inner.base;
        loop {
            let room = base.room.notified();
            match merge() {
                Err(Error::Overloaded(_))
                    if base.settings.when_full == WhenFull::Wait
                        && views <= base.settings.max_entries
                        && !base.closed.load(Ordering::Relaxed) =>
                {
                    base.flush_soon.notify_one();
                    room.await;
                }
                other => return other,
            }
        }
    }

    /// Merges without ever waiting: fails with [`Error::Overloaded`] when
    /// full or shut down. Checks the view first, as
    /// [`DailyStats::incr_many`] does.
    pub fn try_add(&self, entity: &str, count: i64, at: Option<f64>) -> Result<()> {
        let day = self.check_one(entity, count, at)?;
        self.merge_one(entity, day, count)
    }

    /// Checks one view as [`DailyStats::incr_many`] does and gives its day;
    /// reads the clock only when `at` is not given.
    fn check_one(&self, entity: &str, count: i64, at: Option<f64>) -> Result<Day> {
        if self.inner.base.closed.load(Ordering::Relaxed) {
            return Err(shut_down());
        }
        let daily = &self.inner.daily;
        daily.check_view(entity, count, at, || daily.clock.now())
    }

    /// Merges one checked view under its shard's lock: into the entry of
    /// its (entity, day) when one waits (nothing allocated), else into a
    /// new entry, which takes room or fails with [`Error::Overloaded`].
    fn merge_one(&self, entity: &str, day: Day, count: i64) -> Result<()> {
        let inner = &self.inner;
        let created = {
            let mut shard = inner.shards.lock(shard_of(entity));
            // Checked under the lock, as in `merge_all`.
            if inner.base.closed.load(Ordering::Relaxed) {
                return Err(shut_down());
            }
            match shard.table.get_mut(entity) {
                Some(waiting) => match waiting.day(day) {
                    Some(entry) => {
                        entry.count = entry
                            .count
                            .checked_add(count)
                            .ok_or_else(|| overflow(count, entity, day))?;
                        entry.adds += 1;
                        false
                    }
                    None => {
                        inner.base.reserve_n(1)?;
                        waiting.days.push((day, Entry { count, adds: 1 }));
                        true
                    }
                },
                None => {
                    inner.base.reserve_n(1)?;
                    shard.table.insert(
                        Name::from_checked(entity.to_owned()),
                        Waiting {
                            days: vec![(day, Entry { count, adds: 1 })],
                        },
                    );
                    true
                }
            }
        };
        self.merged(1, usize::from(created));
        Ok(())
    }

    /// Merges a batch of views, all or nothing: every view is checked
    /// first (at most [`MAX_BATCH`]); then, with the shards it touches
    /// locked, every view is merged, or none when one would overflow or
    /// the new (entity, day) entries find no room (then it waits for a
    /// flush and tries again, when so configured).
    pub async fn add_many(&self, views: &[View]) -> Result<()> {
        let checked = self.check(views)?;
        self.merging(checked.len(), || self.merge_all(&checked))
            .await
    }

    /// Checks `views` as [`DailyStats::incr_many`] does: their entity,
    /// day and count, with their shard.
    fn check<'v>(&self, views: &'v [View]) -> Result<Vec<Checked<'v>>> {
        if self.inner.base.closed.load(Ordering::Relaxed) {
            return Err(shut_down());
        }
        plan::check_batch_len(views.len(), MAX_BATCH, "views")?;
        let daily = &self.inner.daily;
        let now = daily.clock.now();
        views
            .iter()
            .map(|v| {
                Ok(Checked {
                    entity: &v.entity,
                    day: daily.check_view(&v.entity, v.count, v.at, || now)?,
                    count: v.count,
                    shard: shard_of(&v.entity),
                })
            })
            .collect()
    }

    /// Counts `views` merged, `created` of them into new entries, and asks
    /// for a flush when the table holds enough.
    fn merged(&self, views: usize, created: usize) {
        let base = &self.inner.base;
        base.accepted.fetch_add(views as u64, Ordering::Relaxed);
        if created > 0 && base.entries.load(Ordering::Relaxed) >= base.settings.flush_entries {
            base.flush_soon.notify_one();
        }
    }

    /// With the shards the views touch locked (in ascending order, so no
    /// two callers deadlock): refuses when shut down, works out every new
    /// count with a checked add and, only if all fit and there is room for
    /// the new entries ([`Error::Overloaded`] otherwise), stores them and
    /// counts the views.
    fn merge_all(&self, views: &[Checked<'_>]) -> Result<()> {
        let shard_of_view: Vec<usize> = views.iter().map(|v| v.shard).collect();
        let mut guards = self.inner.shards.lock_all(&shard_of_view);
        // Checked under the locks: the final flush takes each shard's table
        // under its lock after `closed` is set, so a view either is in the
        // table it takes or is refused here, never accepted after it.
        if self.inner.base.closed.load(Ordering::Relaxed) {
            return Err(shut_down());
        }
        // The new entries, merged first in a scratch map so that nothing
        // changes when one would overflow; with whether each is new.
        let mut next: HashMap<(&str, Day), (usize, Entry, bool), FxBuildHasher> =
            HashMap::default();
        for v in views {
            let g = guards
                .binary_search_by_key(&v.shard, |(s, _)| *s)
                .expect("locked");
            let (entry, new) = match next.get(&(v.entity, v.day)) {
                Some(&(_, e, new)) => (e, new),
                None => match guards[g]
                    .1
                    .table
                    .get_mut(v.entity)
                    .and_then(|w| w.day(v.day))
                {
                    Some(e) => (*e, false),
                    None => (Entry::default(), true),
                },
            };
            let count = entry
                .count
                .checked_add(v.count)
                .ok_or_else(|| overflow(v.count, v.entity, v.day))?;
            let entry = Entry {
                count,
                adds: entry.adds + 1,
            };
            next.insert((v.entity, v.day), (g, entry, new));
        }
        let created = next.values().filter(|(_, _, new)| *new).count();
        self.inner.base.reserve_n(created)?;
        for ((entity, day), (g, entry, _)) in next {
            let table = &mut guards[g].1.table;
            match table.get_mut(entity) {
                Some(w) => match w.day(day) {
                    Some(e) => *e = entry,
                    None => w.days.push((day, entry)),
                },
                None => {
                    table.insert(
                        Name::from_checked(entity.to_owned()),
                        Waiting {
                            days: vec![(day, entry)],
                        },
                    );
                }
            }
        }
        drop(guards);
        self.merged(views.len(), created);
        Ok(())
    }

    /// Flushes now and waits until everything added before this call is
    /// written (or dropped as refused).
    pub async fn flush(&self) -> Result<()> {
        self.inner.flush(shut_down).await
    }

    /// Stops taking views, flushes what is pending (retrying an
    /// unavailable backend for up to [`SHUTDOWN_GRACE`](crate::engine::writer::SHUTDOWN_GRACE)) and stops the
    /// flusher.
    pub async fn shutdown(&self) {
        self.inner.shutdown().await
    }

    /// Running figures: `accepted` and `written` count views (adds),
    /// `chunks` store calls that answered, `duplicates` writes the store
    /// found applied already (a retry after a lost reply), and
    /// `pending_entries` the (entity, day) entries waiting.
    pub fn stats(&self) -> WriterStats {
        self.inner.stats()
    }
}

/// A view of [`DailyWriter::add_many`] once checked.
struct Checked<'v> {
    entity: &'v str,
    day: Day,
    count: i64,
    shard: usize,
}

/// The error of an add to a writer that was shut down.
fn shut_down() -> Error {
    Error::Overloaded("the daily writer is shut down".into())
}

/// The error of views that would overflow what waits for their (entity,
/// day).
fn overflow(count: i64, entity: &str, day: Day) -> Error {
    Error::InvalidCount(format!(
        "{count} more views of entity {entity:?} on {day} would overflow what waits to be \
         written; nothing was merged"
    ))
}

/// The shard of an entity (all its days wait in the same one).
fn shard_of(entity: &str) -> usize {
    Shards::<Shard>::of(entity)
}

/// The flusher task: flushes on its interval, when asked, when the table
/// fills, and once more when closed.
async fn flusher(inner: Arc<Inner>, control: mpsc::UnboundedReceiver<Control>) {
    let next_seq = vec![1u64; inner.base.settings.lanes];
    run_flusher(&inner.base, control, next_seq, |next_seq, deadline| {
        flush_once(inner.clone(), next_seq, deadline)
    })
    .await
}

/// Takes everything waiting and writes it; gives the lanes' next numbers
/// back.
async fn flush_once(
    inner: Arc<Inner>,
    mut next_seq: Vec<u64>,
    deadline: Option<Instant>,
) -> Vec<u64> {
    let started = Instant::now();
    let mut taken = inner.shards.take_all(|shard| &mut shard.table);
    if taken.is_empty() {
        return next_seq;
    }
    let entries: usize = taken.iter().map(|(_, w)| w.days.len()).sum();
    taken.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let now = inner.daily.clock.now();
    let floor = inner.daily.floor_at(now);
    let chunks = chunks_of(taken, entries, inner.base.settings.chunk_counters, floor);
    let n_lanes = inner.base.settings.lanes.min(chunks.len());
    let mut per_lane: Vec<Vec<Chunk>> = (0..n_lanes).map(|_| Vec::new()).collect();
    for (i, chunk) in chunks.into_iter().enumerate() {
        per_lane[i % n_lanes].push(chunk);
    }
    let results =
        futures::future::join_all(per_lane.into_iter().enumerate().map(|(lane, chunks)| {
            let inner = inner.clone();
            let mut seq = next_seq[lane];
            async move {
                let (mut written, mut lost) = (0u64, 0u64);
                for chunk in chunks {
                    let at = WriteSeq {
                        writer: inner.base.writer,
                        lane: lane as u32,
                        seq,
                    };
                    seq += 1;
                    let (w, l) = write_chunk(&inner, chunk, at, now, deadline).await;
                    written += w;
                    lost += l;
                }
                (lane, seq, written, lost)
            }
        }))
        .await;
    let mut written = 0;
    for (lane, seq, w, _) in results {
        next_seq[lane] = seq;
        written += w;
    }
    inner.base.flushed(entries, written, started.elapsed());
    next_seq
}

/// Cuts what a flush took (sorted by entity) into chunks of at most
/// `size` writes, an entity's days in day order; `entries` is how many
/// (entity, day) entries it holds.
fn chunks_of(taken: Vec<(Name, Waiting)>, entries: usize, size: usize, floor: Day) -> Vec<Chunk> {
    let mut chunks: Vec<Chunk> = Vec::with_capacity(entries.div_ceil(size));
    let mut left = entries;
    for (entity, mut waiting) in taken {
        waiting.days.sort_unstable_by_key(|(day, _)| *day);
        let mut entity = Some(entity);
        let last = waiting.days.len().saturating_sub(1);
        for (i, (day, e)) in waiting.days.into_iter().enumerate() {
            let chunk = match chunks.last_mut() {
                Some(c) if c.writes.len() < size => c,
                _ => {
                    let n = size.min(left);
                    chunks.push(Chunk {
                        writes: Vec::with_capacity(n),
                        adds: Vec::with_capacity(n),
                    });
                    chunks.last_mut().expect("just pushed")
                }
            };
            // The name moves into its last write, and is copied only for
            // an entity with views on several days.
            let entity = if i == last {
                entity.take()
            } else {
                entity.clone()
            };
            chunk.writes.push(DailyWrite {
                entity: entity.expect("taken at its last day"),
                day,
                count: e.count,
                floor,
            });
            chunk.adds.push(e.adds);
            left -= 1;
        }
    }
    chunks
}

/// Writes one chunk as write `seq` of its lane, sending it again with the
/// same number until it is acknowledged, or until `deadline` passes.
/// Returns the adds written and those lost (refused for good, or given up
/// at shutdown).
async fn write_chunk(
    inner: &Inner,
    chunk: Chunk,
    seq: WriteSeq,
    now: crate::Timestamp,
    deadline: Option<Instant>,
) -> (u64, u64) {
    let store = inner.daily.store();
    let Chunk { writes, adds } = chunk;
    let mut backoff = Backoff::new();
    loop {
        let failure = match store.incr_lane(&writes, seq, now).await {
            Ok(answers) if answers.len() == writes.len() => {
                inner.base.chunks.fetch_add(1, Ordering::Relaxed);
                let (mut written, mut lost) = (0u64, 0u64);
                for ((write, &adds), answer) in writes.iter().zip(&adds).zip(answers) {
                    match answer {
                        Ok(DailyWritten { applied, .. }) => {
                            if applied == Applied::Duplicate {
                                inner.base.duplicates.fetch_add(1, Ordering::Relaxed);
                            }
                            written += adds;
                        }
                        Err(e) => {
                            inner.base.rejected.fetch_add(adds, Ordering::Relaxed);
                            lost += adds;
                            tracing::error!(error = %e, entity = %write.entity,
                                day = %write.day, views = adds,
                                "these views could not be written and are dropped");
                        }
                    }
                }
                return (written, lost);
            }
            Ok(answers) => Error::Backend(format!(
                "the daily store answered {} results for {} writes",
                answers.len(),
                writes.len()
            )),
            Err(e) if retryable(&e) => e,
            Err(e) => {
                // Refused as a whole (not a store's way of refusing one
                // write): nothing of it was written.
                let adds: u64 = adds.iter().sum();
                inner.base.rejected.fetch_add(adds, Ordering::Relaxed);
                tracing::error!(error = %e, views = adds,
                    "the daily store refused a chunk; these views are dropped");
                return (0, adds);
            }
        };
        inner.base.retries.fetch_add(1, Ordering::Relaxed);
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let adds: u64 = adds.iter().sum();
            tracing::error!(error = %failure, views = adds,
                "stopping with the backend unavailable: these unflushed views are lost");
            return (0, adds);
        }
        tracing::warn!(error = %failure, writes = writes.len(),
            retry_in_ms = backoff.next_ms(), "daily flush failed; retrying");
        backoff.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::clock::ManualClock;
    use crate::daily::{DailySettings, DailyStore};

    /// A store that keeps nothing: the table is all these tests look at.
    #[derive(Debug)]
    struct Nowhere;

    #[async_trait::async_trait]
    impl DailyStore for Nowhere {
        async fn incr(
            &self,
            _: &[DailyWrite],
            _: Option<&crate::idempotency::Mark>,
        ) -> Result<Vec<DailyWritten>> {
            Err(Error::Unavailable("nowhere".into()))
        }
        async fn incr_lane(
            &self,
            _: &[DailyWrite],
            _: WriteSeq,
            _: crate::Timestamp,
        ) -> Result<Vec<Result<DailyWritten>>> {
            Err(Error::Unavailable("nowhere".into()))
        }
        async fn days(&self, _: &Name, days: &[Day]) -> Result<Vec<i64>> {
            Ok(vec![0; days.len()])
        }
        async fn total(&self, _: &Name) -> Result<i64> {
            Ok(0)
        }
        async fn list(&self) -> Result<Vec<super::super::DailyHeld>> {
            Ok(Vec::new())
        }
        async fn ping(&self) -> Result<()> {
            Ok(())
        }
    }

    /// The writers' clock: "now" for every test.
    const NOW: f64 = 1_700_000_000.0;

    fn writer(max_entries: usize, when_full: WhenFull) -> DailyWriter {
        let clock = Arc::new(ManualClock::at(NOW));
        let daily =
            DailyStats::with_clock(Arc::new(Nowhere), DailySettings::default(), clock).unwrap();
        DailyWriter::start(
            daily,
            WriterSettings {
                flush_interval: Duration::from_secs(3600),
                flush_entries: max_entries,
                max_entries,
                when_full,
                ..WriterSettings::default()
            },
        )
        .unwrap()
    }

    fn table(w: &DailyWriter) -> Vec<((String, Day), Entry)> {
        let mut all: Vec<_> = w
            .inner
            .shards
            .each()
            .flat_map(|s| {
                s.table
                    .iter()
                    .flat_map(|(n, w)| {
                        w.days
                            .iter()
                            .map(|(d, e)| ((n.as_str().to_owned(), *d), *e))
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Asserts that `w`'s table holds `entries`, each `(entity, day
    /// relative to today, count, adds)` in the table's order, and that
    /// its figures are `(accepted, pending_entries)`.
    fn assert_waiting(w: &DailyWriter, entries: &[(&str, i32, i64, u64)], figures: (u64, u64)) {
        let today = Day::of(crate::Timestamp::from_secs_f64(NOW).unwrap(), 0);
        let expected: Vec<_> = entries
            .iter()
            .map(|&(entity, day, count, adds)| {
                ((entity.to_owned(), today.plus(day)), Entry { count, adds })
            })
            .collect();
        assert_eq!(table(w), expected);
        let stats = w.stats();
        assert_eq!((stats.accepted, stats.pending_entries), figures);
    }

    fn view(entity: &str, count: i64, at: Option<f64>) -> View {
        View {
            entity: entity.into(),
            count,
            at,
        }
    }

    #[tokio::test]
    async fn views_of_an_entity_and_day_merge_into_one_entry() {
        let w = writer(100, WhenFull::Error);
        w.try_add("a", 2, None).unwrap();
        w.try_add("a", 3, Some(NOW - 10.0)).unwrap();
        w.try_add("a", 1, Some(NOW - 86_400.0)).unwrap();
        w.add_many(&[view("b", 4, None), view("a", 1, None)])
            .await
            .unwrap();
        assert_waiting(
            &w,
            &[("a", -1, 1, 1), ("a", 0, 6, 3), ("b", 0, 4, 1)],
            (5, 3),
        );
    }

    #[tokio::test]
    async fn an_overflowing_or_invalid_batch_merges_nothing() {
        let w = writer(100, WhenFull::Error);
        w.try_add("a", i64::MAX - 1, None).unwrap();
        let before = table(&w);
        let err = w
            .add_many(&[view("b", 1, None), view("a", 2, None)])
            .await
            .unwrap_err();
        assert!(
            err.is_bad_input() && err.to_string().contains("overflow"),
            "{err}"
        );
        for bad in [
            view("c", 0, None),
            view("c{1}", 1, None),
            view("c", 1, Some(f64::NAN)),
        ] {
            let err = w.add_many(&[view("b", 1, None), bad]).await.unwrap_err();
            assert!(err.is_bad_input(), "{err}");
        }
        assert!(w.add_many(&[]).await.unwrap_err().is_bad_input());
        assert_eq!(table(&w), before);
        let stats = w.stats();
        assert_eq!((stats.accepted, stats.pending_entries), (1, 1));
    }

    /// The single-view path (no `View`, no `Name` unless the entity is
    /// new) refuses what a batch refuses, with the same error, and merges
    /// into the entry of its (entity, day).
    #[tokio::test]
    async fn a_single_add_checks_and_merges_as_a_batch_of_one_does() {
        let w = writer(100, WhenFull::Error);
        w.try_add("a", i64::MAX - 1, None).unwrap();
        let before = table(&w);
        for (entity, count, at) in [
            ("", 1, None),
            ("c{1}", 1, None),
            ("c}", 1, None),
            ("c\u{7}", 1, None),
            (&"x".repeat(257), 1, None),
            ("c", 0, None),
            ("c", 1, Some(f64::NAN)),
            ("a", 2, None),
        ] {
            let batch = w.add_many(&[view(entity, count, at)]).await.unwrap_err();
            let single = w.try_add(entity, count, at).unwrap_err();
            let waiting = w.add(entity, count, at).await.unwrap_err();
            assert!(single.is_bad_input(), "{single}");
            assert_eq!(single.to_string(), batch.to_string());
            assert_eq!(waiting.to_string(), batch.to_string());
        }
        assert_eq!(table(&w), before);
        w.add("b", 2, None).await.unwrap();
        w.add("b", 3, Some(NOW - 5.0)).await.unwrap();
        w.try_add("b", 1, Some(NOW - 86_400.0)).unwrap();
        w.try_add("a", 1, None).unwrap();
        assert_waiting(
            &w,
            &[("a", 0, i64::MAX, 2), ("b", -1, 1, 1), ("b", 0, 5, 2)],
            (5, 3),
        );
    }

    #[tokio::test]
    async fn a_full_table_refuses_new_entries_but_merges_into_waiting_ones() {
        let w = writer(2, WhenFull::Error);
        w.try_add("a", 1, None).unwrap();
        w.try_add("b", 1, None).unwrap();
        assert!(matches!(w.try_add("c", 1, None), Err(Error::Overloaded(_))));
        assert!(matches!(
            w.add("c", 1, None).await,
            Err(Error::Overloaded(_))
        ));
        w.try_add("a", 1, None).unwrap();
        assert_eq!(w.stats().pending_entries, 2);
    }

    #[tokio::test]
    async fn adds_are_refused_once_shutdown_begins() {
        let w = writer(100, WhenFull::Error);
        w.inner.base.closed.store(true, Ordering::Relaxed);
        assert!(matches!(w.try_add("a", 1, None), Err(Error::Overloaded(_))));
        assert!(matches!(
            w.add_many(&[view("a", 1, None)]).await,
            Err(Error::Overloaded(_))
        ));
        assert!(table(&w).is_empty());
    }
}
