//! The statistics kind: the moments of observed values (count, sum, sum of
//! squares, lowest, highest) and a [`Sketch`] of them for quantiles.
//!
//! What the book's `update_stats` keeps per hour, plus percentiles, in one
//! mergeable value per slice. Values are finite doubles (zero and negatives
//! included; NaN and infinities are refused, naming the value; `-0.0` counts
//! as `0`). A value may stand for `w` observations (a statsd sample rate
//! `|@0.1` gives `w = 10`): it adds `w` to the count and the sketch, `w·x`
//! to the sum and `w·x²` to the sum of squares, the unbiased estimate of
//! what was measured. The count stays at most 2^53 (exact as a double in
//! Redis's Lua) and the sums finite: a record or merge that would leave
//! either is an error that changes nothing.
//!
//! Reads: `mean = sum / count`; `stddev` is the book's sample standard
//! deviation `sqrt(max(0, (sumsq − sum²/count) / (count − 1 or 1)))`;
//! `quantile(q)` estimates the nearest-rank order statistic `x_(⌈q·n⌉)`
//! (q = 0: the lowest, q = 1: the highest) within the sketch's relative
//! accuracy, clamped to [lowest, highest].
//!
//! Laws (tested below): count, lowest, highest and the sketch merge exactly,
//! associatively and commutatively, with the empty value as identity. The
//! sums are f64 additions, associative only up to rounding: exact for
//! values whose sums are exact (small integers, dyadic fractions), within
//! rounding otherwise. Merging values whose sketches have different
//! relative accuracies is refused (nothing is merged): a space keeps one
//! accuracy for all its slices. An empty value carries no settings: it
//! equals every other empty value and takes the settings of what merges in.
//!
//! Encoding (the same bytes in SQLite and Redis, merged by
//! `backend/redis/lua/kind_stats.lua` with Redis's `cmsgpack`): a
//! MessagePack array
//! `[1, alpha, max_buckets, count, sum, sumsq, min, max, zeros,
//!   pos_first, [pos counts...], neg_first, [neg counts...]]`
//! where `1` is the format, `alpha` and `max_buckets` the sketch's settings
//! (so a blob is read and merged without outside configuration), and each
//! store's counts are written as differences from the previous bucket's
//! count (the first one absolute), which keeps the numbers small. Numbers
//! are written as cmsgpack writes them (see `engine::kinds::msgpack`). An empty
//! value writes zeros for count, sums, min and max and empty stores.
//!
//! A Redis pending slice (`backend/redis/lua/stats_fold.lua`) keeps its
//! value as the same array with format `3`, written with the array's
//! three-byte header (`dc 00 0d`, so that a Tally from before format 3
//! fails on it rather than read it short), and beside it a queue: a header
//! (the MessagePack number of the value's `alpha`), then the blobs of
//! format `1` written into the slice since, one per hash field. A pending
//! slice of format `2` (the one-byte header `9d`) keeps its queue in one
//! string: the header, then the blobs one after the other.
//! [`StatsValue::decode_pending`] reads them; `kind_stats.lua`'s
//! `stats_pending_value` is its Lua twin.

use super::msgpack::{Reader, Writer};
use super::sketch::{MAX_COUNT, MAX_MAX_BUCKETS, MIN_MAX_BUCKETS, Sketch, SketchSettings, Store};
use crate::engine::aggregate::{Aggregate, Codec};
use crate::error::{Error, Result};

/// The encoding's format number.
const FORMAT: i64 = 1;
/// The format number of a Redis pending slice's value with its queue in
/// one string, as Tally wrote it before the queue had a field per delta.
const FORMAT_PENDING_STRING: i64 = 2;
/// The format number of a Redis pending slice's value (always written with
/// the 16-bit array header, [`PENDING_HEADER`]).
const FORMAT_PENDING: i64 = 3;
/// The first bytes of a pending value of format 3: MessagePack's 16-bit
/// header of an array of [`FIELDS`], then the format.
const PENDING_HEADER: [u8; 4] = [0xdc, 0x00, FIELDS as u8, FORMAT_PENDING as u8];
/// The number of elements of an encoded value.
const FIELDS: usize = 13;

