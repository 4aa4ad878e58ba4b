//! Sets: distinct counts per slice (statsd `name:value|s`; "unique users
//! per minute"), kept at several precisions.
//!
//! [`Sets`] is the service over the slice engine's `sets` space (the
//! distinct kind, [`crate::engine::kinds::distinct`]): it validates
//! additions (names, members, times), merges a call's members into one set
//! per (set, precision, slice) with the engine's plan and hands them to the
//! store in one round trip (per node on a cluster), all or nothing. A
//! slice keeps its members exactly while small and the registers of a
//! HyperLogLog after (SQLite), or Redis's own HyperLogLog (Redis, merged by
//! PFADD and PFMERGE): either way a count is Redis's estimator over the
//! registers, so it equals PFCOUNT of the same members on every backend
//! (exact in practice for small sets, within about 1 % for large ones).
//!
//! Reads: every slice of a precision with its count; the count of the union
//! over a range `[from, to]`, of one set or several, read at the finest
//! precision whose kept slices reach back to `from` and merged in Rust;
//! listing by prefix; delete. [`SetsWriter`] is the engine's aggregating
//! writer over the same space (the statsd listener's path). The counters'
//! [`crate::Cleaner`] trims old slices.
//!
//! A member is a non-empty UTF-8 string of at most [`MAX_MEMBER_BYTES`]
//! bytes; an addition that breaks the rule is refused with an error naming
//! the set and the member, and nothing of its call is written.
//!
//! What it does not do: keep members to list them back (a set answers how
//! many, not which), or talk to a backend directly. On a Redis Cluster, a
//! batch over sets of several shards that one shard refuses cannot be taken
//! back on the others (as for statistics and gauges).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::clock::{Clock, SharedClock, SystemClock, Timestamp};
use crate::counters::settings::check_precision_in;
use crate::counters::{AggregatorSettings, AggregatorStats, Page};
use crate::engine::kinds::DistinctValue;
use crate::engine::plan::{prepare, time};
use crate::engine::read::{merge_values, range};
use crate::engine::series;
use crate::engine::{Applied, Batch, BatchSink, Kind, SliceSel, SliceStore, Space, Value, Writer};
use crate::error::{Error, Result};
use crate::name::Name;

/// The sets' space id (Redis keys `{<prefix>:<shard>}:sets:...`, SQLite
/// tables `tally_sets_*`).
pub const SPACE: &str = "sets";

/// The most additions accepted in one batch.
pub const MAX_BATCH: usize = 10_000;

/// The most members in one addition.
pub const MAX_MEMBERS: usize = 10_000;

/// The longest member, in bytes of UTF-8.
pub const MAX_MEMBER_BYTES: usize = 255;

/// The most names listed in one page.
pub const MAX_PAGE: usize = 10_000;

/// The most sets whose union one range read counts.
pub const MAX_READ: usize = 1_000;

/// Members added to one set at one instant, as a caller states it; `at`
/// defaults to now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetAdd {
    /// The set.
    pub name: String,
    /// The members added (1 to [`MAX_MEMBERS`]; a member already in the
    /// slice changes nothing).
    pub members: Vec<String>,
    /// Unix seconds with a fraction; defaults to now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<f64>,
}

impl SetAdd {
    /// "Add `members` to `name`", now.
    pub fn new<S: Into<String>>(
        name: impl Into<String>,
        members: impl IntoIterator<Item = S>,
    ) -> Self {
        SetAdd {
            name: name.into(),
            members: members.into_iter().map(Into::into).collect(),
            at: None,
        }
    }

    /// The same addition at `at` Unix seconds.
    pub fn at(mut self, at: f64) -> Self {
        self.at = Some(at);
        self
    }
}

/// Checks one member against the rule: a non-empty UTF-8 string of at most
/// [`MAX_MEMBER_BYTES`] bytes.
pub fn check_member(member: &str) -> Result<()> {
    if member.is_empty() {
        return Err(Error::InvalidInput("a set member must not be empty".into()));
    }
    if member.len() > MAX_MEMBER_BYTES {
        return Err(Error::InvalidInput(format!(
            "a set member is at most {MAX_MEMBER_BYTES} bytes, not {}",
            member.len()
        )));
    }
    Ok(())
}

/// A member as an error message shows it: its first 40 characters.
fn excerpt(member: &str) -> String {
    match member.char_indices().nth(40) {
        Some((end, _)) => format!("{}...", &member[..end]),
        None => member.to_owned(),
    }
}

