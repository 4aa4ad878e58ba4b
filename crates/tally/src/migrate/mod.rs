//! Moving data between stores (`tally migrate`): every series of every
//! space the slice engine keeps (counters, statistics, gauges, sets), the
//! daily statistics and the time series, from one opened [`Tally`] into
//! another, whatever their backends and layouts.
//!
//! How: per space, the source's names are listed in name order, a page of
//! [`MigrateSettings::names_per_batch`] at a time; each page is read whole
//! (every retained slice of every precision both sides keep, one round
//! trip) and merged into the target as one engine batch (one round trip
//! per node), all or nothing. Each batch carries a write id: a writer id
//! hashed from the migration's id ([`MigrateSettings::id`], by default made
//! from the two stores' descriptions), the space's lane, and the page's
//! number from 1. The target's stores apply a write id once (the engine's
//! exactly-once sequence numbers, remembered a week), so a migration that
//! stopped halfway (a crash, a network fault, Ctrl-C) is finished by
//! running it again: the pages it already wrote are answered "duplicate"
//! and skipped, the rest are written, and nothing is counted twice.
//!
//! Daily statistics and time series have stores of their own, without a
//! registry on Redis: each store lists what it holds (SQLite its tables,
//! Redis a SCAN of its keys, on every master of a cluster), and the copy
//! goes by pages the same way, but each series of a page (an entity, a
//! (model, key) pair) is its own keyed write of the target's store, sent
//! at once (pipelined: one round trip per node on Redis), whose mark (kept
//! a week, as the engine's write ids) is made from the migration's id, the
//! store's lane and the series' name. Not from the page's number: time
//! series vanish by themselves when their data expires, which would shift
//! the pages of a rerun; a series keeps its name. See the submodules
//! `daily` (kept days and the all-time total) and `tsdb` (counts,
//! HyperLogLog registers and most-frequent summaries at every rollup both
//! sides keep, with the source's retention).
//!
//! What a migration is not: a copy that replaces. Slices merge into what
//! the target holds by their kind's rule (sums add), as any write does, so
//! migrating into a store that already holds the same series adds them up
//! (which is how two stores are consolidated into one). A rerun resumes
//! only if the source has not changed in between: writes made to the
//! source after a page was copied are not copied by the rerun (give a new
//! id to copy again, into a store that does not hold the first copy). A
//! gauge's current value is what its newest copied slice ends at.

mod daily;
mod tsdb;

use std::time::Instant;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::Tally;
use crate::engine::{
    Applied, Batch, CellDelta, SeriesList, SeriesWrite, SliceRead, SliceStore, Space, WriteSeq,
};
use crate::error::{Error, Result};
use crate::idempotency::Mark;
use crate::name::Name;
use crate::open::{SPACES, SpaceEntry};

/// The most names copied in one batch.
pub const MAX_NAMES_PER_BATCH: usize = 10_000;

/// How a migration runs.
#[derive(Clone, Debug)]
pub struct MigrateSettings {
    /// Names the migration: a rerun with the same id resumes it (skips the
    /// batches the target already applied). `tally migrate` makes it from
    /// the two stores and their layouts.
    pub id: String,
    /// Series per batch (1 to [`MAX_NAMES_PER_BATCH`], default 50): a
    /// batch holds every retained slice of its series, up to precisions ×
    /// slices kept each (7 × 120 with the counters' defaults). Daily
    /// statistics: entities per batch (each up to its retention's days);
    /// time series: (model, key) pairs per batch (each up to kinds ×
    /// rollups × buckets kept: 3 × 618 with the defaults).
    pub names_per_batch: usize,
}

impl MigrateSettings {
    /// Settings with `id` and the default batch size.
    pub fn new(id: impl Into<String>) -> Self {
        MigrateSettings {
            id: id.into(),
            names_per_batch: 50,
        }
    }

    fn validate(&self) -> Result<()> {
        if self.id.is_empty() {
            return Err(Error::InvalidInput("a migration id is not empty".into()));
        }
        if !(1..=MAX_NAMES_PER_BATCH).contains(&self.names_per_batch) {
            return Err(Error::InvalidInput(format!(
                "names per batch must be 1 to {MAX_NAMES_PER_BATCH}, got {}",
                self.names_per_batch
            )));
        }
        Ok(())
    }

