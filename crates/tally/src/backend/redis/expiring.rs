//! The expiring layout's write plan: which hash (chunk) each delta of a
//! batch goes to, how long that chunk lives, and each series' `ends@e`
//! score (see [`super::layout`] for the keys and the chunk math).
//!
//! Pure: the clock's `now` comes in. A chunk whose slices have all left
//! the window at `now` is not written (a read would never return it, and
//! Redis would drop it at once); a slice more than one chunk ahead of the
//! current one is refused, since reads look no further. For the other
//! layouts the same grouping is one hash per (series, precision), so the
//! store builds every call from one plan.

use crate::clock::Timestamp;
use crate::engine::{CellDelta, SeriesWrite, Space};
use crate::error::{Error, Result};

use super::layout::{ChunkMath, ENDS_SCALE, NO_MARK, end_score, spans_nest};

/// One hash a call writes: a run of one series' cells in one hash.
#[derive(Debug)]
pub(crate) struct Group<'a> {
    /// Index of the series in the call's writes.
    pub series: usize,
    /// The cells, all of one precision (and one chunk); in the compact
    /// layout's one hash per series, every precision's.
    pub cells: &'a [CellDelta],
    /// The chunk's start (expiring layout; 0 otherwise).
    pub chunk: u64,
    /// Seconds the chunk lives from now (expiring layout; 0 otherwise).
    pub ttl: u64,
    /// The marks of the finest chunks this chunk holds, the first (modulo
    /// [`NO_MARK`]) and how many: when the series' stored `ends@e` score
    /// carries one of them, the write that stored it wrote this chunk and
    /// gave it its expiry, so a write entering new chunks sets the expiry
    /// of the new ones only. `(0, 0)` when marks cannot tell (expiring
    /// layout; see [`vouching_marks`]).
    pub marks: (u64, u64),
}

/// A series' `ends@e` entry for this write (expiring layout).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct End {
    /// The score: see [`end_score`].
    pub score: u64,
    /// True when the write must set its chunks' expiry whatever the
    /// stored score.
    pub must: bool,
}

/// The hashes of one call, in KEYS order, grouped by series.
#[derive(Debug, Default)]
pub(crate) struct Groups<'a> {
    /// Every hash, series by series.
    pub list: Vec<Group<'a>>,
    /// Per series, its end (expiring layout; empty otherwise).
    pub ends: Vec<End>,
    /// Per series, the range of `list` that is its own.
    spans: Vec<(usize, usize)>,
}

