//! graphite-web's `TimeSeries`: a name, a regular time axis and one optional value per step,
//! with the tags, consolidation function and xFilesFactor that travel with it.
//!
//! Owns the series value and its own arithmetic: consolidation into `values_per_point`
//! buckets (as `TimeSeries.__consolidatingGenerator` does) and the datapoints an answer
//! prints. It does not fetch (see [`crate::Store`]) nor format (see `render`).

use std::collections::BTreeMap;

/// How values are merged into one point (`consolidationFunc` / `consolidateBy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Consolidation {
    /// The mean of the non-null values (graphite's default).
    #[default]
    Average,
    /// Their sum.
    Sum,
    /// Their minimum.
    Min,
    /// Their maximum.
    Max,
    /// The first non-null value.
    First,
    /// The last non-null value.
    Last,
    /// The mean counting nulls as zeros.
    AvgZero,
}

impl Consolidation {
    /// The function graphite-web names `name` (`avg` is `average`), if any.
    pub fn parse(name: &str) -> Option<Consolidation> {
        Some(match name {
            "average" | "avg" => Consolidation::Average,
            "sum" => Consolidation::Sum,
            "min" => Consolidation::Min,
            "max" => Consolidation::Max,
            "first" => Consolidation::First,
            "last" => Consolidation::Last,
            "avg_zero" => Consolidation::AvgZero,
            _ => return None,
        })
    }

    /// graphite-web's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Consolidation::Average => "average",
            Consolidation::Sum => "sum",
            Consolidation::Min => "min",
            Consolidation::Max => "max",
            Consolidation::First => "first",
            Consolidation::Last => "last",
            Consolidation::AvgZero => "avg_zero",
        }
    }

    /// Applies the function to a bucket's usable values (non-empty), as Python would.
    fn apply(self, usable: &[f64]) -> f64 {
        match self {
            Consolidation::Sum => crate::pyfmt::py_sum(usable),
            Consolidation::Average | Consolidation::AvgZero => {
                crate::pyfmt::py_sum(usable) / usable.len() as f64
            }
            Consolidation::Max => crate::pyfmt::py_max(usable),
            Consolidation::Min => crate::pyfmt::py_min(usable),
            Consolidation::First => usable[0],
            Consolidation::Last => usable[usable.len() - 1],
        }
    }
}

/// One series as graphite-web holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its name as graphite-web prints it (`target`).
    pub name: String,
    /// The expression that produced it (`pathExpression`).
    pub path_expression: String,
    /// The first point's timestamp.
    pub start: i64,
    /// The end of the range (graphite's `end`; points run from `start` while `<= end`).
    pub end: i64,
    /// Seconds per value.
    pub step: i64,
    /// One value per step, `None` for a gap.
    pub values: Vec<Option<f64>>,
    /// Its tags (`{"name": path}` for a fetched series).
    pub tags: BTreeMap<String, String>,
    /// The function merging values into points (`consolidationFunc`).
    pub consolidation: Consolidation,
    /// Values merged into each point when it is read ([`Series::points`]).
    pub values_per_point: usize,
    /// The share of non-null values a bucket needs to be non-null.
    pub x_files_factor: f64,
}

impl Series {
    /// A series named `name` with graphite-web's defaults: tags parsed from the name as its
    /// `TimeSeries` constructor does, average consolidation, one value per point,
    /// xFilesFactor 0, `pathExpression` the name.
    pub fn new(name: &str, start: i64, end: i64, step: i64, values: Vec<Option<f64>>) -> Series {
        Series {
            name: name.to_owned(),
            path_expression: name.to_owned(),
            start,
            end,
            step,
            values,
            tags: tags_of_name(name),
            consolidation: Consolidation::Average,
            values_per_point: 1,
            x_files_factor: 0.0,
        }
    }

    /// Sets tag `key` to `value`, as a function tags what it answers.
    pub(crate) fn tag(&mut self, key: &str, value: impl Into<String>) {
        self.tags.insert(key.to_owned(), value.into());
    }

    /// A series read from the store: leaf `path`, matched by `pattern`, over a whisper
    /// window (`start`, `end`, `step`) with one value per step.
    pub fn fetched(
        path: &str,
        pattern: &str,
        start: i64,
        end: i64,
        step: i64,
        values: Vec<Option<f64>>,
    ) -> Series {
        let mut series = Series::new(path, start, end, step, values);
        series.path_expression = pattern.to_owned();
        series
    }

