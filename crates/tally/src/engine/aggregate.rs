//! What every kind of value kept per slice is: a mergeable value with an
//! identity ([`Aggregate`]), optionally one whose merge can be taken back
//! ([`Undo`]), and a pure byte encoding shared by every store ([`Codec`]).
//!
//! The laws a kind keeps are checked by property tests in its module:
//! merging is associative, commutative where the kind's meaning allows it,
//! and the identity changes nothing; decoding an encoding gives the value
//! back. A kind states in its module docs any law it cannot keep and why.
//!
//! Stores and the write and read paths see kinds only through [`Kind`] (a
//! tag: which kind a space keeps) and [`Value`] (one value of any kind),
//! which dispatch to the kind's module; both are declared with the list of
//! kinds, in [`crate::engine::kinds`]. A new kind adds one arm to each.

use std::fmt;

pub use crate::engine::kinds::{Kind, Value};
use crate::error::Result;

/// A mergeable value kept per slice.
pub trait Aggregate: Clone + PartialEq + fmt::Debug + Send + Sync + 'static {
    /// The value that changes nothing when merged; an empty slice reads as it.
    fn identity() -> Self;

    /// Folds `other` into `self`. Fails, leaving `self` unchanged, only where
    /// the kind has a range to leave (a sum past 64 bits, a count past 2^53).
    fn merge(&mut self, other: &Self) -> Result<()>;

    /// True when merging `self` would change nothing.
    fn is_identity(&self) -> bool;
}

/// A kind whose merge can be taken back (all-or-nothing batches undo what
/// they already merged in process).
pub trait Undo: Aggregate {
    /// Takes back an earlier `merge(other)`. Fails, leaving `self`
    /// unchanged, where the result would leave the kind's range.
    fn subtract(&mut self, other: &Self) -> Result<()>;
}

/// The pure byte encoding of a kind: the same bytes in every store that
/// keeps the value as bytes (a SQLite BLOB, a Redis string or hash value).
pub trait Codec: Sized {
    /// Appends the encoding of `self` to `out`.
    fn encode(&self, out: &mut Vec<u8>);

    /// Reads a value back; fails with [`crate::Error::Corrupt`] naming what
    /// is wrong when `bytes` is not an encoding of this kind.
    fn decode(bytes: &[u8]) -> Result<Self>;

    /// The encoding as a new vector.
    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}
