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
