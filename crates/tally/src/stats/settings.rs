//! Statistics configuration: precisions, slices kept, the quantile sketch's
//! accuracy and bound, and which precisions keep a sketch.
//!
//! Invariant: a [`StatsSettings`] that passed [`StatsSettings::validate`]
//! has precisions and samples as valid as the counters' (the same check:
//! [`CounterSettings::validate`]), a sketch accuracy of 0.0001 to 0.1 and a
//! bound of 16 to 65,536 buckets per store ([`SketchSettings::new`]), and
//! `sketch_precisions`, when set, a non-empty ascending subset of the
//! precisions. Nothing else in the crate re-checks these.
//!
//! Defaults, and why: the counters' precisions and samples (the book's
//! 1 s to 1 day, 120 slices each), 1 % relative accuracy, 2,048 buckets
//! per store, and a sketch at *every* precision. Measured on Redis (the
//! kinds' helper): 7 precisions × 120 slices of one stat receiving 1,000
//! lognormal observations a second take 447,296 bytes, under the 512 KiB a
//! busy stat may use, so nothing needs to be given up by default. Where
//! memory is short, `sketch_precisions` names the precisions that keep a
//! sketch; a slice of any other precision keeps count, sum, sum of squares,
//! min and max only (a few dozen bytes), reports no quantiles, and range
//! summaries asked for quantiles read the finest *sketch-keeping* precision
//! that covers the range.

use serde::{Deserialize, Serialize};

use crate::counters::CounterSettings;
use crate::counters::settings::check_precision_in;
use crate::engine::kinds::sketch::{DEFAULT_ALPHA, DEFAULT_MAX_BUCKETS, SketchSettings};
use crate::error::{Error, Result};

/// The quantiles a read reports when none are asked for.
pub const DEFAULT_QUANTILES: [f64; 3] = [0.5, 0.9, 0.99];

/// The most quantiles one read may ask for.
pub const MAX_QUANTILES: usize = 32;

/// What the statistics record and keep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatsSettings {
    /// Slice lengths in seconds; every observation lands in one slice of
    /// each (default: the counters' defaults).
    pub precisions: Vec<u64>,
    /// Slices kept per precision by the cleaner (default 120).
    pub samples: u64,
    /// The quantile sketch's relative accuracy, 0.0001 to 0.1 (default 0.01:
    /// a reported quantile is within 1 % of the exact one).
    pub accuracy: f64,
    /// The most buckets a sketch store spans (default 2,048); past it the
    /// lowest values' buckets are collapsed (upper quantiles keep their
    /// accuracy).
    pub max_buckets: u32,
    /// The precisions that keep a quantile sketch; `None` (the default):
    /// every precision.
    pub sketch_precisions: Option<Vec<u64>>,
}

impl Default for StatsSettings {
    fn default() -> Self {
        StatsSettings::like(&CounterSettings::default())
    }
}

impl StatsSettings {
    /// The defaults with the counters' precisions and samples.
    pub fn like(counters: &CounterSettings) -> Self {
        StatsSettings {
            precisions: counters.precisions.clone(),
            samples: counters.samples,
            accuracy: DEFAULT_ALPHA,
            max_buckets: DEFAULT_MAX_BUCKETS,
            sketch_precisions: None,
        }
    }

    /// Checks the settings; sorts the precisions (and the sketch
    /// precisions) ascending.
    pub fn validate(self) -> Result<Self> {
        let counters = CounterSettings {
            precisions: self.precisions,
            samples: self.samples,
        }
        .validate()
        .map_err(|e| Error::Config(format!("statistics: {}", config_reason(e))))?;
        SketchSettings::new(self.accuracy, self.max_buckets)
            .map_err(|e| Error::Config(format!("statistics: {}", config_reason(e))))?;
        let sketch_precisions = match self.sketch_precisions {
            None => None,
            Some(mut ps) => {
                ps.sort_unstable();
                ps.dedup();
                if ps.is_empty() {
                    return Err(Error::Config(
                        "statistics: sketch_precisions names no precision; leave it unset to \
                         keep a sketch at every precision"
                            .into(),
                    ));
                }
                if let Some(p) = ps.iter().find(|p| !counters.precisions.contains(p)) {
                    return Err(Error::Config(format!(
                        "statistics: sketch precision {p} s is not one of the precisions ({})",
                        counters.precisions_list()
                    )));
                }
                Some(ps)
            }
        };
        Ok(StatsSettings {
            precisions: counters.precisions,
            samples: counters.samples,
            accuracy: self.accuracy,
            max_buckets: self.max_buckets,
            sketch_precisions,
        })
    }

