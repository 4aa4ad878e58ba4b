//! The few MessagePack shapes the kinds' encodings use: arrays, integers,
//! doubles and strings, written the way Redis's Lua `cmsgpack.pack` writes
//! them and read in every form it may write.
//!
//! Redis's scripts merge stored blobs with `cmsgpack.unpack` /
//! `cmsgpack.pack`, so the bytes a script writes back must read here, and
//! the bytes written here should be the bytes the script would write for the
//! same value (the Lua merge tests compare them byte for byte). cmsgpack
//! (Redis 7's `deps/lua/src/lua_cmsgpack.c`, checked against a real
//! redis-server) writes a Lua number, always a double:
//! - as an integer when it is integral and within `i64` (so `-0.0` becomes
//!   `0`), in the smallest form: positive fixint, uint8/16/32/64 for
//!   non-negative values, negative fixint, int8/16/32/64 for negative ones;
//! - otherwise as a float32 when the float32 holds it exactly, else as a
//!   float64.
//!
//! [`Writer::number`] follows exactly that rule; [`Reader::number`] takes
//! every integer width (signed or not) and both float widths. Maps, nil,
//! booleans, binary and extension types are not used by any kind and are
//! refused as corrupt.

use crate::error::{Error, Result};

/// 2^63 as a double: the first integral double outside `i64`.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// Appends MessagePack values to a byte vector.
pub(crate) struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        Writer { out }
    }

    /// An array header for `len` elements (the elements follow).
    pub(crate) fn array(&mut self, len: usize) {
        if len < 16 {
            self.out.push(0x90 | len as u8);
        } else {
            self.long_len(len, 0xdc, 0xdd);
        }
    }

    /// A length past the short forms: `tag16` and a big-endian u16 when
    /// it fits, else `tag32` and a u32 (arrays' and strings' headers).
    fn long_len(&mut self, len: usize, tag16: u8, tag32: u8) {
        if len <= 0xffff {
            self.out.push(tag16);
            self.out.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            self.out.push(tag32);
            self.out.extend_from_slice(&(len as u32).to_be_bytes());
        }
    }

    /// An integer in its smallest form, as cmsgpack writes it.
    pub(crate) fn int(&mut self, n: i64) {
        let out = &mut *self.out;
        if n >= 0 {
            if n <= 127 {
                out.push(n as u8);
            } else if n <= 0xff {
                out.extend_from_slice(&[0xcc, n as u8]);
            } else if n <= 0xffff {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            } else if n <= 0xffff_ffff {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            } else {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        } else if n >= -32 {
            out.push(n as i8 as u8);
        } else if n >= -128 {
            out.extend_from_slice(&[0xd0, n as i8 as u8]);
        } else if n >= -32768 {
            out.push(0xd1);
            out.extend_from_slice(&(n as i16).to_be_bytes());
        } else if n >= -2_147_483_648 {
            out.push(0xd2);
            out.extend_from_slice(&(n as i32).to_be_bytes());
        } else {
            out.push(0xd3);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }

    /// A double, as cmsgpack writes a Lua number: an integer when integral
    /// and within `i64`, else a float32 when exact, else a float64.
    pub(crate) fn number(&mut self, x: f64) {
        if x.is_finite() && x.trunc() == x && (-TWO_63..TWO_63).contains(&x) {
            self.int(x as i64);
        } else if f64::from(x as f32) == x {
            self.out.push(0xca);
            self.out
                .extend_from_slice(&(x as f32).to_bits().to_be_bytes());
        } else {
            self.out.push(0xcb);
            self.out.extend_from_slice(&x.to_bits().to_be_bytes());
        }
    }

    /// A UTF-8 string.
    pub(crate) fn str(&mut self, s: &str) {
        let len = s.len();
        if len < 32 {
            self.out.push(0xa0 | len as u8);
        } else if len <= 0xff {
            self.out.extend_from_slice(&[0xd9, len as u8]);
        } else {
            self.long_len(len, 0xda, 0xdb);
        }
        self.out.extend_from_slice(s.as_bytes());
    }
}

/// Reads MessagePack values from a byte slice; every failure is
/// [`Error::Corrupt`] naming `what` (the kind being decoded).
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
}

