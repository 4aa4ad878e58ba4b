//! The storage contract of every space, at the level of the engine's
//! operations: apply a batch of merged slice deltas (all or nothing), read
//! slices, list and delete series, run one cleaning pass.
//!
//! A [`SliceStore`] is implemented once per store and key layout (SQLite;
//! Redis standalone and Cluster, in the default layout and the book's) and
//! serves every [`Space`]: a space says which kind of value its slices hold,
//! at which precisions, and how old slices go. Validation happened before a
//! store is called: names are valid, deltas are in range and merged to one
//! per (series, precision, slice), series are in name order.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;

use crate::clock::Timestamp;
use crate::engine::aggregate::{Kind, Value};
use crate::engine::precision::{Precision, check_lengths, cutoff, is_due};
use crate::error::{Error, Result};
use crate::name::Name;

/// How a space's old slices go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Retention {
    /// A cleaner pass removes them, on the book's cadence (counters).
    Cleaner,
    /// Each slice expires by itself, `keep` slices after it started (set in
    /// the same call that writes it).
    Expire,
    /// Writes trim what is older than the kept slices.
    TrimOnWrite,
}

/// A family of series of one kind: its name in stores, its kind, its
/// precisions (finest first) and how its old slices go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Space {
    /// The space's name in keys and table names: `counters`, `stats`, ...
    pub id: &'static str,
    /// The kind of value every slice holds.
    pub kind: Kind,
    /// The precisions, finest first.
    pub precisions: Vec<Precision>,
    /// How old slices go.
    pub retention: Retention,
}

impl Space {
    /// The counters' space id: its data keeps the layouts counters have
    /// always had (the book's keys, `{prefix:shard}:<p>:<name>`, and the
    /// `tally_counter` / `tally_sample` tables).
    pub const COUNTERS: &'static str = "counters";

    /// What a series of this space is called in error messages: the
    /// kind's noun ([`Kind::noun`]), or "time series" for the time series'
    /// spaces (`ts_...`).
    pub fn noun(&self) -> &'static str {
        if self.id.starts_with("ts_") {
            "time series"
        } else {
            self.kind.noun()
        }
    }

    /// A space, checked: the id is 1 to 32 characters of `a-z`, `0-9` and
    /// `_`, starting with a letter (it goes into keys and table names); 1 to
    /// 32 precisions, distinct, each of 1 s to a year, keeping 1 to 100,000
    /// slices. Precisions are sorted finest first.
    pub fn new(
        id: &'static str,
        kind: Kind,
        mut precisions: Vec<Precision>,
        retention: Retention,
    ) -> Result<Self> {
        let id_ok = (1..=32).contains(&id.len())
            && id.starts_with(|c: char| c.is_ascii_lowercase())
            && id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !id_ok {
            return Err(Error::Config(format!(
                "space id {id:?} must be 1 to 32 characters of a-z, 0-9 and _, starting with a letter"
            )));
        }
        if precisions.is_empty() || precisions.len() > 32 {
            return Err(Error::Config(format!(
                "space {id} needs 1 to 32 precisions, got {}",
                precisions.len()
            )));
        }
        precisions.sort_unstable_by_key(|r| r.seconds);
        check_lengths(
            &format!("space {id}: precision"),
            precisions.iter().map(|r| r.seconds),
        )?;
        for r in &precisions {
            if r.keep == 0 || r.keep > 100_000 {
                return Err(Error::Config(format!(
                    "space {id}: precision {} s must keep 1 to 100000 slices, not {}",
                    r.seconds, r.keep
                )));
            }
        }
        Ok(Space {
            id,
            kind,
            precisions,
            retention,
        })
    }

    /// A space cleaned by the cleaner whose every precision keeps the same
    /// number of slices: `kind` values at `precisions` (seconds), each
    /// keeping `samples` slices, checked as [`Space::new`] checks them
    /// (gauges, sets, statistics).
    pub fn cleaned(id: &'static str, kind: Kind, seconds: &[u64], samples: u64) -> Result<Self> {
        let precisions = seconds
            .iter()
            .map(|&p| Precision::new(p, samples))
            .collect();
        Self::new(id, kind, precisions, Retention::Cleaner)
    }

    /// The counters' space: sums at `precisions` (already validated by
    /// [`crate::CounterSettings::validate`]), each keeping `keep` slices,
    /// cleaned by the cleaner.
    pub fn counters(precisions: &[u64], keep: u64) -> Self {
        Space {
            id: Self::COUNTERS,
            kind: Kind::Sum,
            precisions: precisions
                .iter()
                .map(|&p| Precision::new(p, keep))
                .collect(),
            retention: Retention::Cleaner,
        }
    }

    /// A space other than the counters' (`visits`): sums at `precisions`,
    /// each keeping `keep` slices, cleaned by the cleaner. For the tests of
    /// what serves any space.
    #[cfg(test)]
    pub(crate) fn visits(precisions: &[u64], keep: u64) -> Arc<Space> {
        Arc::new(Space::cleaned("visits", Kind::Sum, precisions, keep).unwrap())
    }

    /// True for the counters' space (whose data keeps its historic layout).
    pub fn is_counters(&self) -> bool {
        self.id == Self::COUNTERS
    }

    /// The precision of `seconds`, if the space has it.
    pub fn precision(&self, seconds: u64) -> Option<&Precision> {
        self.precisions.iter().find(|r| r.seconds == seconds)
    }

    /// The slice lengths, finest first.
    pub fn seconds(&self) -> Vec<u64> {
        self.precisions.iter().map(|r| r.seconds).collect()
    }
}

