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
//! which dispatch to the kind's module. A new kind adds one arm to each.

use std::fmt;

use crate::error::{Error, Result};

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

/// Which kind of value a space keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// A signed 64-bit sum ([`super::kinds::sum`]).
    Sum,
}

impl Kind {
    /// The kind's code in stores: the Lua scripts' dispatch key.
    pub const fn code(self) -> u8 {
        match self {
            Kind::Sum => 1,
        }
    }

    /// The kind's name, for messages.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Sum => "sum",
        }
    }

    /// The value an empty slice reads as.
    pub fn identity(self) -> Value {
        match self {
            Kind::Sum => Value::Sum(0),
        }
    }

    /// True when the kind's merge can be taken back ([`Undo`]).
    pub const fn has_undo(self) -> bool {
        match self {
            Kind::Sum => true,
        }
    }

    /// Reads a stored value of this kind from its encoding ([`Codec`]).
    pub fn decode(self, bytes: &[u8]) -> Result<Value> {
        match self {
            Kind::Sum => i64::decode(bytes).map(Value::Sum),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One value of any kind: a delta a write carries, or what a slice holds.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// A sum ([`Kind::Sum`]).
    Sum(i64),
}

impl Value {
    /// The value's kind.
    pub const fn kind(&self) -> Kind {
        match self {
            Value::Sum(_) => Kind::Sum,
        }
    }

    /// Folds `other` into `self` with the kind's merge; fails, changing
    /// nothing, where the kind's range would be left, and (an internal
    /// error) when the kinds differ.
    #[inline]
    pub fn merge(&mut self, other: &Value) -> Result<()> {
        #[allow(unreachable_patterns)] // reachable once a second kind exists
        match (self, other) {
            (Value::Sum(a), Value::Sum(b)) => a.merge(b),
            (a, b) => Err(mismatch(a.kind(), b.kind())),
        }
    }

    /// Takes back an earlier `merge(other)`, for kinds with [`Undo`]; fails
    /// for the others (and where the range would be left).
    pub fn subtract(&mut self, other: &Value) -> Result<()> {
        #[allow(unreachable_patterns)] // reachable once a second kind exists
        match (self, other) {
            (Value::Sum(a), Value::Sum(b)) => a.subtract(b),
            (a, b) if a.kind() == b.kind() => Err(Error::Backend(format!(
                "internal error: {} values cannot be taken back",
                a.kind()
            ))),
            (a, b) => Err(mismatch(a.kind(), b.kind())),
        }
    }

    /// Checks that a delta is one its kind accepts from a caller (a sum is
    /// anything but `i64::MIN`, so it can be negated).
    pub fn check(&self) -> Result<()> {
        match self {
            Value::Sum(a) => super::kinds::sum::check(*a).map(|_| ()),
        }
    }

    /// True when merging `self` changes nothing.
    pub fn is_identity(&self) -> bool {
        match self {
            Value::Sum(a) => a.is_identity(),
        }
    }

    /// Appends the kind's encoding of `self` to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Value::Sum(a) => a.encode(out),
        }
    }

    /// The sum, for a value of [`Kind::Sum`].
    pub const fn as_sum(&self) -> Option<i64> {
        #[allow(unreachable_patterns)] // reachable once a second kind exists
        match self {
            Value::Sum(a) => Some(*a),
            _ => None,
        }
    }
}

/// The internal error of merging values of different kinds (a space keeps
/// one kind, so this is a bug, not bad input).
fn mismatch(a: Kind, b: Kind) -> Error {
    Error::Backend(format!(
        "internal error: cannot merge a {b} value into a {a} value"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_dispatch_to_their_kind() {
        let mut v = Kind::Sum.identity();
        assert!(v.is_identity());
        v.merge(&Value::Sum(5)).unwrap();
        v.merge(&Value::Sum(-2)).unwrap();
        assert_eq!(v, Value::Sum(3));
        assert_eq!(v.as_sum(), Some(3));
        v.subtract(&Value::Sum(3)).unwrap();
        assert!(v.is_identity());
        let mut out = Vec::new();
        Value::Sum(-12).encode(&mut out);
        assert_eq!(Kind::Sum.decode(&out).unwrap(), Value::Sum(-12));
        assert_eq!(Kind::Sum.code(), 1);
        assert!(Kind::Sum.has_undo());
        assert!(Value::Sum(i64::MIN).check().is_err());
        Value::Sum(-3).check().unwrap();
        // A refused merge changes nothing.
        let mut full = Value::Sum(i64::MAX);
        assert!(full.merge(&Value::Sum(1)).is_err());
        assert_eq!(full, Value::Sum(i64::MAX));
    }
}
