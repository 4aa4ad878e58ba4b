//! The statsd line protocol, with DogStatsD's additions: a pure parser.
//!
//! A packet holds lines separated by `\n` (a trailing `\r` is dropped). A
//! line is a name, then `:`, then one or more samples separated by `:`:
//!
//! ```text
//! line   = name ":" sample *( ":" sample )
//! sample = value *( ":" value ) "|" type *( "|" field )
//! field  = "@" rate | "T" unix-seconds | "#" tags | "c:" container-id
//!        | "e:" external-data | "card:" cardinality
//! ```
//!
//! **The name ends at the line's first `:`**, as statsd (`stats.js`) and
//! DogStatsD both read it, so a name holding `:` cannot be sent over statsd
//! (`shop:checkout:1|c` is the name `shop` with the values `checkout` and
//! `1`, refused as [`Reject::BadValue`]). Every sample of a line belongs to
//! that one name: no value ever lands under another.
//!
//! - Several samples (statsd: `hits:1|c:2|c`) each have their own type,
//!   rate and time.
//! - Several values before one type (DogStatsD's packed values, protocol
//!   v1.1: `lat:1:2:3|ms`) are several samples sharing that type and its
//!   fields. Sets take one member per sample (`users:a:b|s` is refused:
//!   DogStatsD reads the member `a:b`, statsd the member `b`).
//! - Fields come after the type in any order. `@rate` is a sample rate in
//!   (0, 1]; `T<seconds>` the Unix time the sample is written at (DogStatsD
//!   v1.3); `#tags` are accepted and not kept (the line counts as
//!   [`Line::tagged`]); the origin-detection fields `c:` (container id,
//!   v1.2), `e:` (external data, v1.5) and `card:` (cardinality, v1.6) are
//!   accepted and not kept.
//! - How a field ends: a `:` inside tags and the origin-detection fields is
//!   theirs (`#env:prod`, `c:ci-abc`), so they run to the next `|` or the
//!   end of the line; the type, a rate and a time end at `|` or `:`, and a
//!   `:` after them starts the next sample. So `ct:1|c|c:abc` is one counter
//!   sample with a container id, and `hits:1|c:2|c` two counter samples.
//!
//! Types:
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
//! A line is taken whole or not at all: one bad sample or field refuses the
//! line with a [`Reject`] reason, and nothing in it is kept. DogStatsD's
//! events (`_e{...}`) and service checks (`_sc|...`) are not metrics and
//! are refused as [`Reject::EventOrServiceCheck`].
//!
//! A `T` time must also be one the store keeps ([`check_time`], given the
//! listener's "now" and the resolutions of the sample's kind): not older
//! than the longest-kept resolution keeps, and at most [`MAX_AHEAD_SECS`]
//! ahead, else the line is refused as [`Reject::TimeNotKept`].
//!
//! What this module does not do: read a clock or write anything. Parsing
//! never panics and never allocates; a parsed [`Line`] holds its first
//! sample and reads the others again from the line's text when
//! [`Line::samples`] asks for them.

use crate::clock::Timestamp;
use crate::engine::resolution::{self, Resolution};
use crate::name::Name;

/// The largest weight a sample rate may give an observation: 2^53, the most
/// a statistic counts exactly.
pub const MAX_WEIGHT: u64 = 1 << 53;

/// How far ahead of "now" a `T` time may be, in seconds (a sender's clock
/// a little ahead of the server's), as the time-series store allows.
pub const MAX_AHEAD_SECS: u64 = 60;

/// Why a line was not kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reject {
    /// A metric type Tally does not know (not `c`, `ms`, `h`, `d`, `g`, `s`).
    UnknownType,
    /// No `name:value|type` shape, an empty or unknown field, or a name
    /// holding `|`.
    Malformed,
    /// The name is not a valid Tally name.
    BadName,
    /// A value is not a number (or, for a set, an empty member or several).
    BadValue,
    /// A sample rate is not a number in (0, 1].
    BadRate,
    /// A scaled value does not fit in a 64-bit count, or a weight goes past
    /// [`MAX_WEIGHT`].
    Overflow,
    /// A `T` field that is not whole Unix seconds from 1 to the end of 9999.
    BadTime,
    /// A `T` time outside what the store keeps: older than every
    /// resolution of the metric's kind keeps, or more than
    /// [`MAX_AHEAD_SECS`] ahead ([`check_time`]; the parser, which knows no
    /// "now", never gives it).
    TimeNotKept,
    /// A DogStatsD event (`_e{...}`) or service check (`_sc|...`): not a
    /// metric, and Tally keeps neither.
    EventOrServiceCheck,
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
            Reject::BadTime => "bad_time",
            Reject::TimeNotKept => "time_not_kept",
            Reject::EventOrServiceCheck => "event_or_service_check",
        }
    }
}

/// What one sample says about its metric.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reading<'a> {
    /// A counter increment (`c`), scaled by the sample rate.
    Count(i64),
    /// An observation of a statistic (`ms`, `h`, `d`).
    Observation {
        /// The value observed (finite).
        value: f64,
        /// How many observations it stands for: `round(1/rate)`, at least 1.
        weight: u64,
    },
    /// A gauge set or adjusted (`g`).
    Gauge {
        /// The value (finite).
        value: f64,
        /// True for `+N` / `-N` (an adjustment), false for a set.
        relative: bool,
    },
    /// A member of a set (`s`), as sent.
    Member(&'a str),
}

