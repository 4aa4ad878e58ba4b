//! Tally's series as Graphite sees them: the namespace, and the store the
//! Graphite render and find API (`tally_graphite`) reads, straight from
//! the engine's stores.
//!
//! A [`Family`] is one space of the engine (counters, statistics, gauges,
//! sets) placed under a root of the Graphite namespace, with the leaves
//! each series shows: a counter is one leaf (its count per slice), a
//! statistic a branch of leaves (`count`, `sum`, ..., `p99`). Which leaves
//! a kind has and how each comes out of a slice's value is the kind's own
//! business: each kind's module hands out its [`Shape`]s
//! ([`crate::Counters::graphite_shapes`] and its like); this module has no
//! per-kind code. [`Source`] holds the families of one server and
//! implements [`tally_graphite::Store`]:
//!
//! - `fetch` matches each pattern against the names each family lists by
//!   the pattern's literal prefix (the store's ordered listing), then reads
//!   the matched series of a family in one round trip (per node on a
//!   cluster) at the one precision whisper would read: the finest whose
//!   kept span covers `now − from` ([`tally_graphite::window()`]), every step
//!   of the window a value or `None`;
//! - `find` walks the same listings, skipping past a branch's names once
//!   the branch is found.
//!
//! Names become paths as [`path`] says. When two series share a path (two
//! names escaping alike, or a counter `api.count` beside a statistic
//! `api`), `fetch` answers each, in a fixed order: family by family in the
//! source's order (counters, gauges, sets, statistics), and within a
//! family by name (the store's ordered listing, bytewise on every
//! backend). The render API then keeps one series per path as
//! graphite-web's merge of series sharing a name does: the first one's
//! values, its nulls filled from the later ones read at the same step (all
//! families have the same precisions unless the statistics were given
//! others; a twin read at another step replaces a first series that has a
//! null). `find` lists such a path once. A path that is both a leaf and a
//! branch (a counter `api` beside a statistic `api`, or counters `web` and
//! `web.x`) is what a whisper file `api.wsp` beside a directory `api/` is
//! to graphite-web: `find` lists it once, as a branch; `render` of the path
//! answers the leaf.
//!
//! What it does not do: parse targets, evaluate functions or format
//! answers (`tally_graphite` does), or write anything.

mod fetch;
pub mod merged;
pub mod path;

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use tally_graphite::{Archive, Error as GError, Fetch, Glob, Node, Result as GResult, Series};

use crate::engine::{SeriesList, SliceRead, SliceStore, Space, Value};
use crate::error::{Error, Result};
use crate::name::Name;

/// The default quantile leaves of statistics: the stats default.
pub const DEFAULT_QUANTILES: [f64; 3] = [0.5, 0.9, 0.99];

/// Names read from a family's listing per round trip when walking it by a
/// pattern's prefix: large, since a store answers a page in about the time
/// of its names (a walk of 100,000 names takes 10 round trips).
const PAGE: usize = 10_000;

/// Series exported per round trip.
const EXPORT_PAGE: usize = 1_000;

/// Where Tally's series sit in the Graphite namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Namespace {
    /// Tally's own: a series `N` is the path `N` (a statistic a branch).
    #[default]
    Tally,
    /// statsd's Graphite backend's names (its `legacyNamespace`):
    /// `stats_counts.N`, `stats.N`, `stats.timers.N.*`, `stats.gauges.N`,
    /// `stats.sets.N.count`.
    Statsd,
}

impl FromStr for Namespace {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "tally" => Ok(Namespace::Tally),
            "statsd" => Ok(Namespace::Statsd),
            other => Err(Error::Config(format!(
                "unknown Graphite namespace {other:?}: it is `tally` or `statsd`"
            ))),
        }
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Namespace::Tally => "tally",
            Namespace::Statsd => "statsd",
        })
    }
}

/// How a leaf's value comes out of a slice's value: the value and the
/// slice's length in seconds; `None` for a slot that shows no value.
pub type ReadLeaf = Arc<dyn Fn(&Value, u64) -> Option<f64> + Send + Sync>;

/// A function a [`ReadLeaf`] is made of: every
/// `Fn(&Value, u64) -> Option<f64>` that can be shared between threads.
pub trait ReadValue: Fn(&Value, u64) -> Option<f64> + Send + Sync + 'static {}

impl<F: Fn(&Value, u64) -> Option<f64> + Send + Sync + 'static> ReadValue for F {}

/// One leaf of a series.
#[derive(Clone)]
pub struct Leaf {
    /// Its last node; empty for the series itself (a counter's path is its
    /// name, with no leaf node of its own).
    pub node: String,
    /// Its value in a slice.
    pub read: ReadLeaf,
}