    /// The sketch's settings (valid once [`StatsSettings::validate`] passed).
    pub fn sketch(&self) -> Result<SketchSettings> {
        SketchSettings::new(self.accuracy, self.max_buckets)
    }

    /// True when slices of `precision` keep a quantile sketch.
    pub fn keeps_sketch(&self, precision: u64) -> bool {
        self.sketch_precisions
            .as_ref()
            .is_none_or(|ps| ps.contains(&precision))
    }

    /// Checks that `precision` is configured.
    pub fn check_precision(&self, precision: u64) -> Result<()> {
        check_precision_in(&self.precisions, precision)
    }
}

/// The message of a configuration error, without its `invalid
/// configuration:` lead (the caller adds its own context).
fn config_reason(e: Error) -> String {
    match e {
        Error::Config(why) => why,
        other => other.to_string(),
    }
}

/// Checks the quantiles a read asks for: at most [`MAX_QUANTILES`], each
/// between 0 and 1.
pub fn check_quantiles(qs: &[f64]) -> Result<()> {
    if qs.len() > MAX_QUANTILES {
        return Err(Error::InvalidInput(format!(
            "at most {MAX_QUANTILES} quantiles can be asked for at once, got {}",
            qs.len()
        )));
    }
    if let Some(q) = qs.iter().find(|q| !(0.0..=1.0).contains(*q)) {
        return Err(Error::InvalidInput(format!(
            "a quantile must be between 0 and 1, got {q}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_counters_and_keep_every_sketch() {
        let s = StatsSettings::default().validate().unwrap();
        // The book's 1 s to 1 day, 120 slices each (`defaults_are_the_books`).
        let counters = CounterSettings::default();
        assert_eq!(s.precisions, counters.precisions);
        assert_eq!(s.samples, counters.samples);
        assert_eq!(s.accuracy, 0.01);
        assert_eq!(s.max_buckets, 2048);
        assert!(s.precisions.iter().all(|&p| s.keeps_sketch(p)));
        let like = StatsSettings::like(&CounterSettings {
            precisions: vec![60, 1],
            samples: 7,
        })
        .validate()
        .unwrap();
        assert_eq!((like.precisions.clone(), like.samples), (vec![1, 60], 7));
    }

    #[test]
    fn bad_settings_are_refused_with_a_reason() {
        let bad = |f: fn(&mut StatsSettings)| {
            let mut s = StatsSettings::default();
            f(&mut s);
            s.validate().unwrap_err().to_string()
        };
        assert!(bad(|s| s.precisions = vec![]).contains("statistics: at least one precision"));
        assert!(bad(|s| s.samples = 0).contains("samples must be"));
        assert!(bad(|s| s.accuracy = 0.5).contains("statistics:"));
        assert!(bad(|s| s.max_buckets = 2).contains("statistics:"));
        assert!(bad(|s| s.sketch_precisions = Some(vec![])).contains("names no precision"));
        let e = bad(|s| s.sketch_precisions = Some(vec![7]));
        assert!(
            e.contains("sketch precision 7 s is not one of the precisions (1, 5, 60"),
            "{e}"
        );
        let s = StatsSettings {
            sketch_precisions: Some(vec![3600, 60, 60]),
            ..StatsSettings::default()
        }
        .validate()
        .unwrap();
        assert_eq!(s.sketch_precisions, Some(vec![60, 3600]));
        assert!(s.keeps_sketch(60) && !s.keeps_sketch(1));
        assert!(
            s.check_precision(2)
                .unwrap_err()
                .to_string()
                .contains("precision 2 s is not configured")
        );
    }

    #[test]
    fn quantiles_are_checked() {
        check_quantiles(&[0.0, 0.5, 1.0]).unwrap();
        assert!(
            check_quantiles(&[1.5])
                .unwrap_err()
                .to_string()
                .contains("between 0 and 1, got 1.5")
        );
        assert!(check_quantiles(&[f64::NAN]).is_err());
        assert!(check_quantiles(&[0.5; 33]).is_err());
    }
}
