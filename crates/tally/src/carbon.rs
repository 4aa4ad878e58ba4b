//! Carbon's plaintext protocol: a pure parser, and the framing of its lines.
//!
//! A line is `path value timestamp`: three fields separated by whitespace,
//! a gauge `path` set to `value` at `timestamp` (Unix seconds, a fraction
//! allowed). What a line may hold is what carbon 1.1.10's line receiver
//! accepts:
//! - fields are separated by any run of the characters Python's
//!   `str.split()` takes for whitespace (ASCII space, tab, `\r`, `\x0b`,
//!   `\x0c`, `\x1c` to `\x1f`, and Unicode's spaces such as U+00A0 or
//!   U+3000), before, between and after them; exactly three fields;
//! - `value` and `timestamp` are numbers as Python's `float()` reads them:
//!   an optional sign, digits with an optional point and exponent (`1`,
//!   `-.5`, `2.`, `1e3`), `inf`, `infinity`, `nan` in any case, single
//!   underscores between digits (`1_000`), and any Unicode decimal digit
//!   (`١٢` is 12; Unicode 14, as Python 3.11 has it);
//! - a timestamp from −2 (excluded) to −1 (included) means "now" (carbon
//!   truncates it to −1, its "no timestamp" mark); any other is kept as
//!   sent, fraction included.
//!
//! Over TCP a line ends at `\n` ([`LineBuffer`]); a UDP datagram holds lines
//! split as Python's `str.splitlines()` splits them: at `\n`, `\r\n`, `\r`,
//! `\x0b`, `\x0c`, `\x1c` to `\x1e`, U+0085, U+2028 and U+2029
//! ([`datagram_lines`]).
//!
//! Refused, each with its [`Reject`] reason, writing nothing:
//! - what carbon refuses: not three fields (an empty line included), a
//!   value or timestamp that is not a number;
//! - what carbon accepts but Tally cannot keep: a value that is not finite
//!   (carbon drops NaN silently, and keeps ±inf, which no gauge holds); a
//!   timestamp that is NaN or infinite (carbon fails on it, closing the TCP
//!   connection or dropping the rest of the datagram); a timestamp outside
//!   what the gauges keep ([`Window`], the rule of statsd's `T` times:
//!   before the oldest slice any precision keeps, or more than
//!   [`MAX_AHEAD_SECS`] ahead of now, where whisper's files would refuse it
//!   too); a path that is not a valid Tally name (more than 256
//!   characters, or a control character); a line that is not UTF-8 (carbon fails on it: over TCP it closes the
//!   connection, over UDP it drops the whole datagram; Tally refuses that
//!   line alone); a TCP line longer than the limit (carbon's is 16,384
//!   bytes and it closes the connection; Tally refuses that line alone and
//!   reads on from the next `\n`); the unterminated rest of a TCP stream at
//!   its end (carbon ignores it without a word).
//!
//! A line refused for several reasons is refused for the first in carbon's
//! order: the fields, both numbers, a NaN value, the timestamp's, then what
//! only Tally refuses. An accepted line's gauge name is exactly its path,
//! as sent (tagged paths like `cpu;host=a` included: the tags stay part of
//! the name); a value of −0 is kept as 0 (the same number). Parsing never
//! panics and does not allocate for a line of ASCII digits.

use crate::clock::Timestamp;
use crate::engine::precision::Precision;
use crate::name::Name;

/// How far ahead of now a timestamp may be (clock skew), seconds: statsd's
/// rule for its `T` times ([`crate::statsd::MAX_AHEAD_SECS`]).
pub const MAX_AHEAD_SECS: u64 = crate::statsd::MAX_AHEAD_SECS;

/// The longest TCP line accepted when none is configured, bytes (without
/// its `\n`): carbon's own limit.
pub const DEFAULT_MAX_LINE: usize = 16_384;

/// Bytes read from a TCP connection at once: a [`LineBuffer`] holds this
/// much more than its longest line.
pub const READ_CHUNK: usize = 16 * 1024;

/// Why a line was not kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reject {
    /// The line is not UTF-8.
    NotUtf8,
    /// Not three fields (an empty line included).
    Malformed,
    /// The value is not a number.
    BadValue,
    /// The timestamp is not a finite number.
    BadTimestamp,
    /// The value is NaN or infinite.
    NotFinite,
    /// The path is not a valid name ([`Name::check`]).
    BadName,
    /// The timestamp is outside what the gauges keep ([`Window`]), as
    /// statsd's `time_not_kept`.
    TimeNotKept,
    /// A TCP line longer than the limit.
    TooLong,
    /// A TCP stream ended inside a line (no `\n` after it).
    Unterminated,
}