/// One (precision, slice) delta of one series.
#[derive(Clone, Debug, PartialEq)]
pub struct CellDelta {
    /// Slice length in seconds.
    pub precision: u64,
    /// Slice start, Unix seconds.
    pub slice: u64,
    /// What to merge into the slice.
    pub delta: Value,
}

/// Everything one write merges into one series.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesWrite {
    /// The series.
    pub name: Name,
    /// Deltas ordered by precision, then slice; one per (precision, slice).
    pub cells: Vec<CellDelta>,
}

/// A write handed to a store: merged deltas for one or more series of one
/// space.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    /// The space written.
    pub space: Arc<Space>,
    /// Per series, its deltas; series in name order, each at most once.
    pub writes: Vec<SeriesWrite>,
    /// When set, the store records this sequence number atomically with the
    /// writes, and applies a batch whose number is not above the last one
    /// recorded for its lane as a no-op: a retried write is applied once.
    pub seq: Option<WriteSeq>,
}

/// The place of a write in one writer's ordered stream, for exactly-once
/// retries.
///
/// A writer (e.g. one writer in one process) draws a random `writer` id
/// and numbers the writes of each `lane` 1, 2, 3...; a lane never sends write
/// n + 1 before write n was acknowledged. The store keeps, per (writer, lane),
/// the last number applied (per registry shard on a cluster), so its memory
/// is bounded by the number of writers, not of writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WriteSeq {
    /// The writer's random id.
    pub writer: u64,
    /// The lane within the writer.
    pub lane: u32,
    /// The write's number in its lane, from 1.
    pub seq: u64,
}

impl WriteSeq {
    /// `<writer hex>:<lane>`, the key of the lane's record.
    pub fn lane_id(&self) -> String {
        format!("{:016x}:{}", self.writer, self.lane)
    }
}

impl fmt::Display for WriteSeq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.lane_id(), self.seq)
    }
}

/// What applying a batch did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The deltas were merged.
    Written,
    /// The batch's sequence number was already applied: nothing was merged
    /// this time.
    Duplicate,
}

/// Which slices a read returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SliceSel {
    /// Every stored slice, oldest first.
    All,
    /// The stored slices starting in `[from, to]`, oldest first.
    Range {
        /// The earliest slice start returned.
        from: u64,
        /// The latest slice start returned.
        to: u64,
    },
}

impl SliceSel {
    /// True when a slice starting at `start` is selected.
    pub fn contains(&self, start: u64) -> bool {
        match *self {
            SliceSel::All => true,
            SliceSel::Range { from, to } => from <= start && start <= to,
        }
    }
}

