//! Counter configuration: precisions, samples kept, cleaner cadence.
//!
//! Invariant: a [`CounterSettings`] that passed [`CounterSettings::validate`]
//! has 1 to 32 distinct precisions in ascending order, each between 1 s and
//! one year, and keeps between 1 and 100,000 samples per precision. Nothing
//! else in the crate re-checks these.

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::engine::cleaner::{CleanerSettings, DEFAULT_CLEAN_BATCH, DEFAULT_CLEAN_INTERVAL};
pub use crate::engine::precision::check_precision_in;
use crate::engine::precision::list;
use crate::error::{Error, Result};

/// The book's precisions: 1 s, 5 s, 1 min, 5 min, 1 h, 5 h, 1 day.
pub const DEFAULT_PRECISIONS: [u64; 7] = [1, 5, 60, 300, 3600, 18000, 86400];
/// The book's sample count per precision.
pub const DEFAULT_SAMPLES: u64 = 120;

const MAX_PRECISIONS: usize = 32;
const MAX_PRECISION_SECS: u64 = 366 * 86_400;
const MAX_SAMPLES: u64 = 100_000;

/// What the counters record and keep.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CounterSettings {
    /// Slice lengths in seconds; every increment is added to one slice of each.
    pub precisions: Vec<u64>,
    /// Samples (slices) kept per precision by the cleaner.
    pub samples: u64,
}

impl Default for CounterSettings {
    fn default() -> Self {
        CounterSettings {
            precisions: DEFAULT_PRECISIONS.to_vec(),
            samples: DEFAULT_SAMPLES,
        }
    }
}

impl CounterSettings {
    /// Checks the settings and sorts the precisions ascending.
    pub fn validate(mut self) -> Result<Self> {
        if self.precisions.is_empty() {
            return Err(Error::Config("at least one precision is required".into()));
        }
        if self.precisions.len() > MAX_PRECISIONS {
            return Err(Error::Config(format!(
                "at most {MAX_PRECISIONS} precisions are supported, {} were given",
                self.precisions.len()
            )));
        }
        self.precisions.sort_unstable();
        for pair in self.precisions.windows(2) {
            if pair[0] == pair[1] {
                return Err(Error::Config(format!(
                    "precision {} s is listed twice",
                    pair[0]
                )));
            }
        }
        if let Some(&p) = self
            .precisions
            .iter()
            .find(|&&p| p == 0 || p > MAX_PRECISION_SECS)
        {
            return Err(Error::Config(format!(
                "precision {p} s is out of range (1 to {MAX_PRECISION_SECS} s)"
            )));
        }
        if self.samples == 0 || self.samples > MAX_SAMPLES {
            return Err(Error::Config(format!(
                "samples must be between 1 and {MAX_SAMPLES}, got {}",
                self.samples
            )));
        }
        Ok(self)
    }

    /// Checks that `precision` is configured.
    pub fn check_precision(&self, precision: u64) -> Result<()> {
        check_precision_in(&self.precisions, precision)
    }

    /// The most samples any precision's hash holds between two cleaner
    /// passes `interval` apart (see [`crate::engine::precision::peak_slices`]):
    /// what Redis's `hash-max-listpack-entries` must allow for counters to
    /// stay in the compact encoding.
    pub fn peak_samples(&self, interval: Duration) -> u64 {
        self.precisions
            .iter()
            .map(|&p| crate::engine::precision::peak_slices(self.samples, p, interval.as_secs()))
            .max()
            .unwrap_or(self.samples)
    }

    /// The precisions as `1, 5, 60`, for messages.
    pub fn precisions_list(&self) -> String {
        list(&self.precisions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_books() {
        let s = CounterSettings::default().validate().unwrap();
        assert_eq!(s.precisions, vec![1, 5, 60, 300, 3600, 18000, 86400]);
        assert_eq!(s.samples, 120);
        assert_eq!(s.peak_samples(DEFAULT_CLEAN_INTERVAL), 181);
    }

    #[test]
    fn rejects_bad_settings_with_a_reason() {
        let bad = |precisions: Vec<u64>, samples| {
            CounterSettings {
                precisions,
                samples,
            }
            .validate()
            .unwrap_err()
            .to_string()
        };
        assert!(bad(vec![], 120).contains("at least one precision"));
        assert!(bad(vec![5, 5], 120).contains("listed twice"));
        assert!(bad(vec![0, 5], 120).contains("out of range"));
        assert!(bad(vec![5], 0).contains("samples must be"));
        assert!(bad((1..=33).collect(), 10).contains("at most 32"));
    }

    #[test]
    fn sorts_precisions() {
        let s = CounterSettings {
            precisions: vec![60, 1, 5],
            samples: 3,
        }
        .validate()
        .unwrap();
        assert_eq!(s.precisions, vec![1, 5, 60]);
        let err = s.check_precision(2).unwrap_err().to_string();
        assert!(
            err.contains("precision 2 s is not configured (configured: 1, 5, 60)"),
            "{err}"
        );
    }
}
