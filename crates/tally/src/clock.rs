//! Time: the only module that reads the system clock.
//!
//! Everything in Tally that needs "now" takes a [`Clock`]. [`SystemClock`] reads
//! the wall clock; [`ManualClock`] is set and advanced by hand, so tests (yours
//! too) control time exactly. [`Timestamp`] is a validated instant in Unix
//! seconds with a fraction: finite, not negative, not after year 9999.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// The instant `secs` Unix seconds, which a test knows to be valid.
#[cfg(test)]
pub(crate) fn ts(secs: f64) -> Timestamp {
    Timestamp::from_secs_f64(secs).unwrap()
}

/// An instant in Unix seconds (with a fraction), validated on construction.
#[derive(Clone, Copy, PartialEq, PartialOrd, Debug)]
pub struct Timestamp(f64);

impl Timestamp {
    /// The latest accepted instant: 9999-12-31T23:59:59Z.
    pub const MAX_SECS: f64 = 253_402_300_799.0;

    /// Validates Unix seconds: finite, `>= 0` and not after year 9999.
    pub fn from_secs_f64(secs: f64) -> Result<Self> {
        if !secs.is_finite() {
            return Err(Error::InvalidTime(format!(
                "{secs} is not a finite number of seconds"
            )));
        }
        if secs < 0.0 {
            return Err(Error::InvalidTime(format!(
                "{secs} is before the Unix epoch"
            )));
        }
        if secs > Self::MAX_SECS {
            return Err(Error::InvalidTime(format!("{secs} is after the year 9999")));
        }
        Ok(Timestamp(secs))
    }

    /// Whole Unix seconds (always valid below [`Self::MAX_SECS`]).
    pub fn from_secs(secs: u64) -> Result<Self> {
        Self::from_secs_f64(secs as f64)
    }

    /// Unix seconds with the fraction.
    pub fn as_secs_f64(self) -> f64 {
        self.0
    }

    /// Unix seconds rounded down: the second this instant falls in.
    pub fn whole_secs(self) -> u64 {
        self.0.floor() as u64
    }

    /// Unix milliseconds rounded down.
    pub fn as_millis(self) -> u64 {
        (self.0 * 1000.0).floor() as u64
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A source of the current time.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(since.as_secs_f64().min(Timestamp::MAX_SECS))
    }
}

/// A clock that only moves when told to; cheap to clone (clones share time).
///
/// Holds microseconds, so it is exact for any instant a test uses.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    micros: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock stopped at `secs` Unix seconds.
    pub fn at(secs: f64) -> Self {
        let clock = ManualClock::default();
        clock.set(secs);
        clock
    }

    /// Moves the clock to `secs` (it may go backwards).
    pub fn set(&self, secs: f64) {
        let ts = Timestamp::from_secs_f64(secs).expect("ManualClock::set: invalid time");
        self.micros
            .store((ts.as_secs_f64() * 1e6).round() as u64, Ordering::SeqCst);
    }

    /// Moves the clock forward by `secs`.
    pub fn advance(&self, secs: f64) {
        let micros = (secs * 1e6).round() as u64;
        self.micros.fetch_add(micros, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.micros.load(Ordering::SeqCst) as f64 / 1e6)
    }
}

/// A shared clock, as held by the services.
pub type SharedClock = Arc<dyn Clock>;

/// The two constructors of a service built from a store and its settings,
/// in the service's `impl`: `new` (on the system clock) and `with_clock`,
/// both validating the settings before `$build` runs with them.
///
/// ```ignore
/// constructors! {
///     "Counters", |store: dyn SliceStore, settings: CounterSettings, clock| {
///         /* Self, built from the validated settings */
///     }
/// }
/// ```
macro_rules! constructors {
    ($what:literal, |$s:ident: $store:ty, $set:ident: $settings:ty, $c:ident| $build:block) => {
        #[doc = concat!($what, " on `store` with validated `settings`, on the system clock.")]
        pub fn new(
            store: ::std::sync::Arc<$store>,
            settings: $settings,
        ) -> $crate::error::Result<Self> {
            Self::with_clock(
                store,
                settings,
                ::std::sync::Arc::new($crate::clock::SystemClock),
            )
        }

        #[doc = concat!($what, " on `store` with validated `settings`, reading time from `clock`.")]
        pub fn with_clock(
            $s: ::std::sync::Arc<$store>,
            $set: $settings,
            $c: $crate::clock::SharedClock,
        ) -> $crate::error::Result<Self> {
            let $set = $set.validate()?;
            $build
        }
    };
}
pub(crate) use constructors;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_reject_what_is_not_a_time() {
        assert!(Timestamp::from_secs_f64(f64::NAN).is_err());
        assert!(Timestamp::from_secs_f64(f64::INFINITY).is_err());
        assert!(Timestamp::from_secs_f64(-0.5).is_err());
        assert!(Timestamp::from_secs_f64(Timestamp::MAX_SECS + 1.0).is_err());
        assert_eq!(
            Timestamp::from_secs_f64(1336376415.5).unwrap().whole_secs(),
            1336376415
        );
        assert_eq!(Timestamp::from_secs_f64(0.0).unwrap().whole_secs(), 0);
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::at(100.25);
        assert_eq!(clock.now().as_secs_f64(), 100.25);
        clock.advance(0.75);
        assert_eq!(clock.now().as_secs_f64(), 101.0);
        assert_eq!(clock.now().as_millis(), 101_000);
        clock.set(5.0);
        assert_eq!(clock.now().whole_secs(), 5);
    }
}
