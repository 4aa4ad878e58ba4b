//! The slice engine: one write path, one read path and one aggregating
//! writer for every value Tally keeps per (series, precision, slice).
//!
//! A counter's slice holds a sum; a time-series bucket a sum, a HyperLogLog
//! or a top-N table; a statistic's slice its moments and a quantile sketch; a
//! gauge's slice its last, lowest and highest value. Each of these is a
//! *kind*: a mergeable value ([`Aggregate`]) with a pure byte encoding
//! ([`Codec`]). Kinds live in [`kinds`], one small module each, holding only
//! their math, their merge rule and their encoding; validation, slice
//! precision, duplicate merging, batching, exactly-once flushes, range
//! reads and storage are written once, for every kind:
//!
//! - [`aggregate`]: the kind traits, the [`Kind`] tag and the [`Value`] enum
//!   that dispatches to each kind;
//! - [`precision`]: slice math (slice starts, cutoffs, the cleaner's
//!   cadence, which precision a range is read at);
//! - [`plan`]: the write path's pure half: a write's items resolved into one
//!   merged delta per (series, precision, slice), all or nothing;
//! - [`store`]: what a [`Space`] is, the batch a store applies, and the
//!   [`SliceStore`] trait each store implements once per key layout
//!   (`backend::sqlite::engine`, `backend::redis::engine`);
//! - [`writer`]: the aggregating writer (in-process merging, exactly-once
//!   flushes), generic over the kind;
//! - [`read`]: range reads merging slices, and series merged into one;
//! - [`series`]: the service and the writer every kind of named series
//!   shares, and a [`Page`] of names;
//! - [`cleaner`]: trims old slices of every space the cleaner keeps;
//! - [`keyed`]: the write id an idempotency key stands for.
//!
//! Services (counters, statistics, gauges and sets) are thin: their own
//! validation and view of a value over these.

pub mod aggregate;
pub mod cleaner;
pub mod keyed;
pub mod kinds;
pub mod plan;
pub mod precision;
pub mod read;
pub mod series;
pub mod store;
pub mod writer;

pub use aggregate::{Aggregate, Codec, Kind, Undo, Value};
pub use cleaner::{Cleaner, CleanerSettings, PassObserver};
pub use precision::Precision;
pub use read::Sample;
pub use series::Page;
pub use store::{
    Applied, Batch, BatchSink, CellDelta, CleanJob, CleanReport, Due, HeldReads, Reads, Retention,
    SeriesList, SeriesWrite, SliceRead, SliceSel, SliceStore, Slices, Space, WriteSeq, branch_of,
    collapse_by_pages, contains_by_listing,
};
pub use writer::{WhenFull, Writer, WriterSettings, WriterStats};