/// One sample of a line: a reading and, with a `T` field, its time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample<'a> {
    /// What it says.
    pub reading: Reading<'a>,
    /// Unix seconds from the `T` field; `None` for "now".
    pub at: Option<u64>,
}

/// One accepted line: a name and its samples, every one of them valid.
#[derive(Clone, Copy, Debug)]
pub struct Line<'a> {
    /// The metric every sample is written under: the text before the
    /// line's first `:`.
    pub name: &'a str,
    /// The line carried DogStatsD tags, which Tally does not keep (the
    /// samples are written under the bare name).
    pub tagged: bool,
    /// Some sample carries a time (`T`).
    pub timed: bool,
    len: usize,
    first: Sample<'a>,
    /// The text after the name's `:`, read again for the samples after the
    /// first.
    text: &'a str,
}

impl<'a> Line<'a> {
    /// How many samples the line holds (at least 1).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// The line's samples, in the order sent.
    pub fn samples(&self) -> Samples<'a> {
        Samples {
            first: Some(self.first),
            rest: (self.len > 1).then(|| {
                let mut rest = Cursor::new(self.text);
                rest.next(); // the first, kept
                rest
            }),
        }
    }
}

/// The samples of a [`Line`], in the order sent.
#[derive(Clone, Debug)]
pub struct Samples<'a> {
    first: Option<Sample<'a>>,
    rest: Option<Cursor<'a>>,
}

impl<'a> Iterator for Samples<'a> {
    type Item = Sample<'a>;

    fn next(&mut self) -> Option<Sample<'a>> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        // The line was read whole when it was parsed: no error is left.
        self.rest.as_mut()?.next().and_then(Result::ok)
    }
}

/// The non-empty lines of a packet, parsed.
pub fn parse_packet(packet: &[u8]) -> impl Iterator<Item = Result<Line<'_>, Reject>> {
    // One UTF-8 check for the whole packet, the usual case, whose lines are
    // then sliced out of its text; a packet that fails it is checked line
    // by line, refusing only the lines at fault.
    let whole = std::str::from_utf8(packet).ok();
    packet
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .map(move |l| {
            let text = match whole {
                Some(whole) => {
                    let start = l.as_ptr() as usize - packet.as_ptr() as usize;
                    whole.get(start..start + l.len()).ok_or(Reject::Malformed)
                }
                None => std::str::from_utf8(l).map_err(|_| Reject::Malformed),
            };
            text.and_then(parse_line)
        })
}

/// Parses one line (without its newline): every sample is read and
/// checked, so an accepted line's samples are all valid.
pub fn parse_line(line: &str) -> Result<Line<'_>, Reject> {
    if line.starts_with("_e{") || line.starts_with("_sc|") {
        return Err(Reject::EventOrServiceCheck);
    }
    // The name runs to the first `:`, and holds no `|`.
    let Some(colon) = find2(line, b':', b'|').filter(|&i| line.as_bytes()[i] == b':') else {
        return Err(Reject::Malformed);
    };
    let (name, samples) = (&line[..colon], &line[colon + 1..]);
    if Name::check(name).is_err() {
        return Err(Reject::BadName);
    }
    let mut cursor = Cursor::new(samples);
    let first = cursor.next().ok_or(Reject::Malformed)??;
    let mut len = 1;
    for sample in &mut cursor {
        sample?;
        len += 1;
    }
    Ok(Line {
        name,
        tagged: cursor.tagged,
        timed: cursor.timed,
        len,
        first,
        text: samples,
    })
}

/// Checks a sample's `T` time (whole Unix seconds) against what a store of
/// `resolutions` keeps at `now`: a slice some resolution still keeps, and
/// at most [`MAX_AHEAD_SECS`] after `now`.
pub fn check_time(at: u64, now: Timestamp, resolutions: &[Resolution]) -> Result<(), Reject> {
    if at > now.whole_secs().saturating_add(MAX_AHEAD_SECS)
        || !resolution::kept(resolutions, now, at)
    {
        return Err(Reject::TimeNotKept);
    }
    Ok(())
}

/// The metric types known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Type {
    Counter,
    Observation,
    Gauge,
    Set,
}

/// A run of values sharing a type and fields: its type, rate (and the
/// weight it gives an observation) and time.
#[derive(Clone, Copy, Debug)]
struct Group {
    kind: Type,
    rate: f64,
    weight: u64,
    at: Option<u64>,
}

/// Reads samples from the text after a line's name, one value at a time.
#[derive(Clone, Copy, Debug)]
struct Cursor<'a> {
    /// The current group's values not read yet; `None` when none are left.
    values: Option<&'a str>,
    group: Group,
    /// The text of the groups after the current one.
    rest: &'a str,
    /// A group read so far carried tags / a time.
    tagged: bool,
    timed: bool,
}