    /// The values as iterating the `TimeSeries` yields them: consolidated by
    /// `values_per_point` when that is above one (a last partial bucket included).
    pub fn points(&self) -> Vec<Option<f64>> {
        let per = self.values_per_point;
        if per <= 1 {
            return self.values.clone();
        }
        let mut out = Vec::with_capacity(self.values.len() / per + 1);
        let mut usable = Vec::with_capacity(per);
        for chunk in self.values.chunks(per) {
            usable.clear();
            let mut non_null = 0usize;
            for value in chunk {
                match value {
                    Some(v) => {
                        usable.push(*v);
                        non_null += 1;
                    }
                    None if self.consolidation == Consolidation::AvgZero => usable.push(0.0),
                    None => {}
                }
            }
            let enough = non_null > 0 && non_null as f64 / per as f64 >= self.x_files_factor;
            out.push(if enough {
                Some(self.consolidation.apply(&usable))
            } else {
                None
            });
        }
        out
    }

    /// The datapoints an answer prints: [`Series::points`] zipped with the timestamps from
    /// `start` to `end` inclusive by `step × values_per_point` (the shorter one decides).
    pub fn datapoints(&self) -> Vec<(Option<f64>, i64)> {
        let stride = self
            .step
            .saturating_mul(self.values_per_point.max(1) as i64);
        if stride <= 0 {
            return Vec::new();
        }
        let points = self.points();
        let mut out = Vec::with_capacity(points.len());
        let mut ts = self.start;
        for value in points {
            if ts > self.end {
                break;
            }
            out.push((value, ts));
            ts = match ts.checked_add(stride) {
                Some(t) => t,
                None => break,
            };
        }
        out
    }
}

/// The tags graphite-web gives a new series named `name`: `{"name": name}`, or, for a name
/// that does not look like a function call and parses as a tagged path (`metric;tag=value`
/// or `metric{tag="value"}`), the parsed tags (its tag database's `parse`).
pub fn tags_of_name(name: &str) -> BTreeMap<String, String> {
    if !looks_like_call(name)
        && let Some(tags) = parse_tagged(name)
    {
        return tags;
    }
    BTreeMap::from([("name".to_owned(), name.to_owned())])
}

/// `^[a-z]+[(].+[)]$` (case-insensitive, `.` not matching a newline, `$` also before a last
/// newline), as `TimeSeries.__init__` tests a name.
fn looks_like_call(name: &str) -> bool {
    let body = name.strip_suffix('\n').unwrap_or(name);
    let letters = body.bytes().take_while(u8::is_ascii_alphabetic).count();
    if letters == 0 {
        return false;
    }
    let rest = &body[letters..];
    let Some(inner) = rest.strip_prefix('(').and_then(|r| r.strip_suffix(')')) else {
        return false;
    };
    !inner.is_empty() && !inner.contains('\n')
}

pub(crate) fn parse_tagged(path: &str) -> Option<BTreeMap<String, String>> {
    if path.ends_with("\"}") && path.contains('{') {
        return parse_openmetrics(path);
    }
    let mut segments = path.split(';');
    let metric = segments.next()?;
    if metric.is_empty() {
        return None;
    }
    let mut tags = BTreeMap::new();
    for segment in segments {
        let (tag, value) = segment.split_once('=')?;
        if tag.is_empty() || !valid_tag(tag, value) {
            return None;
        }
        tags.insert(tag.to_owned(), value.to_owned());
    }
    tags.insert("name".to_owned(), sanitized_name(metric)?);
    Some(tags)
}