/// The quantiles a summary reports by default.
pub const DEFAULT_QUANTILES: [f64; 5] = [0.5, 0.75, 0.9, 0.99, 0.999];

/// The statistics of the values observed in one slice (or merged slices).
/// Its default is empty, its sketch with the default settings.
#[derive(Clone, Debug, Default)]
pub struct StatsValue {
    sum: f64,
    sumsq: f64,
    min: f64,
    max: f64,
    sketch: Sketch,
}

impl PartialEq for StatsValue {
    fn eq(&self, other: &Self) -> bool {
        if self.is_empty() && other.is_empty() {
            return true;
        }
        self.sum == other.sum
            && self.sumsq == other.sumsq
            && self.min == other.min
            && self.max == other.max
            && self.sketch == other.sketch
    }
}

impl StatsValue {
    /// An empty statistic whose sketch has `settings`.
    pub fn new(settings: SketchSettings) -> Self {
        StatsValue {
            sum: 0.0,
            sumsq: 0.0,
            min: 0.0,
            max: 0.0,
            sketch: Sketch::new(settings),
        }
    }

    /// The sketch's settings.
    pub fn settings(&self) -> SketchSettings {
        self.sketch.settings()
    }

    /// True when nothing was observed.
    pub fn is_empty(&self) -> bool {
        self.sketch.count() == 0
    }

    /// Records one observation of `x`.
    pub fn record(&mut self, x: f64) -> Result<()> {
        self.record_weighted(x, 1)
    }

    /// Records `x` as `w` observations (a statsd sample rate r gives
    /// `w = round(1/r)`). Fails, changing nothing, when `x` is not finite,
    /// `w` is 0, the count would pass 2^53 or a sum would become infinite.
    pub fn record_weighted(&mut self, x: f64, w: u64) -> Result<()> {
        if !x.is_finite() {
            return Err(Error::InvalidInput(format!(
                "the value {x:?} is not a finite number; nothing was recorded"
            )));
        }
        if w == 0 {
            return Err(Error::InvalidCount(format!(
                "the value {x:?} has weight 0; a weight must be at least 1"
            )));
        }
        self.sketch.check_room(w)?;
        let x = x + 0.0; // -0.0 counts as 0
        let wf = w as f64;
        let sum = self.sum + wf * x;
        let sumsq = self.sumsq + wf * (x * x);
        for (what, v) in [("sum", sum), ("sum of squares", sumsq)] {
            if !v.is_finite() {
                return Err(Error::InvalidInput(format!(
                    "recording {x:?} (weight {w}) would make the {what} of the statistic \
                     infinite; nothing was recorded"
                )));
            }
        }
        let first = self.is_empty();
        self.sketch.add(x, w)?;
        self.sum = sum;
        self.sumsq = sumsq;
        if first {
            (self.min, self.max) = (x, x);
        } else {
            self.min = self.min.min(x);
            self.max = self.max.max(x);
        }
        Ok(())
    }

    /// Folds `other` in. Fails, changing nothing, when the sketches'
    /// accuracies differ, the count would pass 2^53 or a sum would become
    /// infinite.
    pub fn merge(&mut self, other: &StatsValue) -> Result<()> {
        self.sketch.check_merge(&other.sketch)?;
        if other.is_empty() {
            return Ok(());
        }
        if self.is_empty() {
            *self = other.clone();
            return Ok(());
        }
        let sum = self.sum + other.sum;
        let sumsq = self.sumsq + other.sumsq;
        if !sum.is_finite() || !sumsq.is_finite() {
            return Err(Error::InvalidInput(
                "merging would make the sums of a statistic infinite; nothing was merged".into(),
            ));
        }
        self.sketch.merge(&other.sketch)?;
        self.sum = sum;
        self.sumsq = sumsq;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        Ok(())
    }