    /// The write id of batch `number` (from 1) of the space on `lane`.
    fn write_seq(&self, lane: u32, number: u64) -> WriteSeq {
        WriteSeq {
            writer: self.writer(&[]),
            lane,
            seq: number,
        }
    }

    /// The mark of the copy of series `name` of the store on `lane` (daily
    /// statistics, time series), written at `now`.
    fn mark(&self, lane: u32, name: &str, now: u64) -> Mark {
        let series = [&lane.to_be_bytes()[..], name.as_bytes()].concat();
        Mark {
            writer: self.writer(&series),
            at: now,
        }
    }

    /// A writer id hashed from the migration's id and `more`.
    fn writer(&self, more: &[u8]) -> u64 {
        let digest = Sha256::new()
            .chain_update(b"tally migrate\0")
            .chain_update(self.id.as_bytes())
            .chain_update(more)
            .finalize();
        let mut writer = [0u8; 8];
        writer.copy_from_slice(&digest[..8]);
        u64::from_be_bytes(writer)
    }
}

/// The lane of the daily statistics' marks (the engine's spaces use 0 to 3).
const LANE_DAILY: u32 = 4;
/// The lane of the time series' marks.
const LANE_TSDB: u32 = 5;

/// What a migration did in one space (or, for [`MigrateReport::daily`] and
/// [`MigrateReport::time_series`], one store).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SpaceReport {
    /// The space: `counters`, `stats`, `gauges` or `sets` (`daily`,
    /// `time_series` for those stores).
    pub space: String,
    /// Series in the source (daily statistics: entities; time series:
    /// (model, key) pairs).
    pub series: u64,
    /// Slices read from the source (copied now or by an earlier run; daily
    /// statistics: kept days; time series: buckets of a key's kind at a
    /// rollup).
    pub slices: u64,
    /// Batches written to the target by this run.
    pub batches_written: u64,
    /// Batches the target had applied already (an earlier, interrupted run).
    pub batches_skipped: u64,
    /// Precisions (seconds) the source keeps and the target does not: not
    /// copied (time series: rollups).
    pub resolutions_not_copied: Vec<u64>,
}

/// What a migration did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MigrateReport {
    /// The migration's id.
    pub id: String,
    /// Per engine space, in the order copied.
    pub spaces: Vec<SpaceReport>,
    /// The daily statistics (copied after the spaces).
    pub daily: SpaceReport,
    /// The time series (copied last).
    pub time_series: SpaceReport,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// Where a running migration is, for a progress display.
#[derive(Clone, Debug)]
pub struct Progress<'a> {
    /// The space being copied.
    pub space: &'a str,
    /// Series of the space done so far.
    pub series_done: u64,
    /// Series of the space in the source.
    pub series_total: u64,
    /// Slices of the space done so far.
    pub slices_done: u64,
}

/// What every copier takes: the two stores, the migration's settings and
/// where its progress goes.
struct Run<'a, P> {
    from: &'a Tally,
    to: &'a Tally,
    settings: &'a MigrateSettings,
    progress: P,
}

