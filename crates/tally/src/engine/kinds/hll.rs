//! HyperLogLog, register-compatible with Redis: the one implementation,
//! behind the distinct kind ([`super::distinct`]) and the time-series
//! store's SQLite HyperLogLogs (`tsdb::hll` is this module).
//!
//! The same parameters as Redis's PFADD/PFCOUNT: 2^14 registers,
//! MurmurHash64A with Redis's seed, and Redis's estimator (Ertl's improved
//! raw estimator), so the same values give the same registers and the same
//! estimate on either backend (standard error 0.81%). Serialized sparse (3
//! bytes per non-zero register) while small, dense (one byte per register)
//! after. Union is the register-wise maximum.
//!
//! [`Hll::from_redis`] reads Redis's own string of a HyperLogLog key (what
//! GET returns after PFADD or PFMERGE: "HYLL", then dense 6-bit registers
//! or sparse ZERO/XZERO/VAL opcodes), so a store that keeps Redis's
//! HyperLogLogs merges and counts them in Rust exactly as SQLite's.

use crate::error::{Error, Result};

const P: u32 = 14;
const M: usize = 1 << P;
const Q: u32 = 64 - P;
const SEED: u64 = 0xadc8_3b19;
const SPARSE: u8 = 1;
const DENSE: u8 = 2;

/// A HyperLogLog sketch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hll {
    registers: Vec<u8>,
}

impl Default for Hll {
    fn default() -> Self {
        Hll {
            registers: vec![0; M],
        }
    }
}

impl Hll {
    /// Adds a value; true when a register changed.
    pub fn add(&mut self, value: &[u8]) -> bool {
        let hash = murmur64a(value, SEED);
        let index = (hash & (M as u64 - 1)) as usize;
        let rest = (hash >> P) | (1u64 << Q);
        let rank = rest.trailing_zeros() as u8 + 1;
        if rank > self.registers[index] {
            self.registers[index] = rank;
            true
        } else {
            false
        }
    }

    /// Folds `other` in (set union).
    pub fn merge(&mut self, other: &Hll) {
        for (a, &b) in self.registers.iter_mut().zip(&other.registers) {
            *a = (*a).max(b);
        }
    }

    /// The estimated number of distinct values (Redis's estimator).
    pub fn count(&self) -> u64 {
        let mut histogram = [0u32; 64];
        for &r in &self.registers {
            histogram[r as usize] += 1;
        }
        let m = M as f64;
        let mut z = m * tau((m - f64::from(histogram[Q as usize + 1])) / m);
        for j in (1..=Q as usize).rev() {
            z += f64::from(histogram[j]);
            z *= 0.5;
        }
        z += m * sigma(f64::from(histogram[0]) / m);
        const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
        (ALPHA_INF * m * m / z).round() as u64
    }

    /// Serializes the registers.
    pub fn to_bytes(&self) -> Vec<u8> {
        let nonzero = self.registers.iter().filter(|&&r| r > 0).count();
        if nonzero * 3 < M {
            let mut out = Vec::with_capacity(1 + nonzero * 3);
            out.push(SPARSE);
            for (i, &r) in self.registers.iter().enumerate() {
                if r > 0 {
                    out.extend_from_slice(&(i as u16).to_le_bytes());
                    out.push(r);
                }
            }
            out
        } else {
            let mut out = Vec::with_capacity(1 + M);
            out.push(DENSE);
            out.extend_from_slice(&self.registers);
            out
        }
    }