    /// The number of observations.
    pub fn count(&self) -> u64 {
        self.sketch.count()
    }

    /// The sum of the observations.
    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// The sum of their squares.
    pub fn sum_of_squares(&self) -> f64 {
        self.sumsq
    }

    /// The lowest value observed.
    pub fn min(&self) -> Option<f64> {
        (!self.is_empty()).then_some(self.min)
    }

    /// The highest value observed.
    pub fn max(&self) -> Option<f64> {
        (!self.is_empty()).then_some(self.max)
    }

    /// The mean.
    pub fn mean(&self) -> Option<f64> {
        (!self.is_empty()).then(|| self.sum / self.count() as f64)
    }

    /// The sample standard deviation, as the book computes it:
    /// `sqrt(max(0, (sumsq − sum²/n) / (n − 1 or 1)))`.
    pub fn stddev(&self) -> Option<f64> {
        if self.is_empty() {
            return None;
        }
        let n = self.count() as f64;
        let denominator = if self.count() > 1 { n - 1.0 } else { 1.0 };
        let variance = (self.sumsq - self.sum * self.sum / n) / denominator;
        Some(variance.max(0.0).sqrt())
    }

    /// The estimate of the nearest-rank quantile `q` (0 to 1); `None` when
    /// nothing was observed.
    pub fn quantile(&self, q: f64) -> Result<Option<f64>> {
        if !(0.0..=1.0).contains(&q) {
            return Err(Error::InvalidInput(format!(
                "a quantile must be between 0 and 1, got {q}"
            )));
        }
        if self.is_empty() {
            return Ok(None);
        }
        if q == 0.0 {
            return Ok(Some(self.min));
        }
        if q == 1.0 {
            return Ok(Some(self.max));
        }
        let rank = nearest_rank(q, self.count());
        let v = self
            .sketch
            .value_at_rank(rank)
            .expect("rank within the count");
        Ok(Some(v.clamp(self.min, self.max)))
    }

    /// [`StatsValue::quantile`] of each of `qs`, in their order, in one
    /// walk of the sketch (a read asks every slice for several); empty when
    /// nothing was observed. Fails as `quantile` on the first `q` outside
    /// 0 to 1.
    pub fn quantiles(&self, qs: &[f64]) -> Result<Vec<f64>> {
        if let Some(&q) = qs.iter().find(|q| !(0.0..=1.0).contains(*q)) {
            return Err(Error::InvalidInput(format!(
                "a quantile must be between 0 and 1, got {q}"
            )));
        }
        if self.is_empty() {
            return Ok(Vec::new());
        }
        let mut out = vec![0.0; qs.len()];
        // (rank, position in qs) of those the sketch answers, by rank: on
        // the stack for the few quantiles a read asks for.
        let mut few = [(0u64, 0usize); 16];
        let mut many = Vec::new();
        let ranked = if qs.len() <= few.len() {
            &mut few[..]
        } else {
            many.resize(qs.len(), (0, 0));
            &mut many[..]
        };
        let mut n = 0;
        for (i, &q) in qs.iter().enumerate() {
            if q == 0.0 {
                out[i] = self.min;
            } else if q == 1.0 {
                out[i] = self.max;
            } else {
                ranked[n] = (nearest_rank(q, self.count()), i);
                n += 1;
            }
        }
        let ranked = &mut ranked[..n];
        if !ranked.is_sorted() {
            ranked.sort_unstable();
        }
        let mut ranks = [0u64; 16];
        let mut more = Vec::new();
        let ranks = if n <= ranks.len() {
            &mut ranks[..n]
        } else {
            more.resize(n, 0);
            &mut more[..]
        };
        for (r, &(rank, _)) in ranks.iter_mut().zip(ranked.iter()) {
            *r = rank;
        }
        let mut k = 0;
        self.sketch.values_at_ranks(ranks, |v| {
            out[ranked[k].1] = v.clamp(self.min, self.max);
            k += 1;
        });
        Ok(out)
    }

