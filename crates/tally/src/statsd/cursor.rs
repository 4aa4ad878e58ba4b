//! The reader under [`parse_line`](super::parse_line) and [`Samples`](super::Samples):
//! a cursor over the text after a line's name that yields one sample at a time, each
//! value read against its group's type, rate and time.

use super::{MAX_WEIGHT, Reading, Reject, Sample};
use crate::clock::Timestamp;

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
pub(super) struct Cursor<'a> {
    /// The current group's values not read yet; `None` when none are left.
    values: Option<&'a str>,
    group: Group,
    /// The text of the groups after the current one.
    rest: &'a str,
    /// A group read so far carried tags / a time.
    pub(super) tagged: bool,
    pub(super) timed: bool,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(samples: &'a str) -> Self {
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
pub(super) fn find2(text: &str, a: u8, b: u8) -> Option<usize> {
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