impl Reject {
    /// A short code, for metrics labels.
    pub fn code(self) -> &'static str {
        match self {
            Reject::NotUtf8 => "not_utf8",
            Reject::Malformed => "malformed",
            Reject::BadValue => "bad_value",
            Reject::BadTimestamp => "bad_timestamp",
            Reject::NotFinite => "not_finite",
            Reject::BadName => "bad_name",
            Reject::TimeNotKept => "time_not_kept",
            Reject::TooLong => "too_long",
            Reject::Unterminated => "unterminated",
        }
    }
}

/// One accepted line: set gauge `path` to `value` at `at`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point<'a> {
    /// The gauge: the path exactly as sent.
    pub path: &'a str,
    /// The value (finite; −0 reads 0).
    pub value: f64,
    /// Unix seconds, within the [`Window`].
    pub at: f64,
}

/// The timestamps accepted at one moment: those whose second lands in a
/// slice some precision of the gauges still keeps
/// ([`precision::kept`](crate::engine::precision::kept)), up to
/// [`MAX_AHEAD_SECS`] after now's second, both bounds included: statsd's
/// rule for its `T` times ([`crate::statsd::check_time`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    now: f64,
    oldest: u64,
    newest: u64,
}

impl Window {
    /// The window at `now` of a space with `precisions`: from the start of
    /// the oldest slice any of them keeps.
    pub fn new(now: Timestamp, precisions: &[Precision]) -> Self {
        let oldest = precisions
            .iter()
            .map(|r| r.oldest_kept(now))
            .min()
            .unwrap_or_else(|| now.whole_secs());
        Window {
            now: now.as_secs_f64(),
            oldest,
            newest: now.whole_secs().saturating_add(MAX_AHEAD_SECS),
        }
    }

    /// A window of the given whole seconds, `now` standing for the "now"
    /// timestamps.
    pub fn between(now: f64, oldest: u64, newest: u64) -> Self {
        Window {
            now,
            oldest,
            newest,
        }
    }

    /// What "now" stands for.
    pub fn now(&self) -> f64 {
        self.now
    }

    /// The oldest second accepted.
    pub fn oldest(&self) -> u64 {
        self.oldest
    }

    /// The newest second accepted.
    pub fn newest(&self) -> u64 {
        self.newest
    }

    /// Whether `at` (Unix seconds) is accepted: its whole second is within
    /// the bounds.
    pub fn contains(&self, at: f64) -> bool {
        let second = at.floor();
        self.oldest as f64 <= second && second <= self.newest as f64
    }
}

/// Parses one line (without its line break) at the moment `window` stands
/// for.
pub fn parse_line<'a>(line: &'a [u8], window: &Window) -> Result<Point<'a>, Reject> {
    let text = std::str::from_utf8(line).map_err(|_| Reject::NotUtf8)?;
    let [path, value, at] = fields(text).ok_or(Reject::Malformed)?;
    // In carbon's order: both numbers, a NaN value, a timestamp that is not
    // finite; then what carbon keeps and Tally cannot.
    let value = number(value).ok_or(Reject::BadValue)?;
    let at = number(at).ok_or(Reject::BadTimestamp)?;
    if value.is_nan() {
        return Err(Reject::NotFinite);
    }
    if !at.is_finite() {
        return Err(Reject::BadTimestamp);
    }
    if value.is_infinite() {
        return Err(Reject::NotFinite);
    }
    Name::check(path).map_err(|_| Reject::BadName)?;
    // Carbon takes int(timestamp) == -1 for "now".
    let at = if -2.0 < at && at <= -1.0 {
        window.now
    } else {
        at
    };
    if !window.contains(at) {
        return Err(Reject::TimeNotKept);
    }
    Ok(Point {
        path,
        value: value + 0.0,
        at,
    })
}

/// The three whitespace-separated fields of `text`, if it has exactly
/// three.
fn fields<'a>(text: &'a str) -> Option<[&'a str; 3]> {
    let mut out: [&'a str; 3] = [""; 3];
    let mut n = 0;
    let mut push = |field: &'a str| -> Option<()> {
        if field.is_empty() {
            return Some(());
        }
        *out.get_mut(n)? = field;
        n += 1;
        Some(())
    };
    if text.is_ascii() {
        let bytes = text.as_bytes();
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if is_ascii_space(b) {
                push(&text[start..i])?;
                start = i + 1;
            }
        }
        push(&text[start..])?;
    } else {
        for field in text.split(is_space) {
            push(field)?;
        }
    }
    (n == 3).then_some(out)
}

