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

pub mod merged;
pub mod path;

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use tally_graphite::{Archive, Error as GError, Fetch, Glob, Node, Result as GResult, Series};

use crate::engine::{SeriesList, SliceRead, SliceSel, SliceStore, Space, Value};
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
    pub fn new(
        node: impl Into<String>,
        read: impl Fn(&Value, u64) -> Option<f64> + Send + Sync + 'static,
    ) -> Self {
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
    pub fn single(
        root: impl Into<String>,
        read: impl Fn(&Value, u64) -> Option<f64> + Send + Sync + 'static,
    ) -> Self {
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
    /// handing each to `visit`, which answers where to resume (a name after
    /// which the listing goes on: the name itself, or past a branch).
    async fn walk(
        &self,
        prefix: &str,
        mut visit: impl FnMut(&str) -> GResult<Option<String>>,
    ) -> GResult<()> {
        let mut after: Option<String> = None;
        loop {
            let page = self
                .store
                .list(
                    SeriesList::new(&self.space, PAGE)
                        .prefix(prefix)
                        .after(after.as_deref()),
                )
                .await
                .map_err(store_error)?;
            let full = page.len() == PAGE;
            let mut resume = None;
            for name in &page {
                if resume.as_deref().is_some_and(|r: &str| name.as_str() <= r) {
                    continue;
                }
                resume = visit(name)?;
            }
            if !full {
                return Ok(());
            }
            let last = page.last().expect("a full page").clone();
            after = Some(match resume {
                Some(r) if r > last => r,
                _ => last,
            });
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

    /// The names of `family` whose leaves match `glob`, each with the
    /// indices of its matching leaves; fails past `max` leaves in all
    /// (counting `seen` already matched). A pattern naming its series
    /// outright is not listed: its one name is checked as it is read. One
    /// whose last node names none of a branch family's leaves reads nothing.
    async fn matching(
        &self,
        family: &Family,
        glob: &Glob,
        max: usize,
        seen: &mut usize,
    ) -> GResult<Matched> {
        let depth = glob.depth();
        let root = family.root_nodes.len();
        let leaf_nodes = usize::from(!family.shape.is_single());
        if depth <= root + leaf_nodes || !family.root_matches(glob) {
            return Ok(Matched::Listed(Vec::new()));
        }
        let name_nodes = depth - root - leaf_nodes;
        let leaves: Vec<usize> = family
            .shape
            .leaves
            .iter()
            .enumerate()
            .filter(|(_, l)| leaf_nodes == 0 || glob.node_matches(depth - 1, &l.node))
            .map(|(i, _)| i)
            .collect();
        if leaves.is_empty() {
            return Ok(Matched::Listed(Vec::new()));
        }
        let mut count = |n: usize| {
            *seen += n;
            if *seen > max {
                return Err(series_limit(max));
            }
            Ok(())
        };
        if let Some(name) = exact_name(glob, root, name_nodes) {
            return Ok(match Name::new(name) {
                Ok(name) => Matched::Named(name, leaves),
                Err(_) => Matched::Listed(Vec::new()),
            });
        }
        let mut found = Vec::new();
        family
            .walk(family.name_prefix(glob), |name| {
                let escaped = path::escape(name);
                let nodes: Vec<&str> = escaped.split('.').collect();
                if nodes.len() != name_nodes
                    || !nodes
                        .iter()
                        .enumerate()
                        .all(|(i, n)| glob.node_matches(root + i, n))
                {
                    return Ok(None);
                }
                count(leaves.len())?;
                found.push((Name::new(name).map_err(store_error)?, leaves.clone()));
                Ok(None)
            })
            .await?;
        Ok(Matched::Listed(found))
    }

    /// The series of `family`'s `names` over the window whisper reads for
    /// `(from, until]` at `now`; empty when whisper reads nothing. With
    /// `named` (a pattern naming its one series outright), `None` when
    /// that name is no series of the family, learnt in the same store call
    /// as the read ([`SliceStore::read_held`]).
    async fn read(
        &self,
        family: &Family,
        pattern: &str,
        names: &[(Name, Vec<usize>)],
        (from, until, now): (i64, i64, i64),
        named: bool,
    ) -> GResult<Option<Vec<Series>>> {
        let only: Vec<Name> = names.iter().map(|(n, _)| n.clone()).collect();
        let window = tally_graphite::window(&family.archives, from, until, now)
            .filter(|w| !names.is_empty() && w.end > w.start);
        let Some(window) = window else {
            if !named {
                return Ok(Some(Vec::new()));
            }
            let held = family.store.contains(&family.space, &only).await;
            return Ok(held.map_err(store_error)?.iter().all(|&h| h).then(Vec::new));
        };
        let step = window.step;
        let slots = ((window.end - window.start) / step) as usize;
        let selected = SliceSel::Range {
            from: window.start.max(0) as u64,
            to: (window.end - 1).max(0) as u64,
        };
        let precision = [step as u64];
        let read = SliceRead::new(&family.space, &only, &precision).slices(selected);
        let read = if named {
            match family.store.read_held(read).await.map_err(store_error)? {
                held if held.iter().all(Option::is_some) => held.into_iter().flatten().collect(),
                _ => return Ok(None),
            }
        } else {
            family.store.read(read).await.map_err(store_error)?
        };
        let mut out = Vec::new();
        for ((name, leaves), mut per) in names.iter().zip(read) {
            let slices = per.pop().unwrap_or_default();
            let escaped = path::escape(name.as_str());
            for &l in leaves {
                let leaf = &family.shape.leaves[l];
                let mut values = vec![None; slots];
                for (start, value) in &slices {
                    let offset = *start as i64 - window.start;
                    if offset >= 0 && offset % step == 0 && ((offset / step) as usize) < slots {
                        values[(offset / step) as usize] = (leaf.read)(value, step as u64);
                    }
                }
                let path = path::join(&[&family.shape.root, &escaped, &leaf.node]);
                out.push(Series::fetched(
                    &path,
                    pattern,
                    window.start,
                    window.end,
                    step,
                    values,
                ));
            }
        }
        Ok(Some(out))
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
            .walk(family.name_prefix(glob), |name| {
                let escaped = path::escape(name);
                let nodes: Vec<&str> = escaped.split('.').collect();
                let path_len = nodes.len() + usize::from(!single);
                if path_len < wanted {
                    return Ok(None);
                }
                let from_name = wanted.min(nodes.len());
                if !nodes[..from_name]
                    .iter()
                    .enumerate()
                    .all(|(i, n)| glob.node_matches(root + i, n))
                {
                    return Ok(None);
                }
                let prefix = path::join(&[&family.shape.root, &nodes[..from_name].join(".")]);
                let mut add = |p: String, leaf: bool| {
                    out.insert((p, leaf));
                    if out.len() > max {
                        overflow = true;
                    }
                };
                if wanted < nodes.len() {
                    add(prefix, false);
                    // Every name sharing these raw nodes gives this branch.
                    let raw: Vec<&str> = name.split('.').take(wanted).collect();
                    return Ok(Some(format!("{}.\u{10FFFF}", raw.join("."))));
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
                Ok(None)
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

/// The names a pattern matches in a family, each with its matching leaves.
enum Matched {
    /// Found by listing.
    Listed(Vec<(Name, Vec<usize>)>),
    /// The one name the pattern names outright: a series if the store
    /// holds it, checked as it is read (one round trip for both).
    Named(Name, Vec<usize>),
}

/// The error of a render past its limit of series.
fn series_limit(max: usize) -> GError {
    GError::limit(format!(
        "more than {max} series match the targets: the limit of series per \
         render (--graphite-max-series)"
    ))
}

/// The one name a pattern's nodes `root .. root + name_nodes` name, when
/// each is exact and the name is its own path (no `_`, which may stand for
/// a character a path cannot carry, and nothing escaping would change).
fn exact_name(glob: &Glob, root: usize, name_nodes: usize) -> Option<String> {
    let nodes: Vec<&str> = (root..root + name_nodes)
        .map(|i| glob.exact_node(i))
        .collect::<Option<_>>()?;
    let name = nodes.join(".");
    (!name.contains('_') && path::escape(&name) == name).then_some(name)
}

/// A store's failure, as the Graphite API's 500.
fn store_error(e: Error) -> GError {
    GError::Store(e.to_string())
}

#[async_trait]
impl tally_graphite::Store for Source {
    async fn fetch(&self, fetch: Fetch<'_>) -> tally_graphite::Result<Vec<Vec<Series>>> {
        let Fetch {
            patterns,
            from,
            until,
            now,
            max_series,
        } = fetch;
        // Per family (all at once), the names of every pattern; then the
        // limit over every family; then one read per family and pattern,
        // all at once.
        let matched = self.families.iter().map(|family| async move {
            let mut seen = 0;
            let mut wanted = Vec::with_capacity(patterns.len());
            for glob in patterns {
                wanted.push(self.matching(family, glob, max_series, &mut seen).await?);
            }
            Ok::<_, GError>((wanted, seen))
        });
        let matched = futures::future::try_join_all(matched).await?;
        let listed: usize = matched.iter().map(|(_, seen)| seen).sum();
        if listed > max_series {
            return Err(series_limit(max_series));
        }
        let reads = self
            .families
            .iter()
            .zip(&matched)
            .flat_map(|(family, (wanted, _))| {
                patterns
                    .iter()
                    .zip(wanted)
                    .map(move |(glob, matched)| async move {
                        let window = (from, until, now);
                        match matched {
                            Matched::Listed(names) => {
                                let read = self.read(family, glob.text(), names, window, false);
                                Ok((read.await?.unwrap_or_default(), 0))
                            }
                            Matched::Named(name, leaves) => {
                                let one = [(name.clone(), leaves.clone())];
                                let read = self.read(family, glob.text(), &one, window, true);
                                Ok(match read.await? {
                                    Some(series) => (series, leaves.len()),
                                    None => (Vec::new(), 0),
                                })
                            }
                        }
                    })
            });
        let reads: Vec<(Vec<Series>, usize)> = futures::future::try_join_all(reads).await?;
        if listed + reads.iter().map(|(_, named)| named).sum::<usize>() > max_series {
            return Err(series_limit(max_series));
        }
        let mut per_pattern: Vec<Vec<Series>> = vec![Vec::new(); patterns.len()];
        for (i, (series, _)) in reads.into_iter().enumerate() {
            per_pattern[i % patterns.len().max(1)].extend(series);
        }
        Ok(per_pattern)
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
