//! Whisper files holding exactly the given slots: "the same data" as Tally's.
//!
//! A [`WhisperSeries`] is one metric path with one archive per Tally
//! precision (seconds per point, points kept) and the values of its slots,
//! archive by archive. [`WhisperData::write_to`] writes each series as a
//! whisper 1.1 file (`a.b.c` → `a/b/c.wsp` under the whisper directory) in
//! the format whisper's own `__readHeader` and `file_fetch` read:
//!
//! - a header: aggregation type, maximum retention (the largest seconds ×
//!   points), xFilesFactor (`f32`), archive count, then per archive its
//!   offset, seconds per point and points, all big-endian `u32`;
//! - per archive, a ring of `points` slots of (`u32` interval, `f64` value);
//!   slot 0 holds some written point and every other point sits
//!   `(interval − slot 0's interval) / step` slots after it, modulo `points`,
//!   which is where whisper's own update would have put it.
//!
//! Invariant: every archive is written directly, as given. Nothing is
//! propagated from one archive to another and nothing depends on the clock:
//! whisper's `update` would drop points older than an archive's span from
//! "now" and aggregate finer archives into coarser ones, which is exactly
//! what a copy of Tally's slices must not do. What a reader sees of a file
//! is then decided by whisper's `fetch` alone (the archive chosen by the
//! request's `now − from`, slots whose stored interval is not the one
//! expected read as `null`).
//!
//! It does not check whisper's rules for creating a file (each precision
//! dividing the next, each archive covering more time than the one before):
//! Tally's precisions need not follow them and whisper's reader does not
//! care. It does require the archives finest first, as whisper keeps them.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// How whisper would aggregate one archive into the next. Stored in the
/// header only: the files here are never aggregated, and graphite-web reads
/// the method only to merge carbon-cache's points, which the reference server
/// has none of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WhisperAggregation {
    /// `average` (whisper's default), type 1.
    #[default]
    Average,
    /// `sum`, type 2.
    Sum,
    /// `last`, type 3.
    Last,
    /// `max`, type 4.
    Max,
    /// `min`, type 5.
    Min,
    /// `avg_zero`, type 6.
    AvgZero,
    /// `absmax`, type 7.
    AbsMax,
    /// `absmin`, type 8.
    AbsMin,
}

impl WhisperAggregation {
    /// The type number whisper stores in the header.
    fn code(self) -> u32 {
        match self {
            Self::Average => 1,
            Self::Sum => 2,
            Self::Last => 3,
            Self::Max => 4,
            Self::Min => 5,
            Self::AvgZero => 6,
            Self::AbsMax => 7,
            Self::AbsMin => 8,
        }
    }
}

/// One metric path and the slots of each of its archives.
#[derive(Clone, Debug, PartialEq)]
pub struct WhisperSeries {
    /// The metric path, nodes separated by dots (`app.api.requests`). Every
    /// node must be non-empty and hold no `/` or NUL.
    pub path: String,
    /// The archives, finest first: `(seconds per point, points kept)`.
    pub archives: Vec<(u32, u32)>,
    /// The slots: `(archive index, timestamp, value)`. A timestamp is
    /// aligned down to the archive's step as whisper does; it must be after
    /// 0 and fit whisper's `u32`. Two points for one slot of one archive:
    /// the one with the later interval wins, and for the same interval the
    /// one given last (a ring buffer written in time order).
    pub points: Vec<(usize, i64, f64)>,
    /// The aggregation method in the header (default `average`).
    pub aggregation: WhisperAggregation,
    /// The xFilesFactor in the header, within 0..=1 (default 0.5, whisper's).
    pub x_files_factor: f32,
}

impl WhisperSeries {
    /// A series with these archives (finest first) and no points yet.
    pub fn new(path: impl Into<String>, archives: &[(u32, u32)]) -> Self {
        WhisperSeries {
            path: path.into(),
            archives: archives.to_vec(),
            points: Vec::new(),
            aggregation: WhisperAggregation::default(),
            x_files_factor: 0.5,
        }
    }

    /// A series of an export (Tally's `graphite::Exported`): its archives
    /// as `(seconds, slices kept)`, finest first, and its points.
    ///
    /// Panics on an archive whisper's `u32` header cannot hold.
    pub fn exported(path: String, archives: &[(u64, u64)], points: Vec<(usize, i64, f64)>) -> Self {
        let archives: Vec<(u32, u32)> = archives
            .iter()
            .map(|&(s, k)| (as_u32(s), as_u32(k)))
            .collect();
        WhisperSeries {
            points,
            ..WhisperSeries::new(path, &archives)
        }
    }

    /// Adds the value of one slot of archive `archive`.
    pub fn point(mut self, archive: usize, timestamp: i64, value: f64) -> Self {
        self.points.push((archive, timestamp, value));
        self
    }