/// The delta of `members` added to the set `name`, every member checked.
fn delta_of(name: &str, members: &[impl AsRef<str>]) -> Result<Value> {
    if members.is_empty() || members.len() > MAX_MEMBERS {
        return Err(Error::InvalidInput(format!(
            "set {name:?}: an addition takes 1 to {MAX_MEMBERS} members, not {}",
            members.len()
        )));
    }
    for m in members {
        check_member(m.as_ref()).map_err(|e| match e {
            Error::InvalidInput(why) => Error::InvalidInput(format!(
                "set {name:?}: member {:?}: {why}",
                excerpt(m.as_ref())
            )),
            other => other,
        })?;
    }
    Ok(Value::Distinct(Box::new(DistinctValue::of(members))))
}

/// One slice of a set: when it starts and how many distinct members it
/// holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetSlice {
    /// The slice's start, Unix seconds.
    pub start: u64,
    /// Its distinct members (Redis's estimator).
    pub count: u64,
}

/// Every slice of a set at one precision, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetSeries {
    /// The precision, seconds.
    pub precision: u64,
    /// The slices, oldest first.
    pub slices: Vec<SetSlice>,
}

/// The distinct members of a range, over one set or the union of several.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetRange {
    /// The range asked for, Unix seconds.
    pub from: u64,
    /// Its end, inclusive.
    pub to: u64,
    /// The precision read (slices starting in `[slice_start(from), to]`
    /// are merged: the range is widened to whole slices).
    pub precision: u64,
    /// The distinct members of the union.
    pub count: u64,
}

/// One set's slices at every precision within a range, and the count of
/// the range's union ([`Sets::view`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetView {
    /// Per precision, finest first, the slices starting in `[from, to]`.
    pub series: Vec<SetSeries>,
    /// The distinct members of the range.
    pub union: SetRange,
}

/// Named sets at several precisions. Cheap to clone.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// use tally::sets::SetAdd;
///
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let sets = tally.sets();
/// let at = 1336376415.0;
/// sets.add_many(&[SetAdd::new("users", ["ann", "bob"]).at(at),
///                 SetAdd::new("users", ["bob", "cy"]).at(at + 60.0)])
///     .await?; // one round trip
/// let minutes = sets.get("users", 60).await?;
/// assert_eq!(minutes.iter().map(|s| s.count).collect::<Vec<_>>(), vec![2, 2]);
/// let both = sets.count(&["users"], at as u64 - 15, at as u64 + 60).await?;
/// assert_eq!(both.count, 3);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Sets {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn SliceStore>,
    space: Arc<Space>,
    precisions: Vec<u64>,
    clock: SharedClock,
}

impl Sets {
    /// Sets on `store` at `precisions` (seconds), each keeping `samples`
    /// slices, on the system clock.
    pub fn new(store: Arc<dyn SliceStore>, precisions: &[u64], samples: u64) -> Result<Self> {
        Self::with_clock(store, precisions, samples, Arc::new(SystemClock))
    }

    /// Sets on `store`, reading time from `clock`. The precisions and
    /// samples follow the space's rules ([`Space::new`]).
    pub fn with_clock(
        store: Arc<dyn SliceStore>,
        precisions: &[u64],
        samples: u64,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        let space = Space::cleaned(SPACE, Kind::Distinct, precisions, samples)?;
        Ok(Sets {
            inner: Arc::new(Inner {
                store,
                precisions: space.seconds(),
                space: Arc::new(space),
                clock,
            }),
        })
    }

