//! The statsd line protocol, for counters: a pure parser.
//!
//! A packet holds lines separated by `\n`; a counter line is
//! `<name>:<value>|c` (the name may itself hold `:`), optionally with a sample rate `|@<rate>` (the value is
//! scaled by 1/rate and rounded to the nearest integer, as the line stands for
//! that many events) and DogStatsD tags `|#...` (ignored). Every other metric
//! type (`g`, `ms`, `h`, `s`, `d`...) and every malformed line is rejected
//! with a [`Reject`] reason; nothing in a rejected line is counted. Parsing
//! never panics and never allocates for a valid line.

use crate::name::Name;

/// Why a line was not counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reject {
    /// A metric type other than a counter (`g`, `ms`, `h`, `s`...).
    NotCounter,
    /// No `name:value|type` shape.
    Malformed,
    /// The name is not a valid Tally name.
    BadName,
    /// The value is not a number.
    BadValue,
    /// The sample rate is not a number in (0, 1].
    BadRate,
    /// The scaled value does not fit in a 64-bit count.
    Overflow,
}

impl Reject {
    /// A short code, for metrics labels.
    pub fn code(self) -> &'static str {
        match self {
            Reject::NotCounter => "not_counter",
            Reject::Malformed => "malformed",
            Reject::BadName => "bad_name",
            Reject::BadValue => "bad_value",
            Reject::BadRate => "bad_rate",
            Reject::Overflow => "overflow",
        }
    }
}

/// One parsed line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Line<'a> {
    /// A counter increment.
    Counter {
        /// The counter.
        name: &'a str,
        /// The count, scaled by the sample rate.
        count: i64,
    },
    /// A line that counts nothing, and why.
    Rejected(Reject),
}

/// The non-empty lines of a packet, parsed.
pub fn parse_packet(packet: &[u8]) -> impl Iterator<Item = Line<'_>> {
    packet
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .map(|l| match std::str::from_utf8(l) {
            Ok(text) => parse_line(text),
            Err(_) => Line::Rejected(Reject::Malformed),
        })
}

