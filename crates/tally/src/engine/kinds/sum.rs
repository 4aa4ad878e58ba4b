//! Sums: a signed 64-bit total per slice (counters, time-series counts,
//! daily views).
//!
//! A sum is an `i64` that never holds `i64::MIN`, so every sum and every
//! delta can be negated (a write is taken back by adding its negation).
//! Merging is checked addition: a result past the range, or equal to
//! `i64::MIN`, is refused with [`Error::Overflow`] and changes nothing. The
//! error carries no series, precision or slice: the write path that knows
//! them fills them in ([`crate::engine::plan::locate`]).
//!
//! The encoding is the decimal text Redis keeps in a hash field and
//! `HINCRBY` reads (`-42`), without sign for positive values and without
//! leading zeros. SQLite keeps sums as INTEGER, not as this text. A stored
//! total may be `i64::MIN` (Redis's `HINCRBY` reaches it, and so does
//! [`add_stored`]): only deltas must be negatable, so decoding accepts it.
//!
//! Laws: merging is associative and commutative with 0 as identity wherever
//! no intermediate result leaves the range (the property tests stay inside
//! it, and check separately that a refused merge changes nothing); subtract
//! undoes merge.

use crate::engine::aggregate::{Aggregate, Codec, Undo};
use crate::error::{Error, Result};

/// Checks that a delta can be stored and negated: anything but `i64::MIN`.
pub fn check(delta: i64) -> Result<i64> {
    if delta == i64::MIN {
        return Err(Error::InvalidCount(format!(
            "{delta} is out of range (-{max} to {max})",
            max = i64::MAX
        )));
    }
    Ok(delta)
}

/// `a + b`, or `None` when it leaves the range (`i64::MIN` included).
#[inline]
pub fn add(a: i64, b: i64) -> Option<i64> {
    a.checked_add(b).filter(|&s| s != i64::MIN)
}

/// A stored total plus a delta, as Redis's `HINCRBY` adds it: `None` only
/// past the 64-bit range (the total may become `i64::MIN`; it is never
/// negated). Every store adds deltas to stored sums with this rule.
#[inline]
pub fn add_stored(total: i64, delta: i64) -> Option<i64> {
    total.checked_add(delta)
}

/// `a + b` clamped into the range: what the aggregating writer uses to fold
/// seconds into slices, where a total past the range can only be refused
/// by the store anyway (the stored count would leave it too).
#[inline]
pub fn add_clamped(a: i64, b: i64) -> i64 {
    a.saturating_add(b).max(-i64::MAX)
}

/// The overflow of a merge, not yet located (see the module docs).
pub(crate) fn overflow(delta: i64) -> Error {
    Error::Overflow {
        kind: "",
        name: String::new(),
        precision: 0,
        slice: 0,
        delta,
    }
}

impl Aggregate for i64 {
    fn identity() -> Self {
        0
    }

    #[inline]
    fn merge(&mut self, other: &Self) -> Result<()> {
        *self = add(*self, *other).ok_or_else(|| overflow(*other))?;
        Ok(())
    }

    fn is_identity(&self) -> bool {
        *self == 0
    }
}

impl Undo for i64 {
    fn subtract(&mut self, other: &Self) -> Result<()> {
        *self = self
            .checked_sub(*other)
            .filter(|&s| s != i64::MIN)
            .ok_or_else(|| overflow(other.checked_neg().unwrap_or(i64::MAX)))?;
        Ok(())
    }
}

impl Codec for i64 {
    fn encode(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        let _ = write!(out, "{self}");
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        std::str::from_utf8(bytes)
            .ok()
            .filter(|t| !t.starts_with('+'))
            .and_then(|t| t.parse::<i64>().ok())
            .ok_or_else(|| {
                Error::Corrupt(format!(
                    "{:?} is not a sum (a decimal integer)",
                    String::from_utf8_lossy(bytes)
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Values whose sums of three stay inside the range.
    fn small() -> impl Strategy<Value = i64> {
        -(i64::MAX / 4)..=(i64::MAX / 4)
    }

    #[test]
    fn overflow_is_refused_and_changes_nothing() {
        let mut a = i64::MAX;
        let err = a.merge(&1).unwrap_err();
        assert!(matches!(err, Error::Overflow { delta: 1, .. }), "{err}");
        assert_eq!(a, i64::MAX);
        // i64::MIN is out of range too: it could not be negated.
        let mut b = -i64::MAX;
        assert!(b.merge(&-1).is_err());
        assert_eq!(b, -i64::MAX);
        assert!(b.subtract(&1).is_err());
        assert_eq!(b, -i64::MAX);
        assert!(check(i64::MIN).is_err());
        assert_eq!(check(-5).unwrap(), -5);
    }

    #[test]
    fn decodes_what_redis_stores_and_names_what_is_not_a_sum() {
        assert_eq!(i64::decode(b"-42").unwrap(), -42);
        assert_eq!(i64::decode(b"0").unwrap(), 0);
        // A stored total may be i64::MIN (HINCRBY reaches it).
        assert_eq!(i64::decode(b"-9223372036854775808").unwrap(), i64::MIN);
        assert_eq!(add_stored(-i64::MAX, -1), Some(i64::MIN));
        assert_eq!(add_stored(i64::MAX, 1), None);
        for bad in [&b"1.5"[..], b"", b"x", b"+1", b"9223372036854775808"] {
            let err = i64::decode(bad).unwrap_err();
            assert!(matches!(err, Error::Corrupt(_)), "{err}");
            assert!(err.to_string().contains("not a sum"), "{err}");
        }
        assert_eq!(7i64.to_bytes(), b"7");
    }

    proptest! {
        #[test]
        fn merge_is_associative_and_commutative(a in small(), b in small(), c in small()) {
            let mut ab = a;
            ab.merge(&b).unwrap();
            let mut ab_c = ab;
            ab_c.merge(&c).unwrap();
            let mut bc = b;
            bc.merge(&c).unwrap();
            let mut a_bc = a;
            a_bc.merge(&bc).unwrap();
            prop_assert_eq!(ab_c, a_bc);
            let mut ba = b;
            ba.merge(&a).unwrap();
            prop_assert_eq!(ab, ba);
        }

        #[test]
        fn identity_changes_nothing(a in -i64::MAX..=i64::MAX) {
            let mut x = a;
            x.merge(&i64::identity()).unwrap();
            prop_assert_eq!(x, a);
            let mut id = i64::identity();
            id.merge(&a).unwrap();
            prop_assert_eq!(id, a);
            prop_assert!(i64::identity().is_identity());
        }

        #[test]
        fn subtract_undoes_merge(a in -i64::MAX..=i64::MAX, b in -i64::MAX..=i64::MAX) {
            let mut x = a;
            match x.merge(&b) {
                Ok(()) => {
                    x.subtract(&b).unwrap();
                    prop_assert_eq!(x, a);
                }
                Err(_) => prop_assert_eq!(x, a),
            }
        }

        #[test]
        fn encoding_round_trips(a in -i64::MAX..=i64::MAX) {
            prop_assert_eq!(i64::decode(&a.to_bytes()).unwrap(), a);
            prop_assert_eq!(a.to_bytes(), a.to_string().into_bytes());
        }
    }
}