impl Leaf {
    /// A leaf named `node` read by `read`.
    pub fn new(node: impl Into<String>, read: impl ReadValue) -> Self {
        Leaf {
            node: node.into(),
            read: Arc::new(read),
        }
    }
}

impl fmt::Debug for Leaf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Leaf").field(&self.node).finish()
    }
}

/// Where a kind's series sit and which leaves they show: a kind's answer
/// to "what does Graphite see of you in this namespace".
#[derive(Clone, Debug)]
pub struct Shape {
    /// The nodes before the name (`stats.timers`), empty for none.
    pub root: String,
    /// The leaves of every series: one with an empty node for a series that
    /// is a leaf itself.
    pub leaves: Vec<Leaf>,
}

impl Shape {
    /// A series that is one leaf under `root`.
    pub fn single(root: impl Into<String>, read: impl ReadValue) -> Self {
        Shape {
            root: root.into(),
            leaves: vec![Leaf::new("", read)],
        }
    }

    fn is_single(&self) -> bool {
        self.leaves.len() == 1 && self.leaves[0].node.is_empty()
    }
}

/// The node of a quantile leaf: `p` and the percentile without its
/// decimal point (0.5 → `p50`, 0.999 → `p999`, 0.05 → `p5`).
pub fn quantile_node(q: f64) -> String {
    format!("p{}", percentile(q).replace('.', ""))
}

/// `q` (0 to 1) as a percentile, shifted in decimal so that no binary
/// rounding shows: 0.5 → `50`, 0.999 → `99.9`, 0.05 → `5`, 0.001 → `0.1`.
pub fn percentile(q: f64) -> String {
    let text = format!("{q}");
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let frac = format!("{frac:0<2}");
    let (moved, rest) = frac.split_at(2);
    let whole = format!("{int}{moved}");
    let whole = whole.trim_start_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    if rest.is_empty() {
        whole.to_owned()
    } else {
        format!("{whole}.{rest}")
    }
}

/// One engine space under a root of the namespace.
#[derive(Clone)]
pub struct Family {
    space: Arc<Space>,
    store: Arc<dyn SliceStore>,
    shape: Shape,
    root_nodes: Vec<String>,
    archives: Vec<Archive>,
}

impl fmt::Debug for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Family")
            .field("space", &self.space.id)
            .field("shape", &self.shape)
            .finish()
    }
}

/// The archives of `space` as whisper's would be: one per precision (its
/// slice length as the step, the slices kept as the points), in its order.
pub fn archives(space: &Space) -> Vec<Archive> {
    space
        .precisions
        .iter()
        .map(|r| Archive {
            step: r.seconds as i64,
            points: r.keep as i64,
        })
        .collect()
}

impl Family {
    /// The series of `space` in `store`, shown as `shape` says.
    pub fn new(space: Arc<Space>, store: Arc<dyn SliceStore>, shape: Shape) -> Self {
        let root_nodes = if shape.root.is_empty() {
            Vec::new()
        } else {
            shape.root.split('.').map(str::to_owned).collect()
        };
        let archives = archives(&space);
        Family {
            space,
            store,
            shape,
            root_nodes,
            archives,
        }
    }

    /// True when the root's nodes match the pattern's first nodes (as many
    /// as both have).
    fn root_matches(&self, glob: &Glob) -> bool {
        self.root_nodes
            .iter()
            .take(glob.depth())
            .enumerate()
            .all(|(i, n)| glob.node_matches(i, n))
    }

    /// The name prefix every name matching `glob` below the root starts
    /// with: the pattern's literal prefix below the root, cut to the nodes a
    /// name surely covers (a statistic's leaf node is no part of its name)
    /// and before any `_` (which may stand for another character).
    fn name_prefix<'g>(&self, glob: &'g Glob) -> &'g str {
        let literal = glob.literal_prefix();
        let below = if self.shape.root.is_empty() {
            literal
        } else {
            match literal
                .strip_prefix(self.shape.root.as_str())
                .and_then(|rest| rest.strip_prefix('.'))
            {
                Some(rest) => rest,
                None => return "",
            }
        };
        let leaf_nodes = usize::from(!self.shape.is_single());
        let name_nodes = glob
            .depth()
            .saturating_sub(self.root_nodes.len() + leaf_nodes);
        if name_nodes == 0 {
            return "";
        }
        let cut = below
            .match_indices('.')
            .nth(name_nodes - 1)
            .map_or(below, |(i, _)| &below[..i]);
        path::name_prefix(cut)
    }

    /// Lists the family's names starting with `prefix`, a page at a time,
    /// handing each to `visit`; with `collapse`, a branch of that many
    /// nodes once ([`SeriesList::collapse`]: a store that can seeks past
    /// the rest of it).
    async fn walk(
        &self,
        prefix: &str,
        collapse: Option<usize>,
        mut visit: impl FnMut(&str) -> GResult<()>,
    ) -> GResult<()> {
        let mut after: Option<String> = None;
        loop {
            let list = SeriesList::new(&self.space, PAGE)
                .prefix(prefix)
                .after(after.as_deref());
            let list = match collapse {
                Some(nodes) => list.collapse(nodes),
                None => list,
            };
            let page = self.store.list(list).await.map_err(store_error)?;
            for name in &page {
                visit(name)?;
            }
            if page.len() < PAGE {
                return Ok(());
            }
            after = page.into_iter().last();
        }
    }
}