/// A read handed to a store: the slices of each of `names` at each of
/// `precisions`, those `slices` selects.
#[derive(Clone, Copy, Debug)]
pub struct SliceRead<'a> {
    /// The space read.
    pub space: &'a Space,
    /// The series, in the answer's order.
    pub names: &'a [Name],
    /// The slice lengths (seconds), in the answer's order.
    pub precisions: &'a [u64],
    /// Which slices.
    pub slices: SliceSel,
}

impl<'a> SliceRead<'a> {
    /// Every slice of `names` at `precisions`.
    pub fn new(space: &'a Space, names: &'a [Name], precisions: &'a [u64]) -> Self {
        SliceRead {
            space,
            names,
            precisions,
            slices: SliceSel::All,
        }
    }

    /// The same read, of the slices `slices` selects only.
    pub fn slices(self, slices: SliceSel) -> Self {
        SliceRead { slices, ..self }
    }
}

/// A page of a space's series names handed to a store: up to `limit`
/// names starting with `prefix` (empty: all), after `after` (exclusive),
/// in name (byte) order.
#[derive(Clone, Copy, Debug)]
pub struct SeriesList<'a> {
    /// The space listed.
    pub space: &'a Space,
    /// What every name starts with.
    pub prefix: &'a str,
    /// The name the page starts after, if any.
    pub after: Option<&'a str>,
    /// The most names returned.
    pub limit: usize,
    /// With `Some(n)` (n ≥ 1), the names of more than `n` dot-separated
    /// nodes that share their first `n` ([`branch_of`]) come once, as the
    /// first of them, and a page after such a name starts past them all: a
    /// Graphite find of one level's nodes, which need not read every name
    /// below each node.
    pub collapse: Option<usize>,
}

impl<'a> SeriesList<'a> {
    /// The first `limit` names of the space.
    pub fn new(space: &'a Space, limit: usize) -> Self {
        SeriesList {
            space,
            prefix: "",
            after: None,
            limit,
            collapse: None,
        }
    }

    /// The same page, of the names starting with `prefix` only.
    pub fn prefix(self, prefix: &'a str) -> Self {
        SeriesList { prefix, ..self }
    }

    /// The same page, starting after `after` (exclusive) when given.
    pub fn after(self, after: Option<&'a str>) -> Self {
        SeriesList { after, ..self }
    }

    /// The same page, each branch of `nodes` nodes listed once (see
    /// [`SeriesList::collapse`]).
    pub fn collapse(self, nodes: usize) -> Self {
        SeriesList {
            collapse: Some(nodes),
            ..self
        }
    }
}

/// The branch of `nodes` nodes that `name` lies in: its first `nodes`
/// nodes and the dot after them, when it has more; `None` for a name of
/// `nodes` nodes or fewer (and for `nodes` 0).
pub fn branch_of(name: &str, nodes: usize) -> Option<&str> {
    let (dot, _) = name.match_indices('.').nth(nodes.checked_sub(1)?)?;
    Some(&name[..=dot])
}

/// Names read a round trip by [`collapse_by_pages`], at the least.
const COLLAPSE_PAGE: usize = 1_000;

/// A collapsed listing ([`SeriesList::collapse`]) made of the store's
/// plain pages, dropping every name of a branch after its first: for a
/// store that cannot seek past a branch (Redis, whose registry shards
/// hold a branch's names scattered by hash).
pub async fn collapse_by_pages<S: SliceStore + ?Sized>(
    store: &S,
    list: SeriesList<'_>,
) -> Result<Vec<String>> {
    let nodes = list.collapse.unwrap_or(0);
    let page = list.limit.max(COLLAPSE_PAGE);
    let mut out = Vec::new();
    let mut branch = list
        .after
        .and_then(|a| branch_of(a, nodes))
        .map(str::to_owned);
    let mut after = list.after.map(str::to_owned);
    loop {
        let names = store
            .list(SeriesList {
                after: after.as_deref(),
                limit: page,
                collapse: None,
                ..list
            })
            .await?;
        for name in &names {
            if branch.as_deref().is_some_and(|b| name.starts_with(b)) {
                continue;
            }
            branch = branch_of(name, nodes).map(str::to_owned);
            out.push(name.clone());
            if out.len() == list.limit {
                return Ok(out);
            }
        }
        if names.len() < page {
            return Ok(out);
        }
        after = names.into_iter().last();
    }
}

