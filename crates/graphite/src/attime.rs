//! graphite-web 1.1.10's time forms (`render/attime.py`) in UTC, its default `TIME_ZONE`:
//! `now`, epoch seconds, `-1h`, `now-5min`, `HH:MM_YYYYMMDD`, `YYYYMMDD`, `MM/DD/YY[YY]`,
//! `today`, `yesterday`, `tomorrow`, `noon`, `midnight`, `teatime`, `6am`, `jan1`,
//! `monday`, ... with offsets (`+1d`, `-2w3d`, units by prefix; a bare `m` is refused).
//!
//! Owns parsing time references and offsets to epoch seconds, with Python's rules for the
//! numbers and dates inside (its `int()`, `float()`, `datetime` ranges). Time zones other than
//! UTC (the `tz` parameter) are not supported. It does not read the clock: `now` is given.

/// Seconds from 0001-01-01 to the epoch, negated: Python's smallest datetime.
const MIN_EPOCH: i64 = -62_135_596_800;
/// 9999-12-31T23:59:59: Python's largest datetime (whole seconds).
const MAX_EPOCH: i64 = 253_402_300_799;

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// Why a time did not parse: the text of the Python exception graphite-web reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeError(pub String);

impl std::fmt::Display for TimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

type TResult<T> = std::result::Result<T, TimeError>;

fn err<T>(message: impl Into<String>) -> TResult<T> {
    Err(TimeError(message.into()))
}

/// `parseATTime(s, UTC, now)`: a time reference plus an offset, as epoch seconds.
pub fn parse_at_time(s: &str, now: i64) -> TResult<i64> {
    let s: String = s
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| !matches!(c, '_' | ',' | ' '))
        .collect();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        let yyyymmdd = s.len() == 8
            && s[..4].parse::<i64>().is_ok_and(|y| y > 1900)
            && s[4..6].parse::<i64>().is_ok_and(|m| m < 13)
            && s[6..].parse::<i64>().is_ok_and(|d| d < 32);
        if !yyyymmdd {
            return match s.parse::<i64>() {
                Ok(t) if (MIN_EPOCH..=MAX_EPOCH).contains(&t) => Ok(t),
                Ok(t) if t < 1 << 52 => err(format!(
                    "year {} is out of range",
                    civil_from_days(t.div_euclid(86_400)).0
                )),
                _ => err("timestamp out of range for platform time_t"),
            };
        }
    }
    let (reference, offset) = if let Some(at) = s.find('+') {
        (&s[..at], &s[at..])
    } else if let Some(at) = s.find('-') {
        (&s[..at], &s[at..])
    } else {
        (s.as_str(), "")
    };
    let base = parse_reference(reference, now)?;
    let offset = parse_offset(offset)?;
    let t = base
        .checked_add(offset)
        .filter(|t| (MIN_EPOCH..=MAX_EPOCH).contains(t));
    match t {
        Some(t) => Ok(t),
        None => err("date value out of range"),
    }
}