    /// The file's path relative to the whisper directory: `a.b.c` →
    /// `a/b/c.wsp`.
    ///
    /// Panics if the path is not a valid metric path (see [`Self::path`]).
    pub fn file_path(&self) -> PathBuf {
        let nodes: Vec<&str> = self.path.split('.').collect();
        for node in &nodes {
            assert!(
                !node.is_empty() && !node.contains(['/', '\0']),
                "whisper series {:?}: every node of a metric path must be non-empty \
                 and hold no '/' or NUL",
                self.path
            );
        }
        let (last, parents) = nodes.split_last().expect("split yields a node");
        let mut file: PathBuf = parents.iter().collect();
        file.push(format!("{last}.wsp"));
        file
    }

    /// The whole whisper file.
    ///
    /// Panics on a series whisper cannot hold: no archive, a step or point
    /// count of 0, archives not finest first, a point in an archive that does
    /// not exist, a timestamp outside 1..=u32::MAX, an xFilesFactor outside
    /// 0..=1, or a file over 4 GiB.
    pub fn to_bytes(&self) -> Vec<u8> {
        let path = &self.path;
        assert!(
            !self.archives.is_empty(),
            "whisper series {path:?} has no archive"
        );
        for &(step, points) in &self.archives {
            assert!(
                step > 0 && points > 0,
                "whisper series {path:?}: archive ({step}, {points}) is empty"
            );
        }
        assert!(
            self.archives.windows(2).all(|w| w[0].0 < w[1].0),
            "whisper series {path:?}: archives must be finest first with distinct steps, got {:?}",
            self.archives
        );
        assert!(
            (0.0..=1.0).contains(&self.x_files_factor),
            "whisper series {path:?}: xFilesFactor {} is not within 0..=1",
            self.x_files_factor
        );
        for (index, p) in self.points.iter().enumerate() {
            assert!(
                p.0 < self.archives.len(),
                "whisper series {path:?}: point {index} is in archive {} of {}",
                p.0,
                self.archives.len()
            );
        }
        const METADATA: usize = 16;
        const ARCHIVE_INFO: usize = 12;
        const POINT: usize = 12;
        let header = METADATA + ARCHIVE_INFO * self.archives.len();
        let size = self
            .archives
            .iter()
            .fold(header, |n, &(_, points)| n + points as usize * POINT);
        assert!(
            u32::try_from(size).is_ok(),
            "whisper series {path:?}: a file of {size} bytes is past whisper's 4 GiB"
        );
        let max_retention = self
            .archives
            .iter()
            .map(|&(step, points)| u64::from(step) * u64::from(points))
            .max()
            .unwrap_or(0);
        let max_retention = u32::try_from(max_retention).unwrap_or_else(|_| {
            panic!("whisper series {path:?}: a span of {max_retention} s is past whisper's u32")
        });

        let mut file = vec![0u8; size];
        let mut put = |at: usize, bytes: &[u8]| file[at..at + bytes.len()].copy_from_slice(bytes);
        put(0, &self.aggregation.code().to_be_bytes());
        put(4, &max_retention.to_be_bytes());
        put(8, &self.x_files_factor.to_be_bytes());
        put(12, &(self.archives.len() as u32).to_be_bytes());
        let mut offset = header;
        let mut offsets = Vec::with_capacity(self.archives.len());
        for (i, &(step, points)) in self.archives.iter().enumerate() {
            let at = METADATA + ARCHIVE_INFO * i;
            put(at, &(offset as u32).to_be_bytes());
            put(at + 4, &step.to_be_bytes());
            put(at + 8, &points.to_be_bytes());
            offsets.push(offset);
            offset += points as usize * POINT;
        }

        for (index, &(step, points)) in self.archives.iter().enumerate() {
            let mut slots: Vec<(u32, f64)> = self
                .points
                .iter()
                .filter(|p| p.0 == index)
                .map(|&(_, timestamp, value)| {
                    let ts = u32::try_from(timestamp)
                        .ok()
                        .filter(|&t| t > 0)
                        .unwrap_or_else(|| {
                            panic!(
                                "whisper series {path:?}: timestamp {timestamp} is outside \
                                 whisper's 1..=u32::MAX (0 marks an empty slot)"
                            )
                        });
                    (ts - ts % step, value)
                })
                .collect();
            if slots.is_empty() {
                continue;
            }
            // Written in time order, so a later interval overwrites an earlier
            // one in the same slot; the sort is stable, so for one interval
            // the value given last wins.
            slots.sort_by_key(|&(interval, _)| interval);
            let base = i64::from(slots[0].0);
            for (interval, value) in slots {
                let distance = (i64::from(interval) - base) / i64::from(step);
                let slot = distance.rem_euclid(i64::from(points)) as usize;
                let at = offsets[index] + slot * POINT;
                file[at..at + 4].copy_from_slice(&interval.to_be_bytes());
                file[at + 4..at + 12].copy_from_slice(&value.to_be_bytes());
            }
        }
        file
    }
}

/// A set of whisper series: what a reference graphite-web serves.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WhisperData {
    /// The series. Two series with one path: the later one's file wins.
    pub series: Vec<WhisperSeries>,
}

/// An archive's figure as whisper's header holds it.
fn as_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or_else(|_| panic!("{n} does not fit a whisper archive header"))
}