/// ASCII whitespace as Python's `str.split()` takes it: `\t`, `\n`,
/// `\x0b`, `\x0c`, `\r`, `\x1c` to `\x1f` and space.
#[inline]
fn is_ascii_space(b: u8) -> bool {
    matches!(b, b'\t'..=b'\r' | 0x1c..=0x1f | b' ')
}

/// Whitespace as Python's `str.split()` takes it: Unicode's White_Space
/// characters, and `\x1c` to `\x1f`.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Line breaks as Python's `str.splitlines()` takes them (`\r\n` is one).
fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r'
            | '\x0b'
            | '\x0c'
            | '\x1c'
            | '\x1d'
            | '\x1e'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// A number as Python's `float()` reads it, or `None`.
fn number(field: &str) -> Option<f64> {
    // Rust reads the same grammar but for underscores and non-ASCII digits
    // (both round correctly, so the values are equal).
    if field.is_ascii() && !field.contains('_') {
        return field.parse().ok();
    }
    let mut ascii = String::with_capacity(field.len());
    let mut prev = '\0';
    for c in field.chars() {
        let c = if c.is_ascii() { c } else { decimal_digit(c)? };
        if c == '_' {
            // Only between two digits.
            if !prev.is_ascii_digit() {
                return None;
            }
        } else {
            if prev == '_' && !c.is_ascii_digit() {
                return None;
            }
            ascii.push(c);
        }
        prev = c;
    }
    if prev == '_' {
        return None;
    }
    ascii.parse().ok()
}

/// The first code point of each run of ten Unicode decimal digits (general
/// category Nd, Unicode 14.0) beyond ASCII; each run holds 0 to 9 in order.
const DIGIT_ZEROS: [u32; 65] = [
    0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66, 0xDE6,
    0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90, 0x1B50,
    0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650,
    0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50,
    0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
];

/// The ASCII digit a non-ASCII decimal digit stands for.
fn decimal_digit(c: char) -> Option<char> {
    let cp = c as u32;
    let i = DIGIT_ZEROS.partition_point(|&zero| zero <= cp);
    let zero = DIGIT_ZEROS[i.checked_sub(1)?];
    let d = cp - zero;
    (d < 10).then(|| char::from(b'0' + d as u8))
}

/// Calls `each` with every line of a UDP datagram, split as Python's
/// `str.splitlines()` splits the decoded datagram. A datagram that is not
/// UTF-8 is split at `\n` first, and each part is split so if it is UTF-8,
/// else handed on whole (and refused by [`parse_line`]).
pub fn datagram_lines<'a>(datagram: &'a [u8], mut each: impl FnMut(&'a [u8])) {
    if let Ok(text) = std::str::from_utf8(datagram) {
        split_lines(text, |l| each(l.as_bytes()));
        return;
    }
    let mut parts = datagram.split(|&b| b == b'\n').peekable();
    while let Some(part) = parts.next() {
        let last = parts.peek().is_none();
        if last && part.is_empty() {
            break; // nothing after the last `\n`
        }
        match std::str::from_utf8(part) {
            // An empty line of its own (splitlines("") has none).
            Ok("") => each(part),
            Ok(text) => split_lines(text, |l| each(l.as_bytes())),
            Err(_) => each(part),
        }
    }
}

/// Python's `str.splitlines()`: a break at the very end opens no line.
fn split_lines<'a>(mut text: &'a str, mut each: impl FnMut(&'a str)) {
    while !text.is_empty() {
        match text.char_indices().find(|&(_, c)| is_line_break(c)) {
            None => {
                each(text);
                return;
            }
            Some((i, c)) => {
                each(&text[..i]);
                let mut next = i + c.len_utf8();
                if c == '\r' && text[next..].starts_with('\n') {
                    next += 1;
                }
                text = &text[next..];
            }
        }
    }
}

/// The lines of a TCP stream, read into one buffer of `max_line` +
/// [`READ_CHUNK`] bytes.
///
/// Read into [`LineBuffer::spare`], tell it with [`LineBuffer::filled`],
/// then take lines with [`LineBuffer::next_line`] until `None`; at the end
/// of the stream, [`LineBuffer::finish`] says whether a line was left
/// unterminated. A line longer than `max_line` bytes (its `\n` not
/// counted) comes out as [`Reject::TooLong`] once, and the bytes up to the
/// next `\n` are skipped.
#[derive(Debug)]
pub struct LineBuffer {
    buf: Box<[u8]>,
    /// Bytes before `start` are taken.
    start: usize,
    /// Bytes from `scanned` to `filled` have not been searched for `\n`.
    scanned: usize,
    filled: usize,
    max_line: usize,
    /// Skipping the rest of a line too long.
    discarding: bool,
}