    /// The sketch.
    pub fn sketch(&self) -> &Sketch {
        &self.sketch
    }

    /// The same moments without the quantile sketch: every observation is
    /// counted in the sketch's zero count, so the count (and everything
    /// but the quantiles) reads the same from a blob of a few dozen bytes.
    /// Its quantiles mean nothing: a service keeps such values only at
    /// precisions it reads no quantiles from (and merges them only with
    /// their like, whose merge stays exact for count, sums, min and max).
    pub fn without_sketch(&self) -> StatsValue {
        let sketch = Sketch::from_parts(
            self.settings(),
            self.count(),
            Store::default(),
            Store::default(),
        )
        .expect("a count of at most 2^53 fits");
        StatsValue {
            sketch,
            ..self.clone()
        }
    }
}

/// The 1-based rank of the nearest-rank quantile `q` among `n` values:
/// `⌈q·n⌉`, at least 1.
pub fn nearest_rank(q: f64, n: u64) -> u64 {
    let exact = q * n as f64;
    // q·n is a whole number written in decimal (0.07 × 100) that binary
    // floating point misses by an ulp or two (7.000000000000001): that is
    // the rank, not the next one.
    let whole = exact.round();
    let rank = if (exact - whole).abs() <= 1e-9 * whole.max(1.0) {
        whole
    } else {
        exact.ceil()
    };
    (rank as u64).clamp(1, n)
}

impl Aggregate for StatsValue {
    fn identity() -> Self {
        StatsValue::default()
    }

    fn merge(&mut self, other: &Self) -> Result<()> {
        StatsValue::merge(self, other)
    }

    fn is_identity(&self) -> bool {
        self.is_empty()
    }
}

fn encode_store(w: &mut Writer<'_>, store: &Store) {
    w.int(i64::from(store.first()));
    w.array(store.counts().len());
    let mut previous = 0i64;
    for &c in store.counts() {
        // Counts are at most 2^53: they and their differences fit an i64.
        w.int(c as i64 - previous);
        previous = c as i64;
    }
}

fn decode_store(r: &mut Reader<'_>, max: u32, which: &str) -> Result<Store> {
    let first = r.int_in(which, i64::from(i32::MIN), i64::from(i32::MAX))? as i32;
    let len = r.array()?;
    // The hot loop of a read of statistics (hundreds of buckets a slice).
    let mut counts = Vec::with_capacity(len);
    let mut previous = 0i64;
    let limit = MAX_COUNT as i64;
    r.ints_in(len, "a bucket difference", (-limit, limit), |difference| {
        let count = previous + difference;
        if !(0..=limit).contains(&count) {
            return Err(format!("a bucket count is {count}"));
        }
        counts.push(count as u64);
        previous = count;
        Ok(())
    })?;
    Store::from_parts(first, counts, max).map_err(|e| r.corrupt(e))
}

impl Codec for StatsValue {
    fn encode(&self, out: &mut Vec<u8>) {
        let settings = self.settings();
        let mut w = Writer::new(out);
        w.array(FIELDS);
        w.int(FORMAT);
        w.number(settings.alpha());
        w.int(i64::from(settings.max_buckets()));
        w.int(self.count() as i64);
        w.number(self.sum);
        w.number(self.sumsq);
        w.number(self.min);
        w.number(self.max);
        w.int(self.sketch.zeros() as i64);
        encode_store(&mut w, self.sketch.positive());
        encode_store(&mut w, self.sketch.negative());
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes, "statistic");
        let value = read_value::<FORMAT, FORMAT>(&mut r)?;
        r.finish()?;
        Ok(value)
    }
}

