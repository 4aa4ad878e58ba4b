//! The cleaner: trims old slices on the book's cadence, for every space
//! whose retention is the cleaner's.
//!
//! A pass runs every `interval` (default 60 s); precision `p` is visited every
//! `max(1, p / interval)` passes; slices starting at or before
//! `now − keep·p` are removed. The store does the work in batches, so a
//! pass over N series costs O(N / batch) round trips. Several cleaners may
//! run at once: every step is atomic in the store. A failed pass is logged and
//! retried at the next interval with the same pass number, so no precision
//! misses its turn.
//!
//! A cleaner trims every space it is given ([`Cleaner::with_space`]:
//! counters, statistics, gauges, sets), in the same pass, with the same
//! cadence and each precision's own `keep`; [`crate::Tally::cleaner`]
//! gives it all of them.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::{SharedClock, Timestamp};
use crate::engine::precision::is_due;
use crate::engine::store::{CleanJob, CleanReport, FULL_PASS_EVERY};
use crate::engine::{Retention, SliceStore, Space};
use crate::error::{Error, Result};

/// The book's cleaner pass interval.
pub const DEFAULT_CLEAN_INTERVAL: Duration = Duration::from_secs(60);
/// Series handled per cleaner round trip.
pub const DEFAULT_CLEAN_BATCH: usize = 500;

/// How the cleaner runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CleanerSettings {
    /// Time between the starts of two passes (the book: 60 s).
    pub interval: Duration,
    /// Counters handled per round trip.
    pub batch: usize,
    /// One pass in this many reads every slice of every due precision
    /// (the first pass always does); the others remove by name exactly the
    /// slices that passed the cutoff since the cleaner's last visit, at a
    /// cost proportional to what they remove. A slice written late, dated
    /// before an earlier pass's cutoff, waits for the next full pass. 1:
    /// every pass reads everything (the book's cleaner). Default
    /// [`FULL_PASS_EVERY`] (an hour at the default interval).
    pub full_pass_every: u64,
}

impl Default for CleanerSettings {
    fn default() -> Self {
        CleanerSettings {
            interval: DEFAULT_CLEAN_INTERVAL,
            batch: DEFAULT_CLEAN_BATCH,
            full_pass_every: FULL_PASS_EVERY,
        }
    }
}

impl CleanerSettings {
    /// Checks the settings.
    pub fn validate(self) -> Result<Self> {
        if self.interval < Duration::from_secs(1) {
            return Err(Error::Config(
                "the clean interval must be at least 1 s".into(),
            ));
        }
        if self.batch == 0 || self.batch > 10_000 {
            return Err(Error::Config(format!(
                "the clean batch must be between 1 and 10000 counters, got {}",
                self.batch
            )));
        }
        if self.full_pass_every == 0 {
            return Err(Error::Config(
                "a full clean pass every 0 passes: give 1 (every pass) or more".into(),
            ));
        }
        Ok(self)
    }
}

/// Called after every pass with its report (or error) and duration.
pub type PassObserver = Arc<dyn Fn(&Result<CleanReport>, Duration) + Send + Sync>;