/// One leaf's stored values, as [`Source::export`] gives them.
#[derive(Clone, Debug, PartialEq)]
pub struct Exported {
    /// The leaf's path.
    pub path: String,
    /// (slice length in seconds, slices kept) per precision, finest first.
    pub archives: Vec<(u64, u64)>,
    /// (archive index, slice start, value) of every slice showing a value.
    pub points: Vec<(usize, i64, f64)>,
}

/// The families of one server, read as Graphite reads whisper files.
#[derive(Clone, Debug, Default)]
pub struct Source {
    families: Vec<Family>,
}

impl Source {
    /// A source over `families`, answered in this order where paths meet.
    pub fn new(families: Vec<Family>) -> Self {
        Source { families }
    }

    /// The families.
    pub fn families(&self) -> &[Family] {
        &self.families
    }

    /// Every leaf's stored values as whisper files would hold them at
    /// `now`: its path, its archives (slice length, slices kept; finest
    /// first) and, per archive, each slice among the `kept` newest slots at
    /// `now` that shows a value. Where two series share a path, the file
    /// holds what a render answers for it: the first series' values (in
    /// `fetch`'s order), its empty slots filled from the later ones that
    /// have the same archives (one of other archives is left out). What the
    /// tests and `tally bench graphite` write into whisper files for
    /// graphite-web, so that it serves the same data.
    pub async fn export(&self, now: i64) -> Result<Vec<Exported>> {
        let mut out: Vec<Exported> = Vec::new();
        let mut paths: HashMap<String, usize> = HashMap::new();
        for family in &self.families {
            let mut names = Vec::new();
            let mut after: Option<String> = None;
            loop {
                let page = family
                    .store
                    .list(SeriesList::new(&family.space, EXPORT_PAGE).after(after.as_deref()))
                    .await?;
                let full = page.len() == EXPORT_PAGE;
                after = page.last().cloned();
                for name in page {
                    names.push(Name::new(name)?);
                }
                if !full {
                    break;
                }
            }
            let seconds = family.space.seconds();
            for chunk in names.chunks(EXPORT_PAGE) {
                let read = family
                    .store
                    .read(SliceRead::new(&family.space, chunk, &seconds))
                    .await?;
                for (name, per) in chunk.iter().zip(read) {
                    let escaped = path::escape(name.as_str());
                    for leaf in &family.shape.leaves {
                        let path = path::join(&[&family.shape.root, &escaped, &leaf.node]);
                        let archives: Vec<(u64, u64)> = family
                            .archives
                            .iter()
                            .map(|a| (a.step as u64, a.points as u64))
                            .collect();
                        let earlier = paths.get(&path).copied();
                        if earlier.is_some_and(|i| out[i].archives != archives) {
                            continue;
                        }
                        let mut points = Vec::new();
                        for (i, (archive, slices)) in family.archives.iter().zip(&per).enumerate() {
                            // The slots a whisper archive of `points` holds at now.
                            let newest = now - now.rem_euclid(archive.step);
                            let oldest = newest - archive.step * archive.points;
                            for (start, value) in slices {
                                let start = *start as i64;
                                let value = (leaf.read)(value, archive.step as u64);
                                if let (true, Some(v)) = (start > oldest && start <= newest, value)
                                {
                                    points.push((i, start, v));
                                }
                            }
                        }
                        match earlier {
                            Some(i) => {
                                let first = &mut out[i];
                                let held: BTreeSet<(usize, i64)> =
                                    first.points.iter().map(|&(a, t, _)| (a, t)).collect();
                                first.points.extend(
                                    points
                                        .into_iter()
                                        .filter(|&(a, t, _)| !held.contains(&(a, t))),
                                );
                            }
                            None => {
                                paths.insert(path.clone(), out.len());
                                out.push(Exported {
                                    path,
                                    archives,
                                    points,
                                });
                            }
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// The nodes of `family` at the pattern's depth, added to `out`.
    async fn find_in(
        &self,
        family: &Family,
        glob: &Glob,
        max: usize,
    ) -> GResult<BTreeSet<(String, bool)>> {
        let mut found = BTreeSet::new();
        let out = &mut found;
        let depth = glob.depth();
        let root = family.root_nodes.len();
        if !family.root_matches(glob) {
            return Ok(found);
        }
        if depth <= root {
            // A node of the root itself: a branch, if the family holds anything.
            let any = family
                .store
                .list(SeriesList::new(&family.space, 1))
                .await
                .map_err(store_error)?;
            if !any.is_empty() {
                out.insert((family.root_nodes[..depth].join("."), false));
            }
            return Ok(found);
        }
        let single = family.shape.is_single();
        let wanted = depth - root; // nodes below the root
        let mut overflow = false;
        family
            .walk(family.name_prefix(glob), Some(wanted), |name| {
                let escaped = path::escape(name);
                let nodes: Vec<&str> = escaped.split('.').collect();
                let path_len = nodes.len() + usize::from(!single);
                if path_len < wanted {
                    return Ok(());
                }
                let from_name = wanted.min(nodes.len());
                if !nodes[..from_name]
                    .iter()
                    .enumerate()
                    .all(|(i, n)| glob.node_matches(root + i, n))
                {
                    return Ok(());
                }
                let prefix = path::join(&[&family.shape.root, &nodes[..from_name].join(".")]);
                let mut add = |p: String, leaf: bool| {
                    out.insert((p, leaf));
                    if out.len() > max {
                        overflow = true;
                    }
                };
                if wanted < nodes.len() {
                    // The branch's first name: the listing collapses the rest.
                    add(prefix, false);
                    return Ok(());
                }
                if single {
                    add(prefix, true);
                } else if wanted == nodes.len() {
                    add(prefix, false);
                } else {
                    for leaf in &family.shape.leaves {
                        if glob.node_matches(depth - 1, &leaf.node) {
                            add(path::join(&[&prefix, &leaf.node]), true);
                        }
                    }
                }
                Ok(())
            })
            .await?;
        if overflow {
            return Err(find_limit(max));
        }
        Ok(found)
    }
}

/// The error of a find past its limit.
fn find_limit(max: usize) -> GError {
    GError::limit(format!(
        "more than {max} nodes match the query: the limit of find results \
         (--graphite-max-find)"
    ))
}

/// A store's failure, as the Graphite API's 500.
fn store_error(e: Error) -> GError {
    GError::Store(e.to_string())
}

#[async_trait]
impl tally_graphite::Store for Source {
    async fn fetch(&self, fetch: Fetch<'_>) -> tally_graphite::Result<Vec<Vec<Series>>> {
        self.fetch_series(fetch).await
    }

    async fn find(&self, pattern: &Glob, max: usize) -> tally_graphite::Result<Vec<Node>> {
        // Every family at once, then their nodes merged.
        let per_family = self
            .families
            .iter()
            .map(|family| self.find_in(family, pattern, max));
        let mut found = BTreeSet::new();
        for nodes in futures::future::try_join_all(per_family).await? {
            found.extend(nodes);
        }
        if found.len() > max {
            return Err(find_limit(max));
        }
        Ok(found
            .into_iter()
            .map(|(path, leaf)| Node { path, leaf })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_nodes_are_percentiles_without_the_point() {
        for (input, expected) in [
            (0.5, "p50"),
            (0.9, "p90"),
            (0.99, "p99"),
            (0.999, "p999"),
            (0.05, "p5"),
            (0.07, "p7"),
            (0.001, "p01"),
            (1.0, "p100"),
            (0.0, "p0"),
        ] {
            assert_eq!(quantile_node(input), expected, "quantile_node({input:?})");
        }
        for (input, expected) in [(0.999, "99.9"), (0.75, "75")] {
            assert_eq!(percentile(input), expected, "percentile({input:?})");
        }
    }

    #[test]
    fn namespaces_parse_and_print() {
        assert_eq!("tally".parse::<Namespace>().unwrap(), Namespace::Tally);
        assert_eq!("statsd".parse::<Namespace>().unwrap(), Namespace::Statsd);
        let err = "graphite".parse::<Namespace>().unwrap_err().to_string();
        assert!(err.contains("`tally` or `statsd`"), "{err}");
        assert_eq!(Namespace::Statsd.to_string(), "statsd");
    }
}