/// One precision's stored slices of one series, oldest first.
pub type Slices = Vec<(u64, Value)>;

/// A read's answer: per series, per precision, its slices oldest first,
/// each (slice start, `T`).
pub type Reads<T> = Vec<Vec<Vec<(u64, T)>>>;

/// [`Reads`] that tell names of no series apart: `None` for each
/// ([`SliceStore::read_many`]).
pub type HeldReads<T = Value> = Vec<Option<Vec<Vec<(u64, T)>>>>;

/// Every slice of `reads` through `f` (per series, per precision, in
/// order), keeping the slices for which it returns `Some`.
pub fn map_reads<T, U>(reads: Reads<T>, f: impl Fn(u64, T) -> Option<U>) -> Vec<Vec<Vec<U>>> {
    reads
        .into_iter()
        .map(|per| {
            per.into_iter()
                .map(|slices| slices.into_iter().filter_map(|(s, v)| f(s, v)).collect())
                .collect()
        })
        .collect()
}

/// One cleaning pass's parameters: the pass number (which precisions are
/// due) and the instant cutoffs are measured from.
#[derive(Clone, Debug)]
pub struct CleanJob {
    /// Pass number, counted from 0 (the first pass visits every precision).
    pub pass: u64,
    /// The instant the cutoffs are measured from.
    pub now: Timestamp,
    /// Slices kept per precision, for counters in the book's layout, whose
    /// registry may name precisions the space does not list; every other
    /// cutoff uses the space's own `keep` ([`CleanJob::cutoff_of`]).
    pub samples: u64,
    /// Seconds between passes (for the visiting cadence).
    pub interval_secs: u64,
    /// Series per round trip.
    pub batch: usize,
    /// When this cleaner last visited each precision (seconds, the pass's
    /// `now`), if it remembers: a store then removes exactly the slices
    /// that passed the cutoff since ([`Due::Slices`]) instead of reading
    /// every slice to find them. Empty on a cleaner's first pass and every
    /// [`FULL_PASS_EVERY`] passes.
    pub last_visits: Vec<(u64, Timestamp)>,
}

/// A cleaner forgets its visits every this many passes, so that one pass
/// in so many reads every slice ([`Due::Upto`]): it catches slices written
/// late, dated before an earlier pass's cutoff (once an hour at the
/// default 60 s interval).
pub const FULL_PASS_EVERY: u64 = 60;

/// The most slices a pass removes by name from one (series, precision);
/// past it (a cleaner that stopped for long) the pass reads the slices.
pub const MAX_WINDOW: u64 = 1024;

/// What a cleaning pass removes from one (series, precision).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Due {
    /// Every slice that starts at or before this cutoff: the store reads
    /// the slices to find them (no earlier visit is known).
    Upto(i64),
    /// Exactly the slices with these starts, those that passed the cutoff
    /// since the last visit (each may be absent): the store removes them by
    /// name, at a cost proportional to their number.
    Slices(Vec<u64>),
}

impl CleanJob {
    /// What is due at `precision` keeping [`CleanJob::samples`] slices
    /// (counters in the book's layout), if it is due in this pass.
    pub fn due_for(&self, precision: u64) -> Option<Due> {
        self.due(precision, self.samples)
    }

    /// What is due at `precision` (its own `keep`), if it is due in this
    /// pass.
    pub fn due_of(&self, precision: &Precision) -> Option<Due> {
        self.due(precision.seconds, precision.keep)
    }