/// Runs cleaning passes over the spaces it is given.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// use std::sync::Arc;
///
/// let clock = tally::ManualClock::at(1_700_000_000.0);
/// let tally = tally::Tally::builder()
///     .precisions([1, 60])
///     .samples(10) // keep 10 s of 1 s slices, 10 min of 1 min slices
///     .clock(Arc::new(clock.clone()))
///     .open("sqlite::memory:")
///     .await?;
/// tally.counters().incr("hits", 1).await?;
///
/// clock.advance(30.0);
/// let report = tally.cleaner().pass().await?; // one pass now
/// assert_eq!(report.samples_removed, 1); // the 1 s slice, older than 10 s
/// assert_eq!(tally.counters().get("hits", 60).await?.len(), 1);
///
/// // In an application: a pass every interval until shutdown.
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let task = tally.cleaner().spawn(async move {
///     let _ = stopped.await;
/// });
/// stop.send(()).unwrap();
/// task.await.unwrap();
/// # Ok(())
/// # }
/// ```
pub struct Cleaner {
    clock: SharedClock,
    settings: CleanerSettings,
    passes: u64,
    observer: Option<PassObserver>,
    /// The spaces trimmed in each pass, in order.
    spaces: Vec<(Arc<dyn SliceStore>, Arc<Space>)>,
    /// When each precision (seconds) was last visited by a pass that
    /// succeeded: the next pass removes only what passed the cutoff since.
    visits: HashMap<u64, Timestamp>,
}

impl std::fmt::Debug for Cleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cleaner")
            .field("settings", &self.settings)
            .field("passes", &self.passes)
            .field(
                "spaces",
                &self.spaces.iter().map(|(_, s)| s.id).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Cleaner {
    /// A cleaner of no space yet, reading time from `clock`, that has run
    /// no pass yet (its first pass visits every precision). Spaces are
    /// added with [`Cleaner::with_space`] ([`crate::Counters::cleaner`]
    /// starts one with the counters).
    pub fn new(clock: SharedClock, settings: CleanerSettings) -> Result<Self> {
        Ok(Cleaner {
            clock,
            settings: settings.validate()?,
            passes: 0,
            observer: None,
            spaces: Vec::new(),
            visits: HashMap::new(),
        })
    }

    /// Also trims `space` in `store` in every pass (after the spaces given
    /// before,
    /// each precision keeping its own `keep` slices). Refused for a space
    /// whose slices do not go by the cleaner.
    pub fn with_space(mut self, store: Arc<dyn SliceStore>, space: Arc<Space>) -> Result<Self> {
        if space.retention != Retention::Cleaner {
            return Err(Error::Config(format!(
                "space {} is not trimmed by the cleaner ({:?})",
                space.id, space.retention
            )));
        }
        self.spaces.push((store, space));
        Ok(self)
    }

    /// Calls `observer` after every pass (for metrics).
    pub fn with_observer(mut self, observer: PassObserver) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Passes completed so far.
    pub fn passes(&self) -> u64 {
        self.passes
    }

    /// Runs one pass now (by the cleaner's clock).
    pub async fn pass(&mut self) -> Result<CleanReport> {
        let now = self.clock.now();
        self.pass_at(now).await
    }

    /// Runs one pass with cutoffs measured from `now`.
    ///
    /// A pass removes from each (series, precision) exactly the slices
    /// that passed the cutoff since this cleaner's last visit of the
    /// precision ([`Due::Slices`](crate::engine::Due)), at a cost
    /// proportional to what it removes; its first pass, and one in every
    /// [`CleanerSettings::full_pass_every`] after, reads every slice
    /// instead (catching slices written late, dated before an earlier
    /// cutoff).
    pub async fn pass_at(&mut self, now: Timestamp) -> Result<CleanReport> {
        let last_visits = if self.passes.is_multiple_of(self.settings.full_pass_every) {
            Vec::new()
        } else {
            self.visits.iter().map(|(&s, &t)| (s, t)).collect()
        };
        let job = CleanJob {
            pass: self.passes,
            now,
            samples: 0,
            interval_secs: self.settings.interval.as_secs(),
            batch: self.settings.batch,
            last_visits,
        };
        let started = Instant::now();
        let mut result = Ok(CleanReport::default());
        for (store, space) in &self.spaces {
            let Ok(total) = &mut result else { break };
            // The book's layout of counters reads `samples` (its registry
            // may name precisions the space does not list).
            let job = CleanJob {
                samples: space.precisions.first().map_or(0, |r| r.keep),
                ..job.clone()
            };
            match store.clean(space, &job).await {
                Ok(report) => total.add(&report),
                Err(e) => result = Err(e),
            }
        }
        if let Some(observer) = &self.observer {
            observer(&result, started.elapsed());
        }
        let report = result?;
        let precisions = self
            .spaces
            .iter()
            .flat_map(|(_, space)| space.precisions.iter().map(|r| r.seconds));
        for seconds in precisions {
            if is_due(job.pass, seconds, job.interval_secs) {
                self.visits.insert(seconds, now);
            }
        }
        self.passes += 1;
        Ok(report)
    }

    /// Runs passes every interval until `shutdown` completes. A pass that
    /// fails is logged; the loop goes on.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let started = Instant::now();
            let pass = self.passes;
            tokio::select! {
                _ = &mut shutdown => break,
                result = self.pass() => match result {
                    Ok(report) => log_round_done!("cleaner pass done", started, [pass], report =>
                        scanned, samples_removed, counters_removed, round_trips),
                    Err(e) => tracing::warn!(pass, error = %e, "cleaner pass failed; retrying next interval"),
                },
            }
            // As the book: sleep what is left of the interval, at least 1 s.
            let wait = self
                .settings
                .interval
                .saturating_sub(started.elapsed())
                .max(Duration::from_secs(1));
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tokio::time::sleep(wait) => {}
            }
        }
        tracing::info!(passes = self.passes, "cleaner stopped");
    }

    /// Spawns [`Cleaner::run`] on the current runtime.
    pub fn spawn(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.run(shutdown))
    }
}
