//! The distinct-count kind: a set of values, estimated with a HyperLogLog
//! register-compatible with Redis ([`Hll`], the one implementation: the time-series store's too).
//!
//! A [`DistinctValue`] holds up to [`SET_CAP`] values as they are (a Redis
//! store adds them with PFADD, which needs the raw values) and turns into
//! the registers of a HyperLogLog past that (a Redis store PFMERGEs
//! [`DistinctValue::redis_bytes`], the same registers in Redis's own dense
//! encoding). Merging is set union: values into values (registers once the
//! union passes the cap), values into registers, registers by their maximum.
//! It is associative and commutative with the empty set as identity,
//! exactly: the result is the union's values when they fit and no operand
//! was registers, else the registers of the union, whatever the grouping.
//! A union cannot be undone, so there is no `Undo`.
//!
//! [`DistinctValue::estimate`] always counts through the registers (Redis's
//! estimator), so a set reads the same before and after it turns into
//! registers, and the same as Redis's PFCOUNT of the same values.
//!
//! Encoding: registers as [`Hll::to_bytes`] writes them (first byte 1:
//! sparse, 2: dense); values as the byte 3 then a MessagePack array of the
//! values as strings, in byte order.

use std::collections::BTreeSet;

use super::hll::Hll;
use super::msgpack::{Reader, Writer};
use crate::engine::aggregate::{Aggregate, Codec};
use crate::error::Result;

/// The most values kept as they are; one more and they become registers.
pub const SET_CAP: usize = 256;

const VALUES: u8 = 3;
const REGISTERS: usize = 1 << 14;

/// A set of distinct values, exact while small.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DistinctValue {
    /// At most [`SET_CAP`] values.
    Values(BTreeSet<String>),
    /// The registers of a HyperLogLog of more values.
    Registers(Box<Hll>),
}

impl Default for DistinctValue {
    fn default() -> Self {
        DistinctValue::Values(BTreeSet::new())
    }
}

fn hll_of<'a>(values: impl IntoIterator<Item = &'a String>, mut hll: Hll) -> Hll {
    for v in values {
        hll.add(v.as_bytes());
    }
    hll
}

impl DistinctValue {
    /// The set of `values`.
    pub fn of<S: AsRef<str>>(values: impl IntoIterator<Item = S>) -> Self {
        let mut d = DistinctValue::default();
        for v in values {
            d.insert(v.as_ref());
        }
        d
    }

    /// Adds one value.
    pub fn insert(&mut self, value: &str) {
        match self {
            DistinctValue::Values(set) => {
                if set.contains(value) {
                    return;
                }
                set.insert(value.to_owned());
                if set.len() > SET_CAP {
                    *self = DistinctValue::Registers(Box::new(hll_of(&*set, Hll::default())));
                }
            }
            DistinctValue::Registers(hll) => {
                hll.add(value.as_bytes());
            }
        }
    }

    /// The HyperLogLog of the set.
    pub fn to_hll(&self) -> Hll {
        match self {
            DistinctValue::Values(set) => hll_of(set, Hll::default()),
            DistinctValue::Registers(hll) => (**hll).clone(),
        }
    }

    /// The estimated number of distinct values (Redis's estimator, also
    /// for a set of values).
    pub fn estimate(&self) -> u64 {
        self.to_hll().count()
    }

    /// The set's HyperLogLog in Redis's dense encoding (what GET returns for
    /// a dense HLL key): "HYLL", encoding 0, 3 unused bytes, 8 bytes of
    /// cached cardinality marked stale, then 16384 6-bit registers packed
    /// least significant bit first. PFMERGE accepts it as a source key.
    pub fn redis_bytes(&self) -> Vec<u8> {
        let registers = registers(&self.to_hll());
        let mut out = vec![0u8; 16 + REGISTERS * 6 / 8];
        out[..4].copy_from_slice(b"HYLL");
        // The cached cardinality's most significant bit: not valid.
        out[15] = 0x80;
        let dense = &mut out[16..];
        for (i, &r) in registers.iter().enumerate() {
            let bit = i * 6;
            let (byte, shift) = (bit / 8, bit % 8);
            let v = u16::from(r & 0x3f) << shift;
            dense[byte] |= v as u8;
            if shift > 2 {
                dense[byte + 1] |= (v >> 8) as u8;
            }
        }
        out
    }
}

impl DistinctValue {
    /// What a Redis store sends as a delta: a set of values in its own
    /// encoding (PFADD takes the values), registers as [`Self::redis_bytes`]
    /// (PFMERGE takes Redis's HyperLogLog).
    pub fn encode_for_redis(&self, out: &mut Vec<u8>) {
        match self {
            DistinctValue::Values(_) => self.encode(out),
            DistinctValue::Registers(_) => out.extend_from_slice(&self.redis_bytes()),
        }
    }
}

