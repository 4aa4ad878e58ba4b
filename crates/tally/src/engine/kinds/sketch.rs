//! DDSketch: a quantile sketch with relative accuracy, mergeable exactly.
//!
//! A positive value `x` falls in bucket `i = ceil(ln x / ln γ)`, with
//! `γ = (1 + α) / (1 − α)`: bucket `i` holds `(γ^(i−1), γ^i]` and reports
//! `2γ^i / (γ + 1)`, within `α` (relative) of every value in it. Negative
//! values go, by magnitude, into a mirrored store; values whose magnitude
//! is below [`MIN_INDEXABLE`] (the smallest normal double: only zero and
//! subnormals) into a zero count, reported as 0. Sketches of the same `α`
//! merge exactly by adding bucket counts (Masson, Rim, Lee: "DDSketch",
//! VLDB 2019).
//!
//! Storage is dense: per store, the index of its first bucket and the
//! counts from there to its last non-empty bucket (both ends are always
//! non-empty, so equal sketches have equal storage). A store never spans
//! more than `max_buckets` indexes: past that, the buckets of the *lowest
//! values* are collapsed into the lowest bucket kept (for the positive
//! store its lowest indexes, for the negative store its highest ones, the
//! most negative values). Quantiles whose rank falls above the collapsed
//! mass keep the accuracy `α`; ranks inside it report the lowest bucket kept
//! (an over-estimate). The kept window only depends on the store's highest
//! (positive) or lowest (negative) index, so collapsing commutes with merging:
//! merge stays associative and commutative with a bound. The bound applies
//! per store (a sketch holds at most `2 × max_buckets` counts); with sketches
//! of different bounds, the smaller bound wins.
//!
//! This module owns the bucket math and the count bound (2^53), not the
//! encoding: the statistics kind encodes the sketch inside its blob.

use std::cell::Cell;

use crate::error::{Error, Result};

/// The default relative accuracy.
pub const DEFAULT_ALPHA: f64 = 0.01;
/// The finest relative accuracy accepted.
pub const MIN_ALPHA: f64 = 0.0001;
/// The coarsest relative accuracy accepted.
pub const MAX_ALPHA: f64 = 0.1;
/// The default bound on the buckets of each store.
pub const DEFAULT_MAX_BUCKETS: u32 = 2048;
/// The smallest bound on the buckets of a store accepted.
pub const MIN_MAX_BUCKETS: u32 = 16;
/// The largest bound on the buckets of a store accepted.
pub const MAX_MAX_BUCKETS: u32 = 1 << 16;
/// Magnitudes below this (zero and subnormal doubles) are counted as zero.
pub const MIN_INDEXABLE: f64 = f64::MIN_POSITIVE;
/// No double has a bucket index beyond ±MAX_INDEX, even at [`MIN_ALPHA`]
/// (|ln x| < 710 and ln γ > 2e-4).
const MAX_INDEX: i32 = 4_000_000;
/// The most observations a sketch (and a statistic) counts: 2^53, so that
/// counts stay exact as doubles in Redis's Lua.
pub const MAX_COUNT: u64 = 1 << 53;

/// A sketch's accuracy and size bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SketchSettings {
    alpha: f64,
    max_buckets: u32,
    gamma: f64,
    ln_gamma: f64,
}

impl Default for SketchSettings {
    fn default() -> Self {
        Self::new(DEFAULT_ALPHA, DEFAULT_MAX_BUCKETS).expect("the defaults are valid")
    }
}