/// A number as read: integers keep their exact value.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Number {
    Int(i128),
    Float(f64),
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Reader { bytes, at: 0, what }
    }

    /// A corrupt-data error naming the kind and the problem.
    pub(crate) fn corrupt(&self, problem: impl std::fmt::Display) -> Error {
        Error::Corrupt(format!("a stored {} is malformed: {problem}", self.what))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| self.corrupt("it ends early"))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn be<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    /// An array header: the number of elements that follow.
    pub(crate) fn array(&mut self) -> Result<usize> {
        let at = self.at;
        let len = match self.byte()? {
            b @ 0x90..=0x9f => usize::from(b & 0x0f),
            0xdc => usize::from(u16::from_be_bytes(self.be()?)),
            0xdd => u32::from_be_bytes(self.be()?) as usize,
            b => return Err(self.corrupt(format!("expected an array at byte {at}, got 0x{b:02x}"))),
        };
        // Every element takes at least one byte: refuse absurd lengths early.
        if len > self.bytes.len() - self.at {
            return Err(self.corrupt(format!("an array of {len} elements does not fit")));
        }
        Ok(len)
    }

    fn any_number(&mut self) -> Result<Number> {
        let at = self.at;
        Ok(match self.byte()? {
            b @ 0x00..=0x7f => Number::Int(i128::from(b)),
            b @ 0xe0..=0xff => Number::Int(i128::from(b as i8)),
            0xcc => Number::Int(i128::from(self.byte()?)),
            0xcd => Number::Int(i128::from(u16::from_be_bytes(self.be()?))),
            0xce => Number::Int(i128::from(u32::from_be_bytes(self.be()?))),
            0xcf => Number::Int(i128::from(u64::from_be_bytes(self.be()?))),
            0xd0 => Number::Int(i128::from(self.byte()? as i8)),
            0xd1 => Number::Int(i128::from(i16::from_be_bytes(self.be()?))),
            0xd2 => Number::Int(i128::from(i32::from_be_bytes(self.be()?))),
            0xd3 => Number::Int(i128::from(i64::from_be_bytes(self.be()?))),
            0xca => Number::Float(f64::from(f32::from_bits(u32::from_be_bytes(self.be()?)))),
            0xcb => Number::Float(f64::from_bits(u64::from_be_bytes(self.be()?))),
            b => return Err(self.corrupt(format!("expected a number at byte {at}, got 0x{b:02x}"))),
        })
    }

    /// A number in any integer or float form, as a double.
    pub(crate) fn number(&mut self) -> Result<f64> {
        if let Some((n, next)) = plain_int(self.bytes, self.at) {
            self.at = next;
            return Ok(n as f64);
        }
        Ok(match self.any_number()? {
            Number::Int(n) => n as f64,
            Number::Float(x) => x,
        })
    }

    /// A finite number (what every kind stores).
    pub(crate) fn finite(&mut self, field: &str) -> Result<f64> {
        let x = self.number()?;
        if x.is_finite() {
            Ok(x)
        } else {
            Err(self.corrupt(format!("{field} is {x}")))
        }
    }

    /// An integer in `min..=max`. A float holding an integral value is
    /// accepted too (a script may have computed it), a fraction is not.
    ///
    /// An integer form holding a value in range is read inline, without
    /// the dispatch through [`Number`]; anything else (a float, a value out
    /// of range, a malformed or short input) goes the general way, which
    /// reads it from the same byte and fails the same way.
    #[inline(always)]
    pub(crate) fn int_in(&mut self, field: &str, min: i64, max: i64) -> Result<i64> {
        if let Some((n, next)) = plain_int(self.bytes, self.at)
            && (min..=max).contains(&n)
        {
            self.at = next;
            return Ok(n);
        }
        self.int_in_general(field, min, max)
    }

    /// `len` integers, each read as [`Reader::int_in`] reads it and handed
    /// in order to `each`; a problem `each` answers fails the read as
    /// corrupt, naming it.
    ///
    /// The loop of a sketch's bucket array, hundreds of numbers a slice on
    /// the read path: the position stays in a register for the whole array
    /// (through `&mut self` it is stored and reloaded for every number).
    #[inline(always)]
    pub(crate) fn ints_in(
        &mut self,
        len: usize,
        field: &str,
        (min, max): (i64, i64),
        mut each: impl FnMut(i64) -> std::result::Result<(), String>,
    ) -> Result<()> {
        let bytes = self.bytes;
        let mut at = self.at;
        for _ in 0..len {
            let n = match plain_int(bytes, at) {
                Some((n, next)) if (min..=max).contains(&n) => {
                    at = next;
                    n
                }
                _ => {
                    self.at = at;
                    let n = self.int_in_general(field, min, max)?;
                    at = self.at;
                    n
                }
            };
            if let Err(problem) = each(n) {
                self.at = at;
                return Err(self.corrupt(problem));
            }
        }
        self.at = at;
        Ok(())
    }

    /// [`Reader::int_in`] for every form: floats, values out of range, and
    /// the errors.
    #[cold]
    #[inline(never)]
    fn int_in_general(&mut self, field: &str, min: i64, max: i64) -> Result<i64> {
        let n = match self.any_number()? {
            Number::Int(n) => n,
            Number::Float(x) if x.trunc() == x && x.abs() < TWO_63 => x as i128,
            Number::Float(x) => {
                return Err(self.corrupt(format!("{field} is {x}, not an integer")));
            }
        };
        if n < i128::from(min) || n > i128::from(max) {
            return Err(self.corrupt(format!("{field} is {n}, outside {min}..={max}")));
        }
        Ok(n as i64)
    }

    /// A UTF-8 string.
    pub(crate) fn str(&mut self) -> Result<&'a str> {
        let at = self.at;
        let len = match self.byte()? {
            b @ 0xa0..=0xbf => usize::from(b & 0x1f),
            0xd9 => usize::from(self.byte()?),
            0xda => usize::from(u16::from_be_bytes(self.be()?)),
            0xdb => u32::from_be_bytes(self.be()?) as usize,
            b => return Err(self.corrupt(format!("expected a string at byte {at}, got 0x{b:02x}"))),
        };
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes)
            .map_err(|_| self.corrupt(format!("the string at byte {at} is not UTF-8")))
    }

    /// Whether every byte has been read.
    pub(crate) fn at_end(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// Fails unless every byte was read.
    pub(crate) fn finish(&self) -> Result<()> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.corrupt(format!(
                "{} bytes follow the value",
                self.bytes.len() - self.at
            )))
        }
    }
}

