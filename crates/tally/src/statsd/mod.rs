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
//! listener's "now" and the precisions of the sample's kind): not older
//! than the longest-kept precision keeps, and at most [`MAX_AHEAD_SECS`]
//! ahead, else the line is refused as [`Reject::TimeNotKept`].
//!
//! What this module does not do: read a clock or write anything. Parsing
//! never panics and never allocates; a parsed [`Line`] holds its first
//! sample and reads the others again from the line's text when
//! [`Line::samples`] asks for them.

mod cursor;
mod target;
#[cfg(test)]
mod tests;

pub use self::target::{StatsdRules, Target};

use self::cursor::{Cursor, find2};
use crate::clock::Timestamp;
use crate::engine::precision::{self, Precision};
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
    /// precision of the metric's kind keeps, or more than
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

/// The kinds of [`Reading`]: which statsd types a kind's writer takes
/// (see [`StatsdRules`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReadingKind {
    /// [`Reading::Count`] (`c`).
    Count,
    /// [`Reading::Observation`] (`ms`, `h`, `d`).
    Observation,
    /// [`Reading::Gauge`] (`g`).
    Gauge,
    /// [`Reading::Member`] (`s`).
    Member,
}

impl ReadingKind {
    /// How many kinds there are (each one's index is below it).
    pub const COUNT: usize = 4;

    /// Its place in a table of [`ReadingKind::COUNT`] entries.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl Reading<'_> {
    /// What kind of reading it is.
    pub fn kind(&self) -> ReadingKind {
        match self {
            Reading::Count(_) => ReadingKind::Count,
            Reading::Observation { .. } => ReadingKind::Observation,
            Reading::Gauge { .. } => ReadingKind::Gauge,
            Reading::Member(_) => ReadingKind::Member,
        }
    }
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
/// `precisions` keeps at `now`: a slice some precision still keeps, and
/// at most [`MAX_AHEAD_SECS`] after `now`.
pub fn check_time(at: u64, now: Timestamp, precisions: &[Precision]) -> Result<(), Reject> {
    if at > now.whole_secs().saturating_add(MAX_AHEAD_SECS) || !precision::kept(precisions, now, at)
    {
        return Err(Reject::TimeNotKept);
    }
    Ok(())
}