impl FromIterator<WhisperSeries> for WhisperData {
    fn from_iter<I: IntoIterator<Item = WhisperSeries>>(series: I) -> Self {
        WhisperData {
            series: series.into_iter().collect(),
        }
    }
}

impl WhisperData {
    /// No series.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a series.
    pub fn with(mut self, series: WhisperSeries) -> Self {
        self.series.push(series);
        self
    }

    /// Writes every series under `whisper_dir` (made if missing), replacing
    /// files already there.
    ///
    /// Panics on a series whisper cannot hold ([`WhisperSeries::to_bytes`]).
    pub fn write_to(&self, whisper_dir: &Path) -> io::Result<()> {
        for series in &self.series {
            let file = whisper_dir.join(series.file_path());
            if let Some(parent) = file.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::write(&file, series.to_bytes())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(file: &[u8], at: usize) -> u32 {
        u32::from_be_bytes(file[at..at + 4].try_into().unwrap())
    }

    fn slot(file: &[u8], at: usize) -> (u32, f64) {
        (
            u32_at(file, at),
            f64::from_be_bytes(file[at + 4..at + 12].try_into().unwrap()),
        )
    }

    /// Asserts the points of the slots from `at` on, one after another.
    fn assert_slots(file: &[u8], at: usize, want: &[(u32, f64)]) {
        for (i, &point) in want.iter().enumerate() {
            assert_eq!(slot(file, at + 12 * i), point, "slot {i}");
        }
    }

    #[test]
    fn paths_become_directories() {
        let s = WhisperSeries::new("app.api.requests", &[(1, 10)]);
        assert_eq!(s.file_path(), PathBuf::from("app/api/requests.wsp"));
        let s = WhisperSeries::new("load", &[(1, 10)]);
        assert_eq!(s.file_path(), PathBuf::from("load.wsp"));
    }

    #[test]
    #[should_panic(expected = "non-empty")]
    fn an_empty_node_is_refused() {
        WhisperSeries::new("a..b", &[(1, 10)]).file_path();
    }

    #[test]
    fn the_header_is_whispers() {
        let mut s = WhisperSeries::new("a", &[(1, 120), (60, 120), (3600, 24)]);
        s.aggregation = WhisperAggregation::Sum;
        s.x_files_factor = 0.0;
        let file = s.to_bytes();
        assert_eq!(file.len(), 16 + 3 * 12 + (120 + 120 + 24) * 12);
        assert_eq!(u32_at(&file, 0), 2);
        assert_eq!(u32_at(&file, 4), 3600 * 24);
        assert_eq!(f32::from_be_bytes(file[8..12].try_into().unwrap()), 0.0);
        assert_eq!(u32_at(&file, 12), 3);
        let infos: Vec<[u32; 3]> = (0..3)
            .map(|i| {
                let at = 16 + 12 * i;
                [
                    u32_at(&file, at),
                    u32_at(&file, at + 4),
                    u32_at(&file, at + 8),
                ]
            })
            .collect();
        assert_eq!(
            infos,
            [[52, 1, 120], [52 + 1440, 60, 120], [52 + 2880, 3600, 24]]
        );
        assert!(file[52..].iter().all(|&b| b == 0), "no points, all empty");
    }

    #[test]
    fn slots_sit_where_whisper_puts_them_without_propagation() {
        let s = WhisperSeries::new("a", &[(10, 4), (60, 3)])
            .point(0, 1005, 1.0)
            .point(0, 1023, 2.0)
            .point(0, 990, 0.5)
            .point(1, 960, 7.0);
        let file = s.to_bytes();
        let a0 = 16 + 24;
        // Base: the earliest interval, 990, in slot 0; 1000 and 1020 follow.
        assert_slots(&file, a0, &[(990, 0.5), (1000, 1.0), (0, 0.0), (1020, 2.0)]);
        // The coarse archive holds its own point only.
        let a1 = a0 + 4 * 12;
        assert_eq!(slot(&file, a1), (960, 7.0));
        assert!(file[a1 + 12..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_later_interval_overwrites_its_slot_and_the_last_value_wins() {
        let s = WhisperSeries::new("a", &[(1, 3)])
            .point(0, 100, 1.0)
            .point(0, 103, 2.0)
            .point(0, 101, 3.0)
            .point(0, 101, 4.0);
        let file = s.to_bytes();
        assert_slots(&file, 16 + 12, &[(103, 2.0), (101, 4.0), (0, 0.0)]);
    }

    #[test]
    #[should_panic(expected = "outside whisper's")]
    fn a_negative_timestamp_is_refused() {
        WhisperSeries::new("a", &[(1, 3)])
            .point(0, -5, 1.0)
            .to_bytes();
    }

    #[test]
    #[should_panic(expected = "archive 2 of 2")]
    fn a_point_in_a_missing_archive_is_refused() {
        WhisperSeries::new("a", &[(1, 3), (2, 3)])
            .point(2, 5, 1.0)
            .to_bytes();
    }
}