/// The integer written at `bytes[at..]` in one of MessagePack's integer
/// forms, if its value fits an `i64`, and the index past it; `None` for
/// anything else (another form, too few bytes).
#[inline(always)]
fn plain_int(bytes: &[u8], at: usize) -> Option<(i64, usize)> {
    // A fixint (0x00..=0x7f, 0xe0..=0xff) is its own value as an i8, and
    // the only byte whose i8 is -32 or more.
    let fix = *bytes.get(at)? as i8;
    if fix >= -32 {
        return Some((i64::from(fix), at + 1));
    }
    wide_int(bytes, at)
}

/// [`plain_int`] past the fixints: the forms with a tag byte.
#[inline]
fn wide_int(bytes: &[u8], at: usize) -> Option<(i64, usize)> {
    let (&b, tail) = bytes.get(at..)?.split_first()?;
    fn be<const N: usize>(tail: &[u8]) -> Option<[u8; N]> {
        tail.get(..N)?.try_into().ok()
    }
    let (n, len) = match b {
        0xcc => (i64::from(*tail.first()?), 1),
        0xcd => (i64::from(u16::from_be_bytes(be(tail)?)), 2),
        0xce => (i64::from(u32::from_be_bytes(be(tail)?)), 4),
        0xcf => (i64::try_from(u64::from_be_bytes(be(tail)?)).ok()?, 8),
        0xd0 => (i64::from(*tail.first()? as i8), 1),
        0xd1 => (i64::from(i16::from_be_bytes(be(tail)?)), 2),
        0xd2 => (i64::from(i32::from_be_bytes(be(tail)?)), 4),
        0xd3 => (i64::from_be_bytes(be(tail)?), 8),
        _ => return None,
    };
    Some((n, at + 1 + len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn number(x: f64) -> String {
        let mut out = Vec::new();
        Writer::new(&mut out).number(x);
        hex(&out)
    }

    /// The bytes a real redis-server 7.0's `cmsgpack.pack` gave for these
    /// numbers (`EVAL "return cmsgpack.pack(<x>)" 0`).
    #[test]
    fn numbers_are_written_as_cmsgpack_writes_them() {
        let seen = [
            (1.0, "01"),
            (-1.0, "ff"),
            (127.0, "7f"),
            (128.0, "cc80"),
            (255.0, "ccff"),
            (256.0, "cd0100"),
            (65535.0, "cdffff"),
            (65536.0, "ce00010000"),
            (-32.0, "e0"),
            (-33.0, "d0df"),
            (-128.0, "d080"),
            (-129.0, "d1ff7f"),
            (-32768.0, "d18000"),
            (-32769.0, "d2ffff7fff"),
            (4_294_967_296.0, "cf0000000100000000"),
            (9_007_199_254_740_992.0, "cf0020000000000000"),
            (-9_007_199_254_740_992.0, "d3ffe0000000000000"),
            (1.5, "ca3fc00000"),
            (0.1, "cb3fb999999999999a"),
            (1e300, "cb7e37e43c8800759c"),
            (-0.0, "00"),
            (f64::INFINITY, "ca7f800000"),
            (TWO_63, "ca5f000000"),
            (-TWO_63, "d38000000000000000"),
        ];
        for (x, bytes) in seen {
            assert_eq!(number(x), bytes, "{x}");
        }
    }

    #[test]
    fn every_integer_and_float_form_reads() {
        let forms: [(&[u8], f64); 14] = [
            (&[0x05], 5.0),
            (&[0xfb], -5.0),
            (&[0xcc, 0xc8], 200.0),
            (&[0xcd, 0x01, 0x00], 256.0),
            (&[0xce, 0x00, 0x01, 0x00, 0x00], 65536.0),
            (&[0xcf, 0, 0, 0, 1, 0, 0, 0, 0], 4_294_967_296.0),
            (
                &[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                18_446_744_073_709_551_615.0,
            ),
            (&[0xd0, 0x80], -128.0),
            (&[0xd1, 0x80, 0x00], -32768.0),
            (&[0xd2, 0x80, 0, 0, 0], -2_147_483_648.0),
            (&[0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0], -TWO_63),
            // Unsigned forms of small numbers (other writers use them).
            (&[0xcd, 0x00, 0x05], 5.0),
            (&[0xca, 0x3f, 0xc0, 0x00, 0x00], 1.5),
            (&[0xcb, 0x3f, 0xb9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a], 0.1),
        ];
        for (bytes, x) in forms {
            let mut r = Reader::new(bytes, "test");
            assert_eq!(r.number().unwrap(), x, "{}", hex(bytes));
            r.finish().unwrap();
        }
    }

    #[test]
    fn malformed_input_is_corrupt_and_says_why() {
        let err = Reader::new(&[0xcd, 0x01], "sketch").number().unwrap_err();
        assert!(matches!(err, Error::Corrupt(_)));
        assert!(
            err.to_string()
                .contains("a stored sketch is malformed: it ends early"),
            "{err}"
        );
        let err = Reader::new(&[0xc0], "sketch").number().unwrap_err();
        assert!(
            err.to_string()
                .contains("expected a number at byte 0, got 0xc0"),
            "{err}"
        );
        let err = Reader::new(&[0xdd, 0xff, 0xff, 0xff, 0xff], "sketch")
            .array()
            .unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
        let err = Reader::new(&[0xca, 0x3f, 0xc0, 0, 0], "x")
            .int_in("count", 0, 10)
            .unwrap_err();
        assert!(
            err.to_string().contains("count is 1.5, not an integer"),
            "{err}"
        );
        let err = Reader::new(&[0x0b], "x")
            .int_in("count", 0, 10)
            .unwrap_err();
        assert!(
            err.to_string().contains("count is 11, outside 0..=10"),
            "{err}"
        );
        let mut r = Reader::new(&[0x01, 0x02], "x");
        r.number().unwrap();
        assert!(
            r.finish()
                .unwrap_err()
                .to_string()
                .contains("1 bytes follow")
        );
    }

    /// Bytes that start with every integer form (and some others), in
    /// range or not, whole or cut short.
    fn arb_number_bytes() -> impl Strategy<Value = Vec<u8>> {
        let int =
            prop_oneof![any::<i64>(), -200i64..200, (-(1i64 << 53))..(1i64 << 53),].prop_map(|n| {
                let mut out = Vec::new();
                Writer::new(&mut out).int(n);
                out
            });
        let float = any::<f64>().prop_map(|x| {
            let mut out = Vec::new();
            Writer::new(&mut out).number(x);
            out
        });
        let tag = prop_oneof![
            Just(0xcfu8),
            Just(0xd3),
            Just(0xca),
            Just(0xcb),
            0xc0u8..0xe0
        ];
        let tagged = (tag, proptest::collection::vec(any::<u8>(), 0..10))
            .prop_map(|(t, rest)| [&[t][..], &rest].concat());
        // Mostly whole, sometimes a byte or two short.
        let cut = prop_oneof![4 => Just(0usize), 1 => 1usize..3];
        (prop_oneof![int, float, tagged], cut)
            .prop_map(|(bytes, cut)| bytes[..bytes.len().saturating_sub(cut)].to_vec())
    }

    proptest! {
        /// The inline integer path reads what the general one reads, and
        /// fails where it fails with the same error, leaving the reader at
        /// the same byte.
        #[test]
        fn int_in_is_the_general_reading(
            bytes in arb_number_bytes(),
            (min, max) in prop_oneof![
                Just((i64::MIN, i64::MAX)),
                Just((-(1i64 << 53), 1i64 << 53)),
                Just((0, 1i64 << 53)),
                (-300i64..300, 0i64..300).prop_map(|(a, w)| (a, a + w)),
            ],
        ) {
            let mut fast = Reader::new(&bytes, "statistic");
            let mut general = Reader::new(&bytes, "statistic");
            let got = fast.int_in("a bucket difference", min, max).map_err(|e| e.to_string());
            let want = general
                .int_in_general("a bucket difference", min, max)
                .map_err(|e| e.to_string());
            prop_assert_eq!(got, want);
            prop_assert_eq!(fast.at, general.at);
            // `number` takes the same inline path for integers.
            let mut fast = Reader::new(&bytes, "statistic");
            let mut general = Reader::new(&bytes, "statistic");
            let got = fast.number().map(f64::to_bits).map_err(|e| e.to_string());
            let want = general
                .any_number()
                .map(|n| match n {
                    Number::Int(n) => (n as f64).to_bits(),
                    Number::Float(x) => x.to_bits(),
                })
                .map_err(|e| e.to_string());
            prop_assert_eq!(got, want);
            prop_assert_eq!(fast.at, general.at);
        }

        #[test]
        fn numbers_round_trip(x in any::<f64>().prop_filter("finite", |x| x.is_finite())) {
            let mut out = Vec::new();
            Writer::new(&mut out).number(x);
            let mut r = Reader::new(&out, "test");
            let back = r.number().unwrap();
            r.finish().unwrap();
            // -0.0 is written as 0 (as cmsgpack does); everything else exactly.
            prop_assert_eq!(back, x);
            prop_assert_eq!(back.to_bits(), if x == 0.0 { 0 } else { x.to_bits() });
        }

        #[test]
        fn integers_round_trip(n in any::<i64>()) {
            let mut out = Vec::new();
            Writer::new(&mut out).int(n);
            let mut r = Reader::new(&out, "test");
            prop_assert_eq!(r.int_in("n", i64::MIN, i64::MAX).unwrap(), n);
            r.finish().unwrap();
        }

        #[test]
        fn arrays_and_strings_round_trip(items in proptest::collection::vec(".{0,300}", 0..40)) {
            let mut out = Vec::new();
            let mut w = Writer::new(&mut out);
            w.array(items.len());
            for s in &items {
                w.str(s);
            }
            let mut r = Reader::new(&out, "test");
            let n = r.array().unwrap();
            prop_assert_eq!(n, items.len());
            for s in &items {
                prop_assert_eq!(r.str().unwrap(), s.as_str());
            }
            r.finish().unwrap();
        }
    }
}