impl StatsValue {
    /// The value of a Redis pending slice: its blob `value` (format 1, as
    /// a Tally before format 2 wrote it, 2, or 3 with its 16-bit array
    /// header) with every delta of its format 2 `queue` (none when `None`
    /// or empty: its header, then deltas one after the other), then each
    /// of `deltas` (a format 3 queue's, one blob each, in the order
    /// written) merged in, as `kind_stats.lua` merges them.
    pub fn decode_pending(
        value: &[u8],
        queue: Option<&[u8]>,
        deltas: &[&[u8]],
    ) -> Result<StatsValue> {
        let mut r = Reader::new(value, "statistic");
        let mut value = if value.first() == Some(&PENDING_HEADER[0]) {
            read_value::<FORMAT_PENDING, FORMAT_PENDING>(&mut r)?
        } else {
            read_value::<FORMAT, FORMAT_PENDING_STRING>(&mut r)?
        };
        r.finish()?;
        if let Some(queue) = queue.filter(|q| !q.is_empty()) {
            let mut r = Reader::new(queue, "statistic's pending queue");
            r.finite("the queue's alpha")?;
            while !r.at_end() {
                value.merge(&read_value::<FORMAT, FORMAT>(&mut r)?)?;
            }
        }
        for delta in deltas {
            let mut r = Reader::new(delta, "statistic's pending delta");
            value.merge(&read_value::<FORMAT, FORMAT>(&mut r)?)?;
            r.finish()?;
        }
        Ok(value)
    }

    /// The bytes of this value as a Redis pending slice of format 2 keeps
    /// it (as Tally wrote it before format 3), and the header of its empty
    /// queue.
    pub fn encode_pending(&self) -> (Vec<u8>, Vec<u8>) {
        let mut value = self.to_bytes();
        value[1] = FORMAT_PENDING_STRING as u8;
        let mut header = Vec::new();
        Writer::new(&mut header).number(self.settings().alpha());
        (value, header)
    }

    /// The bytes of this value as a Redis pending slice keeps it now
    /// (format 3, with the array's 16-bit header).
    pub fn encode_pending_value(&self) -> Vec<u8> {
        let value = self.to_bytes();
        [&PENDING_HEADER[..], &value[2..]].concat()
    }
}

/// One encoded value from `r`, of a format in `MIN..=MAX` (constants: the
/// hot read of a stored slice is compiled for format 1 alone).
fn read_value<const MIN: i64, const MAX: i64>(r: &mut Reader<'_>) -> Result<StatsValue> {
    let fields = r.array()?;
    if fields != FIELDS {
        return Err(r.corrupt(format!("it has {fields} fields, not {FIELDS}")));
    }
    r.int_in("the format", MIN, MAX)?;
    let alpha = r.finite("alpha")?;
    let max_buckets = r.int_in(
        "max_buckets",
        i64::from(MIN_MAX_BUCKETS),
        i64::from(MAX_MAX_BUCKETS),
    )? as u32;
    let settings = SketchSettings::remembered(alpha, max_buckets).map_err(|e| r.corrupt(e))?;
    let count = r.int_in("count", 0, MAX_COUNT as i64)? as u64;
    let sum = r.finite("sum")?;
    let sumsq = r.finite("sumsq")?;
    let min = r.finite("min")?;
    let max = r.finite("max")?;
    let zeros = r.int_in("zeros", 0, MAX_COUNT as i64)? as u64;
    let positive = decode_store(r, max_buckets, "pos_first")?;
    let negative = decode_store(r, max_buckets, "neg_first")?;
    let sketch =
        Sketch::from_parts(settings, zeros, positive, negative).map_err(|e| r.corrupt(e))?;
    if sketch.count() != count {
        return Err(r.corrupt(format!(
            "its count {count} differs from its buckets' total {}",
            sketch.count()
        )));
    }
    if count == 0 {
        if sum != 0.0 || sumsq != 0.0 || min != 0.0 || max != 0.0 {
            return Err(r.corrupt("an empty statistic has a non-zero sum, min or max"));
        }
    } else if min > max || sumsq < 0.0 {
        return Err(r.corrupt(format!(
            "min {min} is above max {max} or sumsq {sumsq} is negative"
        )));
    }
    Ok(StatsValue {
        sum,
        sumsq,
        min,
        max,
        sketch,
    })
}

#[cfg(test)]
pub(crate) mod tests;
