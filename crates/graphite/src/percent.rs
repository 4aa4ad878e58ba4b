//! Python's `format % value` for one float, as `aliasQuery` writes a series' last value
//! into a name: the conversions `s`, `r`, `d`, `i`, `u`, `f`, `F`, `e`, `E`, `g`, `G` and
//! `%%`, with flags (`-`, `+`, space, `#`, `0`), a width and a precision.
//!
//! Owns that formatting; where Python raises (no conversion or more than one, an integer
//! conversion of an infinity, a conversion a float cannot take, `*` or a mapping key) the
//! answer is an error naming the problem.

use crate::pyfmt::repr_f64;
use crate::{Error, Result};

/// One `%` conversion's flags, width and precision.
#[derive(Debug, Default, Clone, Copy)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    alternate: bool,
    zero: bool,
    width: usize,
    precision: Option<usize>,
}

/// `format % value` as Python writes it for a float `value`.
pub(crate) fn format_one(format: &str, value: f64) -> Result<String> {
    let bad = |why: &str| {
        Err(Error::invalid(format!(
            "cannot format {format:?} with a number: {why}"
        )))
    };
    let mut out = String::new();
    let mut used = false;
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        while let Some(&f) = chars.peek() {
            match f {
                '-' => spec.left = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '#' => spec.alternate = true,
                '0' => spec.zero = true,
                _ => break,
            }
            chars.next();
        }
        if chars.peek() == Some(&'(') {
            return bad("a mapping key needs a mapping");
        }
        let digits = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
            let mut n: Option<usize> = None;
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                n = Some(n.unwrap_or(0).saturating_mul(10).saturating_add(d as usize));
                chars.next();
            }
            n
        };
        if chars.peek() == Some(&'*') {
            return bad("`*` needs more arguments");
        }
        spec.width = digits(&mut chars).unwrap_or(0);
        if chars.peek() == Some(&'.') {
            chars.next();
            if chars.peek() == Some(&'*') {
                return bad("`*` needs more arguments");
            }
            spec.precision = Some(digits(&mut chars).unwrap_or(0));
        }
        // Python skips a length modifier.
        while matches!(chars.peek(), Some('h' | 'l' | 'L')) {
            chars.next();
        }
        let Some(conversion) = chars.next() else {
            return bad("incomplete format");
        };
        if conversion == '%' {
            out.push('%');
            continue;
        }
        if used {
            return bad("not enough arguments for format string");
        }
        used = true;
        let text = match conversion {
            's' | 'r' => {
                let text = repr_f64(value);
                let text = match spec.precision {
                    Some(p) => text.chars().take(p).collect(),
                    None => text,
                };
                pad(text, spec)
            }
            'd' | 'i' | 'u' => {
                if !value.is_finite() {
                    return bad("an infinity or NaN has no integer");
                }
                let int = value.trunc();
                let digits = format!("{:.0}", int.abs());
                let digits = match spec.precision {
                    Some(p) if digits.len() < p => format!("{digits:0>p$}"),
                    _ => digits,
                };
                signed(digits, int.is_sign_negative() && int != 0.0, spec)
            }
            'f' | 'F' | 'e' | 'E' | 'g' | 'G' => {
                let digits = float_digits(value.abs(), conversion, spec);
                signed(digits, value.is_sign_negative() && !value.is_nan(), spec)
            }
            other => return bad(&format!("%{other} cannot take a float")),
        };
        out.push_str(&text);
    }
    if !used {
        return bad("not all arguments converted during string formatting");
    }
    Ok(out)
}

/// The digits of a non-negative float under conversion `c`.
fn float_digits(x: f64, c: char, spec: Spec) -> String {
    let upper = c.is_ascii_uppercase();
    let special = if x.is_nan() {
        Some("nan")
    } else if x.is_infinite() {
        Some("inf")
    } else {
        None
    };
    if let Some(word) = special {
        return if upper {
            word.to_uppercase()
        } else {
            word.to_owned()
        };
    }
    let precision = spec.precision.unwrap_or(6);
    let text = match c.to_ascii_lowercase() {
        'f' => {
            let t = format!("{x:.precision$}");
            if spec.alternate && precision == 0 {
                t + "."
            } else {
                t
            }
        }
        'e' => exponent_form(x, precision, spec.alternate),
        _ => {
            let p = precision.max(1);
            let exp = decimal_exponent(x, p);
            let mut t = if exp < -4 || exp >= p as i32 {
                exponent_form(x, p - 1, spec.alternate)
            } else {
                let decimals = (p as i32 - 1 - exp).max(0) as usize;
                let t = format!("{x:.decimals$}");
                if spec.alternate && !t.contains('.') {
                    t + "."
                } else {
                    t
                }
            };
            if !spec.alternate {
                t = strip_fraction_zeros(&t);
            }
            t
        }
    };
    if upper { text.to_uppercase() } else { text }
}

