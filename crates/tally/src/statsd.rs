//! The statsd line protocol: a pure parser.
//!
//! A packet holds lines separated by `\n`; a line is `<name>:<value>|<type>`
//! (the name may itself hold `:`), optionally with a sample rate `|@<rate>`
//! and DogStatsD tags `|#...` (ignored). Types:
//! - `c`, a counter: the value is scaled by 1/rate and rounded to the
//!   nearest integer (the line stands for that many events; statsd keeps
//!   the fraction: `1|c|@0.3` counts 3 here, 3.33 there);
//! - `ms` (timer), `h` (histogram), `d` (distribution): an observation of a
//!   statistic, weighted by `round(1/rate)` (at least 1), as statsd counts a
//!   sampled timer as that many (statsd takes the value itself once in its
//!   other figures; Tally's are all over the weighted observations: see
//!   `stats/graphite.rs`);
//! - `g`, a gauge: `5` sets it, `+5` and `-5` adjust it (to set a negative
//!   value a client sends `0` then `-5`, as statsd has it);
//! - `s`, a set: the value is a member, counted once per slice.
//!
//! Every other type and every malformed line is rejected with a [`Reject`]
//! reason; nothing in a rejected line is kept. Parsing never panics and
//! never allocates for a valid line.

use crate::name::Name;

/// The largest weight a sample rate may give an observation: 2^53, the most
/// a statistic counts exactly.
pub const MAX_WEIGHT: u64 = 1 << 53;

/// Why a line was not kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reject {
    /// A metric type Tally does not know (not `c`, `ms`, `h`, `d`, `g`, `s`).
    UnknownType,
    /// No `name:value|type` shape.
    Malformed,
    /// The name is not a valid Tally name.
    BadName,
    /// The value is not a number (or, for a set, an empty member).
    BadValue,
    /// The sample rate is not a number in (0, 1].
    BadRate,
    /// The scaled value does not fit in a 64-bit count, or the weight past
    /// [`MAX_WEIGHT`].
    Overflow,
}