/// Parses one line (without its newline).
pub fn parse_line(line: &str) -> Line<'_> {
    // `name:value` ends at the first `|`; the value has no `:`, so the name
    // runs to the last `:` before it (names like `shop:checkout` are fine).
    let Some((head, rest)) = line.split_once('|') else {
        return Line::Rejected(Reject::Malformed);
    };
    let Some((name, value)) = head.rsplit_once(':') else {
        return Line::Rejected(Reject::Malformed);
    };
    let mut fields = rest.split('|');
    let Some(kind) = fields.next() else {
        return Line::Rejected(Reject::Malformed);
    };
    if kind != "c" {
        return Line::Rejected(if kind.is_empty() {
            Reject::Malformed
        } else {
            Reject::NotCounter
        });
    }
    let mut rate = 1.0f64;
    for field in fields {
        if let Some(r) = field.strip_prefix('@') {
            match r.parse::<f64>() {
                Ok(r) if r > 0.0 && r <= 1.0 => rate = r,
                _ => return Line::Rejected(Reject::BadRate),
            }
        } else if !field.starts_with('#') {
            return Line::Rejected(Reject::Malformed);
        }
    }
    if Name::check(name).is_err() {
        return Line::Rejected(Reject::BadName);
    }
    let value: f64 = match value.parse::<f64>() {
        Ok(v) if v.is_finite() => v,
        _ => return Line::Rejected(Reject::BadValue),
    };
    let scaled = (value / rate).round();
    // i64::MIN is kept out, so every count can be negated.
    if !(scaled > i64::MIN as f64 && scaled < i64::MAX as f64) {
        return Line::Rejected(Reject::Overflow);
    }
    Line::Counter {
        name,
        count: scaled as i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn counter(name: &str, count: i64) -> Line<'_> {
        Line::Counter { name, count }
    }

    #[test]
    fn counters_with_rates_and_tags() {
        assert_eq!(parse_line("hits:1|c"), counter("hits", 1));
        assert_eq!(parse_line("hits:-3|c"), counter("hits", -3));
        assert_eq!(parse_line("hits:1|c|@0.1"), counter("hits", 10));
        assert_eq!(
            parse_line("hits:2|c|@0.5|#env:prod,az:b"),
            counter("hits", 4)
        );
        assert_eq!(parse_line("hits:1|c|#env:prod|@0.25"), counter("hits", 4));
        assert_eq!(
            parse_line("api.calls/user:42|c"),
            counter("api.calls/user", 42)
        );
        assert_eq!(parse_line("hits:1.6|c"), counter("hits", 2));
        // Regression: names with `:` (Tally's own style) were split at the first one.
        assert_eq!(parse_line("shop:checkout:5|c"), counter("shop:checkout", 5));
        assert_eq!(parse_line("a:b:c:1|c|#k:v"), counter("a:b:c", 1));
    }

    #[test]
    fn other_types_and_garbage_are_rejected() {
        let reject = |l: &str| match parse_line(l) {
            Line::Rejected(r) => r,
            other => panic!("{l:?} parsed as {other:?}"),
        };
        assert_eq!(reject("temp:21|g"), Reject::NotCounter);
        assert_eq!(reject("rt:320|ms"), Reject::NotCounter);
        assert_eq!(reject("users:alice|s"), Reject::NotCounter);
        assert_eq!(reject("hits"), Reject::Malformed);
        assert_eq!(reject("hits:1"), Reject::Malformed);
        assert_eq!(reject("hits:1|"), Reject::Malformed);
        assert_eq!(reject("hits|c"), Reject::Malformed);
        assert_eq!(reject("hits:1|c|x"), Reject::Malformed);
        assert_eq!(reject(":1|c"), Reject::BadName);
        assert_eq!(reject("hits:abc|c"), Reject::BadValue);
        assert_eq!(reject("hits:NaN|c"), Reject::BadValue);
        assert_eq!(reject("hits:inf|c"), Reject::BadValue);
        assert_eq!(reject("hits:1|c|@0"), Reject::BadRate);
        assert_eq!(reject("hits:1|c|@1.5"), Reject::BadRate);
        assert_eq!(reject("hits:1|c|@x"), Reject::BadRate);
        assert_eq!(reject("hits:1e19|c"), Reject::Overflow);
        assert_eq!(reject("hits:1|c|@0.0000000000000000001"), Reject::Overflow);
    }

    #[test]
    fn packets_hold_several_lines() {
        let lines: Vec<Line<'_>> = parse_packet(b"a:1|c\nb:2|c|@0.5\r\nbad\n\ng:1|g\n").collect();
        assert_eq!(
            lines,
            vec![
                counter("a", 1),
                counter("b", 4),
                Line::Rejected(Reject::Malformed),
                Line::Rejected(Reject::NotCounter)
            ]
        );
        assert_eq!(
            parse_packet(b"\xff\xfe:1|c").collect::<Vec<_>>(),
            vec![Line::Rejected(Reject::Malformed)]
        );
    }

    proptest! {
        #[test]
        fn never_panics(packet in proptest::collection::vec(any::<u8>(), 0..300)) {
            for line in parse_packet(&packet) {
                if let Line::Counter { name, count } = line {
                    prop_assert!(Name::check(name).is_ok());
                    prop_assert!(count != i64::MIN);
                }
            }
        }

        #[test]
        fn valid_counter_lines_round_trip(name in "[a-z][a-z0-9._/:-]{0,30}", value in -1_000_000i64..1_000_000, rate_pct in 1u32..=100) {
            let rate = f64::from(rate_pct) / 100.0;
            let line = format!("{name}:{value}|c|@{rate}");
            let expected = (value as f64 / rate).round() as i64;
            prop_assert_eq!(parse_line(&line), Line::Counter { name: &name, count: expected });
        }

        #[test]
        fn any_other_type_is_rejected(name in "[a-z]{1,10}", value in 0u32..1000, kind in "(g|ms|h|s|d|set|timer)") {
            let line = format!("{name}:{value}|{kind}");
            prop_assert_eq!(parse_line(&line), Line::Rejected(Reject::NotCounter));
        }
    }
}