impl LineBuffer {
    /// A buffer for lines of at most `max_line` bytes.
    pub fn new(max_line: usize) -> Self {
        LineBuffer {
            buf: vec![0; max_line + READ_CHUNK].into_boxed_slice(),
            start: 0,
            scanned: 0,
            filled: 0,
            max_line,
            discarding: false,
        }
    }

    /// Where to read the next bytes (after taking every line): at least
    /// [`READ_CHUNK`] bytes.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.filled, 0);
            self.filled -= self.start;
            self.scanned -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.filled..]
    }

    /// Takes `n` bytes read into [`LineBuffer::spare`].
    pub fn filled(&mut self, n: usize) {
        self.filled = (self.filled + n).min(self.buf.len());
    }

    /// The next complete line (without its `\n`), or a line too long;
    /// `None` when no complete line is left.
    pub fn next_line(&mut self) -> Option<Result<&[u8], Reject>> {
        loop {
            let found = self.buf[self.scanned..self.filled]
                .iter()
                .position(|&b| b == b'\n');
            match found {
                Some(i) => {
                    let (start, end) = (self.start, self.scanned + i);
                    self.start = end + 1;
                    self.scanned = end + 1;
                    if self.discarding {
                        self.discarding = false;
                        continue;
                    }
                    if end - start > self.max_line {
                        return Some(Err(Reject::TooLong));
                    }
                    return Some(Ok(&self.buf[start..end]));
                }
                None => {
                    self.scanned = self.filled;
                    if self.discarding {
                        self.start = self.filled;
                    } else if self.filled - self.start > self.max_line {
                        self.discarding = true;
                        self.start = self.filled;
                        return Some(Err(Reject::TooLong));
                    }
                    return None;
                }
            }
        }
    }

    /// At the end of the stream: [`Reject::Unterminated`] if part of a line
    /// is left (not counting the rest of a line refused as too long).
    pub fn finish(&mut self) -> Option<Reject> {
        let left = self.filled > self.start && !self.discarding;
        self.start = self.filled;
        self.scanned = self.filled;
        self.discarding = false;
        left.then_some(Reject::Unterminated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: f64 = 1_700_000_000.0;

    fn window() -> Window {
        Window::between(NOW, NOW as u64 - 86_400, NOW as u64 + 60)
    }

    fn parse(line: &str) -> Result<Point<'_>, Reject> {
        parse_line(line.as_bytes(), &window())
    }

    fn point(path: &str, value: f64, at: f64) -> Result<Point<'_>, Reject> {
        Ok(Point { path, value, at })
    }

    #[test]
    fn well_formed_lines_set_a_gauge_at_their_time() {
        assert_eq!(
            parse("app.load 0.5 1700000000"),
            point("app.load", 0.5, NOW)
        );
        assert_eq!(
            parse("  app.load\t-3e2   1699999999.75  \r"),
            point("app.load", -300.0, NOW - 0.25)
        );
        assert_eq!(parse("a 1_000 1_700_000_000"), point("a", 1000.0, NOW));
        assert_eq!(parse("a -0 1700000000"), point("a", 0.0, NOW));
        assert_eq!(parse("a .5 1700000000."), point("a", 0.5, NOW));
        // "Now" marks: carbon truncates the timestamp to -1.
        assert_eq!(parse("a 1 -1"), point("a", 1.0, NOW));
        assert_eq!(parse("a 1 -1.99"), point("a", 1.0, NOW));
        // Unicode names and digits, Unicode whitespace.
        assert_eq!(
            parse("сервер.нагрузка\u{3000}٢ ١٧٠٠٠٠٠٠٠٠"),
            point("сервер.нагрузка", 2.0, NOW)
        );
        assert_eq!(parse("a\u{a0}1\u{2003}1700000000"), point("a", 1.0, NOW));
        assert_eq!(parse("a\x1f1\x0b1700000000"), point("a", 1.0, NOW));
        // Tagged paths are names like any other.
        assert_eq!(
            parse("cpu;host=a 7 1700000000"),
            point("cpu;host=a", 7.0, NOW)
        );
    }

    #[test]
    fn what_carbon_refuses_or_tally_cannot_keep_is_refused_by_reason() {
        let reject = |l: &str| parse(l).unwrap_err();
        let long_name = format!("{} 1 1700000000", "x".repeat(257));
        for (line, expected) in [
            ("", Reject::Malformed),
            ("   ", Reject::Malformed),
            ("a 1", Reject::Malformed),
            ("a 1 1700000000 x", Reject::Malformed),
            ("a x 1700000000", Reject::BadValue),
            ("a 1__0 1700000000", Reject::BadValue),
            ("a _1 1700000000", Reject::BadValue),
            ("a 1_ 1700000000", Reject::BadValue),
            ("a 1_.5 1700000000", Reject::BadValue),
            ("a 0x10 1700000000", Reject::BadValue),
            ("a 1 x", Reject::BadTimestamp),
            ("a 1 nan", Reject::BadTimestamp),
            ("a 1 inf", Reject::BadTimestamp),
            ("a nan 1700000000", Reject::NotFinite),
            ("a -Infinity 1700000000", Reject::NotFinite),
            ("a 1e400 1700000000", Reject::NotFinite),
            ("a\x01b 1 1700000000", Reject::BadName),
            (&long_name, Reject::BadName),
            ("a 1 0", Reject::TimeNotKept),
            ("a 1 -2", Reject::TimeNotKept),
            ("a 1 -0.5", Reject::TimeNotKept),
            ("a 1 1699913599", Reject::TimeNotKept),
            ("a 1 1700000061", Reject::TimeNotKept),
        ] {
            assert_eq!(reject(line), expected, "{line:?}");
        }
        assert_eq!(
            parse_line(b"a\xff 1 1700000000", &window()).unwrap_err(),
            Reject::NotUtf8
        );
        // The bounds are included.
        assert!(parse("a 1 1699913600").is_ok());
        assert!(parse("a 1 1700000060").is_ok());
    }

    #[test]
    fn numbers_read_as_python_float_reads_them() {
        for (text, v) in [
            ("1", 1.0),
            ("+1.5", 1.5),
            ("1.e2", 100.0),
            ("1E-2", 0.01),
            ("0001", 1.0),
            ("1_0.0_1", 10.01),
            ("1e1_0", 1e10),
            ("１２", 12.0),
            ("1_٢", 12.0),
            ("𝟗", 9.0),
        ] {
            assert_eq!(number(text), Some(v), "{text}");
        }
        for text in [
            "", ".", "e5", "1e", "1e+", "+", "infinit", "1_e5", "1e_5", "1._5", "½", "١_", "a",
        ] {
            assert_eq!(number(text), None, "{text}");
        }
        assert!(number("-nan").unwrap().is_nan());
        assert_eq!(number("iNfInItY"), Some(f64::INFINITY));
        assert_eq!(decimal_digit('٠'), Some('0'));
        assert_eq!(decimal_digit('٩'), Some('9'));
        assert_eq!(decimal_digit('\u{66A}'), None);
        assert_eq!(decimal_digit('\u{80}'), None);
    }

    #[test]
    fn the_window_starts_at_the_oldest_slice_kept() {
        let now = Timestamp::from_secs_f64(NOW + 30.5).unwrap();
        let w = Window::new(now, &[Precision::new(1, 120), Precision::new(60, 1440)]);
        // The minute slice holding now starts 20 s before NOW; 1,439 more
        // are kept.
        assert_eq!(w.oldest(), NOW as u64 - 20 - 1439 * 60);
        assert_eq!(w.newest(), NOW as u64 + 90);
        assert!(w.contains(NOW + 90.99) && !w.contains(NOW + 91.0));
        assert_eq!(w.now(), NOW + 30.5);
    }

    fn datagram(d: &[u8]) -> Vec<&[u8]> {
        let mut lines = Vec::new();
        datagram_lines(d, |l| lines.push(l));
        lines
    }

    #[test]
    fn datagrams_split_as_python_splitlines() {
        let b = |s: &'static str| s.as_bytes();
        assert_eq!(datagram(b""), Vec::<&[u8]>::new());
        assert_eq!(datagram(b"a 1 2"), vec![b("a 1 2")]);
        assert_eq!(datagram(b"a 1 2\n"), vec![b("a 1 2")]);
        assert_eq!(datagram(b"\n"), vec![b("")]);
        assert_eq!(
            datagram(b"a\r\nb\rc\x0bd\n\ne"),
            vec![b("a"), b("b"), b("c"), b("d"), b(""), b("e")]
        );
        assert_eq!(
            datagram("a\u{2028}b\u{85}c".as_bytes()),
            vec![b("a"), b("b"), b("c")]
        );
        // Not UTF-8: split at `\n`, each part on its own.
        assert_eq!(
            datagram(b"a\rb\n\xff\n\nc 1 2\n"),
            vec![b("a"), b("b"), &b"\xff"[..], b(""), b("c 1 2")]
        );
        assert_eq!(datagram(b"\xff\r\n"), vec![&b"\xff\r"[..]]);
    }

    /// Feeds `chunks` through a buffer of `max_line`, as reads would.
    fn frame(max_line: usize, chunks: &[&[u8]]) -> Vec<Result<Vec<u8>, Reject>> {
        let mut lb = LineBuffer::new(max_line);
        let mut out = Vec::new();
        for chunk in chunks {
            let spare = lb.spare();
            spare[..chunk.len()].copy_from_slice(chunk);
            lb.filled(chunk.len());
            while let Some(piece) = lb.next_line() {
                out.push(piece.map(<[u8]>::to_vec));
            }
        }
        if let Some(r) = lb.finish() {
            out.push(Err(r));
        }
        out
    }

    #[test]
    fn tcp_lines_end_at_newlines_and_long_ones_are_skipped() {
        let ok = |s: &str| Ok(s.as_bytes().to_vec());
        assert_eq!(
            frame(8, &[b"a 1 2\nb 3", b" 4\n\n", b"c"]),
            vec![ok("a 1 2"), ok("b 3 4"), ok(""), Err(Reject::Unterminated)]
        );
        // Exactly the limit passes; one byte more does not, and the rest of
        // that line is skipped, across reads.
        assert_eq!(
            frame(8, &[b"12345678\n123456789\nok\n"]),
            vec![ok("12345678"), Err(Reject::TooLong), ok("ok")]
        );
        assert_eq!(
            frame(8, &[b"123456", b"789abc", b"def\nok\n", b"0123456789"]),
            vec![Err(Reject::TooLong), ok("ok"), Err(Reject::TooLong)]
        );
        assert_eq!(frame(8, &[b"a\r\n"]), vec![ok("a\r")]);
    }

    proptest! {
        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..300), split in 0usize..300) {
            let w = window();
            datagram_lines(&data, |l| { let _ = parse_line(l, &w); });
            let split = split.min(data.len());
            for piece in frame(16, &[&data[..split], &data[split..]]).into_iter().flatten() {
                if let Ok(p) = parse_line(&piece, &w) {
                    prop_assert!(Name::check(p.path).is_ok());
                    prop_assert!(p.value.is_finite() && w.contains(p.at));
                }
            }
        }

        #[test]
        fn the_window_is_statsds_rule_for_t_times(
            now in 0.0f64..4e9,
            second in 0u64..4_000_000_000,
            precisions in proptest::sample::subsequence(vec![1u64, 5, 60, 300, 3600, 86400], 1..=6),
            keep in 1u64..200,
        ) {
            let now = Timestamp::from_secs_f64(now).unwrap();
            let rs: Vec<Precision> = precisions.iter().map(|&p| Precision::new(p, keep)).collect();
            let statsd = crate::statsd::check_time(second, now, &rs).is_ok();
            prop_assert_eq!(Window::new(now, &rs).contains(second as f64), statsd);
            prop_assert_eq!(Window::new(now, &rs).contains(second as f64 + 0.5), statsd);
        }

        #[test]
        fn never_panics_on_text(line in "\\PC{0,40}|[0-9 ._eE+-]{0,30}") {
            let _ = parse(&line);
        }

        #[test]
        fn an_accepted_line_names_the_gauge_exactly_as_sent(
            path in "[^\\s\\p{Cc}]{1,60}",
            value in any::<f64>().prop_filter("finite", |v| v.is_finite()),
            at in (NOW - 86_400.0)..(NOW + 60.0),
            gaps in proptest::collection::vec("[ \t\u{a0}\u{3000}]{1,3}", 4),
        ) {
            prop_assume!(path.chars().count() <= 256 && path.chars().all(|c| !is_space(c)));
            let line = format!("{}{path}{}{value}{}{at}{}", gaps[0], gaps[1], gaps[2], gaps[3]);
            let p = parse_line(line.as_bytes(), &window()).unwrap();
            prop_assert_eq!(p.path, path.as_str());
            prop_assert_eq!(p.value, value);
            prop_assert_eq!(p.at, at);
        }
    }
}