impl SketchSettings {
    /// Settings with relative accuracy `alpha` ([`MIN_ALPHA`] to
    /// [`MAX_ALPHA`]) and at most `max_buckets` buckets per store
    /// ([`MIN_MAX_BUCKETS`] to [`MAX_MAX_BUCKETS`]).
    pub fn new(alpha: f64, max_buckets: u32) -> Result<Self> {
        if !(MIN_ALPHA..=MAX_ALPHA).contains(&alpha) {
            return Err(Error::Config(format!(
                "the relative accuracy of a quantile sketch must be {MIN_ALPHA} to {MAX_ALPHA}, got {alpha}"
            )));
        }
        if !(MIN_MAX_BUCKETS..=MAX_MAX_BUCKETS).contains(&max_buckets) {
            return Err(Error::Config(format!(
                "the bucket bound of a quantile sketch must be {MIN_MAX_BUCKETS} to {MAX_MAX_BUCKETS}, got {max_buckets}"
            )));
        }
        let gamma = (1.0 + alpha) / (1.0 - alpha);
        Ok(SketchSettings {
            alpha,
            max_buckets,
            gamma,
            ln_gamma: gamma.ln(),
        })
    }

    /// [`SketchSettings::new`], remembering the last settings made here on
    /// this thread: each stored statistic carries its settings, and a read
    /// decodes hundreds of them, all alike (`new` takes a logarithm).
    pub(crate) fn remembered(alpha: f64, max_buckets: u32) -> Result<Self> {
        thread_local! {
            static LAST: Cell<Option<SketchSettings>> = const { Cell::new(None) };
        }
        LAST.with(|last| match last.get() {
            Some(s) if s.alpha.to_bits() == alpha.to_bits() && s.max_buckets == max_buckets => {
                Ok(s)
            }
            _ => {
                let s = Self::new(alpha, max_buckets)?;
                last.set(Some(s));
                Ok(s)
            }
        })
    }

    /// The relative accuracy α.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// The bound on the buckets of each store.
    pub fn max_buckets(&self) -> u32 {
        self.max_buckets
    }

    /// The bucket of a magnitude `m >= MIN_INDEXABLE`.
    fn index(&self, m: f64) -> i32 {
        // |ln m| <= 745 and ln γ >= 2e-4: the index fits an i32 easily.
        (m.ln() / self.ln_gamma).ceil() as i32
    }

    /// The value bucket `i` reports: 2γ^i / (γ + 1), within α of all of
    /// `(γ^(i−1), γ^i]`; at most `f64::MAX` (the bucket of the largest
    /// doubles would report just past it), which only brings it closer.
    pub fn bucket_value(&self, i: i32) -> f64 {
        ((f64::from(i) * self.ln_gamma).exp() * (2.0 / (self.gamma + 1.0))).min(f64::MAX)
    }
}

/// Which end of a store's indexes survives collapsing.
#[derive(Clone, Copy, Debug)]
enum Keep {
    /// Keep the highest indexes (the positive store: collapse low values).
    High,
    /// Keep the lowest indexes (the negative store, by magnitude: collapse
    /// the most negative values).
    Low,
}

/// The dense counts of one store: `counts[k]` is bucket `first + k`; empty,
/// or with non-zero counts at both ends.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Store {
    first: i32,
    counts: Vec<u64>,
}

impl Store {
    /// A store from its first index and counts, checked to be canonical
    /// (non-zero ends, at most `max` buckets, indexes within i32).
    pub(crate) fn from_parts(first: i32, counts: Vec<u64>, max: u32) -> Result<Self, String> {
        if counts.is_empty() {
            return if first == 0 {
                Ok(Store::default())
            } else {
                Err(format!("an empty store starts at {first}, not 0"))
            };
        }
        if counts.len() > max as usize {
            return Err(format!(
                "a store spans {} buckets, more than its bound {max}",
                counts.len()
            ));
        }
        if counts[0] == 0 || counts[counts.len() - 1] == 0 {
            return Err("a store has an empty bucket at one end".into());
        }
        let last = i64::from(first) + counts.len() as i64 - 1;
        if i64::from(first) < -i64::from(MAX_INDEX) || last > i64::from(MAX_INDEX) {
            return Err(format!(
                "a store's buckets {first}..={last} go past the indexes of any double"
            ));
        }
        Ok(Store { first, counts })
    }

