//! The slice engine: one write path, one read path and one aggregating
//! writer for every value Tally keeps per (series, resolution, slice).
//!
//! A counter's slice holds a sum; a time-series bucket a sum, a HyperLogLog
//! or a top-N table; a statistic's slice its moments and a quantile sketch; a
//! gauge's slice its last, lowest and highest value. Each of these is a
//! *kind*: a mergeable value ([`Aggregate`]) with a pure byte encoding
//! ([`Codec`]). Kinds live in [`kinds`], one small module each, holding only
//! their math, their merge rule and their encoding; validation, slice
//! resolution, duplicate merging, batching, exactly-once flushes, range
//! reads and storage are written once, for every kind.

pub mod aggregate;
pub mod kinds;

pub use aggregate::{Aggregate, Codec, Undo};
