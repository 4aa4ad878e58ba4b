//! Python's text and arithmetic where graphite-web's answers show them: `repr` of a float
//! (JSON and CSV values, names built with `str()`), `%g` (names built by `scale`, `offset`,
//! ...), `sum`/`max`/`min` over floats (NaN included), and `repr` of a string.
//!
//! Owns the formatting rules only; callers decide where each applies.

/// Python 3's `repr(x)` (and `str(x)`) of a float: the shortest digits that round-trip,
/// fixed notation for decimal exponents -4 ..= 15 (with `.0` when integral), else `1e+16`.
pub fn repr_f64(x: f64) -> String {
    let mut out = String::new();
    write_repr_f64(&mut out, x);
    out
}

/// [`repr_f64`] appended to `out`, without allocating for the values answers hold most
/// (fixed notation: Rust's `Display` writes the same shortest digits in fixed notation,
/// so only the `.0` of an integral value is added).
pub fn write_repr_f64(out: &mut String, x: f64) {
    use std::fmt::Write;
    let a = x.abs();
    // An integral value (what counters and most gauges hold) is its
    // integer and `.0`: no shortest-digits search. Below 2^53 every
    // integer is exact, so its digits are the shortest that round-trip.
    if a < 9_007_199_254_740_992.0 && x.fract() == 0.0 && !(x == 0.0 && x.is_sign_negative()) {
        write_i64(out, x as i64);
        out.push_str(".0");
        return;
    }
    if a == 0.0 || (1e-4..1e16).contains(&a) {
        let start = out.len();
        let _ = write!(out, "{x}");
        if !out[start..].contains('.') {
            out.push_str(".0");
        }
    } else {
        out.push_str(&repr_by_exponent(x));
    }
}

/// An integer's decimal digits appended to `out` (what `Display` writes):
/// two digits a step from a table (`itoa`), with no UTF-8 check of the
/// digits; a render of 1,000 series writes 240,000 of these.
pub(crate) fn write_i64(out: &mut String, i: i64) {
    out.push_str(itoa::Buffer::new().format(i));
}