impl<'a> Groups<'a> {
    /// The default and ria layouts: one hash per (series, precision).
    pub fn by_precision(writes: &[&'a SeriesWrite]) -> Self {
        let mut groups = Groups::default();
        for (i, w) in writes.iter().enumerate() {
            let first = groups.list.len();
            for cells in w.cells.chunk_by(|a, b| a.precision == b.precision) {
                groups.list.push(Group {
                    series: i,
                    cells,
                    chunk: 0,
                    ttl: 0,
                    marks: (0, 0),
                });
            }
            groups.spans.push((first, groups.list.len()));
        }
        groups
    }

    /// The compact layout: one hash per series, all its cells.
    pub fn by_series(writes: &[&'a SeriesWrite]) -> Self {
        let mut groups = Groups::default();
        for (i, w) in writes.iter().enumerate() {
            let first = groups.list.len();
            if !w.cells.is_empty() {
                groups.list.push(Group {
                    series: i,
                    cells: &w.cells,
                    chunk: 0,
                    ttl: 0,
                    marks: (0, 0),
                });
            }
            groups.spans.push((first, groups.list.len()));
        }
        groups
    }

    /// Series `i`'s hashes with their index in [`Groups::list`].
    pub fn of_series(&self, i: usize) -> impl Iterator<Item = (usize, &Group<'a>)> {
        let (from, to) = self.spans[i];
        (from..to).map(move |k| (k, &self.list[k]))
    }
}

/// The chunk math of `space` at `precision`, or why the expiring layout
/// cannot keep it.
pub(crate) fn math(space: &Space, precision: u64) -> Result<ChunkMath> {
    match space.precision(precision) {
        Some(r) if r.keep > 0 => Ok(ChunkMath::new(*r)),
        _ => Err(Error::Config(format!(
            "the expiring layout needs how many slices space {} keeps at {precision} s \
             (its chunks and their expiry follow from it)",
            space.id
        ))),
    }
}

/// The expiring layout: one hash per (series, precision, chunk), the
/// chunks that already expired left out, each series' end score.
pub(crate) fn groups<'a>(
    space: &Space,
    writes: &[&'a SeriesWrite],
    now: Timestamp,
) -> Result<Groups<'a>> {
    let maths = space
        .precisions
        .iter()
        .map(|r| math(space, r.seconds))
        .collect::<Result<Vec<_>>>()?;
    let nest = spans_nest(&space.precisions);
    let finest = maths.first().map(|m| m.precision.seconds);
    let marks = |m: &ChunkMath, chunk: u64| match maths.first() {
        Some(f) if vouching_marks(&maths, nest) => {
            ((chunk / f.span()) % NO_MARK, m.span() / f.span())
        }
        _ => (0, 0),
    };
    let now_secs = now.whole_secs();
    let mut groups = Groups::default();
    for (i, w) in writes.iter().enumerate() {
        let first = groups.list.len();
        let mut end = 0u64;
        let mut dropped = false;
        let mut finest_chunks = Vec::new();
        let mut precisions = 0usize;
        for run in w.cells.chunk_by(|a, b| a.precision == b.precision) {
            let m = math(space, run[0].precision)?;
            precisions += 1;
            let ahead = m
                .chunk_of(m.precision.slice_start(now))
                .saturating_add(m.span());
            for cells in run.chunk_by(|a, b| m.chunk_of(a.slice) == m.chunk_of(b.slice)) {
                let chunk = m.chunk_of(cells[0].slice);
                if chunk > ahead {
                    return Err(Error::InvalidInput(format!(
                        "{}: the slice starting at {} is more than one chunk ({} s) ahead of \
                         now ({now_secs}); the expiring layout keeps slices up to the chunk \
                         after the current one",
                        w.name,
                        cells[0].slice,
                        m.span()
                    )));
                }
                let expiry = m.expiry(chunk);
                if expiry <= now_secs {
                    dropped = true;
                    continue;
                }
                if Some(m.precision.seconds) == finest {
                    finest_chunks.push(chunk);
                }
                end = end.max(expiry);
                groups.list.push(Group {
                    series: i,
                    cells,
                    chunk,
                    ttl: expiry - now_secs,
                    marks: marks(&m, chunk),
                });
            }
        }
        // The write proves its chunks exist with an expiry only when it
        // wrote every precision, dropped nothing, and its finest cells are
        // in one chunk (see `end_score`).
        let proof = (!dropped && precisions == maths.len() && finest_chunks.len() == 1)
            .then(|| (maths[0], finest_chunks[0]));
        let (score, must) = end_score(end, proof, nest);
        groups.ends.push(End { score, must });
        groups.spans.push((first, groups.list.len()));
    }
    Ok(groups)
}

/// True when a series' stored mark (a finest chunk's number modulo
/// [`NO_MARK`]) names one finest chunk among those a write can meet: the
/// spans nest, and the finest chunks between the stored write (whose data
/// has not all expired: at most about two of the longest spans ago, plus a
/// chunk ahead) and this one (at most one chunk ahead of now) are fewer
/// than the marks.
pub(crate) fn vouching_marks(maths: &[ChunkMath], nest: bool) -> bool {
    let (Some(finest), Some(longest)) = (
        maths.iter().map(ChunkMath::span).min(),
        maths.iter().map(ChunkMath::span).max(),
    ) else {
        return false;
    };
    nest && finest > 0 && longest / finest < (NO_MARK - 4) / 4
}

/// The `ends@e` scores below which a series' data has all expired at `now`
/// (its end is at or before `now`).
pub(crate) fn prune_below(now: Timestamp) -> u64 {
    now.whole_secs()
        .saturating_add(1)
        .saturating_mul(ENDS_SCALE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Value;

    #[test]
    fn the_apply_script_knows_the_score_layout() {
        let lua = include_str!("lua/engine_apply.lua");
        assert!(
            lua.contains(&format!(
                "local ENDS_SCALE, NO_MARK = {ENDS_SCALE}, {NO_MARK}"
            )),
            "engine_apply.lua's constants differ from layout.rs's"
        );
    }

    /// A write of 1 into each (precision, slice) of `cells`.
    fn write(name: &str, cells: &[(u64, u64)]) -> SeriesWrite {
        super::super::engine::testing::write(name, cells, &Value::Sum(1))
    }

    #[test]
    fn writes_split_into_chunks_with_their_ttl_and_expired_chunks_go() {
        let space = Space::counters(&[1, 10], 3);
        let now = Timestamp::from_secs(100).unwrap();
        // 1 s chunks are 3 s long: slice 97 is in [96, 99), expiring at
        // 98 + 3 = 101; slice 99 in [99, 102). 10 s chunks: [90, 120).
        let w = write("a", &[(1, 97), (1, 99), (10, 90)]);
        let g = groups(&space, &[&w], now).unwrap();
        let got: Vec<(u64, u64, u64)> = g
            .list
            .iter()
            .map(|g| (g.cells[0].precision, g.chunk, g.ttl))
            .collect();
        assert_eq!(got, vec![(1, 96, 1), (1, 99, 4), (10, 90, 40)]);
        // Two finest chunks: no proof.
        assert!(g.ends[0].must);
        // One finest chunk and every precision: a mark.
        let w = write("a", &[(1, 99), (1, 100), (10, 90)]);
        let g = groups(&space, &[&w], now).unwrap();
        assert!(!g.ends[0].must);
        assert_eq!(g.ends[0].score / ENDS_SCALE, 140);
        // A chunk that already expired is left out, and proves nothing.
        let w = write("a", &[(1, 90), (1, 99), (10, 90)]);
        let g = groups(&space, &[&w], now).unwrap();
        assert_eq!(g.list.len(), 2);
        assert!(g.ends[0].must);
    }

    #[test]
    fn slices_beyond_the_next_chunk_are_refused() {
        let space = Space::counters(&[1], 3);
        let now = Timestamp::from_secs(100).unwrap();
        // Current chunk [99, 102), next [102, 105).
        assert!(groups(&space, &[&write("a", &[(1, 104)])], now).is_ok());
        let e = groups(&space, &[&write("a", &[(1, 105)])], now).unwrap_err();
        assert!(e.is_bad_input());
        assert!(
            e.to_string().contains("more than one chunk (3 s) ahead"),
            "{e}"
        );
        let unknown = Space::counters(&[1], 0);
        let e = groups(&unknown, &[&write("a", &[(1, 99)])], now).unwrap_err();
        assert!(e.to_string().contains("needs how many slices"), "{e}");
    }
}
