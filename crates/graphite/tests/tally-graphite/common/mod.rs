//! An in-memory store with whisper's semantics, for the evaluation tests: each leaf is a
//! "file" of archives (finest first), each archive a ring of `points` slots whose base is
//! the first point written, a slot answering only for the timestamp it holds (as
//! `__archive_fetch` reads it). Paths may also be bare directories (branches).
#![allow(dead_code)]

pub mod fixture;
pub mod replay;

use std::collections::{BTreeMap, BTreeSet};

use tally_graphite::{
    Archive, Args, Context, Error, Fetch, Function, Glob, Node, Result, Series, Signature, Store,
    Value, window,
};

/// An answer's body as text.
pub fn text(answer: &tally_graphite::Answer) -> String {
    String::from_utf8_lossy(&answer.body).into_owned()
}

/// Asserts that an answer's body starts with `prefix`.
pub fn assert_body_starts(answer: &tally_graphite::Answer, prefix: &str) {
    let body = text(answer);
    assert!(body.starts_with(prefix), "{body}");
}

/// Asserts that an answer's body contains `part`.
pub fn assert_body_contains(answer: &tally_graphite::Answer, part: &str) {
    let body = text(answer);
    assert!(body.contains(part), "{body}");
}

/// An embedder's function that needs nothing of its context: its signature, and its body
/// on the validated arguments.
pub struct PlainFunction(pub Signature, pub fn(Args) -> Result<Value>);

#[async_trait::async_trait]
impl Function for PlainFunction {
    fn signature(&self) -> &Signature {
        &self.0
    }

    async fn call(&self, _cx: &Context<'_>, args: Args) -> Result<Value> {
        (self.1)(args)
    }
}

/// One archive's ring.
#[derive(Debug, Clone)]
pub struct Ring {
    pub archive: Archive,
    base: Option<i64>,
    slots: Vec<Option<(i64, f64)>>,
}

impl Ring {
    fn new(archive: Archive) -> Ring {
        Ring {
            archive,
            base: None,
            slots: vec![None; archive.points.max(0) as usize],
        }
    }

    fn position(&self, base: i64, ts: i64) -> usize {
        ((ts - base).div_euclid(self.archive.step)).rem_euclid(self.archive.points) as usize
    }

    /// Writes points (timestamps floored to the step); the earliest becomes the base when
    /// the ring is empty, as whisper's first write does.
    pub fn write(&mut self, points: &[(i64, f64)]) {
        let step = self.archive.step;
        let mut points: Vec<(i64, f64)> = points
            .iter()
            .map(|&(t, v)| (t - t.rem_euclid(step), v))
            .collect();
        points.sort_by_key(|p| p.0);
        let Some(first) = points.first() else { return };
        let base = *self.base.get_or_insert(first.0);
        for (t, v) in points {
            let at = self.position(base, t);
            self.slots[at] = Some((t, v));
        }
    }

    fn read(&self, ts: i64) -> Option<f64> {
        let base = self.base?;
        match self.slots[self.position(base, ts)] {
            Some((t, v)) if t == ts => Some(v),
            _ => None,
        }
    }
}

/// Files and directories by dotted path.
#[derive(Debug, Clone, Default)]
pub struct MemStore {
    pub files: BTreeMap<String, Vec<Ring>>,
    pub dirs: BTreeSet<String>,
}

impl MemStore {
    pub fn file(&mut self, path: &str, archives: &[(i64, i64)]) -> &mut Vec<Ring> {
        self.files.entry(path.to_owned()).or_insert_with(|| {
            archives
                .iter()
                .map(|&(step, points)| Ring::new(Archive { step, points }))
                .collect()
        })
    }

    pub fn dir(&mut self, path: &str) {
        self.dirs.insert(path.to_owned());
    }

    /// Every path a node can have: files, directories and all their ancestors.
    fn branches(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for path in self.files.keys().chain(self.dirs.iter()) {
            let parts: Vec<&str> = path.split('.').collect();
            for n in 1..parts.len() {
                out.insert(parts[..n].join("."));
            }
        }
        out.extend(self.dirs.iter().cloned());
        out
    }
}

#[async_trait::async_trait]
impl Store for MemStore {
    async fn fetch(&self, fetch: Fetch<'_>) -> Result<Vec<Vec<Series>>> {
        let mut out = Vec::new();
        let mut count = 0;
        for pattern in fetch.patterns {
            let mut list = Vec::new();
            for (path, rings) in &self.files {
                if !pattern.matches(path) {
                    continue;
                }
                count += 1;
                if count > fetch.max_series {
                    return Err(Error::limit(format!(
                        "more than {} series",
                        fetch.max_series
                    )));
                }
                let archives: Vec<Archive> = rings.iter().map(|r| r.archive).collect();
                let Some(w) = window(&archives, fetch.from, fetch.until, fetch.now) else {
                    continue;
                };
                let ring = &rings[w.archive];
                let values = w.timestamps().map(|t| ring.read(t)).collect();
                list.push(Series::fetched(
                    path,
                    pattern.text(),
                    w.start,
                    w.end,
                    w.step,
                    values,
                ));
            }
            out.push(list);
        }
        Ok(out)
    }

    async fn find(&self, pattern: &Glob, max: usize) -> Result<Vec<Node>> {
        let depth = pattern.depth();
        let mut nodes = Vec::new();
        let branches = self.branches();
        for path in branches.iter() {
            if path.split('.').count() == depth && pattern.matches(path) {
                nodes.push(Node {
                    path: path.clone(),
                    leaf: false,
                });
            }
        }
        for path in self.files.keys() {
            if path.split('.').count() == depth && pattern.matches(path) {
                nodes.push(Node {
                    path: path.clone(),
                    leaf: true,
                });
            }
        }
        if nodes.len() > max {
            return Err(Error::limit(format!("more than {max} nodes")));
        }
        Ok(nodes)
    }
}
