//! The gauge kind: a value that is set or adjusted (statsd `name:42|g`,
//! `name:+3|g`, `name:-3|g`), kept per slice as its last, lowest and
//! highest value.
//!
//! A [`GaugeValue`] is a composed sequence of operations, in order:
//! - its *relative* part, the adjustments before the first absolute set:
//!   their total `d` and the lowest and highest of their running sums;
//! - its *absolute* part, from the first set on: the last value and the
//!   lowest and highest of the values held after each operation.
//!
//! A stored slice is absolute only (its last, min and max). Applied to a
//! gauge's current value `c` (the last value of its newest slice, 0 if it
//! has none), the values held after each operation are `c + running sum`
//! then the absolute values: a slice's min and max are taken over the values
//! held after each operation in it (not over `c` itself, held before). A
//! store folds a write's delta into a slice with [`GaugeValue::merge`] when
//! the slice exists and with [`GaugeValue::applied`] (from the gauge's
//! current value) when it does not; the Lua twin is
//! `backend/redis/lua/kind_gauge.lua`'s `merge_gauge`.
//!
//! Laws (tested below): composing is associative, with the empty sequence
//! as identity, exactly for values whose sums are exact (small integers),
//! up to rounding otherwise. It is *not* commutative and cannot be: "set 1
//! then set 2" ends at 2 and "set 2 then set 1" at 1; the meaning of a gauge
//! is its order, so deltas are composed in the order they were written
//! (tests check that order is kept). Values and adjustments are finite
//! (`-0.0` counts as `0`); a value that would become infinite is an error
//! that changes nothing.
//!
//! Encoding: a MessagePack array `[1, parts, ...]` where `parts` is 1
//! (relative part only), 2 (absolute only), 3 (both) or 0 (the identity),
//! followed by the relative part `d, lo, hi` when present, then the
//! absolute part `last, lo, hi` when present; numbers as Redis's cmsgpack
//! writes them.

use serde::{Deserialize, Serialize};

use super::msgpack::{Reader, Writer};
use crate::engine::aggregate::{Aggregate, Codec};
use crate::error::{Error, Result};

const FORMAT: i64 = 1;
const RELATIVE: i64 = 1;
const ABSOLUTE: i64 = 2;

/// The relative part: the total adjustment and the range of running sums.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Run {
    d: f64,
    lo: f64,
    hi: f64,
}

/// The absolute part: the last value and the range of values held.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Held {
    last: f64,
    lo: f64,
    hi: f64,
}

/// A gauge's operations in one slice (or a write's delta), composed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GaugeValue {
    relative: Option<Run>,
    absolute: Option<Held>,
}

/// What a stored gauge slice reads as.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GaugeReading {
    /// The value after the slice's last operation.
    pub last: f64,
    /// The lowest value held after an operation in the slice.
    pub min: f64,
    /// The highest.
    pub max: f64,
}

fn finite(what: &str, x: f64) -> Result<f64> {
    if x.is_finite() {
        Ok(x + 0.0) // -0.0 counts as 0
    } else {
        Err(Error::InvalidInput(format!(
            "the gauge {what} {x:?} is not a finite number; nothing was changed"
        )))
    }
}

impl GaugeValue {
    /// The operation "set the gauge to `x`".
    pub fn set(x: f64) -> Result<Self> {
        let x = finite("value", x)?;
        Ok(GaugeValue {
            relative: None,
            absolute: Some(Held {
                last: x,
                lo: x,
                hi: x,
            }),
        })
    }

    /// The operation "add `d` to the gauge" (negative to subtract).
    pub fn adjust(d: f64) -> Result<Self> {
        let d = finite("adjustment", d)?;
        Ok(GaugeValue {
            relative: Some(Run { d, lo: d, hi: d }),
            absolute: None,
        })
    }

