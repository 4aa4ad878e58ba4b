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

use serde::{Deserialize, Serialize};

use crate::engine::kinds::DistinctValue;
use crate::engine::read::{merge_values, range};
use crate::engine::series::{
    PlainRules, Rules, SeriesService, SeriesWriter, SliceSeries, operation,
};
use crate::engine::{Applied, Kind, SliceRead, Value};
use crate::error::{Error, Result};
use crate::name::Name;

/// The sets' space id (Redis keys `{<prefix>:<shard>}:sets:...`, SQLite
/// tables `tally_sets_*`).
pub const SPACE: &str = "sets";

pub use crate::engine::series::{MAX_BATCH, MAX_PAGE};

/// The most members in one addition.
pub const MAX_MEMBERS: usize = 10_000;

/// The longest member, in bytes of UTF-8.
pub const MAX_MEMBER_BYTES: usize = 255;

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

operation!(SetAdd, "set addition");

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
pub type SetSeries = SliceSeries<SetSlice>;

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

/// The distinct kind's rules for [`SeriesService`]: members added.
#[derive(Debug, Default)]
pub struct SetRules;

impl PlainRules for SetRules {
    const SPACE: &'static str = SPACE;
    const KIND: Kind = Kind::Distinct;
    type Slice = SetSlice;

    fn slice(start: u64, v: &Value) -> Result<SetSlice> {
        Ok(SetSlice {
            start,
            count: distinct_of(v)?.estimate(),
        })
    }
}

impl Rules for SetRules {
    type Op = SetAdd;
    const WRITER: &'static str = "SetsWriter";

    fn delta(&self, add: &SetAdd) -> Result<Value> {
        delta_of(&add.name, &add.members)
    }
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
pub type Sets = SeriesService<SetRules>;

/// The sets' aggregating writer: members merged in process, written in
/// batches, each exactly once ([`SeriesWriter`]). Cheap to clone.
pub type SetsWriter = SeriesWriter<SetRules>;

impl SeriesService<SetRules> {
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
        self.write(adds).await
    }

    /// [`Sets::add_many`] with an idempotency key, applied once
    /// ([`SeriesService::write_once`]).
    pub async fn add_many_once(&self, key: &str, adds: &[SetAdd]) -> Result<Applied> {
        self.write_once(key, adds).await
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
        let space = &self.space();
        let plan = range(space, self.clock().now(), from, to).ok_or_else(|| {
            Error::InvalidTime(format!("a range's end ({to}) is before its start ({from})"))
        })?;
        let per = self
            .store()
            .read(SliceRead::new(space, &names, &[plan.precision.seconds]).slices(plan.slices))
            .await?;
        let union = merge_values(
            Kind::Distinct,
            per.iter().flatten().flatten().map(|(_, v)| v),
        )?;
        Ok(SetRange {
            from,
            to,
            precision: plan.precision.seconds,
            count: distinct_of(&union)?.estimate(),
        })
    }

    /// One set's slices starting in `[from, to]` at every precision, and
    /// the distinct members of the range (as [`Sets::count`] counts them),
    /// from one read of every precision: one round trip.
    pub async fn view(&self, name: &str, from: u64, to: u64) -> Result<SetView> {
        let space = &self.space();
        let plan = range(space, self.clock().now(), from, to).ok_or_else(|| {
            Error::InvalidTime(format!("a range's end ({to}) is before its start ({from})"))
        })?;
        let name = Name::new(name)?;
        let mut all = self
            .store()
            .read(SliceRead::new(space, &[name], self.precisions()))
            .await?;
        let per = all.pop().unwrap_or_default();
        let mut union = None;
        let mut series = Vec::with_capacity(per.len());
        for (&precision, slices) in self.precisions().iter().zip(&per) {
            if precision == plan.precision.seconds {
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
                .map(|(start, v)| SetRules::slice(*start, v))
                .collect::<Result<_>>()?;
            series.push(SetSeries { precision, slices });
        }
        Ok(SetView {
            series,
            union: SetRange {
                from,
                to,
                precision: plan.precision.seconds,
                count: union.unwrap_or(0),
            },
        })
    }
}

/// The set of a stored slice (or of a merge).
fn distinct_of(v: &Value) -> Result<&DistinctValue> {
    match v {
        Value::Distinct(d) => Ok(d),
        other => Err(other.misplaced(SPACE)),
    }
}

/// What Graphite sees of a set: one leaf, its distinct count per slice
/// (`N` in Tally's namespace, `stats.sets.N.count` in statsd's).
impl SeriesService<SetRules> {
    /// The sets' place in the Graphite namespace `ns`.
    pub fn graphite_shapes(&self, ns: crate::graphite::Namespace) -> Vec<crate::graphite::Shape> {
        use crate::graphite::{Leaf, Namespace, Shape};
        match ns {
            Namespace::Tally => vec![Shape::single("", graphite_distinct)],
            Namespace::Statsd => vec![Shape {
                root: "stats.sets".into(),
                leaves: vec![Leaf::new("count", graphite_distinct)],
            }],
        }
    }
}

/// A set slice's distinct count.
fn graphite_distinct(v: &Value, _step: u64) -> Option<f64> {
    match v {
        Value::Distinct(d) => Some(d.estimate() as f64),
        _ => None,
    }
}

impl SeriesWriter<SetRules> {
    /// Takes one addition without ever waiting: fails with
    /// [`Error::Overloaded`] when full, and with the rule it breaks when
    /// invalid (nothing taken).
    pub fn try_add(&self, add: &SetAdd) -> Result<()> {
        self.try_take(add)
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