impl<'a> Cursor<'a> {
    fn new(samples: &'a str) -> Self {
        Cursor {
            values: None,
            group: Group {
                kind: Type::Counter,
                rate: 1.0,
                weight: 1,
                at: None,
            },
            rest: samples,
            tagged: false,
            timed: false,
        }
    }

    /// Reads the group at the start of `rest`: its values, type and fields,
    /// leaving `rest` at the next group (after its `:`) or empty.
    fn open_group(&mut self) -> Result<(), Reject> {
        let bar = find(self.rest, b'|').ok_or(Reject::Malformed)?;
        let (values, after) = (&self.rest[..bar], &self.rest[bar + 1..]);
        let end = find2(after, b'|', b':').unwrap_or(after.len());
        let kind = match &after[..end] {
            "c" => Type::Counter,
            "ms" | "h" | "d" => Type::Observation,
            "g" => Type::Gauge,
            "s" => Type::Set,
            "" => return Err(Reject::Malformed),
            _ => return Err(Reject::UnknownType),
        };
        if kind == Type::Set && values.contains(':') {
            return Err(Reject::BadValue);
        }
        let mut group = Group {
            kind,
            rate: 1.0,
            weight: 1,
            at: None,
        };
        let mut tail = &after[end..];
        loop {
            match tail.as_bytes().first() {
                None => {
                    self.rest = "";
                    break;
                }
                Some(b':') => {
                    self.rest = &tail[1..];
                    if self.rest.is_empty() {
                        return Err(Reject::Malformed);
                    }
                    break;
                }
                _ => {
                    // A `|`: the next field.
                    let field = &tail[1..];
                    let end = match field.as_bytes().first() {
                        Some(b'@') => {
                            let end = find2(field, b'|', b':').unwrap_or(field.len());
                            group.rate = match field[1..end].parse::<f64>() {
                                Ok(r) if r > 0.0 && r <= 1.0 => r,
                                _ => return Err(Reject::BadRate),
                            };
                            end
                        }
                        Some(b'T') => {
                            let end = find2(field, b'|', b':').unwrap_or(field.len());
                            group.at = Some(unix_seconds(&field[1..end])?);
                            self.timed = true;
                            end
                        }
                        Some(b'#') => {
                            let end = field.find('|').unwrap_or(field.len());
                            self.tagged |= end > 1;
                            end
                        }
                        _ if ["c:", "e:", "card:"].iter().any(|p| field.starts_with(p)) => {
                            field.find('|').unwrap_or(field.len())
                        }
                        _ => return Err(Reject::Malformed),
                    };
                    tail = &field[end..];
                }
            }
        }
        if kind == Type::Observation {
            let weight = (1.0 / group.rate).round();
            if weight > MAX_WEIGHT as f64 {
                return Err(Reject::Overflow);
            }
            group.weight = (weight as u64).max(1);
        }
        self.values = Some(values);
        self.group = group;
        Ok(())
    }
}

impl<'a> Iterator for Cursor<'a> {
    type Item = Result<Sample<'a>, Reject>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        // Most lines hold one sample: asking for a second costs no call.
        if self.values.is_none() && self.rest.is_empty() {
            return None;
        }
        Some(self.read())
    }
}

impl<'a> Cursor<'a> {
    /// The next sample, when there is one. Inlined, as is [`reading`]: a
    /// sample handed back through memory cost the hot path more than its
    /// reading (the copy stalls on the stores that wrote it).
    #[inline(always)]
    fn read(&mut self) -> Result<Sample<'a>, Reject> {
        let values = match self.values {
            Some(values) => values,
            None => {
                if let Err(reason) = self.open_group() {
                    // Nothing more is read after an error.
                    (self.values, self.rest) = (None, "");
                    return Err(reason);
                }
                self.values.unwrap_or_default()
            }
        };
        let (value, more) = match find(values, b':') {
            Some(i) => (&values[..i], Some(&values[i + 1..])),
            None => (values, None),
        };
        self.values = more;
        let read = reading(value, &self.group);
        if read.is_err() {
            (self.values, self.rest) = (None, "");
        }
        read.map(|reading| Sample {
            reading,
            at: self.group.at,
        })
    }
}

/// The index of the first `a` byte in `text` (ASCII, so the index is a
/// char boundary). The fields searched are a few bytes long: a plain loop
/// beats a vectorised search set up for each.
#[inline]
fn find(text: &str, a: u8) -> Option<usize> {
    text.bytes().position(|c| c == a)
}

/// The index of the first `a` or `b` byte in `text` (both ASCII).
#[inline]
fn find2(text: &str, a: u8, b: u8) -> Option<usize> {
    text.bytes().position(|c| c == a || c == b)
}

/// A `T` field's value: whole Unix seconds, 1 to the end of 9999.
fn unix_seconds(text: &str) -> Result<u64, Reject> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Reject::BadTime);
    }
    match text.parse::<u64>() {
        Ok(t) if t >= 1 && Timestamp::from_secs(t).is_ok() => Ok(t),
        _ => Err(Reject::BadTime),
    }
}

