//! The narrow trait the embedder implements: read the series matching path patterns as
//! whisper reads one file each, and list the nodes matching a pattern.
//!
//! Owns only the contract between this crate and a store; it knows nothing of Redis, SQLite
//! or whisper files. The pure helpers a store needs ([`crate::window()`], [`crate::Glob`],
//! [`crate::Series::fetched`]) live in their own modules.

use crate::{Glob, Result, Series};

/// One node of the namespace as `/metrics/find` lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Node {
    /// The node's whole dotted path.
    pub path: String,
    /// True for a series (a whisper file); false for a branch (a directory).
    pub leaf: bool,
}

impl Node {
    /// The last dotted node of the path (graphite's `node.name`).
    pub fn name(&self) -> &str {
        self.path.rsplit('.').next().unwrap_or(&self.path)
    }
}

/// What [`Store::fetch`] reads: patterns over one window.
#[derive(Clone, Copy, Debug)]
pub struct Fetch<'a> {
    /// The patterns; each is answered by its own list of series.
    pub patterns: &'a [Glob],
    /// The window's start (excluded), as graphite's `from`.
    pub from: i64,
    /// The window's end (included), as graphite's `until`.
    pub until: i64,
    /// The time the window is read at (whisper picks its archive by it).
    pub now: i64,
    /// The most leaves all the patterns may match together.
    pub max_series: usize,
}

/// Where the series and the namespace come from.
#[async_trait::async_trait]
pub trait Store: Send + Sync {
    /// For each pattern, the series of every leaf path matching it, each read as whisper reads
    /// one file over `(from, until]` at `now` ([`Series::fetched`] with the start, end and step of
    /// [`crate::window()`] and one value per step). A leaf whose window is `None` gives no series.
    /// Fails with [`crate::Error::Limit`] when more than `max_series` leaves match in all.
    async fn fetch(&self, fetch: Fetch<'_>) -> Result<Vec<Vec<Series>>>;

    /// The nodes at depth `pattern.depth()` matching the pattern (a path can be a leaf, a
    /// branch, or both: then two nodes). Fails with [`crate::Error::Limit`] past `max`.
    async fn find(&self, pattern: &Glob, max: usize) -> Result<Vec<Node>>;
}
