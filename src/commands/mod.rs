//! The commands, one module per group: each holds its clap arguments and
//! its `run`, a thin shim over the library.
//!
//! Commands import the shared modules ([`crate::config`],
//! [`crate::context`], [`crate::output`]) and never the dispatcher
//! ([`crate::cli`]) nor each other.

pub mod bench;
pub mod buffer;
pub mod completions;
pub mod counters;
pub mod daily;
pub mod limit;
pub mod lock;
pub mod migrate;
pub mod serve;
pub mod sets;
pub mod stats;
pub mod ts;