/// [`repr_f64`] from the shortest digits and their exponent: every float, any notation.
fn repr_by_exponent(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    let (digits, exp) = shortest_digits(x.abs());
    // The value is 0.DIGITS x 10^decpt.
    let decpt = exp + 1;
    let mut out = String::from(sign);
    if (-4 < decpt) && decpt <= 16 {
        if decpt <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-decpt) as usize));
            out.push_str(&digits);
        } else if decpt as usize >= digits.len() {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', decpt as usize - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..decpt as usize]);
            out.push('.');
            out.push_str(&digits[decpt as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push_str(&exponent(exp));
    }
    out
}

/// Python's `'%g' % x`: six significant digits, trailing zeros dropped, exponent form for
/// decimal exponents below -4 or from 6 up.
pub fn format_g(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let sci = format!("{:.5e}", x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        let decimals = (5 - exp).max(0) as usize;
        let fixed = format!("{:.*}", decimals, x);
        strip_zeros(&fixed).to_owned()
    } else {
        format!("{}{}", strip_zeros(mantissa), exponent(exp))
    }
}

/// `e+06`, `e-05`, `e+300`: Python's exponent suffix (sign, at least two digits).
fn exponent(exp: i32) -> String {
    format!(
        "e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.unsigned_abs()
    )
}

fn strip_zeros(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// The shortest round-tripping decimal digits of a finite non-negative float, and the
/// decimal exponent of the first digit (`x = D.DDD x 10^exp`).
fn shortest_digits(x: f64) -> (String, i32) {
    if x == 0.0 {
        return ("0".to_owned(), 0);
    }
    let sci = format!("{:e}", x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (digits, exp.parse().unwrap_or(0))
}

/// Python's `sum()` of floats (3.11: plain left-to-right addition from 0).
pub fn py_sum(values: &[f64]) -> f64 {
    values.iter().fold(0.0, |acc, v| acc + v)
}

/// Python's `max()`: the first value, replaced by each later one that compares greater
/// (so a leading NaN stays, a later one is skipped). NaN for an empty slice.
pub fn py_max(values: &[f64]) -> f64 {
    let mut it = values.iter();
    let Some(&first) = it.next() else {
        return f64::NAN;
    };
    it.fold(first, |m, &v| if v > m { v } else { m })
}

/// Python's `min()`, as [`py_max`].
pub fn py_min(values: &[f64]) -> f64 {
    let mut it = values.iter();
    let Some(&first) = it.next() else {
        return f64::NAN;
    };
    it.fold(first, |m, &v| if v < m { v } else { m })
}

/// Python's `repr()` of a str: single quotes unless the text holds a single quote and no
/// double quote; backslash escapes for the quote, backslash, `\t`, `\n`, `\r` and other
/// non-printable characters.
pub fn repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if (0x80..0xa0).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Test support: checks that `f`, this crate's copy of Python's `what` on a string, gives
/// each case's expected text.
#[cfg(test)]
pub(crate) fn assert_text_cases(what: &str, f: fn(&str) -> String, cases: &[(&str, &str)]) {
    for (input, want) in cases {
        assert_eq!(f(input), *want, "{what} of {input:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        // Values checked against CPython 3.11's repr().
        let cases: &[(f64, &str)] = &[
            (1.0, "1.0"),
            (0.1, "0.1"),
            (100.0, "100.0"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1234567890123456.7, "1234567890123456.8"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1.5e300, "1.5e+300"),
            (123456789.0, "123456789.0"),
            (1.0 / 3.0, "0.3333333333333333"),
            (2.0 / 3.0, "0.6666666666666666"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ];
        for (x, want) in cases {
            assert_eq!(repr_f64(*x), *want, "repr({x:?})");
            assert_eq!(repr_by_exponent(*x), *want, "repr({x:?})");
        }
    }

    proptest::proptest! {
        /// The fixed-notation fast path writes what the digits-and-exponent form does, for
        /// every float (any bit pattern) and around both ends of fixed notation.
        #[test]
        fn repr_fast_path_is_the_exponent_form(
            bits in proptest::num::u64::ANY,
            k in -10_000i64..10_000,
        ) {
            let x = f64::from_bits(bits);
            proptest::prop_assert_eq!(repr_f64(x), repr_by_exponent(x));
            for edge in [1e-4f64, 1e16, 1.0] {
                let near = f64::from_bits((edge.to_bits() as i64 + k) as u64);
                proptest::prop_assert_eq!(repr_f64(near), repr_by_exponent(near));
                proptest::prop_assert_eq!(repr_f64(-near), repr_by_exponent(-near));
            }
            let integral = k as f64 * 1e11;
            proptest::prop_assert_eq!(repr_f64(integral), repr_by_exponent(integral));
            // Integers around 2^53, where the integral fast path ends.
            let edge = 9_007_199_254_740_992.0f64 + k as f64;
            proptest::prop_assert_eq!(repr_f64(edge), repr_by_exponent(edge));
            proptest::prop_assert_eq!(repr_f64(-edge), repr_by_exponent(-edge));
            proptest::prop_assert_eq!(repr_f64(k as f64), repr_by_exponent(k as f64));
        }

        /// The integer writer writes what `Display` does.
        #[test]
        fn integers_are_written_as_display_writes_them(i in proptest::num::i64::ANY) {
            let mut out = String::new();
            write_i64(&mut out, i);
            proptest::prop_assert_eq!(out, i.to_string());
        }
    }

    #[test]
    fn percent_g_matches_python() {
        // Values checked against CPython 3.11's '%g' % x.
        let cases: &[(f64, &str)] = &[
            (10.0, "10"),
            (2.5, "2.5"),
            (0.5, "0.5"),
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-3.0, "-3"),
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0 / 3.0, "0.333333"),
            (100.5, "100.5"),
            (999999.5, "1e+06"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
        ];
        for (x, want) in cases {
            assert_eq!(format_g(*x), *want, "%g of {x:?}");
        }
    }

    #[test]
    fn max_and_min_keep_pythons_nan_order() {
        assert!(py_max(&[f64::NAN, 1.0]).is_nan());
        assert_eq!(py_max(&[1.0, f64::NAN, 3.0]), 3.0);
        assert_eq!(py_min(&[2.0, f64::NAN, 1.0]), 1.0);
        assert_eq!(py_sum(&[0.1, 0.2, 0.3]), 0.1 + 0.2 + 0.3);
    }

    #[test]
    fn string_repr_matches_python() {
        crate::pyfmt::assert_text_cases(
            "repr",
            repr_str,
            &[
                ("abc", "'abc'"),
                ("it's", "\"it's\""),
                ("a'b\"c", "'a\\'b\"c'"),
                ("\\1 A", "'\\\\1 A'"),
                ("x\ny", "'x\\ny'"),
            ],
        );
    }
}