    /// The engine's space these sets are.
    pub fn space(&self) -> &Arc<Space> {
        &self.inner.space
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn SliceStore> {
        &self.inner.store
    }

    /// The clock in use.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// The precisions, finest first.
    pub fn precisions(&self) -> &[u64] {
        &self.inner.precisions
    }

    /// Adds `members` to `name` now.
    pub async fn add<S: AsRef<str>>(&self, name: &str, members: &[S]) -> Result<()> {
        self.add_many(&[SetAdd::new(name, members.iter().map(|m| m.as_ref()))])
            .await
    }

    /// Adds `members` to `name` at `at` Unix seconds.
    pub async fn add_at<S: AsRef<str>>(&self, name: &str, members: &[S], at: f64) -> Result<()> {
        self.add_many(&[SetAdd::new(name, members.iter().map(|m| m.as_ref())).at(at)])
            .await
    }

    /// Adds members to any sets in one round trip (per node on a cluster),
    /// all or nothing: if any addition is invalid (a name, a member, no
    /// members, a time), nothing is written.
    pub async fn add_many(&self, adds: &[SetAdd]) -> Result<()> {
        let batch = self.prepare(adds)?;
        self.inner.store.apply(&batch).await.map(|_| ())
    }

    /// [`Sets::add_many`] with an idempotency key: the batch is written with
    /// the key's write id, so the same key sent again is applied once
    /// ([`Applied::Duplicate`]), as [`crate::Counters::incr_many_once`].
    pub async fn add_many_once(&self, key: &str, adds: &[SetAdd]) -> Result<Applied> {
        series::apply_once(self.inner.store.as_ref(), key, self.prepare(adds)?).await
    }

    /// Validates and merges additions into the engine's batch without
    /// writing it.
    pub fn prepare(&self, adds: &[SetAdd]) -> Result<Batch> {
        prepare(
            &self.inner.space,
            adds,
            MAX_BATCH,
            "set addition",
            self.inner.clock.now(),
            |a, now| self.validate(a, now),
        )
    }

    /// Validates one addition, `now` standing in for a missing time: its
    /// name, instant and delta.
    pub fn validate(&self, add: &SetAdd, now: Timestamp) -> Result<(Name, Timestamp, Value)> {
        let name = Name::new(add.name.as_str())?;
        let at = time(add.at, now)?;
        Ok((name, at, delta_of(&add.name, &add.members)?))
    }

    /// Every slice of one precision, oldest first, with its count.
    pub async fn get(&self, name: &str, precision: u64) -> Result<Vec<SetSlice>> {
        check_precision_in(&self.inner.precisions, precision)?;
        let mut all = self.read_all(name, &[precision]).await?;
        Ok(all.pop().map(|s| s.slices).unwrap_or_default())
    }

    /// Every precision of a set, finest first, in one round trip.
    pub async fn get_all(&self, name: &str) -> Result<Vec<SetSeries>> {
        self.read_all(name, &self.inner.precisions).await
    }

    async fn read_all(&self, name: &str, precisions: &[u64]) -> Result<Vec<SetSeries>> {
        series::read_series(
            self.inner.store.as_ref(),
            &self.inner.space,
            name,
            precisions,
        )
        .await?
        .into_iter()
        .map(|(precision, slices)| {
            let slices = slices
                .iter()
                .map(|(start, v)| {
                    Ok(SetSlice {
                        start: *start,
                        count: distinct_of(v)?.estimate(),
                    })
                })
                .collect::<Result<_>>()?;
            Ok(SetSeries { precision, slices })
        })
        .collect()
    }

    /// The distinct members of the range `[from, to]` (Unix seconds) of one
    /// set, or of the union of several (1 to [`MAX_READ`]); one round trip.
    /// Read at the finest precision whose kept slices reach back to `from`:
    /// slices starting in `[slice_start(from), to]` are merged, so the
    /// range is widened to whole slices.
    pub async fn count(&self, names: &[&str], from: u64, to: u64) -> Result<SetRange> {
        if names.is_empty() || names.len() > MAX_READ {
            return Err(Error::InvalidInput(format!(
                "a range read takes 1 to {MAX_READ} sets, not {}",
                names.len()
            )));
        }
        let names = names
            .iter()
            .map(|n| Name::new(*n))
            .collect::<Result<Vec<_>>>()?;
        let space = &self.inner.space;
        let plan = range(space, self.inner.clock.now(), from, to).ok_or_else(|| {
            Error::InvalidTime(format!("a range's end ({to}) is before its start ({from})"))
        })?;
        let per = self
            .inner
            .store
            .read(space, &names, &[plan.resolution.seconds], plan.slices)
            .await?;
        let union = merge_values(
            Kind::Distinct,
            per.iter().flatten().flatten().map(|(_, v)| v),
        )?;
        Ok(SetRange {
            from,
            to,
            precision: plan.resolution.seconds,
            count: distinct_of(&union)?.estimate(),
        })
    }

    /// One set's slices starting in `[from, to]` at every precision, and
    /// the distinct members of the range (as [`Sets::count`] counts them),
    /// from one read of every precision: one round trip.
    pub async fn view(&self, name: &str, from: u64, to: u64) -> Result<SetView> {
        let space = &self.inner.space;
        let plan = range(space, self.inner.clock.now(), from, to).ok_or_else(|| {
            Error::InvalidTime(format!("a range's end ({to}) is before its start ({from})"))
        })?;
        let name = Name::new(name)?;
        let mut all = self
            .inner
            .store
            .read(space, &[name], &self.inner.precisions, SliceSel::All)
            .await?;
        let per = all.pop().unwrap_or_default();
        let mut union = None;
        let mut series = Vec::with_capacity(per.len());
        for (&precision, slices) in self.inner.precisions.iter().zip(&per) {
            if precision == plan.resolution.seconds {
                let merged = merge_values(
                    Kind::Distinct,
                    slices
                        .iter()
                        .filter(|(start, _)| plan.slices.contains(*start))
                        .map(|(_, v)| v),
                )?;
                union = Some(distinct_of(&merged)?.estimate());
            }
            let slices = slices
                .iter()
                .filter(|(start, _)| (from..=to).contains(start))
                .map(|(start, v)| {
                    Ok(SetSlice {
                        start: *start,
                        count: distinct_of(v)?.estimate(),
                    })
                })
                .collect::<Result<_>>()?;
            series.push(SetSeries { precision, slices });
        }
        Ok(SetView {
            series,
            union: SetRange {
                from,
                to,
                precision: plan.resolution.seconds,
                count: union.unwrap_or(0),
            },
        })
    }

    /// Up to `limit` sets whose names start with `prefix` (empty: all),
    /// after the cursor `after`, in name order.
    pub async fn search(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Page> {
        series::search(
            self.inner.store.as_ref(),
            &self.inner.space,
            prefix,
            after,
            limit,
            MAX_PAGE,
        )
        .await
    }

    /// Deletes every slice of a set; true if it held anything.
    pub async fn delete(&self, name: &str) -> Result<bool> {
        series::delete(self.inner.store.as_ref(), &self.inner.space, name).await
    }
}

/// The set of a stored slice (or of a merge).
fn distinct_of(v: &Value) -> Result<&DistinctValue> {
    match v {
        Value::Distinct(d) => Ok(d),
        other => Err(Error::Backend(format!(
            "internal error: the sets space holds a {} value",
            other.kind()
        ))),
    }
}

/// The sets' aggregating writer: members merged in process, written in
/// batches, each exactly once (the engine's [`Writer`]; its guarantees and
/// bounds). Cheap to clone.
#[derive(Clone)]
pub struct SetsWriter {
    sets: Sets,
    writer: Writer,
}

impl std::fmt::Debug for SetsWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetsWriter")
            .field("settings", self.writer.settings())
            .finish()
    }
}