    /// The index of the first bucket (0 when empty).
    pub(crate) fn first(&self) -> i32 {
        self.first
    }

    /// The counts from the first bucket to the last.
    pub(crate) fn counts(&self) -> &[u64] {
        &self.counts
    }

    fn last(&self) -> i32 {
        self.first + self.counts.len() as i32 - 1
    }

    fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The window [lo, hi] kept for a store spanning [lo, hi] under `max`.
    fn window(lo: i32, hi: i32, max: u32, keep: Keep) -> (i32, i32) {
        let span = i64::from(hi) - i64::from(lo) + 1;
        if span <= i64::from(max) {
            return (lo, hi);
        }
        let keep_span = max as i32 - 1;
        match keep {
            Keep::High => (hi - keep_span, hi),
            Keep::Low => (lo, lo + keep_span),
        }
    }

    /// Re-lays the counts over [lo, hi], folding any bucket outside into the
    /// nearest end.
    fn reshape(&mut self, lo: i32, hi: i32) {
        if self.counts.is_empty() {
            self.first = lo;
            self.counts = vec![0; (hi - lo + 1) as usize];
            return;
        }
        if lo == self.first && hi == self.last() {
            return;
        }
        if lo == self.first && hi > self.last() {
            self.counts.resize((hi - lo + 1) as usize, 0);
            return;
        }
        let mut counts = vec![0; (hi - lo + 1) as usize];
        for (k, &c) in self.counts.iter().enumerate() {
            let i = (self.first + k as i32).clamp(lo, hi);
            counts[(i - lo) as usize] += c;
        }
        self.first = lo;
        self.counts = counts;
    }

    fn add(&mut self, i: i32, w: u64, max: u32, keep: Keep) {
        let (lo, hi) = if self.counts.is_empty() {
            (i, i)
        } else {
            Self::window(self.first.min(i), self.last().max(i), max, keep)
        };
        self.reshape(lo, hi);
        self.counts[(i.clamp(lo, hi) - lo) as usize] += w;
    }

    fn merge(&mut self, other: &Store, max: u32, keep: Keep) {
        if other.counts.is_empty() {
            // Still apply a smaller bound that `other` may have brought.
            if !self.counts.is_empty() {
                let (lo, hi) = Self::window(self.first, self.last(), max, keep);
                self.reshape(lo, hi);
            }
            return;
        }
        let (lo, hi) = if self.counts.is_empty() {
            (other.first, other.last())
        } else {
            (self.first.min(other.first), self.last().max(other.last()))
        };
        let (lo, hi) = Self::window(lo, hi, max, keep);
        self.reshape(lo, hi);
        for (k, &c) in other.counts.iter().enumerate() {
            let i = (other.first + k as i32).clamp(lo, hi);
            self.counts[(i - lo) as usize] += c;
        }
    }
}

/// A DDSketch: counts per logarithmic bucket of positive and negative
/// values, and a count of zeros. Its default is empty, with the default
/// settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sketch {
    settings: SketchSettings,
    count: u64,
    zeros: u64,
    positive: Store,
    negative: Store,
}

impl Sketch {
    /// An empty sketch.
    pub fn new(settings: SketchSettings) -> Self {
        Sketch {
            settings,
            count: 0,
            zeros: 0,
            positive: Store::default(),
            negative: Store::default(),
        }
    }

    /// A sketch from its parts, checked (for decoding).
    pub(crate) fn from_parts(
        settings: SketchSettings,
        zeros: u64,
        positive: Store,
        negative: Store,
    ) -> Result<Self, String> {
        let count = [zeros, positive.total(), negative.total()]
            .iter()
            .try_fold(0u64, |a, &b| a.checked_add(b))
            .filter(|&c| c <= MAX_COUNT)
            .ok_or_else(|| "its bucket counts add up past 2^53".to_string())?;
        Ok(Sketch {
            settings,
            count,
            zeros,
            positive,
            negative,
        })
    }