/// One value read as its group's type says.
#[inline(always)]
fn reading<'a>(value: &'a str, group: &Group) -> Result<Reading<'a>, Reject> {
    if group.kind == Type::Set {
        if value.is_empty() {
            return Err(Reject::BadValue);
        }
        return Ok(Reading::Member(value));
    }
    let number = match value.parse::<f64>() {
        Ok(v) if v.is_finite() => v + 0.0, // -0.0 counts as 0
        _ => return Err(Reject::BadValue),
    };
    Ok(match group.kind {
        Type::Observation => Reading::Observation {
            value: number,
            weight: group.weight,
        },
        Type::Gauge => Reading::Gauge {
            value: number,
            relative: value.starts_with(['+', '-']),
        },
        // Sets returned above.
        Type::Counter | Type::Set => {
            let scaled = (number / group.rate).round();
            // i64::MIN is kept out, so every count can be negated.
            if !(scaled > i64::MIN as f64 && scaled < i64::MAX as f64) {
                return Err(Reject::Overflow);
            }
            Reading::Count(scaled as i64)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The name and samples of an accepted line.
    fn read(line: &str) -> (&str, Vec<Sample<'_>>) {
        match parse_line(line) {
            Ok(l) => {
                let samples: Vec<Sample<'_>> = l.samples().collect();
                assert_eq!(samples.len(), l.len(), "{line:?}");
                (l.name, samples)
            }
            Err(r) => panic!("{line:?} refused: {r:?}"),
        }
    }

    fn reject(line: &str) -> Reject {
        match parse_line(line) {
            Err(r) => r,
            Ok(l) => panic!("{line:?} parsed as {:?}", read(line).1.get(..l.len())),
        }
    }

    fn now(reading: Reading<'_>) -> Sample<'_> {
        Sample { reading, at: None }
    }

    fn count(n: i64) -> Sample<'static> {
        now(Reading::Count(n))
    }

    fn obs(value: f64, weight: u64) -> Sample<'static> {
        now(Reading::Observation { value, weight })
    }

    fn gauge(value: f64, relative: bool) -> Sample<'static> {
        now(Reading::Gauge { value, relative })
    }

    #[test]
    fn counters_with_rates_and_tags() {
        assert_eq!(read("hits:1|c"), ("hits", vec![count(1)]));
        assert_eq!(read("hits:-3|c"), ("hits", vec![count(-3)]));
        assert_eq!(read("hits:1|c|@0.1"), ("hits", vec![count(10)]));
        assert_eq!(
            read("hits:2|c|@0.5|#env:prod,az:b"),
            ("hits", vec![count(4)])
        );
        assert_eq!(read("hits:1|c|#env:prod|@0.25"), ("hits", vec![count(4)]));
        assert_eq!(
            read("api.calls/user:42|c"),
            ("api.calls/user", vec![count(42)])
        );
        assert_eq!(read("hits:1.6|c"), ("hits", vec![count(2)]));
        assert!(parse_line("hits:1|c|#env:prod").unwrap().tagged);
        assert!(!parse_line("hits:1|c").unwrap().tagged);
        // An empty tag list drops nothing.
        assert!(!parse_line("hits:1|c|#").unwrap().tagged);
    }

    /// Issue 21: the name ends at the first `:`, as statsd and DogStatsD
    /// read it; `pk:1:2|h` was one observation of 2 on a statistic `pk:1`.
    #[test]
    fn issue_21_the_name_ends_at_the_first_colon() {
        assert_eq!(read("pk:1:2|h"), ("pk", vec![obs(1.0, 1), obs(2.0, 1)]));
        assert_eq!(read("hits:1|c:2|c"), ("hits", vec![count(1), count(2)]));
        assert_eq!(read("ct:1|c|c:abc123"), ("ct", vec![count(1)]));
        assert_eq!(
            read("ts:1|c|T1700000000"),
            (
                "ts",
                vec![Sample {
                    reading: Reading::Count(1),
                    at: Some(1_700_000_000)
                }]
            )
        );
        let tagged = parse_line("tg:1|c|#env:prod").unwrap();
        assert_eq!((tagged.name, tagged.tagged), ("tg", true));
        assert_eq!(tagged.samples().collect::<Vec<_>>(), vec![count(1)]);
        // What Tally once read as a name with `:` is the name `shop`.
        assert_eq!(reject("shop:checkout:5|c"), Reject::BadValue);
        assert_eq!(read("shop:5:6|c"), ("shop", vec![count(5), count(6)]));
        assert_eq!(reject("users:a:b|s"), Reject::BadValue);
    }

    #[test]
    fn samples_have_their_own_type_rate_and_time() {
        assert_eq!(
            read("x:1|c|@0.5:2|ms|@0.25:3|g:+1|g:ann|s"),
            (
                "x",
                vec![
                    count(2),
                    obs(2.0, 4),
                    gauge(3.0, false),
                    gauge(1.0, true),
                    now(Reading::Member("ann")),
                ]
            )
        );
        let (_, timed) = read("x:1|c|T100:2|c:3|c|T200");
        let times: Vec<Option<u64>> = timed.iter().map(|s| s.at).collect();
        assert_eq!(times, vec![Some(100), None, Some(200)]);
        assert!(parse_line("x:1|c:2|c|T5").unwrap().timed);
        assert!(!parse_line("x:1|c:2|c").unwrap().timed);
        // Packed values share their group's fields.
        assert_eq!(
            read("lat:1:2:3|ms|@0.5|#a:b|T9"),
            (
                "lat",
                [1.0, 2.0, 3.0]
                    .map(|value| Sample {
                        reading: Reading::Observation { value, weight: 2 },
                        at: Some(9)
                    })
                    .to_vec()
            )
        );
        assert_eq!(
            read("q:5:+1:-2|g"),
            (
                "q",
                vec![gauge(5.0, false), gauge(1.0, true), gauge(-2.0, true)]
            )
        );
        // A line that fails in a later sample is refused whole.
        assert_eq!(reject("hits:1|c:x|c"), Reject::BadValue);
        assert_eq!(reject("hits:1|c:2|zz"), Reject::UnknownType);
        assert_eq!(reject("hits:1|c:2|c|@7"), Reject::BadRate);
        assert_eq!(reject("hits:1|c:"), Reject::Malformed);
        assert_eq!(reject("hits:1::2|c"), Reject::BadValue);
        assert_eq!(reject("hits:1:|c"), Reject::BadValue);
    }

    #[test]
    fn fields_come_in_any_order_and_colons_in_tags_and_origin_are_theirs() {
        fn tagged_counter(line: &str) -> (&str, bool, Vec<Sample<'_>>) {
            let l = parse_line(line).unwrap_or_else(|r| panic!("{line:?}: {r:?}"));
            (l.name, l.tagged, l.samples().collect())
        }
        let at = |n, t| Sample {
            reading: Reading::Count(n),
            at: Some(t),
        };
        for line in [
            "n:1|c|@0.5|#k:v|c:id:x|T77",
            "n:1|c|T77|c:id:x|#k:v|@0.5",
            "n:1|c|c:id:x|@0.5|T77|#k:v",
            "n:1|c|#k:v|T77|@0.5|e:it-false,cn-web|card:low",
        ] {
            assert_eq!(tagged_counter(line), ("n", true, vec![at(2, 77)]), "{line}");
        }
        // After a tag list or an origin field, a `:` is still theirs, so a
        // statsd sample cannot follow them.
        assert_eq!(reject("n:1|c|#k:v:2|c"), Reject::Malformed);
        assert_eq!(reject("n:1|c|c:abc:2|c"), Reject::Malformed);
        assert_eq!(read("n:1|c|c:abc|#t"), ("n", vec![count(1)]));
    }

    #[test]
    fn times_are_whole_unix_seconds() {
        assert_eq!(reject("t:1|c|T"), Reject::BadTime);
        assert_eq!(reject("t:1|c|T0"), Reject::BadTime);
        assert_eq!(reject("t:1|c|T-5"), Reject::BadTime);
        assert_eq!(reject("t:1|c|T+5"), Reject::BadTime);
        assert_eq!(reject("t:1|c|T1.5"), Reject::BadTime);
        assert_eq!(reject("t:1|c|T253402300800"), Reject::BadTime);
        assert_eq!(reject("t:1|c|T99999999999999999999999"), Reject::BadTime);
        assert_eq!(read("t:1|c|T253402300799").1[0].at, Some(253_402_300_799));
    }

    #[test]
    fn a_time_must_be_one_the_store_keeps() {
        let rs = [Resolution::new(60, 60), Resolution::new(3600, 24)];
        let now = Timestamp::from_secs(1_700_000_030).unwrap();
        assert_eq!(check_time(1_700_000_030, now, &rs), Ok(()));
        assert_eq!(check_time(1_700_000_030 - 60, now, &rs), Ok(()));
        // The oldest hour kept starts 23 hours before the current one.
        let oldest = 1_699_999_200 - 23 * 3600;
        assert_eq!(check_time(oldest, now, &rs), Ok(()));
        assert_eq!(check_time(oldest - 1, now, &rs), Err(Reject::TimeNotKept));
        assert_eq!(check_time(1_700_000_090, now, &rs), Ok(()));
        assert_eq!(
            check_time(1_700_000_091, now, &rs),
            Err(Reject::TimeNotKept)
        );
    }

    #[test]
    fn events_and_service_checks_have_a_reason_of_their_own() {
        for line in [
            "_e{5,4}:title|text",
            "_e{21,36}:An exception occurred|Cannot parse CSV file from 10.0.0.17|t:warning|#err_type:bad_file",
            "_sc|Redis connection|2|#env:dev|m:Redis connection timed out after 10s",
            "_sc|db|0",
        ] {
            assert_eq!(reject(line), Reject::EventOrServiceCheck, "{line}");
        }
        // A metric whose name merely starts like one is a metric.
        assert_eq!(read("_scale:1|c"), ("_scale", vec![count(1)]));
        assert_eq!(read("_e:1|c"), ("_e", vec![count(1)]));
    }

    /// The example datagrams of the DogStatsD protocol documentation
    /// (datagram format, protocol v1.0 to v1.6), as Tally reads them.
    #[test]
    fn dogstatsd_documentation_examples() {
        let member = |m| now(Reading::Member(m));
        let cases: Vec<(&str, &str, bool, Vec<Sample<'_>>)> = vec![
            ("page.views:1|c", "page.views", false, vec![count(1)]),
            (
                "fuel.level:0.5|g",
                "fuel.level",
                false,
                vec![gauge(0.5, false)],
            ),
            (
                "song.length:240|h|@0.5",
                "song.length",
                false,
                vec![obs(240.0, 2)],
            ),
            (
                "users.uniques:1234|s",
                "users.uniques",
                false,
                vec![member("1234")],
            ),
            (
                "users.online:1|c|#country:china",
                "users.online",
                true,
                vec![count(1)],
            ),
            (
                "users.online:1|c|@0.5|#country:china",
                "users.online",
                true,
                vec![count(2)],
            ),
            // v1.1: packed values.
            (
                "page.views:1:2:32|d",
                "page.views",
                false,
                vec![obs(1.0, 1), obs(2.0, 1), obs(32.0, 1)],
            ),
            (
                "song.length:240:234|h|@0.5",
                "song.length",
                false,
                vec![obs(240.0, 2), obs(234.0, 2)],
            ),
            // v1.2: a container id.
            (
                "page.views:1|g|#env:dev|c:83c0a99c0a54c0c187f461c7980e9b57f3f6a8b0c918c8d93df19a9de6f3fe1d",
                "page.views",
                true,
                vec![gauge(1.0, false)],
            ),
            // v1.3: a timestamp.
            (
                "page.views:15|c|#env:dev|T1656581400",
                "page.views",
                true,
                vec![Sample {
                    reading: Reading::Count(15),
                    at: Some(1_656_581_400),
                }],
            ),
            // v1.4: the container id field's prefixed forms.
            (
                "page.views:1|c|c:ci-83c0a99c0a54",
                "page.views",
                false,
                vec![count(1)],
            ),
            (
                "page.views:1|c|c:in-1234",
                "page.views",
                false,
                vec![count(1)],
            ),
            // v1.5 and v1.6: external data and cardinality.
            (
                "page.views:1|c|#env:dev|e:it-false,cn-nginx-webserver,pu-75a2b6d5-3949-4afb-ad0d-92ff0674e759",
                "page.views",
                true,
                vec![count(1)],
            ),
            (
                "page.views:1|c|#env:dev|card:orchestrator",
                "page.views",
                true,
                vec![count(1)],
            ),
            // The shell examples.
            (
                "custom_metric:60|g|#shell",
                "custom_metric",
                true,
                vec![gauge(60.0, false)],
            ),
            (
                "custom.metric.name:1|c",
                "custom.metric.name",
                false,
                vec![count(1)],
            ),
        ];
        for (line, name, tagged, samples) in cases {
            let parsed = parse_line(line).unwrap_or_else(|r| panic!("{line}: {r:?}"));
            assert_eq!(
                (
                    parsed.name,
                    parsed.tagged,
                    parsed.samples().collect::<Vec<_>>()
                ),
                (name, tagged, samples),
                "{line}"
            );
        }
        for line in [
            "_e{21,42}:An exception occurred|Cannot parse JSON request:\\\\n{\"foo: \"bar\"}|p:low|#err_type:bad_request",
            "_e{20,24}:Event from the shell|This was sent from Bash!|#shell,bash",
        ] {
            assert_eq!(reject(line), Reject::EventOrServiceCheck, "{line}");
        }
    }

    #[test]
    fn other_types_and_garbage_are_rejected() {
        assert_eq!(reject("temp:21|x"), Reject::UnknownType);
        assert_eq!(reject("rt:320|timer"), Reject::UnknownType);
        assert_eq!(reject("users:|s"), Reject::BadValue);
        assert_eq!(reject("temp:+x|g"), Reject::BadValue);
        assert_eq!(reject("rt:1|ms|@0"), Reject::BadRate);
        assert_eq!(reject("rt:1|ms|@1e-300"), Reject::Overflow);
        assert_eq!(reject("hits"), Reject::Malformed);
        assert_eq!(reject("hits:"), Reject::Malformed);
        assert_eq!(reject("hits:1"), Reject::Malformed);
        assert_eq!(reject("hits:1|"), Reject::Malformed);
        assert_eq!(reject("hits|c"), Reject::Malformed);
        assert_eq!(reject("a|b:1|c"), Reject::Malformed);
        assert_eq!(reject("hits:1|c|x"), Reject::Malformed);
        assert_eq!(reject("hits:1|c|"), Reject::Malformed);
        assert_eq!(reject("hits:1|c||@0.5"), Reject::Malformed);
        assert_eq!(reject("hits:1|c|card"), Reject::Malformed);
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
        assert_eq!(read("rt:320|ms"), ("rt", vec![obs(320.0, 1)]));
        assert_eq!(read("rt:1.5|ms|@0.1"), ("rt", vec![obs(1.5, 10)]));
        assert_eq!(read("rt:2|h|@0.3"), ("rt", vec![obs(2.0, 3)]));
        assert_eq!(read("ab:-4|d|#k:v|@0.5"), ("ab", vec![obs(-4.0, 2)]));
        // A rate close to 1 still weighs one observation.
        assert_eq!(read("rt:7|ms|@0.9"), ("rt", vec![obs(7.0, 1)]));
    }

    #[test]
    fn gauges_set_or_adjust_and_sets_take_members() {
        assert_eq!(read("temp:21|g"), ("temp", vec![gauge(21.0, false)]));
        assert_eq!(read("temp:+3.5|g"), ("temp", vec![gauge(3.5, true)]));
        assert_eq!(read("temp:-5|g"), ("temp", vec![gauge(-5.0, true)]));
        assert_eq!(read("temp:0|g|#env:x"), ("temp", vec![gauge(0.0, false)]));
        assert_eq!(
            read("users:alice|s"),
            ("users", vec![now(Reading::Member("alice"))])
        );
        assert_eq!(
            read("users:alice|s:bob|s"),
            (
                "users",
                vec![now(Reading::Member("alice")), now(Reading::Member("bob"))]
            )
        );
    }

    #[test]
    fn packets_hold_several_lines() {
        let lines: Vec<Result<(&str, Vec<Sample<'_>>), Reject>> =
            parse_packet(b"a:1|c\nb:2|c|@0.5\r\nbad\n\ng:1|g\nq:1|zz\n_sc|x|0\n")
                .map(|l| l.map(|l| (l.name, l.samples().collect())))
                .collect();
        assert_eq!(
            lines,
            vec![
                Ok(("a", vec![count(1)])),
                Ok(("b", vec![count(4)])),
                Err(Reject::Malformed),
                Ok(("g", vec![gauge(1.0, false)])),
                Err(Reject::UnknownType),
                Err(Reject::EventOrServiceCheck),
            ]
        );
        assert_eq!(
            parse_packet(b"\xff\xfe:1|c")
                .map(|l| l.err())
                .collect::<Vec<_>>(),
            vec![Some(Reject::Malformed)]
        );
        // A packet that is not UTF-8 as a whole loses only its bad lines.
        let mixed: Vec<Result<&str, Reject>> =
            parse_packet(b"a:1|c\r\n\xff:1|c\n \nn\xc3\xa9:2|c\nb:\xe9|s")
                .map(|l| l.map(|l| l.name))
                .collect();
        assert_eq!(
            mixed,
            vec![
                Ok("a"),
                Err(Reject::Malformed),
                Ok("né"),
                Err(Reject::Malformed)
            ]
        );
    }

    /// A sample as generated for the round trip: its text and what it reads.
    fn group_strategy() -> impl Strategy<Value = (String, Vec<Sample<'static>>)> {
        let value = -1_000_000i64..1_000_000;
        let fields = (
            proptest::option::of(1u32..=100),
            proptest::option::of(1u64..2_000_000_000),
            proptest::option::of("[a-z]{1,5}(:[a-z0-9]{1,5})?(,[a-z]{1,5}:[a-z]{1,3}){0,2}"),
            proptest::option::of("(ci-|in-)?[a-f0-9:]{1,12}"),
            any::<u8>(),
        );
        (0u8..4, proptest::collection::vec(value, 1..4), fields).prop_map(
            |(kind, values, (rate, at, tags, container, order))| {
                let rate_f = rate.map_or(1.0, |r| f64::from(r) / 100.0);
                let (type_, values, read): (&str, Vec<i64>, Vec<Reading<'static>>) = match kind {
                    0 => (
                        "c",
                        values.clone(),
                        values
                            .iter()
                            .map(|&v| Reading::Count((v as f64 / rate_f).round() as i64))
                            .collect(),
                    ),
                    1 => {
                        let weight = ((1.0 / rate_f).round() as u64).max(1);
                        (
                            "ms",
                            values.clone(),
                            values
                                .iter()
                                .map(|&v| Reading::Observation {
                                    value: v as f64,
                                    weight,
                                })
                                .collect(),
                        )
                    }
                    2 => (
                        "g",
                        values.clone(),
                        values
                            .iter()
                            .map(|&v| Reading::Gauge {
                                value: v as f64,
                                relative: v < 0,
                            })
                            .collect(),
                    ),
                    // Sets: one member; a number's text is a fine member.
                    _ => {
                        let m: &'static str = Box::leak(values[0].to_string().into_boxed_str());
                        ("s", vec![values[0]], vec![Reading::Member(m)])
                    }
                };
                let mut fields: Vec<String> = Vec::new();
                if let Some(r) = rate {
                    fields.push(format!("@{}", f64::from(r) / 100.0));
                }
                if let Some(t) = at {
                    fields.push(format!("T{t}"));
                }
                if let Some(t) = &tags {
                    fields.push(format!("#{t}"));
                }
                if let Some(c) = &container {
                    fields.push(format!("c:{c}"));
                }
                let turn = usize::from(order) % fields.len().max(1);
                fields.rotate_left(turn);
                let text = format!(
                    "{}|{type_}{}",
                    values
                        .iter()
                        .map(i64::to_string)
                        .collect::<Vec<_>>()
                        .join(":"),
                    fields.iter().map(|f| format!("|{f}")).collect::<String>()
                );
                let samples = read
                    .into_iter()
                    .map(|reading| Sample { reading, at })
                    .collect();
                (text, samples)
            },
        )
    }

    /// Pieces of statsd lines: names, values, separators, types, fields.
    const TOKENS: &[&str] = &[
        "a",
        "b.c",
        ":",
        "|",
        "1",
        "2.5",
        "-3",
        "+4",
        "c",
        "ms",
        "h",
        "g",
        "s",
        "|c",
        "|@0.5",
        "|#k:v",
        "|#t",
        "|c:ab:1",
        "|e:x",
        "|card:low",
        "|T99",
        "#",
        "@",
        "T",
        "_e{",
        "_sc|",
    ];

    /// Lines of statsd's shape (a name, `:`, groups of values with a type
    /// and fields) with up to three tokens put in or swapped at random
    /// places: about a third are still accepted.
    fn near_lines() -> impl Strategy<Value = String> {
        let group = (
            proptest::collection::vec(
                proptest::sample::select(&["1", "2.5", "-3", "+4"][..]),
                1..3,
            ),
            proptest::sample::select(&["c", "ms", "h", "d", "g"][..]),
            proptest::collection::vec(
                proptest::sample::select(
                    &[
                        "|@0.5",
                        "|#k:v",
                        "|#t",
                        "|c:ab:1",
                        "|e:x",
                        "|card:low",
                        "|T99",
                    ][..],
                ),
                0..3,
            ),
        );
        let noise = proptest::collection::vec(
            (
                any::<prop::sample::Index>(),
                proptest::sample::select(TOKENS),
                any::<bool>(),
            ),
            0..3,
        );
        (
            proptest::sample::select(&["a", "b.c", "x_y"][..]),
            proptest::collection::vec(group, 1..3),
            noise,
        )
            .prop_map(|(name, groups, noise)| {
                let mut pieces: Vec<&str> = vec![name];
                for (values, kind, fields) in groups {
                    pieces.push(":");
                    for (i, v) in values.into_iter().enumerate() {
                        if i > 0 {
                            pieces.push(":");
                        }
                        pieces.push(v);
                    }
                    pieces.push("|");
                    pieces.push(kind);
                    pieces.extend(fields);
                }
                for (at, token, insert) in noise {
                    let at = at.index(pieces.len());
                    if insert {
                        pieces.insert(at, token);
                    } else {
                        pieces[at] = token;
                    }
                }
                pieces.concat()
            })
    }

    proptest! {
        #[test]
        fn never_panics(packet in proptest::collection::vec(any::<u8>(), 0..300)) {
            for line in parse_packet(&packet).flatten() {
                prop_assert!(Name::check(line.name).is_ok());
                prop_assert_eq!(line.samples().count(), line.len());
                for s in line.samples() {
                    if let Reading::Count(n) = s.reading {
                        prop_assert!(n != i64::MIN);
                    }
                }
            }
        }

        /// Issue 21's property: an accepted line writes only under the text
        /// before its first `:`, whatever `:`, `|`, tags and fields it holds.
        #[test]
        fn accepted_lines_write_under_the_text_before_the_first_colon(
            line in near_lines(),
        ) {
            if let Ok(parsed) = parse_line(&line) {
                prop_assert_eq!(Some(parsed.name), line.split(':').next());
                prop_assert!(!parsed.name.contains(':'));
            }
        }

        /// Lines made of any samples, packed values and fields (tags and
        /// container ids full of `:`) read back as sent, under their name.
        #[test]
        fn generated_lines_read_back_as_sent(
            name in "[a-z][a-z0-9._-]{0,20}",
            groups in proptest::collection::vec(group_strategy(), 1..4),
        ) {
            // Tags and origin fields swallow a following `:`, so only the
            // last group may carry them.
            let last = groups.len() - 1;
            let mut text = name.clone();
            let mut expected = Vec::new();
            let mut tagged = false;
            for (i, (group, samples)) in groups.iter().enumerate() {
                let group = if i < last {
                    group.split('|').filter(|f| !f.starts_with('#') && !f.starts_with("c:")).collect::<Vec<_>>().join("|")
                } else {
                    tagged = group.split('|').any(|f| f.len() > 1 && f.starts_with('#'));
                    group.clone()
                };
                text.push(':');
                text.push_str(&group);
                expected.extend_from_slice(samples);
            }
            let parsed = parse_line(&text);
            prop_assert!(parsed.is_ok(), "{} refused: {:?}", text, parsed.err());
            let parsed = parsed.unwrap();
            prop_assert_eq!(parsed.name, name.as_str());
            prop_assert_eq!(parsed.tagged, tagged);
            prop_assert_eq!(parsed.samples().collect::<Vec<_>>(), expected);
        }

        #[test]
        fn any_other_type_is_rejected(name in "[a-z]{1,10}", value in 0u32..1000, kind in "(x|set|timer|cc|gg|[A-Z]{1,3})") {
            let line = format!("{name}:{value}|{kind}");
            prop_assert_eq!(parse_line(&line).err(), Some(Reject::UnknownType));
        }

        #[test]
        fn sampled_observations_weigh_the_inverse_rate(value in -1e6f64..1e6, rate_pct in 1u32..=100) {
            let rate = f64::from(rate_pct) / 100.0;
            let line = format!("rt:{value}|ms|@{rate}");
            let weight = ((1.0 / rate).round() as u64).max(1);
            prop_assert_eq!(read(&line), ("rt", vec![obs(value, weight)]));
        }
    }
}
