//! The embedded backend: one SQLite database, in a file or in memory.
//!
//! The database handle, [`Sqlite`] (connections and transactions), lives in
//! [`crate::sqlite`] (the buffers' SQLite sink opens its tables through it
//! too) and is re-exported here. The slice engine's store
//! ([`SqliteSliceStore`]) keeps every space's tables (counters' included);
//! each other feature keeps its own tables (`tally_*`) and its own store
//! module.

mod buffers;
mod daily;
mod engine;
mod idempotency;
mod limits;
mod locks;
mod once;
mod tsdb;

pub use buffers::SqliteBufferStore;
pub use daily::SqliteDailyStore;
pub use engine::SqliteSliceStore;
pub use idempotency::SqliteIdempotencyStore;
pub use limits::SqliteLimiterStore;
pub use locks::SqliteLockStore;
pub use tsdb::SqliteTsdbStore;

pub use crate::sqlite::{BUSY_TIMEOUT, DB_FILE, Sqlite};
