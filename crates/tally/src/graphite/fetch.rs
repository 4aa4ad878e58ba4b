//! A render's reads: the names each pattern matches in each family, then
//! every family's slices for every pattern, in one store call per store
//! (on SQLite one blocking call a render instead of two per family and
//! pattern).

use std::borrow::Cow;
use std::sync::Arc;

use tally_graphite::{Error as GError, Fetch, Glob, Result as GResult, Series, Window};

use super::{Family, Source, path, store_error};
use crate::engine::{HeldReads, SliceRead, SliceSel, SliceStore, Slices};
use crate::name::Name;

/// The names a pattern matches in a family, each with its matching leaves.
pub(super) enum Matched {
    /// Found by listing.
    Listed(Vec<(Name, Vec<usize>)>),
    /// The one name the pattern names outright: a series if the store
    /// holds it, checked as it is read (one round trip for both).
    Named(Name, Vec<usize>),
}

/// The error of a render past its limit of series.
pub(super) fn series_limit(max: usize) -> GError {
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

/// One family's read for one pattern, planned before any store call.
struct Plan<'a> {
    family: &'a Family,
    pattern: &'a str,
    /// The names matched, each with its matching leaves.
    names: Cow<'a, [(Name, Vec<usize>)]>,
    /// The names alone, as the store reads them.
    only: Vec<Name>,
    /// A pattern naming its one series outright: whether the store holds
    /// it is learnt with the read.
    named: bool,
    /// What whisper reads for the render's range; `None` when it reads
    /// nothing (or there is no name to read).
    window: Option<Window>,
    /// The window's step, the one precision read.
    precision: [u64; 1],
}

impl<'a> Plan<'a> {
    fn new(
        family: &'a Family,
        pattern: &'a str,
        matched: &'a Matched,
        (from, until, now): (i64, i64, i64),
    ) -> Self {
        let (names, named) = match matched {
            Matched::Listed(names) => (Cow::Borrowed(names.as_slice()), false),
            Matched::Named(name, leaves) => {
                (Cow::Owned(vec![(name.clone(), leaves.clone())]), true)
            }
        };
        let window = tally_graphite::window(&family.archives, from, until, now)
            .filter(|w| !names.is_empty() && w.end > w.start);
        Plan {
            family,
            pattern,
            only: names.iter().map(|(n, _)| n.clone()).collect(),
            names,
            named,
            precision: [window.as_ref().map_or(0, |w| w.step as u64)],
            window,
        }
    }

    /// The store's read of the window's slices, when there is one.
    fn read(&self) -> Option<SliceRead<'_>> {
        let w = self.window.as_ref()?;
        let selected = SliceSel::Range {
            from: w.start.max(0) as u64,
            to: (w.end - 1).max(0) as u64,
        };
        Some(SliceRead::new(&self.family.space, &self.only, &self.precision).slices(selected))
    }

    /// The series of the names read (`held`: each name's slices at the
    /// window's step, `None` for a name that is no series): `None` for a
    /// named pattern whose name is no series; a listed name that is no
    /// longer one reads as empty.
    fn series(&self, held: HeldReads) -> Option<Vec<Series>> {
        if self.named && held.iter().any(Option::is_none) {
            return None;
        }
        let Some(window) = &self.window else {
            return Some(Vec::new());
        };
        let step = window.step;
        let slots = ((window.end - window.start) / step) as usize;
        let mut out = Vec::new();
        for ((name, leaves), per) in self.names.iter().zip(held) {
            let slices: Slices = per.and_then(|mut p| p.pop()).unwrap_or_default();
            let escaped = path::escape(name.as_str());
            for &l in leaves {
                let leaf = &self.family.shape.leaves[l];
                let mut values = vec![None; slots];
                for (start, value) in &slices {
                    let offset = *start as i64 - window.start;
                    if offset >= 0 && offset % step == 0 && ((offset / step) as usize) < slots {
                        values[(offset / step) as usize] = (leaf.read)(value, step as u64);
                    }
                }
                let path = path::join(&[&self.family.shape.root, &escaped, &leaf.node]);
                out.push(Series::fetched(
                    &path,
                    self.pattern,
                    window.start,
                    window.end,
                    step,
                    values,
                ));
            }
        }
        Some(out)
    }
}