    /// Reads Redis's string of a HyperLogLog key: a 16-byte header ("HYLL",
    /// the encoding, 3 unused bytes, 8 bytes of cached cardinality), then
    /// either the 2^14 registers packed 6 bits each, least significant bit
    /// first (dense, encoding 0), or opcodes covering every register in
    /// order (sparse, encoding 1): ZERO `00xxxxxx` (x + 1 zero registers),
    /// XZERO `01xxxxxx yyyyyyyy` (the 14-bit xy + 1 zero registers), VAL
    /// `1vvvvvxx` (x + 1 registers holding v + 1). Anything else, or
    /// opcodes that do not cover exactly 2^14 registers, is
    /// [`Error::Corrupt`].
    pub fn from_redis(bytes: &[u8]) -> Result<Self> {
        let bad =
            |why: &str| Error::Corrupt(format!("a Redis HyperLogLog string is malformed: {why}"));
        if bytes.len() < 16 || &bytes[..4] != b"HYLL" {
            return Err(bad("it does not start with the \"HYLL\" header"));
        }
        let body = &bytes[16..];
        let mut hll = Hll::default();
        match bytes[4] {
            0 => {
                if body.len() != M * 6 / 8 {
                    return Err(bad("its dense registers are not 12288 bytes"));
                }
                for (i, r) in hll.registers.iter_mut().enumerate() {
                    let bit = i * 6;
                    let (byte, shift) = (bit / 8, bit % 8);
                    let lo = u16::from(body[byte]);
                    let hi = u16::from(body.get(byte + 1).copied().unwrap_or(0));
                    *r = (((lo | (hi << 8)) >> shift) & 0x3f) as u8;
                }
            }
            1 => {
                let mut at = 0usize;
                let mut ops = body.iter();
                while let Some(&op) = ops.next() {
                    let (run, value) = match op >> 6 {
                        0 => (usize::from(op & 0x3f) + 1, 0),
                        1 => {
                            let next = *ops
                                .next()
                                .ok_or_else(|| bad("an XZERO opcode is cut short"))?;
                            ((usize::from(op & 0x3f) << 8 | usize::from(next)) + 1, 0)
                        }
                        _ => (usize::from(op & 0x3) + 1, ((op >> 2) & 0x1f) + 1),
                    };
                    let regs = hll
                        .registers
                        .get_mut(at..at + run)
                        .ok_or_else(|| bad("its sparse opcodes cover more than 16384 registers"))?;
                    regs.fill(value);
                    at += run;
                }
                if at != M {
                    return Err(bad("its sparse opcodes do not cover 16384 registers"));
                }
            }
            other => return Err(bad(&format!("its encoding byte is {other}"))),
        }
        Ok(hll)
    }

    /// Reads what [`Hll::to_bytes`] wrote.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let bad = || Error::Corrupt("a stored HyperLogLog is malformed".into());
        let mut hll = Hll::default();
        match bytes.split_first() {
            Some((&SPARSE, rest)) if rest.len() % 3 == 0 => {
                for chunk in rest.chunks_exact(3) {
                    let i = u16::from_le_bytes([chunk[0], chunk[1]]) as usize;
                    *hll.registers.get_mut(i).ok_or_else(bad)? = chunk[2];
                }
            }
            Some((&DENSE, rest)) if rest.len() == M => hll.registers.copy_from_slice(rest),
            _ => return Err(bad()),
        }
        Ok(hll)
    }
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let zp = z;
        z += x * y;
        y += y;
        if zp == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let zp = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if zp == z {
            return z / 3.0;
        }
    }
}

