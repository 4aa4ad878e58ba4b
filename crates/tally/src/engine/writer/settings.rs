//! The aggregating writer's settings and running figures.

use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};

/// What [`Writer::add`](super::Writer::add) does when the table is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WhenFull {
    /// Wait until a flush makes room.
    Wait,
    /// Fail at once with [`Error::Overloaded`].
    Error,
}

/// How the aggregating writer buffers and flushes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriterSettings {
    /// Time between flushes.
    pub flush_interval: Duration,
    /// Flush early when this many (series, second) entries wait.
    pub flush_entries: usize,
    /// At most this many entries wait in memory.
    pub max_entries: usize,
    /// What `add` does when `max_entries` are waiting.
    pub when_full: WhenFull,
    /// Series (counters, statistics...) per write (one Lua call or
    /// transaction).
    pub chunk_counters: usize,
    /// Chunks written at the same time.
    pub lanes: usize,
}

impl Default for WriterSettings {
    fn default() -> Self {
        WriterSettings {
            flush_interval: Duration::from_millis(200),
            flush_entries: 100_000,
            max_entries: 1_000_000,
            when_full: WhenFull::Wait,
            chunk_counters: 500,
            lanes: 4,
        }
    }
}

impl WriterSettings {
    /// Checks the settings.
    pub fn validate(self) -> Result<Self> {
        if self.flush_interval < Duration::from_millis(1)
            || self.flush_interval > Duration::from_secs(3600)
        {
            return Err(Error::Config(
                "the flush interval must be between 1 ms and 1 h".into(),
            ));
        }
        if self.max_entries == 0 || self.flush_entries == 0 || self.flush_entries > self.max_entries
        {
            return Err(Error::Config(format!(
                "need 0 < flush_entries ({}) <= max_entries ({})",
                self.flush_entries, self.max_entries
            )));
        }
        if self.chunk_counters == 0 || self.chunk_counters > 10_000 {
            return Err(Error::Config(
                "chunk_counters must be between 1 and 10000".into(),
            ));
        }
        if self.lanes == 0 || self.lanes > 64 {
            return Err(Error::Config("lanes must be between 1 and 64".into()));
        }
        Ok(self)
    }
}

/// Running figures of an aggregating writer (monotonic unless noted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WriterStats {
    /// Deltas (increments) accepted by `add`.
    pub accepted: u64,
    /// Deltas written (acknowledged by the store).
    pub written: u64,
    /// Deltas dropped because the store refused them for good.
    pub rejected: u64,
    /// Flushes that wrote something.
    pub flushes: u64,
    /// Chunks written (store calls that succeeded, duplicates included).
    pub chunks: u64,
    /// Chunk attempts that failed and were retried.
    pub retries: u64,
    /// Chunks the store found already applied (retries of written chunks).
    pub duplicates: u64,
    /// (series, second) entries waiting now (a gauge).
    pub pending_entries: u64,
    /// Total microseconds spent in flushes that wrote something.
    pub flush_micros: u64,
}

/// The most (series, precision, slice) cells in one chunk (one store
/// call), unless one series alone has more. A flush that follows a burst
/// of timestamped writes (carbon lines, many seconds per series) would
/// otherwise send chunks of `chunk_counters` series of hundreds of cells
/// each: one Lua call of minutes, past the client's response timeout.
pub const MAX_CHUNK_CELLS: usize = 20_000;

/// How long a final flush keeps retrying an unavailable backend at shutdown.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
