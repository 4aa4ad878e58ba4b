//! The cleaner: trims old slices on the book's cadence.
//!
//! A pass runs every `interval` (default 60 s); precision `p` is visited every
//! `max(1, p / interval)` passes; slices starting at or before
//! `now − samples·p` are removed. The store does the work in batches, so a
//! pass over N counters costs O(N / batch) round trips. Several cleaners may
//! run at once: every step is atomic in the store. A failed pass is logged and
//! retried at the next interval with the same pass number, so no precision
//! misses its turn.
//!
//! Besides the counters, a cleaner trims every other space it is given
//! whose retention is the cleaner's ([`Cleaner::with_space`]: statistics,
//! gauges, sets), in the same pass, with the same cadence and each resolution's
//! own `keep`; [`crate::Tally::cleaner`] gives it all of them.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::Timestamp;
use crate::counters::Counters;
use crate::counters::settings::CleanerSettings;
use crate::counters::store::{CleanJob, CleanReport};
use crate::engine::resolution::is_due;
use crate::engine::{Retention, SliceStore, Space};
use crate::error::{Error, Result};

/// Called after every pass with its report (or error) and duration.
pub type PassObserver = Arc<dyn Fn(&Result<CleanReport>, Duration) + Send + Sync>;

/// Runs cleaning passes over a [`Counters`]' store.
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
    counters: Counters,
    settings: CleanerSettings,
    passes: u64,
    observer: Option<PassObserver>,
    /// Other spaces trimmed in each pass, after the counters.
    spaces: Vec<(Arc<dyn SliceStore>, Arc<Space>)>,
    /// When each resolution (seconds) was last visited by a pass that
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
    /// A cleaner that has run no pass yet (its first pass visits every
    /// precision).
    pub fn new(counters: Counters, settings: CleanerSettings) -> Result<Self> {
        Ok(Cleaner {
            counters,
            settings: settings.validate()?,
            passes: 0,
            observer: None,
            spaces: Vec::new(),
            visits: HashMap::new(),
        })
    }

    /// Also trims `space` in `store` in every pass (after the counters,
    /// each resolution keeping its own `keep` slices). Refused for a space
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

    /// Runs one pass now (by the counters' clock).
    pub async fn pass(&mut self) -> Result<CleanReport> {
        let now = self.counters.clock().now();
        self.pass_at(now).await
    }

    /// Runs one pass with cutoffs measured from `now`.
    ///
    /// A pass removes from each (series, resolution) exactly the slices
    /// that passed the cutoff since this cleaner's last visit of the
    /// resolution ([`Due::Slices`](crate::engine::Due)), at a cost
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
            samples: self.counters.settings().samples,
            interval_secs: self.settings.interval.as_secs(),
            batch: self.settings.batch,
            last_visits,
        };
        let started = Instant::now();
        let mut result = self
            .counters
            .store()
            .clean(&job, &self.counters.settings().precisions)
            .await;
        for (store, space) in &self.spaces {
            let Ok(total) = &mut result else { break };
            match store.clean(space, &job).await {
                Ok(report) => total.add(&report),
                Err(e) => result = Err(e),
            }
        }
        if let Some(observer) = &self.observer {
            observer(&result, started.elapsed());
        }
        let report = result?;
        let resolutions = self.counters.settings().precisions.iter().copied().chain(
            self.spaces
                .iter()
                .flat_map(|(_, space)| space.resolutions.iter().map(|r| r.seconds)),
        );
        for seconds in resolutions {
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
                    Ok(report) => tracing::info!(
                        pass,
                        scanned = report.scanned,
                        samples_removed = report.samples_removed,
                        counters_removed = report.counters_removed,
                        round_trips = report.round_trips,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "cleaner pass done"
                    ),
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
