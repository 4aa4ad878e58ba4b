//! What the CLI prints: readable tables with sparklines, or JSON for scripts,
//! and the exit codes it ends with.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Result;
use serde::Serialize;
use tally::{Sample, Series};

/// Exit code of a check that was denied, or of a lock that is held (2 is
/// bad input or usage, 1 any other failure).
pub const EXIT_LIMITED: u8 = 3;

/// Prints `value` as one line of JSON with `--json`, else as `human` prints it.
pub fn print<T: Serialize + ?Sized>(value: &T, json: bool, human: impl FnOnce(&T)) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(value)?);
    } else {
        human(value);
    }
    Ok(())
}

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A sparkline of counts, scaled between their minimum and maximum.
pub fn sparkline(counts: &[i64]) -> String {
    let (Some(&min), Some(&max)) = (counts.iter().min(), counts.iter().max()) else {
        return String::new();
    };
    let span = (max as i128 - min as i128).max(1);
    counts
        .iter()
        .map(|&c| {
            let level = ((c as i128 - min as i128) * 7 / span) as usize;
            BARS[level.min(7)]
        })
        .collect()
}

/// `YYYY-MM-DDTHH:MM:SSZ` for Unix seconds (UTC, proleptic Gregorian).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = tally::daily::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// "5 s", "5 min", "1 h", "1 d" for a precision.
pub fn precision_label(p: u64) -> String {
    match p {
        p if p % 86_400 == 0 => format!("{} d", p / 86_400),
        p if p % 3600 == 0 => format!("{} h", p / 3600),
        p if p % 60 == 0 => format!("{} min", p / 60),
        p => format!("{p} s"),
    }
}

/// One precision's slices, a row each, then a sparkline.
pub fn samples_table(name: &str, precision: u64, samples: &[Sample]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{name} at {} precision: {} samples",
        precision_label(precision),
        samples.len()
    );
    if samples.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "{:<22} {:>12} {:>20}",
        "slice start (UTC)", "unix", "count"
    );
    for s in samples {
        let _ = writeln!(out, "{:<22} {:>12} {:>20}", utc(s.start), s.start, s.count);
    }
    let counts: Vec<i64> = samples.iter().map(|s| s.count).collect();
    let _ = writeln!(out, "{}", sparkline(&counts));
    out
}

/// Every precision of a counter: a summary row each, with a sparkline.
pub fn series_table(name: &str, series: &[Series]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{name}");
    let _ = writeln!(
        out,
        "{:<9} {:>7} {:>14} {:<22} {:<22} trend",
        "precision", "samples", "total", "first (UTC)", "last (UTC)"
    );
    for s in series {
        let counts: Vec<i64> = s.samples.iter().map(|x| x.count).collect();
        let total: i128 = counts.iter().map(|&c| c as i128).sum();
        let first = s
            .samples
            .first()
            .map(|x| utc(x.start))
            .unwrap_or_else(|| "-".into());
        let last = s
            .samples
            .last()
            .map(|x| utc(x.start))
            .unwrap_or_else(|| "-".into());
        let tail = &counts[counts.len().saturating_sub(40)..];
        let _ = writeln!(
            out,
            "{:<9} {:>7} {:>14} {:<22} {:<22} {}",
            precision_label(s.precision),
            s.samples.len(),
            total,
            first,
            last,
            sparkline(tail)
        );
    }
    out
}

/// `{"1": [[start, count], ...], "5": [...]}` for every precision.
pub fn series_json(series: &[Series]) -> serde_json::Value {
    let map: BTreeMap<u64, &Vec<Sample>> =
        series.iter().map(|s| (s.precision, &s.samples)).collect();
    let mut obj = serde_json::Map::new();
    for (p, samples) in map {
        obj.insert(
            p.to_string(),
            serde_json::to_value(samples).expect("samples serialize"),
        );
    }
    serde_json::Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_known_instants() {
        for (input, expected) in [
            (0, "1970-01-01T00:00:00Z"),
            (1336376395, "2012-05-07T07:39:55Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (253_402_300_799, "9999-12-31T23:59:59Z"),
        ] {
            assert_eq!(utc(input), expected, "utc({input:?})");
        }
    }

    #[test]
    fn sparkline_spans_min_to_max() {
        assert_eq!(sparkline(&[]), "");
        assert_eq!(sparkline(&[5]), "▁");
        assert_eq!(sparkline(&[0, 7, 14]), "▁▄█");
        assert_eq!(sparkline(&[i64::MIN, i64::MAX]), "▁█");
    }

    #[test]
    fn labels_precisions() {
        for (input, expected) in [(5, "5 s"), (300, "5 min"), (18000, "5 h"), (86400, "1 d")] {
            assert_eq!(
                precision_label(input),
                expected,
                "precision_label({input:?})"
            );
        }
    }

    #[test]
    fn json_keys_by_precision() {
        let series = vec![
            Series {
                precision: 5,
                samples: vec![Sample {
                    start: 10,
                    count: 2,
                }],
            },
            Series {
                precision: 60,
                samples: vec![],
            },
        ];
        assert_eq!(
            series_json(&series).to_string(),
            r#"{"5":[[10,2]],"60":[]}"#
        );
    }
}
