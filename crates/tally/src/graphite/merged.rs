//! `mergedQuantile(seriesList, q, interval)`: Tally's own render function,
//! the quantile graphite cannot give.
//!
//! Graphite consolidates a quantile series (`summarize`, `maxDataPoints`)
//! by averaging its points, and the average of p99s is no p99. This
//! function goes back to the statistics behind the series: each series of
//! the list must be a leaf of a statistic (any leaf: `api.latency.count`,
//! `api.latency.p99`); for each statistic named (once, in the list's
//! order), it reads the slices of the series' window (the precision the
//! render read), merges the sketches of the slices that fall in each
//! `interval` (buckets on the epoch's multiples of the interval, as
//! `summarize` without `alignToFrom`), and gives the quantile `q` of each
//! bucket: the same estimate `GET /v1/stats/{name}?from&to&quantiles=q`
//! gives for that range, within the sketch's relative accuracy of the
//! exact nearest-rank quantile. The series is named
//! `mergedQuantile(<statistic's path>, <q>, "<interval>")`; a bucket with
//! no observation, or a precision that keeps no sketch, is null.

use std::collections::BTreeMap;

use async_trait::async_trait;
use tally_graphite::{
    Args, Context, Error as GError, Function, Param, ParamType, Result as GResult, Series,
    Signature, Value as GValue,
};

use super::{Family, Source, path};
use crate::engine::{Kind, SliceRead, SliceSel, Value};
use crate::name::Name;

/// The function, over the statistics of one source.
pub struct MergedQuantile {
    signature: Signature,
    stats: Vec<Family>,
    sketched: Vec<u64>,
}

impl std::fmt::Debug for MergedQuantile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergedQuantile")
            .field("sketched", &self.sketched)
            .finish_non_exhaustive()
    }
}

impl MergedQuantile {
    /// The function over the statistics families of `source`, whose
    /// precisions `sketched` keep a quantile sketch.
    pub fn new(source: &Source, sketched: &[u64]) -> Self {
        let signature = Signature::new(
            "mergedQuantile",
            "mergedQuantile(seriesList, q, interval)",
            "Tally",
            "Tally's own: for the statistic behind each series (any of its leaves), merges \
             the quantile sketches of its slices per interval and gives quantile q of each \
             interval, where summarize or maxDataPoints would average quantiles.",
        )
        .module("tally.graphite")
        .params(vec![
            Param::new("seriesList", ParamType::SeriesList).required(),
            Param::new("q", ParamType::Float).required(),
            Param::new("interval", ParamType::Interval).required(),
        ]);
        MergedQuantile {
            signature,
            stats: source
                .families()
                .iter()
                .filter(|f| f.space.kind == Kind::Stats)
                .cloned()
                .collect(),
            sketched: sketched.to_vec(),
        }
    }

    /// The statistics family and raw name behind `path` (a leaf's path),
    /// and the statistic's own path.
    async fn statistic(&self, leaf_path: &str) -> GResult<Option<(&Family, Name, String)>> {
        for family in &self.stats {
            let Some((stat_path, leaf)) = leaf_path.rsplit_once('.') else {
                continue;
            };
            if !family.shape.leaves.iter().any(|l| l.node == leaf) {
                continue;
            }
            let below_root = if family.shape.root.is_empty() {
                Some(stat_path)
            } else {
                stat_path
                    .strip_prefix(family.shape.root.as_str())
                    .and_then(|r| r.strip_prefix('.'))
            };
            let Some(escaped) = below_root else { continue };
            let mut found = None;
            family
                .walk(path::name_prefix(escaped), None, |name| {
                    if found.is_none() && path::escape(name) == escaped {
                        found = Some(name.to_owned());
                    }
                    Ok(())
                })
                .await?;
            if let Some(name) = found {
                let name = Name::new(name).map_err(super::store_error)?;
                return Ok(Some((family, name, stat_path.to_owned())));
            }
        }
        Ok(None)
    }
}

/// Buckets of `interval` seconds from `start`'s bucket through `end`'s:
/// `summarize`'s bounds without `alignToFrom`.
fn bounds(start: i64, end: i64, interval: i64) -> (i64, i64) {
    (
        start - start.rem_euclid(interval),
        end - end.rem_euclid(interval) + interval,
    )
}

#[async_trait]
impl Function for MergedQuantile {
    fn signature(&self) -> &Signature {
        &self.signature
    }

    async fn call(&self, _cx: &Context<'_>, mut args: Args) -> GResult<GValue> {
        let q = args
            .f64(1)
            .filter(|q| (0.0..=1.0).contains(q))
            .ok_or_else(|| GError::invalid("mergedQuantile: q must be a number from 0 to 1"))?;
        let interval_text = args.str(2).unwrap_or_default().to_owned();
        let interval = tally_graphite::attime::parse_offset(&interval_text)
            .ok()
            .map(i64::abs)
            .filter(|&i| i > 0)
            .ok_or_else(|| {
                GError::invalid(format!(
                    "mergedQuantile: the interval {interval_text:?} is not a time span such as \"5min\""
                ))
            })?;
        let series = args.take_series(0);
        let mut done = Vec::new();
        let mut out = Vec::new();
        for s in &series {
            let Some((family, name, stat_path)) = self.statistic(&s.name).await? else {
                return Err(GError::invalid(format!(
                    "mergedQuantile: {:?} is not a leaf of a statistic",
                    s.name
                )));
            };
            if done.contains(&stat_path) {
                continue;
            }
            done.push(stat_path.clone());
            let (start, end) = bounds(s.start, s.end, interval);
            let buckets = ((end - start) / interval).max(0) as usize;
            let mut merged: BTreeMap<usize, Value> = BTreeMap::new();
            if self.sketched.contains(&(s.step as u64)) && s.end > s.start {
                let read = family
                    .store
                    .read(
                        SliceRead::new(
                            &family.space,
                            std::slice::from_ref(&name),
                            &[s.step as u64],
                        )
                        .slices(SliceSel::Range {
                            from: s.start.max(0) as u64,
                            to: (s.end - 1).max(0) as u64,
                        }),
                    )
                    .await
                    .map_err(super::store_error)?;
                let slices = read.into_iter().next().and_then(|mut r| r.pop());
                for (at, value) in slices.unwrap_or_default() {
                    let bucket = ((at as i64 - start) / interval) as usize;
                    match merged.get_mut(&bucket) {
                        Some(total) => total.merge(&value).map_err(super::store_error)?,
                        None => {
                            merged.insert(bucket, value);
                        }
                    }
                }
            }
            let values = (0..buckets)
                .map(|b| match merged.get(&b) {
                    Some(Value::Stats(v)) => v.quantile(q).ok().flatten(),
                    _ => None,
                })
                .collect();
            let label = format!(
                "mergedQuantile({stat_path}, {}, \"{interval_text}\")",
                GValue::Float(q).repr()
            );
            let mut result = Series::new(&label, start, end, interval, values);
            result.tags = BTreeMap::from([
                ("name".to_owned(), stat_path.clone()),
                ("mergedQuantile".to_owned(), GValue::Float(q).repr()),
                ("mergedQuantileInterval".to_owned(), interval_text.clone()),
            ]);
            result.path_expression = s.path_expression.clone();
            out.push(result);
        }
        Ok(GValue::Series(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_summarizes() {
        assert_eq!(bounds(1000, 1600, 300), (900, 1800));
        assert_eq!(bounds(900, 1200, 300), (900, 1500));
    }
}
