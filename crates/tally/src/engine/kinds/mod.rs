//! The kinds of value kept per slice, one module each: its math, its merge
//! rule and its pure encoding, nothing else.

pub mod distinct;
pub mod gauge;
pub mod hll;
#[cfg(test)]
mod laws;
pub(crate) mod msgpack;
pub mod sketch;
pub mod stats;
pub mod sum;
pub mod top;

pub use distinct::DistinctValue;
pub use gauge::GaugeValue;
pub use hll::Hll;
pub use sketch::{Sketch, SketchSettings};
pub use stats::StatsValue;
pub use top::TopValue;