/// `parseTimeReference(ref, UTC, now)`.
fn parse_reference(reference: &str, now: i64) -> TResult<i64> {
    if reference.is_empty() || reference == "now" {
        return Ok(now);
    }
    let raw = reference;
    let chars: Vec<char> = reference.chars().collect();
    let mut r: &[char] = &chars;
    let (mut hour, mut minute) = (0i64, 0i64);
    if let Some(i) = find(r, &[':'])
        && 0 < i
        && i < 3
    {
        hour = py_int_chars(&r[..i])?;
        minute = py_int_chars(&r[(i + 1).min(r.len())..(i + 3).min(r.len())])?;
        r = &r[(i + 3).min(r.len())..];
        if r.starts_with(&['a', 'm']) {
            r = &r[2..];
        } else if r.starts_with(&['p', 'm']) {
            hour = (hour + 12).rem_euclid(24);
            r = &r[2..];
        }
    }
    if let Some(i) = find(r, &['a', 'm'])
        && 0 < i
        && i < 3
    {
        hour = py_int_chars(&r[..i])?;
        r = &r[i + 2..];
    }
    if let Some(i) = find(r, &['p', 'm'])
        && 0 < i
        && i < 3
    {
        hour = (py_int_chars(&r[..i])? + 12).rem_euclid(24);
        r = &r[i + 2..];
    }
    let rest: String = r.iter().collect();
    let mut rest = rest.as_str();
    for (word, h) in [("noon", 12), ("midnight", 0), ("teatime", 16)] {
        if let Some(tail) = rest.strip_prefix(word) {
            hour = h;
            minute = 0;
            rest = tail;
            break;
        }
    }
    if !(0..=23).contains(&hour) {
        return err("hour must be in 0..23");
    }
    if !(0..=59).contains(&minute) {
        return err("minute must be in 0..59");
    }
    let (days, _) = split_days(now);
    let (year, _, _) = civil_from_days(days);
    let at_day = |days: i64| days * 86_400 + hour * 3_600 + minute * 60;
    let mut ref_date = at_day(days);
    match rest {
        "yesterday" => ref_date -= 86_400,
        "today" => {}
        "tomorrow" => ref_date += 86_400,
        _ if rest.matches('/').count() == 2 => {
            let parts: Vec<&str> = rest.split('/').collect();
            let m = py_int(parts[0]).ok_or_else(|| int_error(parts[0]))?;
            let d = py_int(parts[1]).ok_or_else(|| int_error(parts[1]))?;
            let mut y = py_int(parts[2]).ok_or_else(|| int_error(parts[2]))?;
            if y < 1900 {
                y += 1900;
            }
            if y < 1970 {
                y += 100;
            }
            ref_date = at_day(days_from_date(y, m, d)?);
        }
        _ if rest.len() == 8 && rest.bytes().all(|b| b.is_ascii_digit()) => {
            let y = rest[..4].parse().unwrap_or(0);
            let m = rest[4..6].parse().unwrap_or(0);
            let d = rest[6..].parse().unwrap_or(0);
            ref_date = at_day(days_from_date(y, m, d)?);
        }
        _ if prefix3(rest).is_some_and(|p| MONTHS.contains(&p)) => {
            let month = MONTHS
                .iter()
                .position(|m| Some(*m) == prefix3(rest))
                .unwrap_or(0) as i64
                + 1;
            let tail: Vec<char> = rest.chars().collect();
            let last2: String = tail[tail.len().saturating_sub(2)..].iter().collect();
            let last1: String = tail[tail.len().saturating_sub(1)..].iter().collect();
            let day = if !last2.is_empty() && last2.chars().all(|c| c.is_ascii_digit()) {
                last2.parse::<i64>().unwrap_or(0)
            } else if !last1.is_empty() && last1.chars().all(|c| c.is_ascii_digit()) {
                last1.parse::<i64>().unwrap_or(0)
            } else {
                return err("Day of month required after month name");
            };
            ref_date = at_day(days_from_date(year, month, day)?);
        }
        _ if prefix3(rest).is_some_and(|p| WEEKDAYS.contains(&p)) => {
            // 1970-01-01 was a Thursday (index 4 from Sunday).
            let today = (days + 4).rem_euclid(7);
            let wanted = WEEKDAYS
                .iter()
                .position(|w| Some(*w) == prefix3(rest))
                .unwrap_or(0) as i64;
            let mut offset = today - wanted;
            if offset < 0 {
                offset += 7;
            }
            ref_date -= offset * 86_400;
        }
        "" => {}
        _ => return err(format!("Unknown day reference: {raw}")),
    }
    Ok(ref_date)
}

fn prefix3(s: &str) -> Option<&str> {
    s.get(..3)
}