fn parse_openmetrics(path: &str) -> Option<BTreeMap<String, String>> {
    let body = &path[..path.len() - 1];
    let mut parts = body.split('{');
    let metric = parts.next()?;
    // Python's split('{', 2) then a two-name unpacking: more than one '{' fails.
    let rawtags = parts.next()?;
    if parts.next().is_some() || metric.is_empty() {
        return None;
    }
    let mut tags = BTreeMap::new();
    let mut rest = rawtags;
    while !rest.is_empty() {
        // ([^=]+)="((?:[\\]["\\]|[^"\\])+)"(:?,|$)
        let eq = rest.find('=')?;
        if eq == 0 {
            return None;
        }
        let tag = &rest[..eq];
        let after = rest[eq + 1..].strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut close = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    close = Some(i);
                    break;
                }
                '\\' => match chars.next() {
                    Some((_, e @ ('"' | '\\'))) => value.push(e),
                    _ => return None,
                },
                c => value.push(c),
            }
        }
        let close = close?;
        if value.is_empty() {
            return None;
        }
        // `(:?,|$)`: an optional colon before a comma, or the end.
        let mut tail = &after[close + 1..];
        if let Some(t) = tail.strip_prefix(":,").or_else(|| tail.strip_prefix(',')) {
            tail = t;
        } else if !tail.is_empty() {
            return None;
        }
        if !valid_tag(tag, &value) {
            return None;
        }
        tags.insert(tag.to_owned(), value);
        rest = tail;
    }
    tags.insert("name".to_owned(), sanitized_name(metric)?);
    Some(tags)
}

fn valid_tag(tag: &str, value: &str) -> bool {
    !tag.is_empty()
        && !value.is_empty()
        && !tag.contains([';', '!', '^', '='])
        && !value.contains(';')
        && !value.starts_with('~')
}

fn sanitized_name(metric: &str) -> Option<String> {
    let trimmed = metric.trim_start_matches('~');
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(values: &[Option<f64>]) -> Series {
        Series::new(
            "a.b",
            100,
            100 + 10 * values.len() as i64,
            10,
            values.to_vec(),
        )
    }

    #[test]
    fn a_fetched_series_is_tagged_with_its_path() {
        let s = Series::fetched("a.b", "a.*", 10, 40, 10, vec![None, Some(1.0), None]);
        assert_eq!(s.name, "a.b");
        assert_eq!(s.path_expression, "a.*");
        assert_eq!(s.tags, BTreeMap::from([("name".into(), "a.b".into())]));
        assert_eq!((s.values_per_point, s.x_files_factor), (1, 0.0));
    }

    #[test]
    fn names_parse_into_tags_as_the_tag_database_does() {
        let tags = tags_of_name("cpu.load;host=a;dc=x");
        assert_eq!(tags.get("name").map(String::as_str), Some("cpu.load"));
        assert_eq!(tags.get("host").map(String::as_str), Some("a"));
        // A bad segment falls back to the name alone.
        assert_eq!(tags_of_name("a;b").len(), 1);
        // A function-looking name is never parsed.
        assert_eq!(
            tags_of_name("sumSeries(a;x=y)")
                .get("name")
                .map(String::as_str),
            Some("sumSeries(a;x=y)")
        );
        let om = tags_of_name("m{a=\"1\",b=\"x\\\"y\"}");
        assert_eq!(om.get("b").map(String::as_str), Some("x\"y"));
        assert_eq!(
            tags_of_name("~x").get("name").map(String::as_str),
            Some("x")
        );
    }

    #[test]
    fn consolidation_buckets_like_the_consolidating_generator() {
        let mut s = series(&[Some(1.0), None, Some(3.0), Some(4.0), None]);
        s.values_per_point = 2;
        assert_eq!(s.points(), vec![Some(1.0), Some(3.5), None]);
        s.consolidation = Consolidation::AvgZero;
        assert_eq!(s.points(), vec![Some(0.5), Some(3.5), None]);
        s.consolidation = Consolidation::Sum;
        s.x_files_factor = 0.6;
        // 1 of 2 is below 0.6; the last bucket counts its one value against 2.
        assert_eq!(s.points(), vec![None, Some(7.0), None]);
    }

    #[test]
    fn datapoints_stop_at_end_and_stride_by_the_bucket() {
        let mut s = series(&[Some(1.0), Some(2.0), Some(3.0)]);
        s.end = 120;
        assert_eq!(
            s.datapoints(),
            vec![(Some(1.0), 100), (Some(2.0), 110), (Some(3.0), 120)]
        );
        s.end = 115;
        assert_eq!(s.datapoints().len(), 2);
        s.values_per_point = 2;
        s.end = 130;
        assert_eq!(s.datapoints(), vec![(Some(1.5), 100), (Some(3.0), 120)]);
    }
}