/// MurmurHash64A, as Redis hashes HyperLogLog values.
fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const MUL: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(MUL);
    let mut chunks = key.chunks_exact(8);
    for chunk in &mut chunks {
        let mut k = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        k = k.wrapping_mul(MUL);
        k ^= k >> R;
        k = k.wrapping_mul(MUL);
        h ^= k;
        h = h.wrapping_mul(MUL);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(MUL);
    }
    h ^= h >> R;
    h = h.wrapping_mul(MUL);
    h ^= h >> R;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_are_close_and_union_is_idempotent() {
        let mut a = Hll::default();
        assert_eq!(a.count(), 0);
        for i in 0..10_000 {
            a.add(format!("user:{i}").as_bytes());
        }
        let est = a.count() as f64;
        assert!((est - 10_000.0).abs() < 10_000.0 * 0.03, "{est}");
        let mut b = Hll::default();
        for i in 5_000..15_000 {
            b.add(format!("user:{i}").as_bytes());
        }
        let mut u = a.clone();
        u.merge(&b);
        let est = u.count() as f64;
        assert!((est - 15_000.0).abs() < 15_000.0 * 0.03, "{est}");
        let again = {
            let mut x = u.clone();
            x.merge(&b);
            x
        };
        assert_eq!(again, u);
    }

    #[test]
    fn small_sets_are_counted_exactly() {
        let mut h = Hll::default();
        for i in 0..100 {
            h.add(i.to_string().as_bytes());
            h.add(i.to_string().as_bytes());
        }
        assert_eq!(h.count(), 100);
    }

    /// What a real redis-server 7.0 answered to GET after PFADD of
    /// `user:0` .. `user:<n-1>` (sparse for 100 values, dense for 5,000),
    /// and its PFCOUNT then: 100 and 5025.
    const REDIS_SPARSE_100: &[u8] = include_bytes!("testdata/redis_sparse_100.hll");
    const REDIS_DENSE_5000: &[u8] = include_bytes!("testdata/redis_dense_5000.hll");

    fn users(n: u32) -> Hll {
        let mut h = Hll::default();
        for i in 0..n {
            h.add(format!("user:{i}").as_bytes());
        }
        h
    }

    #[test]
    fn redis_strings_read_as_the_same_registers_and_count_as_pfcount() {
        assert_eq!(REDIS_SPARSE_100[4], 1, "the fixture is sparse");
        assert_eq!(REDIS_DENSE_5000[4], 0, "the fixture is dense");
        let sparse = Hll::from_redis(REDIS_SPARSE_100).unwrap();
        assert_eq!(sparse, users(100));
        assert_eq!(sparse.count(), 100);
        let dense = Hll::from_redis(REDIS_DENSE_5000).unwrap();
        assert_eq!(dense, users(5000));
        assert_eq!(dense.count(), 5025);
    }

    #[test]
    fn malformed_redis_strings_are_corrupt_and_say_why() {
        let why = |b: &[u8]| match Hll::from_redis(b) {
            Err(Error::Corrupt(why)) => why,
            other => panic!("{other:?}"),
        };
        assert!(why(b"HYLX").contains("header"));
        let mut dense = REDIS_DENSE_5000.to_vec();
        dense.pop();
        assert!(why(&dense).contains("12288 bytes"));
        let mut enc = REDIS_SPARSE_100.to_vec();
        enc[4] = 7;
        assert!(why(&enc).contains("encoding byte is 7"));
        // One ZERO opcode too many, one too few, an XZERO cut short.
        let mut long = REDIS_SPARSE_100.to_vec();
        long.push(0x00);
        assert!(why(&long).contains("more than 16384"));
        // (The fixture ends with an XZERO: drop both its bytes.)
        let short = &REDIS_SPARSE_100[..REDIS_SPARSE_100.len() - 2];
        assert!(why(short).contains("do not cover"));
        let mut cut = REDIS_SPARSE_100[..16].to_vec();
        cut.push(0x40);
        assert!(why(&cut).contains("cut short"));
    }

    #[test]
    fn bytes_round_trip_both_encodings() {
        let mut h = Hll::default();
        for i in 0..50 {
            h.add(&[i]);
        }
        let sparse = h.to_bytes();
        assert_eq!(sparse[0], SPARSE);
        assert_eq!(Hll::from_bytes(&sparse).unwrap(), h);
        for i in 0..100_000u32 {
            h.add(&i.to_le_bytes());
        }
        let dense = h.to_bytes();
        assert_eq!(dense[0], DENSE);
        assert_eq!(Hll::from_bytes(&dense).unwrap(), h);
        assert!(Hll::from_bytes(&[9, 1]).is_err());
        assert!(Hll::from_bytes(&[]).is_err());
    }
}