impl SetsWriter {
    /// Starts a writer into `sets`' store; spawns its flusher on the
    /// current tokio runtime.
    pub fn start(sets: Sets, settings: AggregatorSettings) -> Result<Self> {
        let sink: Arc<dyn BatchSink> = Arc::new(sets.store().clone());
        let writer = Writer::start(sink, sets.space().clone(), sets.clock().clone(), settings)?;
        Ok(SetsWriter { sets, writer })
    }

    /// The sets written to.
    pub fn service(&self) -> &Sets {
        &self.sets
    }

    /// Takes one addition without ever waiting: fails with
    /// [`Error::Overloaded`] when full, and with the rule it breaks when
    /// invalid (nothing taken).
    pub fn try_add(&self, add: &SetAdd) -> Result<()> {
        let (_, _, delta) = self.sets.validate(add, self.sets.clock().now())?;
        self.writer.try_add(&add.name, delta, add.at)
    }

    /// Flushes now and waits until everything taken before this call is
    /// written (or dropped as refused).
    pub async fn flush(&self) -> Result<()> {
        self.writer.flush().await
    }

    /// Stops taking additions, flushes what is pending and stops the
    /// flusher.
    pub async fn shutdown(&self) {
        self.writer.shutdown().await
    }

    /// Running figures (`accepted` and `written` count additions).
    pub fn stats(&self) -> AggregatorStats {
        self.writer.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_follow_the_rule_and_errors_name_the_set() {
        assert!(check_member("a").is_ok());
        assert!(check_member(&"é".repeat(127)).is_ok()); // 254 bytes
        let long = "x".repeat(MAX_MEMBER_BYTES + 1);
        assert!(
            check_member(&long)
                .unwrap_err()
                .to_string()
                .contains("at most 255 bytes, not 256")
        );
        let e = delta_of("users", &["ok", ""]).unwrap_err().to_string();
        assert!(
            e.contains("set \"users\"") && e.contains("must not be empty"),
            "{e}"
        );
        let none: [&str; 0] = [];
        let e = delta_of("users", &none).unwrap_err().to_string();
        assert!(e.contains("1 to 10000 members, not 0"), "{e}");
        let Value::Distinct(d) = delta_of("users", &["a", "b", "a"]).unwrap() else {
            panic!("not a set");
        };
        assert_eq!(*d, DistinctValue::of(["a", "b"]));
    }
}