    fn due(&self, seconds: u64, keep: u64) -> Option<Due> {
        if !is_due(self.pass, seconds, self.interval_secs) {
            return None;
        }
        let cut = cutoff(self.now, keep, seconds);
        let Some(&(_, last)) = self.last_visits.iter().find(|(s, _)| *s == seconds) else {
            return Some(Due::Upto(cut));
        };
        // Slices start at multiples of `seconds`: those in (since, cut].
        let since = cutoff(last, keep, seconds);
        if cut < 0 || cut <= since {
            return None;
        }
        let first = if since < 0 {
            0
        } else {
            (since as u64 / seconds + 1) * seconds
        };
        let cut = cut as u64;
        if first > cut {
            return None;
        }
        let n = (cut - first) / seconds + 1;
        if n > MAX_WINDOW {
            return Some(Due::Upto(cut as i64));
        }
        Some(Due::Slices((0..n).map(|k| first + k * seconds).collect()))
    }

    /// The cutoff for `precision`, keeping `samples` slices, if it is due in
    /// this pass, else `None`.
    pub fn cutoff_for(&self, precision: u64) -> Option<i64> {
        is_due(self.pass, precision, self.interval_secs)
            .then(|| cutoff(self.now, self.samples, precision))
    }

    /// The cutoff for `precision` (its own `keep`), if it is due in this
    /// pass, else `None`.
    pub fn cutoff_of(&self, precision: &Precision) -> Option<i64> {
        is_due(self.pass, precision.seconds, self.interval_secs).then(|| precision.cutoff(self.now))
    }
}

/// What a cleaning pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CleanReport {
    /// Registry entries visited.
    pub scanned: u64,
    /// Samples (slices) removed.
    pub samples_removed: u64,
    /// Registry entries removed because their series became empty.
    pub counters_removed: u64,
    /// Round trips to the backend (transactions, for SQLite).
    pub round_trips: u64,
}

impl CleanReport {
    /// Adds another report's figures to this one.
    pub fn add(&mut self, other: &CleanReport) {
        self.scanned += other.scanned;
        self.samples_removed += other.samples_removed;
        self.counters_removed += other.counters_removed;
        self.round_trips += other.round_trips;
    }
}

/// Checks that the stores keep spaces of `kind`. Sums, statistics, gauges
/// and distinct values are kept as hash fields (Redis; distinct values as
/// Redis's own HyperLogLog strings) and cells (SQLite), merged by the
/// kind's rule in the store. Item counts are merged and encoded, but no
/// store keeps their spaces yet, so a store refuses them rather than keep
/// them wrongly.
pub fn check_stored(kind: Kind) -> Result<()> {
    match kind {
        Kind::Sum | Kind::Stats | Kind::Gauge | Kind::Distinct => Ok(()),
        other => Err(Error::Config(format!(
            "spaces of {other} values are not kept by the slice engine's stores yet"
        ))),
    }
}

/// The error of reading sums from a space of another kind (a bug).
pub fn not_sums(space: &Space) -> Error {
    Error::Backend(format!(
        "internal error: space {} keeps {} values, not sums",
        space.id, space.kind
    ))
}

/// Refuses a read of plain sums ([`SliceStore::read_sums`]) from a space
/// of another kind.
pub fn check_sums(space: &Space) -> Result<()> {
    if space.kind == Kind::Sum {
        Ok(())
    } else {
        Err(not_sums(space))
    }
}

/// [`SliceStore::contains`] by listing each name as a prefix.
pub async fn contains_by_listing<S: SliceStore + ?Sized>(
    store: &S,
    space: &Space,
    names: &[Name],
) -> Result<Vec<bool>> {
    let lists = names.iter().map(|name| async move {
        let found = store
            .list(SeriesList::new(space, 1).prefix(name.as_str()))
            .await?;
        Ok::<_, Error>(found.first().is_some_and(|n| n == name.as_str()))
    });
    futures::future::try_join_all(lists).await
}