fn find(haystack: &[char], needle: &[char]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn int_error(text: &str) -> TimeError {
    TimeError(format!(
        "invalid literal for int() with base 10: {}",
        crate::pyfmt::repr_str(text)
    ))
}

fn py_int_chars(chars: &[char]) -> TResult<i64> {
    let text: String = chars.iter().collect();
    py_int(&text).ok_or_else(|| int_error(&text))
}

/// `parseTimeOffset`: `[+|-]N unit [N unit ...]` as seconds (`5min`, `-1h30min`, `+2w`);
/// units by prefix (`s`, `min`, `h`, `d`, `w`, `mon` = 30 days, `y` = 365 days).
pub fn parse_offset(offset: &str) -> TResult<i64> {
    if offset.is_empty() {
        return Ok(0);
    }
    let chars: Vec<char> = offset.chars().collect();
    let mut rest: &[char] = &chars;
    let sign = if rest[0].is_ascii_digit() {
        1
    } else {
        match rest[0] {
            '+' => {
                rest = &rest[1..];
                1
            }
            '-' => {
                rest = &rest[1..];
                -1
            }
            _ => return err(format!("'Invalid offset: {offset}'")),
        }
    };
    let mut total: i64 = 0;
    while !rest.is_empty() {
        let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        let number: String = rest[..digits].iter().collect();
        let num = match number.parse::<i64>() {
            Ok(n) => n,
            Err(_) if number.is_empty() => return Err(int_error("")),
            Err(_) => return err("Python int too large to convert to C int"),
        };
        rest = &rest[digits..];
        let letters = rest.iter().take_while(|c| c.is_alphabetic()).count();
        let unit: String = rest[..letters].iter().collect();
        rest = &rest[letters..];
        let seconds_per = unit_seconds(&unit)?;
        let add = num
            .checked_mul(seconds_per)
            .and_then(|s| s.checked_mul(sign))
            .filter(|s| s.abs() <= 999_999_999 * 86_400)
            .ok_or_else(|| TimeError("date value out of range".to_owned()))?;
        total = total
            .checked_add(add)
            .ok_or_else(|| TimeError("date value out of range".to_owned()))?;
    }
    Ok(total)
}

/// `getUnitString`, as seconds per unit.
fn unit_seconds(unit: &str) -> TResult<i64> {
    Ok(if unit.starts_with('s') {
        1
    } else if unit.starts_with("min") {
        60
    } else if unit.starts_with('h') {
        3_600
    } else if unit.starts_with('d') {
        86_400
    } else if unit.starts_with('w') {
        7 * 86_400
    } else if unit.starts_with("mon") {
        30 * 86_400
    } else if unit.starts_with('y') {
        365 * 86_400
    } else {
        return err(format!("Invalid offset unit '{unit}'"));
    })
}

/// Python's `int(text)` for a str: optional whitespace and sign, ASCII digits with single
/// underscores between them.
pub fn py_int(text: &str) -> Option<i64> {
    let t = text.trim();
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'_')
    {
        return None;
    }
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    let value: i64 = clean.parse().ok()?;
    Some(if negative { -value } else { value })
}

/// Python's `float(text)` for a str: a decimal or scientific number, `inf`, `infinity`,
/// `nan` (any case, optional sign), surrounding whitespace allowed.
pub fn py_float(text: &str) -> Option<f64> {
    let t = text.trim();
    let body = t.trim_start_matches(['+', '-']);
    if t.len() - body.len() > 1 {
        return None;
    }
    let lower = body.to_ascii_lowercase();
    if matches!(lower.as_str(), "inf" | "infinity" | "nan") {
        return t.to_ascii_lowercase().parse().ok();
    }
    let ok = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && body.bytes().any(|b| b.is_ascii_digit());
    if !ok {
        return None;
    }
    t.parse().ok()
}

fn split_days(t: i64) -> (i64, i64) {
    (t.div_euclid(86_400), t.rem_euclid(86_400))
}

/// Days since the epoch of a date, with Python's range checks and messages.
fn days_from_date(year: i64, month: i64, day: i64) -> TResult<i64> {
    if !(1..=9999).contains(&year) {
        return err(format!("year {year} is out of range"));
    }
    if !(1..=12).contains(&month) {
        return err("month must be in 1..12");
    }
    if day < 1 || day > days_in_month(year, month) {
        return err("day is out of range for month");
    }
    Ok(days_from_civil(year, month, day))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day number since 1970-01-01.
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `YYYY-mm-dd HH:MM:SS` of an epoch time in UTC (the CSV format).
pub(crate) fn format_datetime(t: i64) -> String {
    let (days, secs) = split_days(t);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests;