impl Reject {
    /// A short code, for metrics labels.
    pub fn code(self) -> &'static str {
        match self {
            Reject::UnknownType => "unknown_type",
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
    /// An observation of a statistic (`ms`, `h`, `d`).
    Observation {
        /// The statistic.
        name: &'a str,
        /// The value observed (finite).
        value: f64,
        /// How many observations it stands for: `round(1/rate)`, at least 1.
        weight: u64,
    },
    /// A gauge set or adjusted (`g`).
    Gauge {
        /// The gauge.
        name: &'a str,
        /// The value (finite).
        value: f64,
        /// True for `+N` / `-N` (an adjustment), false for a set.
        relative: bool,
    },
    /// A member of a set (`s`).
    Set {
        /// The set.
        name: &'a str,
        /// The member, as sent.
        member: &'a str,
    },
    /// A line that keeps nothing, and why.
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

/// The metric types known.
#[derive(Clone, Copy)]
enum Type {
    Counter,
    Observation,
    Gauge,
    Set,
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
    let kind = match fields.next() {
        Some("c") => Type::Counter,
        Some("ms" | "h" | "d") => Type::Observation,
        Some("g") => Type::Gauge,
        Some("s") => Type::Set,
        Some("") | None => return Line::Rejected(Reject::Malformed),
        Some(_) => return Line::Rejected(Reject::UnknownType),
    };
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
    let number = match kind {
        Type::Set if value.is_empty() => return Line::Rejected(Reject::BadValue),
        Type::Set => {
            return Line::Set {
                name,
                member: value,
            };
        }
        _ => match value.parse::<f64>() {
            Ok(v) if v.is_finite() => v + 0.0, // -0.0 counts as 0
            _ => return Line::Rejected(Reject::BadValue),
        },
    };
    match kind {
        Type::Observation => {
            let weight = (1.0 / rate).round();
            if weight > MAX_WEIGHT as f64 {
                return Line::Rejected(Reject::Overflow);
            }
            Line::Observation {
                name,
                value: number,
                weight: (weight as u64).max(1),
            }
        }
        Type::Gauge => Line::Gauge {
            name,
            value: number,
            relative: value.starts_with(['+', '-']),
        },
        // Sets returned above.
        Type::Counter | Type::Set => {
            let scaled = (number / rate).round();
            // i64::MIN is kept out, so every count can be negated.
            if !(scaled > i64::MIN as f64 && scaled < i64::MAX as f64) {
                return Line::Rejected(Reject::Overflow);
            }
            Line::Counter {
                name,
                count: scaled as i64,
            }
        }
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
        assert_eq!(reject("temp:21|x"), Reject::UnknownType);
        assert_eq!(reject("rt:320|timer"), Reject::UnknownType);
        assert_eq!(reject("users:|s"), Reject::BadValue);
        assert_eq!(reject("temp:+x|g"), Reject::BadValue);
        assert_eq!(reject("rt:1|ms|@0"), Reject::BadRate);
        assert_eq!(reject("rt:1|ms|@1e-300"), Reject::Overflow);
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
    fn timers_histograms_and_distributions_are_weighted_observations() {
        let obs = |name, value, weight| Line::Observation {
            name,
            value,
            weight,
        };
        assert_eq!(parse_line("rt:320|ms"), obs("rt", 320.0, 1));
        assert_eq!(parse_line("rt:1.5|ms|@0.1"), obs("rt", 1.5, 10));
        assert_eq!(parse_line("rt:2|h|@0.3"), obs("rt", 2.0, 3));
        assert_eq!(parse_line("a:b:-4|d|#k:v|@0.5"), obs("a:b", -4.0, 2));
        // A rate close to 1 still weighs one observation.
        assert_eq!(parse_line("rt:7|ms|@0.9"), obs("rt", 7.0, 1));
    }

    #[test]
    fn gauges_set_or_adjust_and_sets_take_members() {
        let gauge = |name, value, relative| Line::Gauge {
            name,
            value,
            relative,
        };
        assert_eq!(parse_line("temp:21|g"), gauge("temp", 21.0, false));
        assert_eq!(parse_line("temp:+3.5|g"), gauge("temp", 3.5, true));
        assert_eq!(parse_line("temp:-5|g"), gauge("temp", -5.0, true));
        assert_eq!(parse_line("temp:0|g|#env:x"), gauge("temp", 0.0, false));
        assert_eq!(
            parse_line("users:alice|s"),
            Line::Set {
                name: "users",
                member: "alice"
            }
        );
        assert_eq!(
            parse_line("shop:users:42|s"),
            Line::Set {
                name: "shop:users",
                member: "42"
            }
        );
    }

    #[test]
    fn packets_hold_several_lines() {
        let lines: Vec<Line<'_>> =
            parse_packet(b"a:1|c\nb:2|c|@0.5\r\nbad\n\ng:1|g\nq:1|zz\n").collect();
        assert_eq!(
            lines,
            vec![
                counter("a", 1),
                counter("b", 4),
                Line::Rejected(Reject::Malformed),
                Line::Gauge {
                    name: "g",
                    value: 1.0,
                    relative: false
                },
                Line::Rejected(Reject::UnknownType)
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
        fn any_other_type_is_rejected(name in "[a-z]{1,10}", value in 0u32..1000, kind in "(x|set|timer|cc|gg|[A-Z]{1,3})") {
            let line = format!("{name}:{value}|{kind}");
            prop_assert_eq!(parse_line(&line), Line::Rejected(Reject::UnknownType));
        }

        #[test]
        fn sampled_observations_weigh_the_inverse_rate(value in -1e6f64..1e6, rate_pct in 1u32..=100) {
            let rate = f64::from(rate_pct) / 100.0;
            let line = format!("rt:{value}|ms|@{rate}");
            let weight = ((1.0 / rate).round() as u64).max(1);
            prop_assert_eq!(parse_line(&line), Line::Observation { name: "rt", value, weight });
        }
    }
}
