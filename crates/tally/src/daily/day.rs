//! Calendar days: pure date math for the daily statistics.
//!
//! A [`Day`] is a count of days since 1970-01-01 on a calendar shifted by a
//! fixed UTC offset (UTC by default). It converts to and from the article's
//! `YYYYMMDD` integer (the field name in Redis, the key in SQLite) and to
//! `YYYY-MM-DD` text. Proleptic Gregorian, years 1970 to 9999.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::clock::Timestamp;
use crate::error::{Error, Result};

/// A calendar day, as days since 1970-01-01.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day(pub i32);

/// The largest accepted UTC offset, in minutes (UTC+14:00).
pub const MAX_OFFSET_MINUTES: i32 = 14 * 60;

impl Day {
    /// The day `at` falls on, on the calendar `offset_minutes` east of UTC.
    pub fn of(at: Timestamp, offset_minutes: i32) -> Day {
        let local = at.whole_secs() as i64 + i64::from(offset_minutes) * 60;
        Day(local.div_euclid(86_400) as i32)
    }

    /// The Unix second at which this day starts on that calendar.
    pub fn start_secs(self, offset_minutes: i32) -> i64 {
        i64::from(self.0) * 86_400 - i64::from(offset_minutes) * 60
    }

    /// `n` days later (earlier when negative).
    pub fn plus(self, n: i32) -> Day {
        Day(self.0 + n)
    }

    /// The article's `YYYYMMDD` integer.
    pub fn yyyymmdd(self) -> u32 {
        let (y, m, d) = civil_from_days(i64::from(self.0));
        (y as u32) * 10_000 + m * 100 + d
    }

    /// Parses a `YYYYMMDD` integer.
    pub fn from_yyyymmdd(n: u32) -> Result<Day> {
        let (y, m, d) = (n / 10_000, n / 100 % 100, n % 100);
        Self::from_ymd(y as i64, m, d)
    }

    /// The day of a calendar date, checked.
    pub fn from_ymd(y: i64, m: u32, d: u32) -> Result<Day> {
        let bad = || Error::InvalidInput(format!("{y:04}-{m:02}-{d:02} is not a date"));
        if !(1970..=9999).contains(&y) || !(1..=12).contains(&m) || d == 0 {
            return Err(bad());
        }
        let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let len = match m {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        if d > len {
            return Err(bad());
        }
        Ok(Day(days_from_civil(y, m, d) as i32))
    }

    /// Parses `YYYY-MM-DD` or `YYYYMMDD`; anything else (whatever its
    /// characters) is an error, never a panic.
    pub fn parse(text: &str) -> Result<Day> {
        let bad = || Error::InvalidInput(format!("{text:?} is not a date (YYYY-MM-DD)"));
        let digits: String = text.chars().filter(|c| *c != '-').collect();
        // Bytes, not string slices: a multi-byte character must not panic.
        let b = text.as_bytes();
        let dashed = b.len() == 10 && b[4] == b'-' && b[7] == b'-';
        if digits.len() != 8 || !digits.chars().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        if text.len() != 8 && !dashed {
            return Err(bad());
        }
        Self::from_yyyymmdd(digits.parse().map_err(|_| bad())?)
    }
}

impl fmt::Display for Day {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, m, d) = civil_from_days(i64::from(self.0));
        write!(f, "{y:04}-{m:02}-{d:02}")
    }
}

impl Serialize for Day {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Day {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Day::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Howard Hinnant's days-to-civil algorithm: (year, month, day) of a day
/// number counted from 1970-01-01 (proleptic Gregorian).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Howard Hinnant's civil-to-days algorithm.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ts;
    use proptest::prelude::*;

    #[test]
    fn parse_never_panics_on_multibyte_text() {
        // Regression: slicing bytes 4..5 of "2026éé-22" panicked.
        for text in [
            "2026é1-22",
            "aaaé-bbb-c",
            "éééééééééé",
            "2026-11-22",
            "20261122",
        ] {
            let _ = Day::parse(text);
        }
        assert!(Day::parse("2026-11-22").is_ok());
        assert!(Day::parse("2026\u{e9}1-22").is_err());
    }

    #[test]
    fn days_match_the_seeds_dates() {
        // 2023-06-06T12:00:00Z, the article's example day.
        let day = Day::of(ts(1_686_052_800.0), 0);
        assert_eq!(day.yyyymmdd(), 20230606);
        assert_eq!(day.to_string(), "2023-06-06");
        assert_eq!(Day::parse("2023-06-06").unwrap(), day);
        assert_eq!(Day::parse("20230606").unwrap(), day);
        assert_eq!(day.plus(-6).yyyymmdd(), 20230531);
        assert_eq!(Day(0).to_string(), "1970-01-01");
        assert_eq!(
            Day::from_ymd(2000, 2, 29).unwrap().to_string(),
            "2000-02-29"
        );
    }

    #[test]
    fn offsets_move_the_day_boundary() {
        // 2023-06-06T23:30Z is already June 7th in UTC+01:00 and still June
        // 6th in UTC-05:00.
        let at = ts(1_686_094_200.0);
        assert_eq!(Day::of(at, 0).yyyymmdd(), 20230606);
        assert_eq!(Day::of(at, 60).yyyymmdd(), 20230607);
        assert_eq!(Day::of(at, -300).yyyymmdd(), 20230606);
        let day = Day::of(at, 60);
        assert_eq!(day.start_secs(60), 1_686_092_400);
    }

    #[test]
    fn rejects_what_is_not_a_date() {
        for bad in [
            "2023-02-29",
            "2023-13-01",
            "1969-12-31",
            "2023-6-6",
            "x",
            "2023060",
            "",
        ] {
            assert!(Day::parse(bad).is_err(), "{bad}");
        }
        assert!(Day::parse("2024-02-29").is_ok());
    }

    proptest! {
        #[test]
        fn yyyymmdd_round_trips_and_orders(a in 0i32..2_932_896, b in 0i32..2_932_896) {
            let (da, db) = (Day(a), Day(b));
            prop_assert_eq!(Day::from_yyyymmdd(da.yyyymmdd()).unwrap(), da);
            prop_assert_eq!(Day::parse(&da.to_string()).unwrap(), da);
            prop_assert_eq!(da < db, da.yyyymmdd() < db.yyyymmdd());
        }

        #[test]
        fn a_day_contains_its_instants(secs in 0u64..253_402_300_799, off in -840i32..=840) {
            let day = Day::of(ts(secs as f64), off);
            let start = day.start_secs(off);
            prop_assert!(start <= secs as i64 && (secs as i64) < start + 86_400);
        }
    }
}
