//! How the benches' timed loops decide to go on, and the tasks they run.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::Result;

/// Whether a timed loop takes another pass: always its first one, then
/// while `deadline` is ahead. A task that a loaded machine starts only after
/// its deadline still measures one pass, so a run never reports nothing.
pub(crate) fn go_on(deadline: Instant, passes: &mut u64) -> bool {
    *passes += 1;
    *passes == 1 || Instant::now() < deadline
}

/// A timed run: when it started and when its loops stop.
pub(crate) struct Timed {
    pub started: Instant,
    pub deadline: Instant,
}

impl Timed {
    /// A run of `seconds` from now.
    pub fn start(seconds: f64) -> Self {
        let started = Instant::now();
        Timed {
            started,
            deadline: started + Duration::from_secs_f64(seconds),
        }
    }

    /// Spawns every task, waits for them all and adds up what each one
    /// reports it sent.
    pub async fn join<F>(&self, tasks: impl IntoIterator<Item = F>) -> Result<u64>
    where
        F: Future<Output = Result<u64>> + Send + 'static,
    {
        let handles: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();
        let mut sent = 0;
        for h in handles {
            sent += h.await??;
        }
        Ok(sent)
    }

    /// `writers` tasks writing to `store` until the deadline, writer `w`
    /// sending the batches `batches(w)` makes, one call each; how many items
    /// they sent in all.
    pub async fn write_batches<S, B>(
        &self,
        store: &S,
        writers: u64,
        batches: impl Fn(u64) -> B,
    ) -> Result<u64>
    where
        S: BatchStore,
        B: FnMut() -> Vec<S::Item> + Send + 'static,
    {
        let deadline = self.deadline;
        self.join((0..writers).map(|w| {
            let (store, mut next) = (store.clone(), batches(w));
            async move {
                let (mut passes, mut sent) = (0u64, 0u64);
                while go_on(deadline, &mut passes) {
                    let batch = next();
                    store.write(&batch).await?;
                    sent += batch.len() as u64;
                }
                Ok(sent)
            }
        }))
        .await
    }

    /// Seconds since the start.
    pub fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// A store the benches write whole batches to, one call a batch.
pub(crate) trait BatchStore: Clone + Send + Sync + 'static {
    type Item: Send + 'static;

    fn write(&self, batch: &[Self::Item]) -> impl Future<Output = Result<()>> + Send;
}

impl BatchStore for tally::Counters {
    type Item = tally::Increment;

    async fn write(&self, batch: &[tally::Increment]) -> Result<()> {
        Ok(self.incr_many(batch).await?)
    }
}

impl BatchStore for tally::Stats {
    type Item = tally::Observation;

    async fn write(&self, batch: &[tally::Observation]) -> Result<()> {
        Ok(self.record_many(batch).await?)
    }
}

impl BatchStore for tally::DailyStats {
    type Item = tally::View;

    async fn write(&self, batch: &[tally::View]) -> Result<()> {
        self.incr_many(batch).await?;
        Ok(())
    }
}

/// Calls a writer's add takes per round of [`another_round`].
pub(crate) const ROUND: u64 = 1024;

/// After a round of [`ROUND`] adds: counts them into `sent`, then answers
/// whether to take another, having let the writer's flusher run on this
/// worker too.
pub(crate) async fn another_round(deadline: Instant, sent: &mut u64) -> bool {
    *sent += ROUND;
    if Instant::now() >= deadline {
        return false;
    }
    tokio::task::yield_now().await;
    true
}

/// CPU seconds (user + system) of this process so far.
pub(crate) fn self_cpu_seconds() -> f64 {
    rusage_seconds(nix::sys::resource::UsageWho::RUSAGE_SELF)
}

/// CPU seconds (user + system) `getrusage` reports for `who`.
pub(crate) fn rusage_seconds(who: nix::sys::resource::UsageWho) -> f64 {
    nix::sys::resource::getrusage(who).map_or(0.0, |u| {
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    })
}
