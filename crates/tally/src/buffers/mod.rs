//! Buffered counters flushed to SQL (Sentry's "buffers", done exactly once).
//!
//! Many writers bumping one SQL row contend on its lock. [`Buffers::incr`]
//! instead merges each change into a pending record of the row in the
//! backend (one Redis Lua call, or one SQLite transaction): counter deltas
//! are added, last-write-wins values replaced. A [`Flusher`] then claims
//! bounded batches of pending rows and writes each batch to a SQL [`Sink`]
//! in one transaction, one statement per table.
//!
//! Exactly once, whatever crashes: a claim atomically moves rows out of
//! pending into a claim with a lease; the sink records the claim's batch id
//! in the same SQL transaction as its writes and skips a batch it has
//! already recorded; only after the commit is the claim released. A flusher
//! that dies leaves its claim, which another flusher takes over when the
//! lease expires and re-flushes: applied once if the first commit happened,
//! once if not. Several flushers may run at once; each row goes to one.
//!
//! Not done here: which SQL tables exist (the user's, mapped in
//! [`Tables`]), and exact reads across the two systems (see
//! [`Buffers::read`]).
//!
//! Layout (no child imports its parent or a sibling that imports it back):
//! the leaves [`ident`], [`row`], [`table`], [`store`] (the store trait) and
//! [`sink`] (the sink trait); [`service`] ([`Buffers`]) over them;
//! [`flusher`] over the service and a sink; the two sinks
//! ([`sink_postgres`], [`sink_sqlite`]) over the sink trait; this module
//! re-exports them and picks a sink from a URL ([`open_sink`]).

pub mod flusher;
pub mod ident;
pub mod row;
pub mod service;
pub mod sink;
#[cfg(feature = "postgres")]
pub mod sink_postgres;
#[cfg(feature = "sqlite")]
pub mod sink_sqlite;
pub mod store;
pub mod table;

use std::sync::Arc;

pub use flusher::{FlushMetrics, FlushReport, Flusher, FlusherSettings};
pub use ident::Ident;
pub use row::{BatchId, Claim, RowDelta, RowKey, RowUpdate};
pub use service::{BufferedRow, Buffers, MAX_VALUE_BYTES, Update};
pub use sink::{Sink, SinkOutcome, StoredRow};
pub use store::{BufferStats, BufferStore, NewClaim};
pub use table::{TableConfig, TableSpec, Tables};

use crate::error::{Error, Result};

/// Opens the sink named by `url`: `postgres://...` / `postgresql://...`, or
/// `sqlite:PATH` (a file, created if missing). Checks that every mapped
/// table and column exists.
#[cfg_attr(
    not(any(feature = "postgres", feature = "sqlite")),
    allow(unused_variables)
)]
pub async fn open_sink(url: &str, tables: &Tables) -> Result<Arc<dyn Sink>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        return Ok(Arc::new(
            sink_postgres::PostgresSink::connect(url, tables.clone()).await?,
        ));
        #[cfg(not(feature = "postgres"))]
        return Err(not_built("postgres"));
    } else if let Some(path) = url.strip_prefix("sqlite:") {
        let path = path.strip_prefix("//").unwrap_or(path);
        if path.is_empty() {
            return Err(Error::Config("a sqlite: sink URL needs a file path".into()));
        }
        #[cfg(feature = "sqlite")]
        return Ok(Arc::new(
            sink_sqlite::SqliteSink::open(std::path::Path::new(path), tables.clone()).await?,
        ));
        #[cfg(not(feature = "sqlite"))]
        return Err(not_built("sqlite"));
    } else {
        Err(Error::Config(format!(
            "unknown sink URL {url:?}: expected postgres://... or sqlite:PATH"
        )))
    }
}

/// The error for a sink this build lacks.
#[cfg(not(all(feature = "postgres", feature = "sqlite")))]
fn not_built(feature: &str) -> Error {
    Error::Config(format!(
        "this tally was built without the `{feature}` feature, so it has no {feature} sink"
    ))
}