    /// The accuracy and bound.
    pub fn settings(&self) -> SketchSettings {
        self.settings
    }

    /// The number of observations counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The count of zeros (magnitudes below [`MIN_INDEXABLE`]).
    pub fn zeros(&self) -> u64 {
        self.zeros
    }

    pub(crate) fn positive(&self) -> &Store {
        &self.positive
    }

    pub(crate) fn negative(&self) -> &Store {
        &self.negative
    }

    /// Fails, naming the numbers, when counting `more` would pass 2^53.
    pub(crate) fn check_room(&self, more: u64) -> Result<()> {
        match self.count.checked_add(more) {
            Some(n) if n <= MAX_COUNT => Ok(()),
            _ => Err(Error::InvalidCount(format!(
                "counting {more} more observations on top of {} would pass 2^53; nothing was recorded",
                self.count
            ))),
        }
    }

    /// Counts `w` observations of `x`. Fails, changing nothing, when `x`
    /// is not finite, `w` is 0 or the count would pass 2^53.
    pub fn add(&mut self, x: f64, w: u64) -> Result<()> {
        if !x.is_finite() {
            return Err(Error::InvalidInput(format!(
                "{x:?} is not a finite number; nothing was recorded"
            )));
        }
        if w == 0 {
            return Err(Error::InvalidCount(
                "an observation's weight must be at least 1".into(),
            ));
        }
        self.check_room(w)?;
        let max = self.settings.max_buckets;
        if x >= MIN_INDEXABLE {
            self.positive
                .add(self.settings.index(x), w, max, Keep::High);
        } else if x <= -MIN_INDEXABLE {
            self.negative
                .add(self.settings.index(-x), w, max, Keep::Low);
        } else {
            self.zeros += w;
        }
        self.count += w;
        Ok(())
    }

    /// Fails, changing nothing, unless `other` can merge into `self`: the
    /// same relative accuracy (or one of them empty) and a total within
    /// 2^53.
    pub(crate) fn check_merge(&self, other: &Sketch) -> Result<()> {
        if self.count > 0 && other.count > 0 && self.settings.alpha != other.settings.alpha {
            return Err(Error::InvalidInput(format!(
                "cannot merge quantile sketches of relative accuracy {} and {}; \
                 nothing was merged",
                self.settings.alpha, other.settings.alpha
            )));
        }
        self.check_room(other.count)
    }

    /// Folds `other` in: bucket counts add up; the smaller bucket bound of
    /// the two applies. Fails, changing nothing, as `Sketch::check_merge`.
    pub fn merge(&mut self, other: &Sketch) -> Result<()> {
        self.check_merge(other)?;
        if other.count == 0 {
            return Ok(());
        }
        if self.count == 0 {
            *self = other.clone();
            return Ok(());
        }
        let max = self.settings.max_buckets.min(other.settings.max_buckets);
        self.settings.max_buckets = max;
        self.positive.merge(&other.positive, max, Keep::High);
        self.negative.merge(&other.negative, max, Keep::Low);
        self.zeros += other.zeros;
        self.count += other.count;
        Ok(())
    }