impl Source {
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
            .walk(family.name_prefix(glob), None, |name| {
                let escaped = path::escape(name);
                let nodes: Vec<&str> = escaped.split('.').collect();
                if nodes.len() != name_nodes
                    || !nodes
                        .iter()
                        .enumerate()
                        .all(|(i, n)| glob.node_matches(root + i, n))
                {
                    return Ok(());
                }
                count(leaves.len())?;
                found.push((Name::new(name).map_err(store_error)?, leaves.clone()));
                Ok(())
            })
            .await?;
        Ok(Matched::Listed(found))
    }

    /// The series of every pattern: per family (all at once) the names of
    /// every pattern; then the limit over every family; then every read,
    /// in one call per store ([`SliceStore::read_many`]).
    pub(super) async fn fetch_series(&self, fetch: Fetch<'_>) -> GResult<Vec<Vec<Series>>> {
        let Fetch {
            patterns,
            from,
            until,
            now,
            max_series,
        } = fetch;
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
        // One plan per family and pattern, in that order.
        let plans: Vec<Plan<'_>> = self
            .families
            .iter()
            .zip(&matched)
            .flat_map(|(family, (wanted, _))| {
                patterns
                    .iter()
                    .zip(wanted)
                    .map(move |(glob, m)| Plan::new(family, glob.text(), m, (from, until, now)))
            })
            .collect();
        let read = read_plans(&plans).await?;
        let mut named = 0;
        let mut per_pattern: Vec<Vec<Series>> = vec![Vec::new(); patterns.len()];
        for (i, (plan, series)) in plans.iter().zip(read).enumerate() {
            if let Some(series) = series {
                if plan.named {
                    named += plan.names[0].1.len();
                }
                per_pattern[i % patterns.len().max(1)].extend(series);
            }
        }
        if listed + named > max_series {
            return Err(series_limit(max_series));
        }
        Ok(per_pattern)
    }
}

/// The series of each plan ([`Plan::series`]): the plans with a window
/// read in one call per store (the same `Arc`), all stores at once, with a
/// named plan without one asking whether its name is a series.
async fn read_plans(plans: &[Plan<'_>]) -> GResult<Vec<Option<Vec<Series>>>> {
    let mut stores: Vec<(&Arc<dyn SliceStore>, Vec<usize>)> = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        if plan.window.is_none() {
            continue;
        }
        let store = &plan.family.store;
        match stores.iter_mut().find(|(s, _)| Arc::ptr_eq(s, store)) {
            Some((_, group)) => group.push(i),
            None => stores.push((store, vec![i])),
        }
    }
    let calls = stores.iter().map(|(store, group)| async move {
        let reads: Vec<(SliceRead<'_>, bool)> = group
            .iter()
            .filter_map(|&i| Some((plans[i].read()?, plans[i].named)))
            .collect();
        store.read_many(&reads).await
    });
    let checks = plans
        .iter()
        .filter(|p| p.named && p.window.is_none())
        .map(|p| p.family.store.contains(&p.family.space, &p.only));
    let (reads, checks) = futures::join!(
        futures::future::try_join_all(calls),
        futures::future::try_join_all(checks)
    );
    let (reads, checks) = (reads.map_err(store_error)?, checks.map_err(store_error)?);
    let mut held: Vec<Option<HeldReads>> = plans.iter().map(|_| None).collect();
    for ((_, group), answers) in stores.iter().zip(reads) {
        for (&i, answer) in group.iter().zip(answers) {
            held[i] = Some(answer);
        }
    }
    let mut checks = checks.into_iter();
    Ok(plans
        .iter()
        .zip(held)
        .map(|(plan, held)| match held {
            Some(held) => plan.series(held),
            None if plan.named => {
                let is = checks.next().is_some_and(|c| c.iter().all(|&h| h));
                is.then(Vec::new)
            }
            None => Some(Vec::new()),
        })
        .collect())
}