impl<P: FnMut(&Progress<'_>)> Run<'_, P> {
    /// Counts page `page` (from 0) of `report`'s space, whose `chunk` series
    /// were written as one batch or as one keyed write each (`applied`:
    /// their answers, none when it had nothing to write): as written when
    /// any of them was, as skipped when all were there already; then
    /// reports the progress.
    fn page_done(
        &mut self,
        report: &mut SpaceReport,
        mut applied: impl Iterator<Item = Applied>,
        page: usize,
        chunk: usize,
    ) {
        match applied.next() {
            None => {}
            Some(Applied::Written) => report.batches_written += 1,
            Some(Applied::Duplicate) if applied.any(|a| a == Applied::Written) => {
                report.batches_written += 1
            }
            Some(Applied::Duplicate) => report.batches_skipped += 1,
        }
        (self.progress)(&Progress {
            space: &report.space,
            series_done: (page * self.settings.names_per_batch + chunk) as u64,
            series_total: report.series,
            slices_done: report.slices,
        });
    }
}

/// Copies every series of every engine space, the daily statistics and the
/// time series of `from` into `to` (see the module docs), calling
/// `progress` after each batch. Stops at the first
/// error (the target keeps the batches written before it; a rerun with the
/// same id finishes the job).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// use tally::migrate::{MigrateSettings, migrate};
///
/// let from = tally::Tally::open("sqlite::memory:").await?;
/// let to = tally::Tally::open("sqlite::memory:").await?;
/// from.counters().incr("hits", 3).await?;
/// let settings = MigrateSettings::new("memory to memory");
/// let report = migrate(&from, &to, &settings, |_| {}).await?;
/// assert_eq!(report.spaces[0].series, 1);
/// // Run again: the batch is there already, nothing counts twice.
/// let again = migrate(&from, &to, &settings, |_| {}).await?;
/// assert_eq!(again.spaces[0].batches_skipped, 1);
/// assert_eq!(to.counters().get("hits", 86_400).await?[0].count, 3);
/// # Ok(())
/// # }
/// ```
pub async fn migrate(
    from: &Tally,
    to: &Tally,
    settings: &MigrateSettings,
    progress: impl FnMut(&Progress<'_>),
) -> Result<MigrateReport> {
    settings.validate()?;
    let started = Instant::now();
    let source = from.backend().slice_store(from.clock().clone()).await?;
    let target = to.backend().slice_store(to.clock().clone()).await?;
    let mut report = MigrateReport {
        id: settings.id.clone(),
        ..MigrateReport::default()
    };
    let mut run = Run {
        from,
        to,
        settings,
        progress,
    };
    for entry in SPACES {
        let space = copy_space(&mut run, &*source, &*target, entry).await?;
        report.spaces.push(space);
    }
    report.daily = daily::copy(&mut run).await?;
    report.time_series = tsdb::copy(&mut run).await?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Every name of `space` in `store`, in name order.
async fn all_names(store: &dyn SliceStore, space: &Space) -> Result<Vec<String>> {
    let mut names = Vec::new();
    loop {
        let page = store
            .list(
                SeriesList::new(space, MAX_NAMES_PER_BATCH).after(names.last().map(String::as_str)),
            )
            .await?;
        let done = page.len() < MAX_NAMES_PER_BATCH;
        names.extend(page);
        if done {
            return Ok(names);
        }
    }
}

/// Copies `entry`'s space from `source` (the run's `from`) into `target`.
async fn copy_space(
    run: &mut Run<'_, impl FnMut(&Progress<'_>)>,
    source: &dyn SliceStore,
    target: &dyn SliceStore,
    entry: &SpaceEntry,
) -> Result<SpaceReport> {
    let (from, to) = ((entry.space)(run.from), (entry.space)(run.to));
    if from.kind != to.kind {
        return Err(Error::Config(format!(
            "space {} keeps {} values in the source and {} in the target",
            from.id, from.kind, to.kind
        )));
    }
    let (common, not_copied): (Vec<u64>, Vec<u64>) = from
        .precisions
        .iter()
        .map(|r| r.seconds)
        .partition(|s| to.precisions.iter().any(|r| r.seconds == *s));
    let names = all_names(source, &from).await?;
    let mut report = SpaceReport {
        space: from.id.to_owned(),
        series: names.len() as u64,
        resolutions_not_copied: not_copied,
        ..SpaceReport::default()
    };
    for (page, chunk) in names.chunks(run.settings.names_per_batch).enumerate() {
        let names: Vec<Name> = chunk.iter().map(Name::new).collect::<Result<_>>()?;
        let read = source.read(SliceRead::new(&from, &names, &common)).await?;
        let mut writes = Vec::with_capacity(names.len());
        for (name, per) in names.into_iter().zip(read) {
            let cells: Vec<CellDelta> = common
                .iter()
                .zip(per)
                .flat_map(|(&precision, slices)| {
                    slices.into_iter().map(move |(slice, delta)| CellDelta {
                        precision,
                        slice,
                        delta,
                    })
                })
                .collect();
            if !cells.is_empty() {
                report.slices += cells.len() as u64;
                writes.push(SeriesWrite { name, cells });
            }
        }
        let mut applied = None;
        if !writes.is_empty() {
            let batch = Batch {
                space: to.clone(),
                writes,
                seq: Some(run.settings.write_seq(entry.lane, page as u64 + 1)),
            };
            applied = Some(target.apply(&batch).await?);
        }
        run.page_done(&mut report, applied.into_iter(), page, chunk.len());
    }
    Ok(report)
}