/// The decimal exponent of `x` once rounded to `p` significant digits.
fn decimal_exponent(x: f64, p: usize) -> i32 {
    if x == 0.0 {
        return 0;
    }
    let sci = format!("{:.*e}", p - 1, x);
    sci.split_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0)
}

/// `d.ddde+XX` with `precision` decimals (Python's two-digit signed exponent).
fn exponent_form(x: f64, precision: usize, alternate: bool) -> String {
    let sci = format!("{x:.precision$e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let dot = if alternate && precision == 0 { "." } else { "" };
    format!(
        "{mantissa}{dot}e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.unsigned_abs()
    )
}

/// `%g`'s trailing zeros (and a bare point) dropped from the fraction, exponent kept.
fn strip_fraction_zeros(text: &str) -> String {
    let (number, exponent) = match text.find('e') {
        Some(i) => text.split_at(i),
        None => (text, ""),
    };
    let number = if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    };
    format!("{number}{exponent}")
}

/// Digits with their sign (`-`, or `+`/space by the flags), padded to the width.
fn signed(digits: String, negative: bool, spec: Spec) -> String {
    let sign = if negative {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    };
    let numeric = digits
        .chars()
        .all(|c| c.is_ascii_digit() || ".eE+-".contains(c));
    if spec.zero && !spec.left && numeric && sign.len() + digits.len() < spec.width {
        let zeros = spec.width - sign.len() - digits.len();
        return format!("{sign}{}{digits}", "0".repeat(zeros));
    }
    pad(format!("{sign}{digits}"), spec)
}

/// `text` padded with spaces to the width, on the right when left-aligned.
fn pad(text: String, spec: Spec) -> String {
    let len = text.chars().count();
    if len >= spec.width {
        return text;
    }
    let fill = " ".repeat(spec.width - len);
    if spec.left {
        text + &fill
    } else {
        fill + &text
    }
}

#[cfg(test)]
mod tests {
    use super::format_one;

    #[test]
    fn formats_as_python_does() {
        // Each expected text is what Python 3.11 prints for `format % value`.
        for (format, value, expected) in [
            ("%s", 2.5, "2.5"),
            ("%s", 3.0, "3.0"),
            ("v=%d", 7.9, "v=7"),
            ("v=%d", -7.9, "v=-7"),
            ("%5d|", 42.0, "   42|"),
            ("%-5d|", 42.0, "42   |"),
            ("%05d", -42.0, "-0042"),
            ("%+d", 3.0, "+3"),
            ("% d", 3.0, " 3"),
            ("%.3d", 7.0, "007"),
            ("%f", 1.5, "1.500000"),
            ("%.2f%%", 99.567, "99.57%"),
            ("%8.2f", -3.456, "   -3.46"),
            ("%e", 12345.678, "1.234568e+04"),
            ("%.2E", 0.000123, "1.23E-04"),
            ("%g", 1234567.0, "1.23457e+06"),
            ("%g", 0.0001, "0.0001"),
            ("%g", 0.00001, "1e-05"),
            ("%g", 100.0, "100"),
            ("%#g", 100.0, "100.000"),
            ("%.3g", 2.0, "2"),
            ("%G", 1e-10, "1E-10"),
            ("%.1s", 2.5, "2"),
            ("%f", f64::INFINITY, "inf"),
            ("%F", f64::NAN, "NAN"),
            ("%s", -0.0, "-0.0"),
        ] {
            assert_eq!(
                format_one(format, value).unwrap(),
                expected,
                "{format} % {value}"
            );
        }
    }

    #[test]
    fn what_python_refuses_is_an_error() {
        for format in ["no conversion", "%d %d", "%x", "%(a)s", "%*d", "%", "%c"] {
            assert!(format_one(format, 1.0).is_err(), "{format}");
        }
        assert!(format_one("%d", f64::INFINITY).is_err());
        assert!(format_one("%d", f64::NAN).is_err());
        assert_eq!(format_one("100%% %s", 1.0).unwrap(), "100% 1.0");
    }
}