    /// `self` then `next`. Fails, changing nothing, when a value would
    /// become infinite.
    fn then(&self, next: &GaugeValue) -> Result<GaugeValue> {
        let composed = match self.absolute {
            Some(mut h) => {
                if let Some(r) = next.relative {
                    h = Held {
                        last: h.last + r.d,
                        lo: h.lo.min(h.last + r.lo),
                        hi: h.hi.max(h.last + r.hi),
                    };
                }
                if let Some(n) = next.absolute {
                    h = Held {
                        last: n.last,
                        lo: h.lo.min(n.lo),
                        hi: h.hi.max(n.hi),
                    };
                }
                GaugeValue {
                    relative: self.relative,
                    absolute: Some(h),
                }
            }
            None => GaugeValue {
                relative: match (self.relative, next.relative) {
                    (Some(a), Some(b)) => Some(Run {
                        d: a.d + b.d,
                        lo: a.lo.min(a.d + b.lo),
                        hi: a.hi.max(a.d + b.hi),
                    }),
                    (a, None) => a,
                    (None, b) => b,
                },
                absolute: next.absolute,
            },
        };
        let finite = |x: f64| x.is_finite();
        let ok = composed
            .relative
            .is_none_or(|r| finite(r.d) && finite(r.lo) && finite(r.hi))
            && composed
                .absolute
                .is_none_or(|h| finite(h.last) && finite(h.lo) && finite(h.hi));
        if ok {
            Ok(composed)
        } else {
            Err(Error::InvalidInput(
                "the gauge's value would become infinite; nothing was changed".into(),
            ))
        }
    }

    /// This delta applied to a gauge whose current value is `current` and
    /// whose slice holds nothing yet: the slice's value (absolute only; the
    /// identity stays the identity).
    pub fn applied(&self, current: f64) -> Result<GaugeValue> {
        if self.is_identity() {
            return Ok(*self);
        }
        let start = GaugeValue {
            relative: None,
            absolute: Some(Held {
                last: finite("value", current)?,
                lo: f64::INFINITY,
                hi: f64::NEG_INFINITY,
            }),
        };
        start.then(self)
    }

    /// Folds a write's delta into a stored slice: merged into `old` when
    /// the slice holds something, else applied from the gauge's `current`
    /// value. Returns the slice's new value and the gauge's value after
    /// it, or `None` when the delta holds no operation (nothing to write).
    /// `engine_apply.lua` does the same with `merge_gauge`.
    pub fn fold_into(
        old: Option<&GaugeValue>,
        delta: &GaugeValue,
        current: f64,
    ) -> Result<Option<(GaugeValue, f64)>> {
        if delta.is_identity() {
            return Ok(None);
        }
        let new = match old {
            Some(old) => {
                if !old.is_absolute() {
                    return Err(Error::Corrupt(
                        "a stored gauge slice depends on a value before it".into(),
                    ));
                }
                old.then(delta)?
            }
            None => delta.applied(current)?,
        };
        let last = new.absolute.map_or(current, |h| h.last);
        Ok(Some((new, last)))
    }

    /// True when the value does not depend on the gauge's value before it
    /// (it starts with a set, or was applied): a stored slice.
    pub fn is_absolute(&self) -> bool {
        self.relative.is_none() && self.absolute.is_some()
    }

    /// The last, lowest and highest values, for an absolute value (a stored
    /// slice or a merge of them); `None` otherwise.
    pub fn reading(&self) -> Option<GaugeReading> {
        match (self.relative, self.absolute) {
            (None, Some(h)) => Some(GaugeReading {
                last: h.last,
                min: h.lo,
                max: h.hi,
            }),
            _ => None,
        }
    }
}

impl Aggregate for GaugeValue {
    fn identity() -> Self {
        GaugeValue::default()
    }

    /// Composes: `self`'s operations, then `other`'s.
    fn merge(&mut self, other: &Self) -> Result<()> {
        *self = self.then(other)?;
        Ok(())
    }

    fn is_identity(&self) -> bool {
        self.relative.is_none() && self.absolute.is_none()
    }
}