    /// The value reported for the observation of rank `rank` (1-based, in
    /// ascending order), before clamping to the observed range; `None` when
    /// `rank` is 0 or past the count.
    pub fn value_at_rank(&self, rank: u64) -> Option<f64> {
        if rank == 0 || rank > self.count {
            return None;
        }
        let mut seen = 0u64;
        // The most negative values first: the negative store's highest
        // indexes.
        for (k, &c) in self.negative.counts.iter().enumerate().rev() {
            seen += c;
            if seen >= rank {
                return Some(-self.settings.bucket_value(self.negative.first + k as i32));
            }
        }
        seen += self.zeros;
        if seen >= rank {
            return Some(0.0);
        }
        for (k, &c) in self.positive.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(self.settings.bucket_value(self.positive.first + k as i32));
            }
        }
        unreachable!("the stores add up to the count")
    }

    /// [`Sketch::value_at_rank`] of each of `ranks` (ascending, each from 1
    /// to the count) in one walk of the buckets, handed to `each` in order.
    /// The walk adds up whole runs of buckets below the next rank (a read
    /// asks each of hundreds of slices for the same few quantiles).
    ///
    /// # Panics
    ///
    /// When a rank is out of order or out of range.
    pub fn values_at_ranks(&self, ranks: &[u64], mut each: impl FnMut(f64)) {
        assert!(
            ranks.windows(2).all(|w| w[0] <= w[1])
                && ranks.first().is_none_or(|&r| r >= 1)
                && ranks.last().is_none_or(|&r| r <= self.count),
            "ranks ascending, within 1..={}",
            self.count
        );
        let s = self.settings;
        let mut next = 0;
        let mut seen = 0u64;
        // The most negative values first: the negative store's highest
        // indexes.
        let negative = &self.negative;
        walk(
            &negative.counts,
            true,
            &mut seen,
            ranks,
            &mut next,
            |k, n| {
                let v = -s.bucket_value(negative.first + k as i32);
                (0..n).for_each(|_| each(v));
            },
        );
        seen += self.zeros;
        while next < ranks.len() && ranks[next] <= seen {
            each(0.0);
            next += 1;
        }
        let positive = &self.positive;
        walk(
            &positive.counts,
            false,
            &mut seen,
            ranks,
            &mut next,
            |k, n| {
                let v = s.bucket_value(positive.first + k as i32);
                (0..n).for_each(|_| each(v));
            },
        );
        assert_eq!(next, ranks.len(), "the stores add up to the count");
    }

    /// Every non-empty bucket as (the value it reports, its count), in
    /// ascending order of value: the most negative first, then the zeros,
    /// then the positive values.
    pub fn buckets(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        let s = self.settings;
        let negative = self
            .negative
            .counts
            .iter()
            .enumerate()
            .rev()
            .map(move |(k, &c)| (-s.bucket_value(self.negative.first + k as i32), c));
        let zeros = std::iter::once((0.0, self.zeros));
        let positive = self
            .positive
            .counts
            .iter()
            .enumerate()
            .map(move |(k, &c)| (s.bucket_value(self.positive.first + k as i32), c));
        negative
            .chain(zeros)
            .chain(positive)
            .filter(|&(_, c)| c > 0)
    }
}

/// Walks a store's `counts` (from the last when `rev`) with `seen`
/// observations before it, for the ranks of `ranks` from `*next` on:
/// `hit(k, n)` for each bucket `k` (an index into `counts`) holding `n` of
/// them. Leaves `seen` past the store, or wherever the last rank was met.
fn walk(
    counts: &[u64],
    rev: bool,
    seen: &mut u64,
    ranks: &[u64],
    next: &mut usize,
    mut hit: impl FnMut(usize, usize),
) {
    const RUN: usize = 8;
    let len = counts.len();
    let at = |k: usize| if rev { len - 1 - k } else { k };
    let mut k = 0;
    while k < len && *next < ranks.len() {
        let target = ranks[*next];
        // Whole runs of buckets below the target, then one at a time.
        while k + RUN <= len {
            let run = if rev {
                &counts[len - k - RUN..len - k]
            } else {
                &counts[k..k + RUN]
            };
            let total: u64 = run.iter().sum();
            if *seen + total >= target {
                break;
            }
            *seen += total;
            k += RUN;
        }
        while k < len && *seen + counts[at(k)] < target {
            *seen += counts[at(k)];
            k += 1;
        }
        if k == len {
            return;
        }
        *seen += counts[at(k)];
        let first = *next;
        while *next < ranks.len() && ranks[*next] <= *seen {
            *next += 1;
        }
        hit(at(k), *next - first);
        k += 1;
    }
}

#[cfg(test)]
mod tests;