/// Storage for every space. See the module docs for the contract.
#[async_trait]
pub trait SliceStore: Send + Sync + fmt::Debug + 'static {
    /// Merges every delta of `batch` into its slice and registers each
    /// series, all or nothing, in one round trip (per node on a cluster).
    ///
    /// Fails, writing nothing, when a slice would leave its kind's range
    /// ([`Error::Overflow`] for sums).
    async fn apply(&self, batch: &Batch) -> Result<Applied>;

    /// The slices of each series at each precision, oldest first:
    /// `result[i][j]` belongs to `read.names[i]` at `read.precisions[j]`.
    /// One round trip.
    async fn read(&self, read: SliceRead<'_>) -> Result<Vec<Vec<Slices>>>;

    /// [`SliceStore::read`] for a space of sums, with the sums as they are
    /// rather than a [`Value`] each: counters read every precision of many
    /// counters at once, on the latency path, and a value per slice (and
    /// its conversion) measurably slowed them. Fails for other kinds.
    async fn read_sums(&self, read: SliceRead<'_>) -> Result<Reads<i64>> {
        check_sums(read.space)?;
        let all = self.read(read).await?;
        Ok(map_reads(all, |s, v| v.as_sum().map(|c| (s, c))))
    }

    /// A page of the space's series names (see [`SeriesList`]), each
    /// branch once when `list.collapse` asks (a store that cannot seek
    /// past a branch answers with [`collapse_by_pages`]).
    async fn list(&self, list: SeriesList<'_>) -> Result<Vec<String>>;

    /// Whether each of `names` is a series of the space (one [`SliceStore::list`]
    /// lists), in one round trip: the Graphite API's test of a pattern
    /// naming its series outright, where a listing would ask every registry
    /// shard. The default lists each name (concurrently).
    async fn contains(&self, space: &Space, names: &[Name]) -> Result<Vec<bool>> {
        contains_by_listing(self, space, names).await
    }

    /// Several reads (of any spaces) in their order, each with whether it
    /// asks which of its names are series ([`SliceStore::contains`]): such
    /// a read answers `None` for a name that is none; one that does not ask
    /// reads every name as [`SliceStore::read`] does (`Some`). A Graphite
    /// render's reads of every family, where a pattern naming its series
    /// outright asks. The default runs them all at once (one round trip on
    /// Redis); SQLite makes them one blocking call, in one snapshot.
    async fn read_many(&self, reads: &[(SliceRead<'_>, bool)]) -> Result<Vec<HeldReads>> {
        futures::future::try_join_all(reads.iter().map(|&(read, asks)| async move {
            if !asks {
                return Ok(self.read(read).await?.into_iter().map(Some).collect());
            }
            let (held, slices) =
                futures::join!(self.contains(read.space, read.names), self.read(read));
            Ok(held?
                .into_iter()
                .zip(slices?)
                .map(|(held, slices)| held.then_some(slices))
                .collect())
        }))
        .await
    }

    /// Deletes every precision of a series; true if it held anything.
    async fn delete(&self, space: &Space, name: &Name) -> Result<bool>;

    /// Runs one cleaning pass over every registered series of the space.
    ///
    /// Removes due slices at or before their cutoff; drops a series from
    /// the registry only when, atomically with that check, it holds no data.
    async fn clean(&self, space: &Space, job: &CleanJob) -> Result<CleanReport>;

    /// Checks that the backend answers.
    async fn ping(&self) -> Result<()>;
}

/// Where a batch goes: a [`SliceStore`], or a kind's own way into one
/// (statistics'). The aggregating writer writes through one.
#[async_trait]
pub trait BatchSink: Send + Sync + 'static {
    /// Applies `batch` as [`SliceStore::apply`] does.
    async fn apply_batch(&self, batch: &Batch) -> Result<Applied>;
}

#[async_trait]
impl BatchSink for Arc<dyn SliceStore> {
    async fn apply_batch(&self, batch: &Batch) -> Result<Applied> {
        self.apply(batch).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_branch_is_the_first_nodes_of_a_longer_name() {
        assert_eq!(branch_of("a.b.c", 1), Some("a."));
        assert_eq!(branch_of("a.b.c", 2), Some("a.b."));
        assert_eq!(branch_of("a.b.c", 3), None);
        assert_eq!(branch_of("a..c", 2), Some("a.."));
        assert_eq!(branch_of("a.b.c", 0), None);
        assert_eq!(branch_of("abc", 1), None);
    }

    #[test]
    fn spaces_are_checked_and_sorted_finest_first() {
        let r = Precision::new;
        let s = Space::new(
            "stats",
            Kind::Sum,
            vec![r(60, 10), r(1, 5)],
            Retention::Cleaner,
        )
        .unwrap();
        assert_eq!(s.seconds(), vec![1, 60]);
        assert_eq!(s.precision(60).unwrap().keep, 10);
        assert!(!s.is_counters());
        assert!(Space::counters(&[1], 3).is_counters());
        let bad = |id, rs| {
            Space::new(id, Kind::Sum, rs, Retention::Cleaner)
                .unwrap_err()
                .to_string()
        };
        assert!(bad("Stats", vec![r(1, 1)]).contains("space id \"Stats\" must be"));
        assert!(bad("a-b", vec![r(1, 1)]).contains("a-z, 0-9 and _"));
        assert!(bad("s", vec![]).contains("needs 1 to 32 precisions, got 0"));
        assert!(
            bad("s", vec![r(5, 1), r(5, 2)]).contains("space s: precision 5 s is listed twice")
        );
        assert!(bad("s", vec![r(0, 1)]).contains("out of range"));
        assert!(bad("s", vec![r(5, 0)]).contains("must keep 1 to 100000 slices, not 0"));
    }

    #[test]
    fn a_remembered_visit_names_the_slices_that_passed_the_cutoff_since() {
        let at = |secs| Timestamp::from_secs(secs).unwrap();
        let job = CleanJob {
            pass: 1,
            now: at(10_000),
            samples: 3,
            interval_secs: 60,
            batch: 10,
            last_visits: vec![(1, at(9_940)), (5, at(9_940)), (60, at(9_000))],
        };
        // 1 s keeping 3: cutoff 9_997, last 9_937: slices 9_938 ..= 9_997.
        assert_eq!(job.due_for(1), Some(Due::Slices((9_938..=9_997).collect())));
        // 5 s: cutoff 9_985, last 9_925: 9_930, 9_935, ..., 9_985.
        assert_eq!(
            job.due_for(5),
            Some(Due::Slices((9_930..=9_985).step_by(5).collect()))
        );
        // 60 s: cutoff 9_820, last 8_820: 16 slices, 8_880 ..= 9_780.
        assert_eq!(
            job.due_for(60),
            Some(Due::Slices((8_880..=9_780).step_by(60).collect()))
        );
        // Not remembered: read up to the cutoff.
        assert_eq!(job.due_for(10), Some(Due::Upto(9_970)));
        // A visit too long ago: read instead of naming 1,025 slices or more.
        let stalled = CleanJob {
            last_visits: vec![(1, at(8_000))],
            ..job.clone()
        };
        assert_eq!(stalled.due_for(1), Some(Due::Upto(9_997)));
        // A clock that went back: nothing passed the cutoff since.
        let back = CleanJob {
            now: at(9_000),
            ..job.clone()
        };
        assert_eq!(back.due_for(1), None);
        // Not due in this pass at all.
        assert_eq!(job.due_for(300), None);
    }

    #[test]
    fn cutoffs_follow_the_cadence_and_each_precision_s_keep() {
        let job = CleanJob {
            pass: 1,
            now: Timestamp::from_secs(10_000).unwrap(),
            samples: 3,
            interval_secs: 60,
            batch: 10,
            last_visits: Vec::new(),
        };
        assert_eq!(job.cutoff_for(60), Some(10_000 - 180));
        assert_eq!(job.cutoff_of(&Precision::new(60, 10)), Some(10_000 - 600));
        // 300 s is visited every 5th pass only.
        assert_eq!(job.cutoff_of(&Precision::new(300, 10)), None);
        assert!(SliceSel::Range { from: 5, to: 9 }.contains(9));
        assert!(!SliceSel::Range { from: 5, to: 9 }.contains(10));
        assert!(SliceSel::All.contains(0));
    }
}