impl Codec for GaugeValue {
    fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        let parts = i64::from(self.relative.is_some()) * RELATIVE
            + i64::from(self.absolute.is_some()) * ABSOLUTE;
        let numbers = 3 * (self.relative.is_some() as usize + self.absolute.is_some() as usize);
        w.array(2 + numbers);
        w.int(FORMAT);
        w.int(parts);
        if let Some(r) = self.relative {
            for x in [r.d, r.lo, r.hi] {
                w.number(x);
            }
        }
        if let Some(h) = self.absolute {
            for x in [h.last, h.lo, h.hi] {
                w.number(x);
            }
        }
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes, "gauge");
        let len = r.array()?;
        if len < 2 {
            return Err(r.corrupt(format!("it has {len} fields")));
        }
        r.int_in("the format", FORMAT, FORMAT)?;
        let parts = r.int_in("parts", 0, RELATIVE | ABSOLUTE)?;
        let expected = 2 + 3 * ((parts & RELATIVE) + (parts & ABSOLUTE) / ABSOLUTE) as usize;
        if len != expected {
            return Err(r.corrupt(format!("it has {len} fields, not {expected}")));
        }
        let mut triple = |what: &str| -> Result<(f64, f64, f64)> {
            let (a, lo, hi) = (r.finite(what)?, r.finite(what)?, r.finite(what)?);
            if lo <= a && a <= hi {
                Ok((a, lo, hi))
            } else {
                Err(Error::Corrupt(format!(
                    "a stored gauge is malformed: its {what} part {a} is outside [{lo}, {hi}]"
                )))
            }
        };
        let relative = if parts & RELATIVE != 0 {
            let (d, lo, hi) = triple("relative")?;
            Some(Run { d, lo, hi })
        } else {
            None
        };
        let absolute = if parts & ABSOLUTE != 0 {
            let (last, lo, hi) = triple("absolute")?;
            Some(Held { last, lo, hi })
        } else {
            None
        };
        r.finish()?;
        Ok(GaugeValue { relative, absolute })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kinds::laws::{check_corrupt, check_merge, check_round_trip, merged};
    use proptest::prelude::*;

    #[derive(Clone, Copy, Debug)]
    enum Op {
        Set(f64),
        Adjust(f64),
    }

    fn op(o: Op) -> GaugeValue {
        match o {
            Op::Set(x) => GaugeValue::set(x).unwrap(),
            Op::Adjust(d) => GaugeValue::adjust(d).unwrap(),
        }
    }

    fn composed(ops: &[Op]) -> GaugeValue {
        let mut g = GaugeValue::identity();
        for &o in ops {
            g.merge(&op(o)).unwrap();
        }
        g
    }

    /// Runs the operations on a gauge starting at `c`: the values held
    /// after each one give (last, min, max).
    fn simulate(c: f64, ops: &[Op]) -> Option<GaugeReading> {
        let mut v = c;
        let mut seen = Vec::new();
        for &o in ops {
            v = match o {
                Op::Set(x) => x,
                Op::Adjust(d) => v + d,
            };
            seen.push(v);
        }
        (!seen.is_empty()).then(|| GaugeReading {
            last: v,
            min: seen.iter().copied().fold(f64::INFINITY, f64::min),
            max: seen.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }

    /// Integral operations: every sum is exact.
    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (-1000i32..1000).prop_map(|x| Op::Set(f64::from(x))),
            (-100i32..100).prop_map(|d| Op::Adjust(f64::from(d))),
        ]
    }

    #[test]
    fn order_is_kept() {
        let one_two = composed(&[Op::Set(1.0), Op::Set(2.0)]);
        let two_one = composed(&[Op::Set(2.0), Op::Set(1.0)]);
        assert_eq!(one_two.reading().unwrap().last, 2.0);
        assert_eq!(two_one.reading().unwrap().last, 1.0);
        // Merge is composition in order: not commutative.
        let mut a = op(Op::Set(1.0));
        a.merge(&op(Op::Set(2.0))).unwrap();
        let mut b = op(Op::Set(2.0));
        b.merge(&op(Op::Set(1.0))).unwrap();
        assert_ne!(a, b);
        // An adjustment before a set is lost in `last`, one after is kept.
        assert_eq!(
            composed(&[Op::Adjust(5.0), Op::Set(1.0)])
                .applied(10.0)
                .unwrap()
                .reading()
                .unwrap(),
            GaugeReading {
                last: 1.0,
                min: 1.0,
                max: 15.0
            }
        );
        assert_eq!(
            composed(&[Op::Set(1.0), Op::Adjust(5.0)])
                .applied(10.0)
                .unwrap()
                .reading()
                .unwrap(),
            GaugeReading {
                last: 6.0,
                min: 1.0,
                max: 6.0
            }
        );
    }

    #[test]
    fn relative_operations_continue_from_the_current_value() {
        let g = composed(&[Op::Adjust(3.0), Op::Adjust(-5.0)]);
        assert_eq!(g.reading(), None);
        assert!(!g.is_absolute());
        let slice = g.applied(10.0).unwrap();
        assert!(slice.is_absolute());
        assert_eq!(
            slice.reading().unwrap(),
            GaugeReading {
                last: 8.0,
                min: 8.0,
                max: 13.0
            }
        );
        assert_eq!(
            GaugeValue::identity().applied(4.0).unwrap(),
            GaugeValue::identity()
        );
    }

    #[test]
    fn non_finite_values_are_refused_and_infinity_is_not_reached() {
        let err = GaugeValue::set(f64::NAN).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid input: the gauge value NaN is not a finite number; nothing was changed"
        );
        assert!(
            GaugeValue::adjust(f64::INFINITY)
                .unwrap_err()
                .to_string()
                .contains("adjustment inf")
        );
        let mut g = op(Op::Set(f64::MAX));
        let before = g;
        let err = g.merge(&op(Op::Adjust(f64::MAX))).unwrap_err();
        assert!(err.to_string().contains("would become infinite"), "{err}");
        assert_eq!(g, before);
        assert_eq!(
            GaugeValue::set(-0.0)
                .unwrap()
                .reading()
                .unwrap()
                .last
                .to_bits(),
            0
        );
    }

    #[test]
    fn the_encoding_is_the_documented_msgpack_array() {
        let hex =
            |g: GaugeValue| -> String { g.to_bytes().iter().map(|b| format!("{b:02x}")).collect() };
        assert_eq!(hex(GaugeValue::identity()), "920100");
        // [1, 2, last 1.5, lo -3, hi 1.5]
        assert_eq!(
            hex(composed(&[Op::Set(-3.0), Op::Set(1.5)])),
            "950102ca3fc00000fdca3fc00000"
        );
        // [1, 3, d 2, lo 2, hi 2, last 7, lo 7, hi 7]
        assert_eq!(
            hex(composed(&[Op::Adjust(2.0), Op::Set(7.0)])),
            "9801030202020707 07".replace(' ', "")
        );
        check_corrupt::<GaugeValue>(&[
            &[0x92, 0x01, 0x04][..],
            &[0x93, 0x01, 0x02, 0x01],
            &[0x95, 0x01, 0x02, 0x05, 0x01, 0x02],
        ]);
    }

    proptest! {
        #[test]
        fn composing_is_associative_with_identity(
            a in proptest::collection::vec(arb_op(), 0..8),
            b in proptest::collection::vec(arb_op(), 0..8),
            c in proptest::collection::vec(arb_op(), 0..8),
        ) {
            let (ga, gb, gc) = (composed(&a), composed(&b), composed(&c));
            check_merge(&ga, &gb, &gc, false)?;
            let all: Vec<Op> = a.iter().chain(&b).chain(&c).copied().collect();
            prop_assert_eq!(merged(&ga, &[&gb, &gc]), composed(&all));
        }

        /// Applied to a current value, a composed delta gives what running
        /// the operations one by one gives; and splitting the operations
        /// into slices merged in order gives the same reading as one slice.
        #[test]
        fn applying_matches_running_the_operations(
            ops in proptest::collection::vec(arb_op(), 0..20),
            cut in 1usize..6,
            current in -50i32..50,
        ) {
            let c = f64::from(current);
            let slice = composed(&ops).applied(c).unwrap();
            prop_assert_eq!(slice.reading(), simulate(c, &ops));
            let mut stored: Option<GaugeValue> = None;
            for chunk in ops.chunks(cut) {
                let delta = composed(chunk);
                stored = Some(match stored {
                    Some(mut s) => { s.merge(&delta).unwrap(); s }
                    None => delta.applied(c).unwrap(),
                });
            }
            prop_assert_eq!(stored.and_then(|s| s.reading()), simulate(c, &ops));
        }

        /// Arbitrary doubles: compositions agree up to rounding.
        #[test]
        fn with_any_values_composing_agrees_up_to_rounding(
            ops in proptest::collection::vec(prop_oneof![
                (-1e6f64..1e6).prop_map(Op::Set), (-1e3f64..1e3).prop_map(Op::Adjust)], 1..20),
            split in 0usize..20,
        ) {
            let split = split.min(ops.len());
            let mut two = composed(&ops[..split]);
            two.merge(&composed(&ops[split..])).unwrap();
            let one = simulate(0.0, &ops).unwrap();
            let got = two.applied(0.0).unwrap().reading().unwrap();
            for (x, y) in [(got.last, one.last), (got.min, one.min), (got.max, one.max)] {
                prop_assert!((x - y).abs() <= 1e-9 * (1.0 + y.abs() + 2e4), "{} vs {}", x, y);
            }
        }

        #[test]
        fn encoding_round_trips(ops in proptest::collection::vec(prop_oneof![
            any::<f64>().prop_filter("finite", |x| x.is_finite() && x.abs() < 1e300).prop_map(Op::Set),
            (-1e9f64..1e9).prop_map(Op::Adjust)], 0..10)) {
            check_round_trip(&composed(&ops))?;
        }
    }
}