/// The 2^14 registers of `hll`, one byte each, read from its encoding.
fn registers(hll: &Hll) -> Vec<u8> {
    let bytes = hll.to_bytes();
    let mut out = vec![0u8; REGISTERS];
    match bytes.split_first() {
        Some((2, dense)) => out.copy_from_slice(dense),
        Some((_, sparse)) => {
            for t in sparse.chunks_exact(3) {
                out[usize::from(u16::from_le_bytes([t[0], t[1]]))] = t[2];
            }
        }
        None => {}
    }
    out
}

impl Aggregate for DistinctValue {
    fn identity() -> Self {
        DistinctValue::default()
    }

    /// Set union; never fails.
    fn merge(&mut self, other: &Self) -> Result<()> {
        match other {
            DistinctValue::Values(theirs) => {
                for v in theirs {
                    self.insert(v);
                }
            }
            DistinctValue::Registers(theirs) => match self {
                DistinctValue::Registers(mine) => mine.merge(theirs),
                DistinctValue::Values(mine) => {
                    let hll = hll_of(&*mine, (**theirs).clone());
                    *self = DistinctValue::Registers(Box::new(hll));
                }
            },
        }
        Ok(())
    }

    fn is_identity(&self) -> bool {
        matches!(self, DistinctValue::Values(set) if set.is_empty())
    }
}

impl Codec for DistinctValue {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            DistinctValue::Values(set) => {
                out.push(VALUES);
                let mut w = Writer::new(out);
                w.array(set.len());
                for v in set {
                    w.str(v);
                }
            }
            DistinctValue::Registers(hll) => out.extend_from_slice(&hll.to_bytes()),
        }
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        match bytes.split_first() {
            Some((&VALUES, rest)) => {
                let mut r = Reader::new(rest, "set of distinct values");
                let len = r.array()?;
                if len > SET_CAP {
                    return Err(r.corrupt(format!("it holds {len} values, more than {SET_CAP}")));
                }
                let mut set = BTreeSet::new();
                for _ in 0..len {
                    let v = r.str()?;
                    if set.last().is_some_and(|last: &String| last.as_str() >= v) {
                        return Err(r.corrupt(format!("value {v:?} is out of order")));
                    }
                    set.insert(v.to_owned());
                }
                r.finish()?;
                Ok(DistinctValue::Values(set))
            }
            _ => Ok(DistinctValue::Registers(Box::new(Hll::from_bytes(bytes)?))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kinds::laws::{check_corrupt, check_merge, check_round_trip};
    use proptest::prelude::*;

    /// Sets drawn from a pool of 400 values, so unions cross the cap.
    fn arb_distinct() -> impl Strategy<Value = DistinctValue> {
        prop_oneof![
            proptest::collection::vec(0u16..400, 0..40),
            proptest::collection::vec(0u16..400, 200..300),
        ]
        .prop_map(|vs| DistinctValue::of(vs.iter().map(|v| format!("v{v}"))))
    }

    #[test]
    fn values_turn_into_registers_past_the_cap() {
        let values: Vec<String> = (0..=SET_CAP).map(|i| format!("user:{i}")).collect();
        let small = DistinctValue::of(&values[..SET_CAP]);
        assert!(matches!(&small, DistinctValue::Values(s) if s.len() == SET_CAP));
        let big = DistinctValue::of(&values);
        assert!(matches!(big, DistinctValue::Registers(_)));
        assert_eq!(big.to_hll(), hll_of(&values, Hll::default()));
        // The estimate is the registers' either way.
        assert_eq!(small.estimate(), small.to_hll().count());
        assert_eq!(DistinctValue::default().estimate(), 0);
    }

    #[test]
    fn redis_bytes_pack_six_bits_per_register() {
        let d = DistinctValue::of(["a", "b", "c"]);
        let bytes = d.redis_bytes();
        assert_eq!(bytes.len(), 12304);
        let regs = registers(&d.to_hll());
        for (i, &r) in regs.iter().enumerate() {
            let bit = i * 6;
            let word = u16::from(bytes[16 + bit / 8])
                | (u16::from(*bytes.get(16 + bit / 8 + 1).unwrap_or(&0)) << 8);
            assert_eq!(((word >> (bit % 8)) & 0x3f) as u8, r, "register {i}");
        }
        assert_eq!(regs.iter().filter(|&&r| r > 0).count(), 3);
    }

    #[test]
    fn malformed_blobs_are_corrupt() {
        check_corrupt::<DistinctValue>(&[
            &[3u8, 0x92, 0xa1, 0x62, 0xa1, 0x61][..],
            &[3, 0x91],
            &[9],
            &[],
        ]);
    }

    proptest! {
        #[test]
        fn union_is_associative_and_commutative_with_identity(
            a in arb_distinct(), b in arb_distinct(), c in arb_distinct(),
        ) {
            check_merge(&a, &b, &c, true)?;
        }

        #[test]
        fn encoding_round_trips(a in arb_distinct()) {
            check_round_trip(&a)?;
        }
    }
}
